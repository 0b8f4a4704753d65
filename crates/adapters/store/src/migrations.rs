//! The schema, as an ordered list of migrations keyed by `PRAGMA user_version`.
//!
//! Migration `i` (0-based) brings the database to version `i + 1`. A migration, once
//! released, is never edited: a change is a new entry at the end. Nothing here runs
//! queries other than schema changes, and the code never downgrades a database.

use std::path::Path;

use agentplane_engine::ports::StoreError;
use rusqlite::{Connection, TransactionBehavior};

/// Every migration, oldest first. The database's `user_version` is how many have run.
const MIGRATIONS: &[&str] = &[
    // 1: threads, turns and the append-only event log.
    r#"
    CREATE TABLE threads (
        id         TEXT PRIMARY KEY NOT NULL,
        client_id  TEXT NOT NULL,
        agent      TEXT NOT NULL,
        cwd        TEXT NOT NULL,
        title      TEXT,
        created_at TEXT NOT NULL,
        -- The seq the thread's next event gets: seqs are 1, 2, 3… with no gap.
        next_seq   INTEGER NOT NULL DEFAULT 1 CHECK (next_seq >= 1)
    ) STRICT;

    CREATE TABLE turns (
        id         TEXT PRIMARY KEY NOT NULL,
        thread_id  TEXT NOT NULL REFERENCES threads(id),
        input      TEXT NOT NULL,
        -- 'running', or the StopReason it ended with.
        status     TEXT NOT NULL,
        created_at TEXT NOT NULL,
        ended_at   TEXT,
        CHECK ((status = 'running') = (ended_at IS NULL))
    ) STRICT;

    -- At most one running turn per thread, whatever the code above does.
    CREATE UNIQUE INDEX turns_one_running_per_thread ON turns(thread_id)
        WHERE status = 'running';
    CREATE INDEX turns_by_thread ON turns(thread_id);

    CREATE TABLE events (
        thread_id TEXT NOT NULL REFERENCES threads(id),
        seq       INTEGER NOT NULL CHECK (seq >= 1),
        turn_id   TEXT NOT NULL REFERENCES turns(id),
        kind      TEXT NOT NULL,
        ts        TEXT NOT NULL,
        -- The serde JSON of EventPayload, `kind` included.
        payload   TEXT NOT NULL,
        PRIMARY KEY (thread_id, seq)
    ) STRICT;
    CREATE INDEX events_by_turn ON events(turn_id, seq);

    -- The log is append-only: a bug (or a hand-typed query) cannot rewrite history.
    CREATE TRIGGER events_never_update BEFORE UPDATE ON events
        BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
    CREATE TRIGGER events_never_delete BEFORE DELETE ON events
        BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
    "#,
    // 2: soft-deleted threads, compaction summaries, internal turns, turn results, and
    // permission requests.
    r#"
    ALTER TABLE threads ADD COLUMN summary TEXT;
    -- Set once, never cleared: a deleted thread is kept for audit but never returned.
    ALTER TABLE threads ADD COLUMN deleted_at TEXT;
    CREATE INDEX threads_live_by_client ON threads(client_id) WHERE deleted_at IS NULL;
    CREATE TRIGGER threads_stay_deleted BEFORE UPDATE OF deleted_at ON threads
        WHEN OLD.deleted_at IS NOT NULL
        BEGIN SELECT RAISE(ABORT, 'a deleted thread stays deleted'); END;

    ALTER TABLE turns ADD COLUMN internal INTEGER NOT NULL DEFAULT 0
        CHECK (internal IN (0, 1));
    -- The JSON of the turn_completed event's result; NULL while the turn runs.
    ALTER TABLE turns ADD COLUMN result TEXT;
    -- Turns that ended before this column existed get the result of their own
    -- turn_completed event, which every ended turn has.
    UPDATE turns SET result = (
        SELECT payload -> '$.result' FROM events
        WHERE events.turn_id = turns.id AND events.kind = 'turn_completed'
    ) WHERE status != 'running';

    CREATE TABLE permissions (
        id          TEXT PRIMARY KEY NOT NULL,
        thread_id   TEXT NOT NULL REFERENCES threads(id),
        turn_id     TEXT NOT NULL REFERENCES turns(id),
        call_id     TEXT NOT NULL,
        tool        TEXT NOT NULL,
        -- JSON: the call's arguments exactly as planned.
        arguments   TEXT NOT NULL,
        -- JSON: an array of the answers offered.
        options     TEXT NOT NULL,
        status      TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'declined')),
        reason      TEXT,
        created_at  TEXT NOT NULL,
        resolved_at TEXT,
        CHECK ((status = 'pending') = (resolved_at IS NULL))
    ) STRICT;
    CREATE INDEX permissions_pending_by_turn ON permissions(turn_id)
        WHERE status = 'pending';

    -- A permission is resolved at most once, and the record of it stays.
    CREATE TRIGGER permissions_resolved_once BEFORE UPDATE ON permissions
        WHEN OLD.status != 'pending'
        BEGIN SELECT RAISE(ABORT, 'a permission is resolved at most once'); END;
    CREATE TRIGGER permissions_never_delete BEFORE DELETE ON permissions
        BEGIN SELECT RAISE(ABORT, 'permissions are kept for audit'); END;
    "#,
    // 3: approvals (a suspended turn's pending call, its decision, its resumption), and
    // an index for cost queries.
    r#"
    CREATE TABLE approvals (
        id               TEXT PRIMARY KEY NOT NULL,
        thread_id        TEXT NOT NULL REFERENCES threads(id),
        turn_id          TEXT NOT NULL REFERENCES turns(id),
        call_id          TEXT NOT NULL,
        tool             TEXT NOT NULL,
        -- JSON: the exact arguments as planned (kept whatever events retain).
        arguments        TEXT NOT NULL,
        policy           TEXT NOT NULL,
        -- JSON: an array of approver names.
        approvers        TEXT NOT NULL,
        status           TEXT NOT NULL
            CHECK (status IN ('pending', 'approved', 'edited', 'rejected', 'expired')),
        -- JSON: what an `edited` decision runs instead.
        edited_arguments TEXT,
        feedback         TEXT,
        decided_by       TEXT,
        -- JSON: the suspended turn's state, opaque to the store.
        snapshot         TEXT NOT NULL,
        created_at       TEXT NOT NULL,
        expires_at       TEXT NOT NULL,
        decided_at       TEXT,
        -- Set once, when the turn takes the decision and resumes.
        resumed_at       TEXT,
        CHECK ((status = 'pending') = (decided_at IS NULL)),
        CHECK (resumed_at IS NULL OR decided_at IS NOT NULL),
        CHECK (status != 'edited' OR edited_arguments IS NOT NULL)
    ) STRICT;
    -- A turn waits on at most one approval at a time.
    CREATE UNIQUE INDEX approvals_one_open_per_turn ON approvals(turn_id)
        WHERE resumed_at IS NULL;
    CREATE INDEX approvals_by_created ON approvals(created_at);
    CREATE TRIGGER approvals_decided_once BEFORE UPDATE OF status ON approvals
        WHEN OLD.status != 'pending'
        BEGIN SELECT RAISE(ABORT, 'an approval is decided at most once'); END;
    CREATE TRIGGER approvals_resumed_once BEFORE UPDATE OF resumed_at ON approvals
        WHEN OLD.resumed_at IS NOT NULL
        BEGIN SELECT RAISE(ABORT, 'an approval is resumed at most once'); END;
    CREATE TRIGGER approvals_never_delete BEFORE DELETE ON approvals
        BEGIN SELECT RAISE(ABORT, 'approvals are kept for audit'); END;

    CREATE INDEX events_costs ON events(ts) WHERE kind = 'cost';
    "#,
    // Model calls outside turns (the OpenAI-compatible gateway), for costs and budgets.
    r#"
    CREATE TABLE model_calls (
        id            TEXT PRIMARY KEY NOT NULL,
        ts            TEXT NOT NULL,
        client_id     TEXT NOT NULL,
        agent         TEXT NOT NULL,
        provider      TEXT NOT NULL,
        model         TEXT NOT NULL,
        input_tokens  INTEGER NOT NULL CHECK (input_tokens >= 0),
        output_tokens INTEGER NOT NULL CHECK (output_tokens >= 0),
        usd_micros    INTEGER NOT NULL CHECK (usd_micros >= 0)
    ) STRICT;
    CREATE INDEX model_calls_by_ts ON model_calls(ts);
    CREATE TRIGGER model_calls_never_update BEFORE UPDATE ON model_calls
        BEGIN SELECT RAISE(ABORT, 'model calls are an audit record'); END;
    CREATE TRIGGER model_calls_never_delete BEFORE DELETE ON model_calls
        BEGIN SELECT RAISE(ABORT, 'model calls are an audit record'); END;
    "#,
];

/// The schema version this code writes and understands.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// Reads the schema version of the database at `path` (opened as `conn`) without
/// writing anything, and refuses what this code must not touch: a newer schema (never
/// downgrade) or a SQLite file that holds tables but no agentplane schema.
pub(crate) fn check(conn: &Connection, path: &Path) -> Result<u32, StoreError> {
    let failed =
        |e: rusqlite::Error| StoreError::Backend(format!("reading {}: {e}", path.display()));
    let current: u32 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(failed)?;
    if current > SCHEMA_VERSION {
        return Err(StoreError::Backend(format!(
            "{} has schema version {current}, newer than the {SCHEMA_VERSION} this agentplane \
             knows; refusing to open it (use a newer agentplane, never a downgrade)",
            path.display()
        )));
    }
    if current == 0 {
        let tables: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_master", [], |row| row.get(0))
            .map_err(failed)?;
        if tables > 0 {
            return Err(StoreError::Backend(format!(
                "{} is a SQLite database of something else (it has tables but no agentplane \
                 schema); refusing to change it",
                path.display()
            )));
        }
    }
    Ok(current)
}

/// Runs the pending migrations, one transaction each, and returns how many ran. The
/// version is re-read inside each write transaction, so two processes opening the same
/// new file at once cannot both run a migration.
pub(crate) fn migrate(conn: &mut Connection, path: &Path) -> Result<usize, StoreError> {
    let failed =
        |e: rusqlite::Error| StoreError::Backend(format!("migrating {}: {e}", path.display()));
    let mut ran = 0;
    loop {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(failed)?;
        let version: u32 = tx
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .map_err(failed)?;
        let Some(sql) = MIGRATIONS.get(version as usize) else {
            return Ok(ran);
        };
        tx.execute_batch(sql).map_err(failed)?;
        // `user_version` lives in the file header, which the transaction covers: a
        // migration and its version number commit together or not at all.
        tx.pragma_update(None, "user_version", i64::from(version) + 1)
            .map_err(failed)?;
        tx.commit().map_err(failed)?;
        ran += 1;
    }
}
