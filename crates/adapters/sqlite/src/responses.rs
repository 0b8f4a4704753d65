//! `ResponseStore` on SQLite: Responses-API conversations kept for
//! `previous_response_id`, one row each, written by the writer thread as a job and read
//! from the reader pool by id *and* client (a trigger keeps rows from changing).

use std::time::Duration;

use agentplane_core::ChatMessage;
use agentplane_engine::ports::records::{stored_before, stored_now};
use agentplane_engine::ports::responses::{decode_conversation, encode_conversation};
use agentplane_engine::ports::{KeptResponse, ResponseStore, StoreError};
use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};

use crate::SqliteStore;
use crate::rows::{PRIMARY_KEY_VIOLATION, backend};

#[async_trait]
impl ResponseStore for SqliteStore {
    async fn keep_response(&self, response: KeptResponse) -> Result<(), StoreError> {
        let conversation = encode_conversation(&response.messages)?;
        self.job(move |c| {
            let inserted = c
                .prepare_cached(
                    "INSERT INTO gateway_responses (id, client_id, created_at, conversation)
                     VALUES (?1, ?2, ?3, ?4)",
                )
                .and_then(|mut insert| {
                    insert.execute(params![
                        response.id,
                        response.client,
                        stored_now(),
                        conversation
                    ])
                });
            match inserted {
                Ok(_) => Ok(()),
                Err(e) if e.sqlite_extended_error_code() == Some(PRIMARY_KEY_VIOLATION) => Err(
                    StoreError::Conflict(format!("response {} is kept already", response.id)),
                ),
                Err(e) => Err(backend(e)),
            }
        })
        .await
    }

    async fn kept_response(
        &self,
        id: &str,
        client: &str,
        max_age_secs: u64,
    ) -> Result<Option<Vec<ChatMessage>>, StoreError> {
        let (id, client) = (id.to_owned(), client.to_owned());
        let since = stored_before(Duration::from_secs(max_age_secs));
        self.read_point(move |c| {
            let text: Option<String> = c
                .prepare_cached(
                    "SELECT conversation FROM gateway_responses
                     WHERE id = ?1 AND client_id = ?2 AND created_at >= ?3",
                )
                .and_then(|mut select| {
                    select
                        .query_row(params![id, client, since], |row| row.get(0))
                        .optional()
                })
                .map_err(backend)?;
            text.as_deref().map(decode_conversation).transpose()
        })
        .await
    }
}
