//! `KeyStore` on SQLite: API keys by the digest of their secret (ADR 0030). Writes go
//! through the one writer as jobs; reads use the reader pool, never a cache, so a
//! revocation holds on the very next request. The schema's triggers keep keys from
//! being changed (other than revoked, once) or deleted.
//!
//! What must not live here: whether a key is expired or may act as a client — the
//! hub decides; this module only records and finds.

use agentplane_core::KeyId;
use agentplane_core::audit::ledger::{Entry, KeyCreated, KeyRevoked};
use agentplane_engine::ports::{KeyRecord, KeyStore, NewKey, StoreError};
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::SqliteStore;
use crate::rows::{PRIMARY_KEY_VIOLATION, UNIQUE_VIOLATION, backend};
use agentplane_engine::ports::records::stored_now;

const KEY_COLUMNS: &str =
    "id, client_id, roles, description, created_by, created_at, expires_at, revoked_at";

#[async_trait]
impl KeyStore for SqliteStore {
    async fn create_key(&self, key: NewKey) -> Result<KeyRecord, StoreError> {
        self.job(move |c| {
            let roles = serde_json::to_string(&key.roles)
                .map_err(|e| StoreError::Backend(format!("key roles: {e}")))?;
            let created_at = stored_now();
            let inserted = c
                .prepare_cached(
                    "INSERT INTO api_keys (id, digest, client_id, roles, description,
                     created_by, created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )
                .and_then(|mut insert| {
                    insert.execute(params![
                        key.id.as_str(),
                        key.digest,
                        key.client,
                        roles,
                        key.description,
                        key.created_by,
                        created_at,
                        key.expires_at,
                    ])
                });
            match inserted {
                Ok(_) => {
                    let created = KeyCreated {
                        client_id: key.client.clone(),
                        digest: key.digest.clone(),
                        roles,
                        created_at,
                        expires_at: key.expires_at.clone(),
                    };
                    crate::ledger::append(c, &Entry::KeyCreated(created), key.id.as_str())?;
                    one_key(c, "id", key.id.as_str())?
                        .ok_or_else(|| StoreError::Backend("a stored key vanished".into()))
                }
                Err(e)
                    if matches!(
                        e.sqlite_extended_error_code(),
                        Some(PRIMARY_KEY_VIOLATION | UNIQUE_VIOLATION)
                    ) =>
                {
                    Err(StoreError::Conflict("this key is already stored".into()))
                }
                Err(e) => Err(backend(e)),
            }
        })
        .await
    }

    async fn key_by_digest(&self, digest: &str) -> Result<Option<KeyRecord>, StoreError> {
        let digest = digest.to_owned();
        self.read_point(move |c| one_key(c, "digest", &digest))
            .await
    }

    async fn list_keys(&self) -> Result<Vec<KeyRecord>, StoreError> {
        self.read(|c| {
            let raw = c
                .prepare_cached(&format!(
                    "SELECT {KEY_COLUMNS} FROM api_keys ORDER BY rowid"
                ))
                .and_then(|mut select| {
                    select
                        .query_map([], RawKey::from_row)?
                        .collect::<Result<Vec<_>, _>>()
                })
                .map_err(backend)?;
            raw.into_iter().map(RawKey::decode).collect()
        })
        .await
    }

    async fn revoke_key(&self, id: &KeyId) -> Result<KeyRecord, StoreError> {
        let id = id.clone();
        self.job(move |c| {
            let revoked_at = stored_now();
            let changed = c
                .prepare_cached(
                    "UPDATE api_keys SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
                )
                .and_then(|mut update| update.execute(params![id.as_str(), revoked_at]))
                .map_err(backend)?;
            if changed == 1 {
                let revoked = KeyRevoked { revoked_at };
                crate::ledger::append(c, &Entry::KeyRevoked(revoked), id.as_str())?;
            }
            one_key(c, "id", id.as_str())?.ok_or_else(|| StoreError::NotFound(format!("key {id}")))
        })
        .await
    }

    async fn any_keys(&self) -> Result<bool, StoreError> {
        self.read_point(|c| {
            c.prepare_cached("SELECT EXISTS (SELECT 1 FROM api_keys)")
                .and_then(|mut select| select.query_row([], |row| row.get::<_, bool>(0)))
                .map_err(backend)
        })
        .await
    }
}

/// The key whose `column` (`id` or `digest`, both unique) is `value`.
fn one_key(c: &Connection, column: &str, value: &str) -> Result<Option<KeyRecord>, StoreError> {
    c.prepare_cached(&format!(
        "SELECT {KEY_COLUMNS} FROM api_keys WHERE {column} = ?1"
    ))
    .and_then(|mut select| select.query_row([value], RawKey::from_row).optional())
    .map_err(backend)?
    .map(RawKey::decode)
    .transpose()
}

struct RawKey {
    id: String,
    client: String,
    roles: String,
    description: Option<String>,
    created_by: String,
    created_at: String,
    expires_at: Option<String>,
    revoked_at: Option<String>,
}

impl RawKey {
    fn from_row(row: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: row.get(0)?,
            client: row.get(1)?,
            roles: row.get(2)?,
            description: row.get(3)?,
            created_by: row.get(4)?,
            created_at: row.get(5)?,
            expires_at: row.get(6)?,
            revoked_at: row.get(7)?,
        })
    }

    fn decode(self) -> Result<KeyRecord, StoreError> {
        Ok(KeyRecord {
            id: KeyId::parse(&self.id).map_err(StoreError::Backend)?,
            client: self.client,
            roles: serde_json::from_str(&self.roles)
                .map_err(|e| StoreError::Backend(format!("key roles: {e}")))?,
            description: self.description,
            created_by: self.created_by,
            created_at: self.created_at,
            expires_at: self.expires_at,
            revoked_at: self.revoked_at,
        })
    }
}
