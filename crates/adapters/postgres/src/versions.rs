//! `VersionStore` on PostgreSQL: agent versions, the traffic history, thread pinning
//! and shadow threads (ADR 0016), with the same triggers as SQLite behind every rule
//! the port states (frozen non-drafts, forward-only stages, append-only traffic,
//! sticky pinning). A change to a version locks its row first, so two replicas
//! promoting at once are ordered and the second gets `Conflict`.
//!
//! What must not live here: which version a thread should get — the hub decides.

use std::collections::BTreeMap;

use agentplane_core::version::TrafficAction;
use agentplane_core::{Stage, ThreadId, TrafficSplit, VersionSpec};
use agentplane_engine::ports::records::stored_now;
use agentplane_engine::ports::{
    NewThread, NewTraffic, NewVersion, StoreError, ThreadRecord, TrafficRecord, VersionRecord,
    VersionStore,
};
use async_trait::async_trait;
use tokio_postgres::Row;

use crate::PostgresStore;
use crate::db::Db;
use crate::events::{THREAD_COLUMNS, decode_thread};
use crate::nul::{enc, enc_opt};
use crate::rows::{opt_text, pg, text, unique_violation};
use crate::store::{in_tx, on_conn};

const VERSION_COLUMNS: &str =
    "agent, version, stage, spec, shadow, created_by, created_at, updated_at";

#[async_trait]
impl VersionStore for PostgresStore {
    async fn all_versions(&self) -> Result<BTreeMap<String, Vec<VersionRecord>>, StoreError> {
        on_conn!(self, |db| all_versions(db))
    }

    async fn versions_of(&self, agent: &str) -> Result<Vec<VersionRecord>, StoreError> {
        on_conn!(self, |db| versions_of(db, agent))
    }

    async fn create_version(&self, version: NewVersion) -> Result<VersionRecord, StoreError> {
        in_tx!(self, |db| create_version(db, version))
    }

    async fn edit_draft(
        &self,
        agent: &str,
        version: &str,
        spec: VersionSpec,
    ) -> Result<VersionRecord, StoreError> {
        in_tx!(self, |db| edit_draft(db, agent, version, spec))
    }

    async fn set_stage(
        &self,
        agent: &str,
        version: &str,
        from: Stage,
        to: Stage,
    ) -> Result<VersionRecord, StoreError> {
        in_tx!(self, |db| set_stage(db, agent, version, from, to))
    }

    async fn set_shadow(&self, agent: &str, version: Option<&str>) -> Result<(), StoreError> {
        in_tx!(self, |db| set_shadow(db, agent, version))
    }

    async fn traffic(&self, agent: &str) -> Result<Vec<TrafficRecord>, StoreError> {
        on_conn!(self, |db| traffic(db, agent))
    }

    async fn record_traffic(&self, change: NewTraffic) -> Result<TrafficRecord, StoreError> {
        in_tx!(self, |db| record_traffic(db, change))
    }

    async fn pin_thread(&self, thread: &ThreadId, version: &str) -> Result<String, StoreError> {
        in_tx!(self, |db| pin_thread(db, thread, version))
    }

    async fn create_shadow_thread(
        &self,
        thread: NewThread,
        original: &ThreadId,
        version: &str,
    ) -> Result<ThreadRecord, StoreError> {
        in_tx!(self, |db| create_shadow_thread(
            db, thread, original, version
        ))
    }

    async fn shadow_threads(&self, original: &ThreadId) -> Result<Vec<ThreadRecord>, StoreError> {
        on_conn!(self, |db| shadow_threads(db, original))
    }
}

async fn all_versions(db: Db<'_>) -> Result<BTreeMap<String, Vec<VersionRecord>>, StoreError> {
    let rows = db
        .query(
            &format!("SELECT {VERSION_COLUMNS} FROM agent_versions ORDER BY agent, pos"),
            &[],
        )
        .await
        .map_err(pg)?;
    let mut all: BTreeMap<String, Vec<VersionRecord>> = BTreeMap::new();
    for row in &rows {
        let record = decode_version(row)?;
        all.entry(record.agent.clone()).or_default().push(record);
    }
    Ok(all)
}

async fn versions_of(db: Db<'_>, agent: &str) -> Result<Vec<VersionRecord>, StoreError> {
    db.query(
        &format!("SELECT {VERSION_COLUMNS} FROM agent_versions WHERE agent = $1 ORDER BY pos"),
        &[&enc(agent)],
    )
    .await
    .map_err(pg)?
    .iter()
    .map(decode_version)
    .collect()
}

async fn create_version(db: Db<'_>, version: NewVersion) -> Result<VersionRecord, StoreError> {
    let now = stored_now();
    let spec = encode_spec(&version.spec)?;
    let inserted = db
        .execute(
            "INSERT INTO agent_versions
             (agent, version, stage, spec, shadow, created_by, created_at, updated_at)
             VALUES ($1, $2, 'draft', $3, FALSE, $4, $5, $5)",
            &[
                &enc(&version.agent),
                &enc(&version.version),
                &spec,
                &enc(&version.created_by),
                &now,
            ],
        )
        .await;
    match inserted {
        Ok(_) => one_version(db, &version.agent, &version.version, false).await,
        Err(e) if unique_violation(&e).is_some() => Err(StoreError::Conflict(format!(
            "agent `{}` already has version {}",
            version.agent, version.version
        ))),
        Err(e) => Err(pg(e)),
    }
}

async fn edit_draft(
    db: Db<'_>,
    agent: &str,
    version: &str,
    spec: VersionSpec,
) -> Result<VersionRecord, StoreError> {
    let current = one_version(db, agent, version, true).await?;
    current.require_draft()?;
    let spec = encode_spec(&spec)?;
    db.execute(
        "UPDATE agent_versions SET spec = $3, updated_at = $4
         WHERE agent = $1 AND version = $2 AND stage = 'draft'",
        &[&enc(agent), &enc(version), &spec, &stored_now()],
    )
    .await
    .map_err(pg)?;
    one_version(db, agent, version, false).await
}

async fn set_stage(
    db: Db<'_>,
    agent: &str,
    version: &str,
    from: Stage,
    to: Stage,
) -> Result<VersionRecord, StoreError> {
    if from.next() != Some(to) {
        return Err(StoreError::Conflict(format!(
            "a version moves from {} to {}, not to {}",
            from.as_str(),
            from.next().map_or("nothing", Stage::as_str),
            to.as_str()
        )));
    }
    let current = one_version(db, agent, version, true).await?;
    if current.stage != from {
        return Err(StoreError::Conflict(format!(
            "version {version} of agent `{agent}` is {}, not {}",
            current.stage.as_str(),
            from.as_str()
        )));
    }
    db.execute(
        "UPDATE agent_versions SET stage = $3, updated_at = $4
         WHERE agent = $1 AND version = $2",
        &[&enc(agent), &enc(version), &to.as_str(), &stored_now()],
    )
    .await
    .map_err(pg)?;
    one_version(db, agent, version, false).await
}

async fn set_shadow(db: Db<'_>, agent: &str, version: Option<&str>) -> Result<(), StoreError> {
    // Every version of the agent, locked: two replicas changing the shadow take turns.
    db.query(
        "SELECT 1 FROM agent_versions WHERE agent = $1 FOR UPDATE",
        &[&enc(agent)],
    )
    .await
    .map_err(pg)?;
    let now = stored_now();
    db.execute(
        "UPDATE agent_versions SET shadow = FALSE, updated_at = $2
         WHERE agent = $1 AND shadow",
        &[&enc(agent), &now],
    )
    .await
    .map_err(pg)?;
    if let Some(version) = version {
        let current = one_version(db, agent, version, false).await?;
        if current.stage == Stage::Draft {
            return Err(StoreError::Conflict(format!(
                "version {version} of agent `{agent}` is a draft and cannot be a shadow"
            )));
        }
        db.execute(
            "UPDATE agent_versions SET shadow = TRUE, updated_at = $3
             WHERE agent = $1 AND version = $2",
            &[&enc(agent), &enc(version), &now],
        )
        .await
        .map_err(pg)?;
    }
    Ok(())
}

async fn traffic(db: Db<'_>, agent: &str) -> Result<Vec<TrafficRecord>, StoreError> {
    db.query(
        "SELECT agent, seq, action, weights, by, at FROM agent_traffic
         WHERE agent = $1 ORDER BY seq",
        &[&enc(agent)],
    )
    .await
    .map_err(pg)?
    .iter()
    .map(decode_traffic)
    .collect()
}

async fn record_traffic(db: Db<'_>, change: NewTraffic) -> Result<TrafficRecord, StoreError> {
    let full = || StoreError::Conflict("traffic history is full".to_owned());
    let seq = change.after_seq.checked_add(1).ok_or_else(full)?;
    let raw_seq = i64::try_from(seq).map_err(|_| full())?;
    let weights = serde_json::to_string(&change.split)
        .map_err(|e| StoreError::Backend(format!("traffic split cannot be encoded: {e}")))?;
    let at = stored_now();
    let inserted = db
        .execute(
            "INSERT INTO agent_traffic (agent, seq, action, weights, by, at)
             VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                &enc(&change.agent),
                &raw_seq,
                &change.action.as_str(),
                &weights,
                &enc(&change.by),
                &at,
            ],
        )
        .await;
    match inserted {
        Ok(_) => Ok(TrafficRecord {
            agent: change.agent,
            seq,
            action: change.action,
            split: change.split,
            by: change.by,
            at,
        }),
        Err(e) if unique_violation(&e).is_some() => Err(StoreError::Conflict(format!(
            "the traffic of agent `{}` changed meanwhile; read it again",
            change.agent
        ))),
        Err(e) => Err(pg(e)),
    }
}

async fn pin_thread(db: Db<'_>, thread: &ThreadId, version: &str) -> Result<String, StoreError> {
    db.execute(
        "UPDATE threads SET agent_version = $2 WHERE id = $1 AND agent_version IS NULL",
        &[&thread.as_str(), &enc(version)],
    )
    .await
    .map_err(pg)?;
    let row = db
        .query_opt(
            "SELECT agent_version FROM threads WHERE id = $1",
            &[&thread.as_str()],
        )
        .await
        .map_err(pg)?
        .ok_or_else(|| StoreError::NotFound(format!("thread {thread}")))?;
    opt_text(&row, 0)?.ok_or_else(|| StoreError::Backend(format!("thread {thread} was not pinned")))
}

async fn create_shadow_thread(
    db: Db<'_>,
    thread: NewThread,
    original: &ThreadId,
    version: &str,
) -> Result<ThreadRecord, StoreError> {
    let inserted = db
        .execute(
            "INSERT INTO threads
             (id, client_id, agent, cwd, title, created_at, agent_version, shadow_of)
             SELECT $1, $2, $3, $4, $5, $6, $7, id FROM threads
             WHERE id = $8 AND deleted_at IS NULL",
            &[
                &thread.id.as_str(),
                &enc(&thread.client_id),
                &enc(&thread.agent),
                &enc(&thread.cwd),
                &enc_opt(thread.title.as_deref()),
                &stored_now(),
                &enc(version),
                &original.as_str(),
            ],
        )
        .await;
    match inserted {
        Ok(0) => Err(StoreError::NotFound(format!("thread {original}"))),
        Ok(_) => crate::events::thread(db, &thread.id)
            .await?
            .ok_or_else(|| StoreError::Backend(format!("shadow thread {} vanished", thread.id))),
        Err(e) if unique_violation(&e).is_some() => Err(StoreError::Conflict(format!(
            "thread {} already exists",
            thread.id
        ))),
        Err(e) => Err(pg(e)),
    }
}

async fn shadow_threads(db: Db<'_>, original: &ThreadId) -> Result<Vec<ThreadRecord>, StoreError> {
    db.query(
        &format!(
            "SELECT {THREAD_COLUMNS} FROM threads
             WHERE shadow_of = $1 AND deleted_at IS NULL ORDER BY pos"
        ),
        &[&original.as_str()],
    )
    .await
    .map_err(pg)?
    .iter()
    .map(decode_thread)
    .collect()
}

fn encode_spec(spec: &VersionSpec) -> Result<String, StoreError> {
    serde_json::to_string(spec)
        .map_err(|e| StoreError::Backend(format!("version spec cannot be encoded: {e}")))
}

/// The version (its row locked when `lock`), or `NotFound`.
async fn one_version(
    db: Db<'_>,
    agent: &str,
    version: &str,
    lock: bool,
) -> Result<VersionRecord, StoreError> {
    let sql = if lock {
        format!(
            "SELECT {VERSION_COLUMNS} FROM agent_versions WHERE agent = $1 AND version = $2
             FOR UPDATE"
        )
    } else {
        format!("SELECT {VERSION_COLUMNS} FROM agent_versions WHERE agent = $1 AND version = $2")
    };
    db.query_opt(&sql, &[&enc(agent), &enc(version)])
        .await
        .map_err(pg)?
        .ok_or_else(|| StoreError::NotFound(format!("version {version} of agent `{agent}`")))
        .and_then(|row| decode_version(&row))
}

fn decode_version(row: &Row) -> Result<VersionRecord, StoreError> {
    let agent = text(row, 0)?;
    let version = text(row, 1)?;
    let damaged = |what: &str| {
        StoreError::Backend(format!(
            "stored version {version} of agent `{agent}` has a damaged {what}"
        ))
    };
    let stage = Stage::parse(&text(row, 2)?).ok_or_else(|| damaged("stage"))?;
    let spec = serde_json::from_str(&text(row, 3)?).map_err(|_| damaged("spec"))?;
    Ok(VersionRecord {
        stage,
        spec,
        shadow: row.try_get(4).map_err(pg)?,
        created_by: text(row, 5)?,
        created_at: text(row, 6)?,
        updated_at: text(row, 7)?,
        agent,
        version,
    })
}

fn decode_traffic(row: &Row) -> Result<TrafficRecord, StoreError> {
    let agent = text(row, 0)?;
    let seq: i64 = row.try_get(1).map_err(pg)?;
    let damaged = |what: &str| {
        StoreError::Backend(format!(
            "traffic change {seq} of agent `{agent}` has a damaged {what}"
        ))
    };
    let action = match text(row, 2)?.as_str() {
        "set" => TrafficAction::Set,
        "rollback" => TrafficAction::Rollback,
        _ => return Err(damaged("action")),
    };
    let split: TrafficSplit = serde_json::from_str(&text(row, 3)?).map_err(|_| damaged("split"))?;
    Ok(TrafficRecord {
        seq: u64::try_from(seq).map_err(|_| damaged("seq"))?,
        action,
        split,
        by: text(row, 4)?,
        at: text(row, 5)?,
        agent,
    })
}
