//! The store contract (`agentplane-store-contract`) against `SqliteStore`: every test
//! gets a fresh database file in a temporary directory, and a raw connection to it.

use std::path::PathBuf;

use agentplane_sqlite::SqliteStore;
use agentplane_store_contract::{Dialect, RawSql, replica_contract, store_contract};
use async_trait::async_trait;

/// A second connection to the store's file, as an operator could open.
struct SqliteRaw {
    path: PathBuf,
}

impl SqliteRaw {
    fn conn(&self) -> Result<rusqlite::Connection, String> {
        let conn = rusqlite::Connection::open(&self.path).map_err(|e| e.to_string())?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(|e| e.to_string())?;
        Ok(conn)
    }
}

#[async_trait]
impl RawSql for SqliteRaw {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    async fn execute(&self, sql: &str) -> Result<u64, String> {
        let changed = self.conn()?.execute(sql, []).map_err(|e| e.to_string())?;
        Ok(changed as u64)
    }

    async fn batch(&self, sql: &str) -> Result<(), String> {
        self.conn()?.execute_batch(sql).map_err(|e| e.to_string())
    }

    async fn query_i64(&self, sql: &str) -> Result<i64, String> {
        self.conn()?
            .query_row(sql, [], |r| r.get(0))
            .map_err(|e| e.to_string())
    }

    async fn query_texts(&self, sql: &str) -> Result<Vec<String>, String> {
        let conn = self.conn()?;
        let mut select = conn.prepare(sql).map_err(|e| e.to_string())?;
        let rows = select
            .query_map([], |r| r.get(0))
            .map_err(|e| e.to_string())?;
        rows.collect::<Result<_, _>>().map_err(|e| e.to_string())
    }
}

async fn fresh() -> Option<(tempfile::TempDir, SqliteStore, SqliteRaw)> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state").join("agentplane.db");
    let store = SqliteStore::open(&path).await.expect("open the store");
    Some((dir, store, SqliteRaw { path }))
}

store_contract!(fresh);
replica_contract!(fresh);
