//! `ResponseStore` on PostgreSQL: Responses-API conversations kept for
//! `previous_response_id`, one row each, read by id *and* client (a trigger keeps rows
//! from changing). Any replica answers a `previous_response_id` another one kept.

use std::time::Duration;

use agentplane_core::ChatMessage;
use agentplane_engine::ports::records::{stored_before, stored_now};
use agentplane_engine::ports::responses::{decode_conversation, encode_conversation};
use agentplane_engine::ports::{KeptResponse, ResponseStore, StoreError};
use async_trait::async_trait;

use crate::PostgresStore;
use crate::db::Db;
use crate::nul::enc;
use crate::rows::{pg, text, unique_violation};
use crate::store::on_conn;

#[async_trait]
impl ResponseStore for PostgresStore {
    async fn keep_response(&self, response: KeptResponse) -> Result<(), StoreError> {
        on_conn!(self, |db| keep(db, &response))
    }

    async fn kept_response(
        &self,
        id: &str,
        client: &str,
        max_age_secs: u64,
    ) -> Result<Option<Vec<ChatMessage>>, StoreError> {
        on_conn!(self, |db| kept(db, id, client, max_age_secs))
    }
}

async fn keep(db: Db<'_>, response: &KeptResponse) -> Result<(), StoreError> {
    let conversation = encode_conversation(&response.messages)?;
    let inserted = db
        .execute(
            "INSERT INTO gateway_responses (id, client_id, created_at, conversation)
             VALUES ($1, $2, $3, $4)",
            &[
                &enc(&response.id),
                &enc(&response.client),
                &stored_now(),
                &conversation,
            ],
        )
        .await;
    match inserted {
        Ok(_) => Ok(()),
        Err(e) if unique_violation(&e).is_some() => Err(StoreError::Conflict(format!(
            "response {} is kept already",
            response.id
        ))),
        Err(e) => Err(pg(e)),
    }
}

async fn kept(
    db: Db<'_>,
    id: &str,
    client: &str,
    max_age_secs: u64,
) -> Result<Option<Vec<ChatMessage>>, StoreError> {
    let since = stored_before(Duration::from_secs(max_age_secs));
    let row = db
        .query_opt(
            "SELECT conversation FROM gateway_responses
             WHERE id = $1 AND client_id = $2 AND created_at >= $3",
            &[&enc(id), &enc(client), &since],
        )
        .await
        .map_err(pg)?;
    row.map(|row| decode_conversation(&text(&row, 0)?))
        .transpose()
}
