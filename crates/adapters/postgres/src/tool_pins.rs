//! `ToolPinStore` on PostgreSQL: one row per upstream MCP tool, its approved and its
//! last seen definition (JSON text), shared by every replica.

use agentplane_engine::ports::{StoreError, ToolPin, ToolPinStore};
use async_trait::async_trait;

use crate::PostgresStore;
use crate::db::Db;
use crate::nul::enc;
use crate::rows::{opt_text, pg, text};
use crate::store::on_conn;

#[async_trait]
impl ToolPinStore for PostgresStore {
    async fn tool_pins(&self, server: Option<&str>) -> Result<Vec<ToolPin>, StoreError> {
        on_conn!(self, |db| pins(db, server))
    }

    async fn put_tool_pin(&self, pin: &ToolPin) -> Result<(), StoreError> {
        on_conn!(self, |db| put(db, pin))
    }
}

async fn pins(db: Db<'_>, server: Option<&str>) -> Result<Vec<ToolPin>, StoreError> {
    let server = server.map(enc);
    let rows = db
        .query(
            "SELECT server, tool, approved_hash, approved, seen_hash, seen, first_seen_at,
                    changed_at, approved_by
             FROM mcp_tool_pins WHERE $1::TEXT IS NULL OR server = $1
             ORDER BY server, tool",
            &[&server],
        )
        .await
        .map_err(pg)?;
    rows.iter()
        .map(|row| {
            Ok(ToolPin {
                server: text(row, 0)?,
                tool: text(row, 1)?,
                approved_hash: text(row, 2)?,
                approved: json(&text(row, 3)?)?,
                seen_hash: text(row, 4)?,
                seen: json(&text(row, 5)?)?,
                first_seen_at: text(row, 6)?,
                changed_at: opt_text(row, 7)?,
                approved_by: opt_text(row, 8)?,
            })
        })
        .collect()
}

async fn put(db: Db<'_>, pin: &ToolPin) -> Result<(), StoreError> {
    db.execute(
        "INSERT INTO mcp_tool_pins (server, tool, approved_hash, approved, seen_hash, seen,
                                    first_seen_at, changed_at, approved_by)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
         ON CONFLICT (server, tool) DO UPDATE SET
             approved_hash = EXCLUDED.approved_hash, approved = EXCLUDED.approved,
             seen_hash = EXCLUDED.seen_hash, seen = EXCLUDED.seen,
             first_seen_at = EXCLUDED.first_seen_at, changed_at = EXCLUDED.changed_at,
             approved_by = EXCLUDED.approved_by",
        &[
            &enc(&pin.server),
            &enc(&pin.tool),
            &pin.approved_hash,
            &pin.approved.to_string(),
            &pin.seen_hash,
            &pin.seen.to_string(),
            &pin.first_seen_at,
            &pin.changed_at,
            &pin.approved_by.as_deref().map(enc),
        ],
    )
    .await
    .map(|_| ())
    .map_err(pg)
}

fn json(text: &str) -> Result<serde_json::Value, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Backend(format!("a pinned tool: {e}")))
}
