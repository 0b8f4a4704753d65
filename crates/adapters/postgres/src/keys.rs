//! `KeyStore` on PostgreSQL: API keys every replica finds by the digest of their
//! secret (ADR 0030). Every lookup is a query, so a key revoked through one replica is
//! refused by every other on its next request. The triggers of the schema keep keys
//! from being changed (other than revoked, once) or deleted.
//!
//! What must not live here: whether a key is expired or may act as a client — the
//! hub decides.

use agentplane_core::KeyId;
use agentplane_core::audit::ledger::{Entry, KeyCreated, KeyRevoked};
use agentplane_engine::ports::{KeyRecord, KeyStore, NewKey, StoreError};
use async_trait::async_trait;
use tokio_postgres::Row;

use crate::PostgresStore;
use crate::db::Db;
use crate::nul::{enc, enc_opt};
use crate::rows::{damaged, opt_text, pg, text, unique_violation};
use crate::store::{in_tx, on_conn};
use agentplane_engine::ports::records::stored_now;

const KEY_COLUMNS: &str =
    "id, client_id, roles, description, created_by, created_at, expires_at, revoked_at";

#[async_trait]
impl KeyStore for PostgresStore {
    async fn create_key(&self, key: NewKey) -> Result<KeyRecord, StoreError> {
        in_tx!(self, |db| create_key(db, key))
    }

    async fn key_by_digest(&self, digest: &str) -> Result<Option<KeyRecord>, StoreError> {
        on_conn!(self, |db| one_key(db, "digest", digest))
    }

    async fn list_keys(&self) -> Result<Vec<KeyRecord>, StoreError> {
        on_conn!(self, |db| list_keys(db))
    }

    async fn revoke_key(&self, id: &KeyId) -> Result<KeyRecord, StoreError> {
        in_tx!(self, |db| revoke_key(db, id))
    }

    async fn any_keys(&self) -> Result<bool, StoreError> {
        on_conn!(self, |db| any_keys(db))
    }
}

async fn create_key(db: Db<'_>, key: NewKey) -> Result<KeyRecord, StoreError> {
    let roles = serde_json::to_string(&key.roles)
        .map_err(|e| StoreError::Backend(format!("key roles: {e}")))?;
    let created_at = stored_now();
    let inserted = db
        .execute(
            "INSERT INTO api_keys (id, digest, client_id, roles, description, created_by,
             created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            &[
                &key.id.as_str(),
                &key.digest,
                &enc(&key.client),
                &enc(&roles),
                &enc_opt(key.description.as_deref()),
                &enc(&key.created_by),
                &created_at,
                &key.expires_at,
            ],
        )
        .await;
    match inserted {
        Ok(_) => {
            let created = KeyCreated {
                client_id: key.client.clone(),
                digest: key.digest.clone(),
                roles,
                created_at,
                expires_at: key.expires_at.clone(),
            };
            crate::ledger::append(db, &Entry::KeyCreated(created), key.id.as_str()).await?;
            one_key(db, "id", key.id.as_str())
                .await?
                .ok_or_else(|| StoreError::Backend("a stored key vanished".into()))
        }
        Err(e) if unique_violation(&e).is_some() => {
            Err(StoreError::Conflict("this key is already stored".into()))
        }
        Err(e) => Err(pg(e)),
    }
}

async fn list_keys(db: Db<'_>) -> Result<Vec<KeyRecord>, StoreError> {
    db.query(
        &format!("SELECT {KEY_COLUMNS} FROM api_keys ORDER BY pos"),
        &[],
    )
    .await
    .map_err(pg)?
    .iter()
    .map(decode_key)
    .collect()
}

async fn revoke_key(db: Db<'_>, id: &KeyId) -> Result<KeyRecord, StoreError> {
    let revoked_at = stored_now();
    let changed = db
        .execute(
            "UPDATE api_keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL",
            &[&id.as_str(), &revoked_at],
        )
        .await
        .map_err(pg)?;
    if changed == 1 {
        let revoked = KeyRevoked { revoked_at };
        crate::ledger::append(db, &Entry::KeyRevoked(revoked), id.as_str()).await?;
    }
    one_key(db, "id", id.as_str())
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("key {id}")))
}

async fn any_keys(db: Db<'_>) -> Result<bool, StoreError> {
    let row = db
        .query_opt("SELECT EXISTS (SELECT 1 FROM api_keys)", &[])
        .await
        .map_err(pg)?;
    row.map_or(Ok(false), |row| row.try_get(0).map_err(pg))
}

/// The key whose `column` (`id` or `digest`, both unique) is `value`.
async fn one_key(db: Db<'_>, column: &str, value: &str) -> Result<Option<KeyRecord>, StoreError> {
    db.query_opt(
        &format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE {column} = $1"),
        &[&value],
    )
    .await
    .map_err(pg)?
    .as_ref()
    .map(decode_key)
    .transpose()
}

fn decode_key(row: &Row) -> Result<KeyRecord, StoreError> {
    Ok(KeyRecord {
        id: KeyId::parse(&text(row, 0)?).map_err(|_| damaged("key id"))?,
        client: text(row, 1)?,
        roles: serde_json::from_str(&text(row, 2)?).map_err(|_| damaged("key roles"))?,
        description: opt_text(row, 3)?,
        created_by: text(row, 4)?,
        created_at: text(row, 5)?,
        expires_at: opt_text(row, 6)?,
        revoked_at: opt_text(row, 7)?,
    })
}
