//! `VersionStore` on SQLite: agent versions, the traffic history, thread pinning and
//! shadow threads (ADR 0016). Writes go through the one writer as jobs (each in its own
//! savepoint); reads use the reader pool. The schema's triggers back every rule the
//! port states (frozen non-drafts, forward-only stages, append-only traffic, sticky
//! pinning), so a bug here cannot break them either.
//!
//! What must not live here: which version a thread should get, or whether a split is
//! sensible — the hub decides; this module only records.

use std::collections::BTreeMap;

use agentplane_core::version::TrafficAction;
use agentplane_core::{Stage, ThreadId, TrafficSplit, VersionSpec};
use agentplane_engine::ports::records::stored_now;
use agentplane_engine::ports::{
    NewThread, NewTraffic, NewVersion, StoreError, ThreadRecord, TrafficRecord, VersionRecord,
    VersionStore,
};
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::SqliteStore;
use crate::reader::{RawThread, THREAD_COLUMNS};
use crate::rows::{PRIMARY_KEY_VIOLATION, UNIQUE_VIOLATION, backend};
use crate::writer;

const VERSION_COLUMNS: &str =
    "agent, version, stage, spec, shadow, created_by, created_at, updated_at";

impl SqliteStore {
    /// Runs `write` on the writer thread as one isolated command.
    pub(crate) async fn job<T, F>(&self, write: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        self.write(|reply| writer::job(write, reply)).await
    }
}

#[async_trait]
impl VersionStore for SqliteStore {
    async fn all_versions(&self) -> Result<BTreeMap<String, Vec<VersionRecord>>, StoreError> {
        self.read(|c| {
            let rows = c
                .prepare_cached(&format!(
                    "SELECT {VERSION_COLUMNS} FROM agent_versions ORDER BY agent, rowid"
                ))
                .and_then(|mut select| {
                    select
                        .query_map([], RawVersion::from_row)?
                        .collect::<Result<Vec<_>, _>>()
                })
                .map_err(backend)?;
            let mut all: BTreeMap<String, Vec<VersionRecord>> = BTreeMap::new();
            for row in rows {
                let record = row.decode()?;
                all.entry(record.agent.clone()).or_default().push(record);
            }
            Ok(all)
        })
        .await
    }

    async fn versions_of(&self, agent: &str) -> Result<Vec<VersionRecord>, StoreError> {
        let agent = agent.to_owned();
        // A turn's read: on the calling task when a reader is free (ADR 0052).
        self.read_point(move |c| {
            c.prepare_cached(&format!(
                "SELECT {VERSION_COLUMNS} FROM agent_versions WHERE agent = ?1 ORDER BY rowid"
            ))
            .and_then(|mut select| {
                select
                    .query_map([&agent], RawVersion::from_row)?
                    .collect::<Result<Vec<_>, _>>()
            })
            .map_err(backend)?
            .into_iter()
            .map(RawVersion::decode)
            .collect()
        })
        .await
    }

    async fn create_version(&self, version: NewVersion) -> Result<VersionRecord, StoreError> {
        self.job(move |c| {
            let now = stored_now();
            let spec = encode_spec(&version.spec)?;
            let inserted = c
                .prepare_cached(
                    "INSERT INTO agent_versions
                     (agent, version, stage, spec, shadow, created_by, created_at, updated_at)
                     VALUES (?1, ?2, 'draft', ?3, 0, ?4, ?5, ?5)",
                )
                .and_then(|mut insert| {
                    insert.execute(params![
                        version.agent,
                        version.version,
                        spec,
                        version.created_by,
                        now
                    ])
                });
            match inserted {
                Ok(_) => one_version(c, &version.agent, &version.version),
                Err(e) if e.sqlite_extended_error_code() == Some(PRIMARY_KEY_VIOLATION) => {
                    Err(StoreError::Conflict(format!(
                        "agent `{}` already has version {}",
                        version.agent, version.version
                    )))
                }
                Err(e) => Err(backend(e)),
            }
        })
        .await
    }

    async fn edit_draft(
        &self,
        agent: &str,
        version: &str,
        spec: VersionSpec,
    ) -> Result<VersionRecord, StoreError> {
        let (agent, version) = (agent.to_owned(), version.to_owned());
        self.job(move |c| {
            let current = one_version(c, &agent, &version)?;
            current.require_draft()?;
            let spec = encode_spec(&spec)?;
            c.prepare_cached(
                "UPDATE agent_versions SET spec = ?3, updated_at = ?4
                 WHERE agent = ?1 AND version = ?2 AND stage = 'draft'",
            )
            .and_then(|mut update| update.execute(params![agent, version, spec, stored_now()]))
            .map_err(backend)?;
            one_version(c, &agent, &version)
        })
        .await
    }

    async fn set_stage(
        &self,
        agent: &str,
        version: &str,
        from: Stage,
        to: Stage,
    ) -> Result<VersionRecord, StoreError> {
        let (agent, version) = (agent.to_owned(), version.to_owned());
        self.job(move |c| {
            if from.next() != Some(to) {
                return Err(StoreError::Conflict(format!(
                    "a version moves from {} to {}, not to {}",
                    from.as_str(),
                    from.next().map_or("nothing", Stage::as_str),
                    to.as_str()
                )));
            }
            let current = one_version(c, &agent, &version)?;
            if current.stage != from {
                return Err(StoreError::Conflict(format!(
                    "version {version} of agent `{agent}` is {}, not {}",
                    current.stage.as_str(),
                    from.as_str()
                )));
            }
            c.prepare_cached(
                "UPDATE agent_versions SET stage = ?3, updated_at = ?4
                 WHERE agent = ?1 AND version = ?2",
            )
            .and_then(|mut update| {
                update.execute(params![agent, version, to.as_str(), stored_now()])
            })
            .map_err(backend)?;
            one_version(c, &agent, &version)
        })
        .await
    }

    async fn set_shadow(&self, agent: &str, version: Option<&str>) -> Result<(), StoreError> {
        let (agent, version) = (agent.to_owned(), version.map(str::to_owned));
        self.job(move |c| {
            let now = stored_now();
            c.prepare_cached(
                "UPDATE agent_versions SET shadow = 0, updated_at = ?2
                 WHERE agent = ?1 AND shadow = 1",
            )
            .and_then(|mut update| update.execute(params![agent, now]))
            .map_err(backend)?;
            if let Some(version) = version {
                let current = one_version(c, &agent, &version)?;
                if current.stage == Stage::Draft {
                    return Err(StoreError::Conflict(format!(
                        "version {version} of agent `{agent}` is a draft and cannot be a shadow"
                    )));
                }
                c.prepare_cached(
                    "UPDATE agent_versions SET shadow = 1, updated_at = ?3
                     WHERE agent = ?1 AND version = ?2",
                )
                .and_then(|mut update| update.execute(params![agent, version, now]))
                .map_err(backend)?;
            }
            Ok(())
        })
        .await
    }

    async fn traffic(&self, agent: &str) -> Result<Vec<TrafficRecord>, StoreError> {
        let agent = agent.to_owned();
        self.read_point(move |c| {
            c.prepare_cached(
                "SELECT agent, seq, action, weights, by, at FROM agent_traffic
                 WHERE agent = ?1 ORDER BY seq",
            )
            .and_then(|mut select| {
                select
                    .query_map([&agent], RawTraffic::from_row)?
                    .collect::<Result<Vec<_>, _>>()
            })
            .map_err(backend)?
            .into_iter()
            .map(RawTraffic::decode)
            .collect()
        })
        .await
    }

    async fn record_traffic(&self, change: NewTraffic) -> Result<TrafficRecord, StoreError> {
        self.job(move |c| {
            let seq = change
                .after_seq
                .checked_add(1)
                .ok_or_else(|| StoreError::Conflict("traffic history is full".to_owned()))?;
            let raw_seq = i64::try_from(seq)
                .map_err(|_| StoreError::Conflict("traffic history is full".to_owned()))?;
            let weights = serde_json::to_string(&change.split).map_err(|e| {
                StoreError::Backend(format!("traffic split cannot be encoded: {e}"))
            })?;
            let at = stored_now();
            let inserted = c
                .prepare_cached(
                    "INSERT INTO agent_traffic (agent, seq, action, weights, by, at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )
                .and_then(|mut insert| {
                    insert.execute(params![
                        change.agent,
                        raw_seq,
                        change.action.as_str(),
                        weights,
                        change.by,
                        at
                    ])
                });
            match inserted {
                Ok(_) => Ok(TrafficRecord {
                    agent: change.agent,
                    seq,
                    action: change.action,
                    split: change.split,
                    by: change.by,
                    at,
                }),
                Err(e) if e.sqlite_extended_error_code() == Some(PRIMARY_KEY_VIOLATION) => {
                    Err(StoreError::Conflict(format!(
                        "the traffic of agent `{}` changed meanwhile; read it again",
                        change.agent
                    )))
                }
                Err(e) => Err(backend(e)),
            }
        })
        .await
    }

    async fn pin_thread(&self, thread: &ThreadId, version: &str) -> Result<String, StoreError> {
        let (thread, version) = (thread.clone(), version.to_owned());
        self.job(move |c| {
            c.prepare_cached(
                "UPDATE threads SET agent_version = ?2 WHERE id = ?1 AND agent_version IS NULL",
            )
            .and_then(|mut update| update.execute(params![thread.as_str(), version]))
            .map_err(backend)?;
            c.prepare_cached("SELECT agent_version FROM threads WHERE id = ?1")
                .and_then(|mut select| {
                    select
                        .query_row([thread.as_str()], |row| row.get::<_, Option<String>>(0))
                        .optional()
                })
                .map_err(backend)?
                .ok_or_else(|| StoreError::NotFound(format!("thread {thread}")))?
                .ok_or_else(|| StoreError::Backend(format!("thread {thread} was not pinned")))
        })
        .await
    }

    async fn create_shadow_thread(
        &self,
        thread: NewThread,
        original: &ThreadId,
        version: &str,
    ) -> Result<ThreadRecord, StoreError> {
        let (original, version) = (original.clone(), version.to_owned());
        self.job(move |c| {
            let inserted = c
                .prepare_cached(
                    "INSERT INTO threads
                     (id, client_id, agent, cwd, title, created_at, agent_version, shadow_of)
                     SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, id FROM threads
                     WHERE id = ?8 AND deleted_at IS NULL",
                )
                .and_then(|mut insert| {
                    insert.execute(params![
                        thread.id.as_str(),
                        thread.client_id,
                        thread.agent,
                        thread.cwd,
                        thread.title,
                        stored_now(),
                        version,
                        original.as_str(),
                    ])
                });
            match inserted {
                Ok(0) => Err(StoreError::NotFound(format!("thread {original}"))),
                Ok(_) => crate::reader::thread(c, &thread.id)?.ok_or_else(|| {
                    StoreError::Backend(format!("shadow thread {} vanished", thread.id))
                }),
                Err(e)
                    if matches!(
                        e.sqlite_extended_error_code(),
                        Some(PRIMARY_KEY_VIOLATION | UNIQUE_VIOLATION)
                    ) =>
                {
                    Err(StoreError::Conflict(format!(
                        "thread {} already exists",
                        thread.id
                    )))
                }
                Err(e) => Err(backend(e)),
            }
        })
        .await
    }

    async fn shadow_threads(&self, original: &ThreadId) -> Result<Vec<ThreadRecord>, StoreError> {
        let original = original.clone();
        self.read(move |c| {
            c.prepare_cached(&format!(
                "SELECT {THREAD_COLUMNS} FROM threads
                 WHERE shadow_of = ?1 AND deleted_at IS NULL ORDER BY rowid"
            ))
            .and_then(|mut select| {
                select
                    .query_map([original.as_str()], RawThread::from_row)?
                    .collect::<Result<Vec<_>, _>>()
            })
            .map_err(backend)?
            .into_iter()
            .map(RawThread::decode)
            .collect()
        })
        .await
    }
}

fn encode_spec(spec: &VersionSpec) -> Result<String, StoreError> {
    serde_json::to_string(spec)
        .map_err(|e| StoreError::Backend(format!("version spec cannot be encoded: {e}")))
}

/// The version, or `NotFound`.
fn one_version(c: &Connection, agent: &str, version: &str) -> Result<VersionRecord, StoreError> {
    c.prepare_cached(&format!(
        "SELECT {VERSION_COLUMNS} FROM agent_versions WHERE agent = ?1 AND version = ?2"
    ))
    .and_then(|mut select| {
        select
            .query_row([agent, version], RawVersion::from_row)
            .optional()
    })
    .map_err(backend)?
    .ok_or_else(|| StoreError::NotFound(format!("version {version} of agent `{agent}`")))?
    .decode()
}

struct RawVersion {
    agent: String,
    version: String,
    stage: String,
    spec: String,
    shadow: bool,
    created_by: String,
    created_at: String,
    updated_at: String,
}

impl RawVersion {
    fn from_row(row: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            agent: row.get(0)?,
            version: row.get(1)?,
            stage: row.get(2)?,
            spec: row.get(3)?,
            shadow: row.get(4)?,
            created_by: row.get(5)?,
            created_at: row.get(6)?,
            updated_at: row.get(7)?,
        })
    }

    fn decode(self) -> Result<VersionRecord, StoreError> {
        let damaged = |what: &str| {
            StoreError::Backend(format!(
                "stored version {} of agent `{}` has a damaged {what}",
                self.version, self.agent
            ))
        };
        let stage = Stage::parse(&self.stage).ok_or_else(|| damaged("stage"))?;
        let spec = serde_json::from_str(&self.spec).map_err(|_| damaged("spec"))?;
        Ok(VersionRecord {
            agent: self.agent,
            version: self.version,
            stage,
            spec,
            shadow: self.shadow,
            created_by: self.created_by,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

struct RawTraffic {
    agent: String,
    seq: i64,
    action: String,
    weights: String,
    by: String,
    at: String,
}

impl RawTraffic {
    fn from_row(row: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            agent: row.get(0)?,
            seq: row.get(1)?,
            action: row.get(2)?,
            weights: row.get(3)?,
            by: row.get(4)?,
            at: row.get(5)?,
        })
    }

    fn decode(self) -> Result<TrafficRecord, StoreError> {
        let damaged = |what: &str| {
            StoreError::Backend(format!(
                "traffic change {} of agent `{}` has a damaged {what}",
                self.seq, self.agent
            ))
        };
        let action = match self.action.as_str() {
            "set" => TrafficAction::Set,
            "rollback" => TrafficAction::Rollback,
            _ => return Err(damaged("action")),
        };
        let split: TrafficSplit =
            serde_json::from_str(&self.weights).map_err(|_| damaged("split"))?;
        Ok(TrafficRecord {
            seq: u64::try_from(self.seq).map_err(|_| damaged("seq"))?,
            agent: self.agent,
            action,
            split,
            by: self.by,
            at: self.at,
        })
    }
}
