//! `ToolPinStore` on SQLite: one row per upstream MCP tool, its approved and its last
//! seen definition (JSON), written by the writer thread as a job, read from the pool.

use agentplane_engine::ports::{StoreError, ToolPin, ToolPinStore};
use async_trait::async_trait;
use rusqlite::params;

use crate::SqliteStore;
use crate::rows::backend;

const COLUMNS: &str = "server, tool, approved_hash, approved, seen_hash, seen, first_seen_at, \
                       changed_at, approved_by";

#[async_trait]
impl ToolPinStore for SqliteStore {
    async fn tool_pins(&self, server: Option<&str>) -> Result<Vec<ToolPin>, StoreError> {
        let server = server.map(str::to_owned);
        self.read(move |c| {
            let mut select = c
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM mcp_tool_pins
                     WHERE ?1 IS NULL OR server = ?1 ORDER BY server, tool"
                ))
                .map_err(backend)?;
            let rows = select
                .query_map(params![server], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                        row.get::<_, String>(3)?,
                        row.get::<_, String>(4)?,
                        row.get::<_, String>(5)?,
                        row.get::<_, String>(6)?,
                        row.get::<_, Option<String>>(7)?,
                        row.get::<_, Option<String>>(8)?,
                    ))
                })
                .map_err(backend)?;
            let mut pins = Vec::new();
            for row in rows {
                let (server, tool, approved_hash, approved, seen_hash, seen, first, changed, by) =
                    row.map_err(backend)?;
                pins.push(ToolPin {
                    server,
                    tool,
                    approved_hash,
                    approved: json(&approved)?,
                    seen_hash,
                    seen: json(&seen)?,
                    first_seen_at: first,
                    changed_at: changed,
                    approved_by: by,
                });
            }
            Ok(pins)
        })
        .await
    }

    async fn put_tool_pin(&self, pin: &ToolPin) -> Result<(), StoreError> {
        let pin = pin.clone();
        self.job(move |c| {
            c.prepare_cached(&format!(
                "INSERT OR REPLACE INTO mcp_tool_pins ({COLUMNS})
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
            ))
            .and_then(|mut upsert| {
                upsert.execute(params![
                    pin.server,
                    pin.tool,
                    pin.approved_hash,
                    pin.approved.to_string(),
                    pin.seen_hash,
                    pin.seen.to_string(),
                    pin.first_seen_at,
                    pin.changed_at,
                    pin.approved_by,
                ])
            })
            .map(|_| ())
            .map_err(backend)
        })
        .await
    }
}

fn json(text: &str) -> Result<serde_json::Value, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Backend(format!("a pinned tool: {e}")))
}
