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
    // 4: executions: the durable queue of asynchronous turns, and their webhook deliveries.
    r#"
    CREATE TABLE executions (
        id               TEXT PRIMARY KEY NOT NULL,
        client_id        TEXT NOT NULL,
        agent            TEXT NOT NULL,
        input            TEXT NOT NULL,
        thread_id        TEXT NOT NULL REFERENCES threads(id),
        -- The turn of the latest attempt.
        turn_id          TEXT REFERENCES turns(id),
        status           TEXT NOT NULL CHECK (status IN
            ('queued', 'running', 'succeeded', 'failed', 'cancelled', 'interrupted')),
        attempts         INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
        max_attempts     INTEGER NOT NULL CHECK (max_attempts >= 1),
        -- JSON: the successful turn's result.
        output           TEXT,
        error_code       TEXT,
        error_message    TEXT,
        webhook_url      TEXT,
        idempotency_key  TEXT,
        -- JSON: what else identifies the request, compared on an idempotent replay.
        fingerprint      TEXT NOT NULL,
        cancel_requested INTEGER NOT NULL DEFAULT 0 CHECK (cancel_requested IN (0, 1)),
        -- The process (worker) that claimed it while running.
        claimed_by       TEXT,
        created_at       TEXT NOT NULL,
        updated_at       TEXT NOT NULL,
        started_at       TEXT,
        finished_at      TEXT,
        -- When a queued execution is due.
        next_attempt_at  TEXT,
        CHECK ((status IN ('queued', 'running')) = (finished_at IS NULL)),
        CHECK (status != 'queued' OR next_attempt_at IS NOT NULL)
    ) STRICT;
    CREATE UNIQUE INDEX executions_idempotency ON executions(client_id, idempotency_key)
        WHERE idempotency_key IS NOT NULL;
    CREATE INDEX executions_due ON executions(next_attempt_at) WHERE status = 'queued';
    CREATE INDEX executions_by_client ON executions(client_id, created_at);
    CREATE INDEX executions_by_thread ON executions(thread_id, status);
    -- A finished execution never changes: its webhook body is the same at every attempt.
    CREATE TRIGGER executions_final BEFORE UPDATE ON executions
        WHEN OLD.status NOT IN ('queued', 'running')
        BEGIN SELECT RAISE(ABORT, 'a finished execution never changes'); END;
    CREATE TRIGGER executions_never_delete BEFORE DELETE ON executions
        BEGIN SELECT RAISE(ABORT, 'executions are kept'); END;

    CREATE TABLE webhook_deliveries (
        id              TEXT PRIMARY KEY NOT NULL,
        -- One delivery per execution.
        execution_id    TEXT NOT NULL UNIQUE REFERENCES executions(id),
        url             TEXT NOT NULL,
        status          TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
        attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
        next_attempt_at TEXT,
        last_status     INTEGER,
        last_error      TEXT,
        created_at      TEXT NOT NULL,
        delivered_at    TEXT,
        CHECK (status != 'pending' OR next_attempt_at IS NOT NULL)
    ) STRICT;
    CREATE INDEX webhook_deliveries_due ON webhook_deliveries(next_attempt_at)
        WHERE status = 'pending';
    "#,
    // 5: agent versions (ADR 0016): versions and their stages, the traffic history,
    // the version each thread is pinned to and each turn ran, hidden shadow threads.
    r#"
    CREATE TABLE agent_versions (
        agent      TEXT NOT NULL,
        version    TEXT NOT NULL,
        stage      TEXT NOT NULL CHECK (stage IN ('draft', 'staging', 'production')),
        -- JSON: the VersionSpec.
        spec       TEXT NOT NULL,
        shadow     INTEGER NOT NULL DEFAULT 0 CHECK (shadow IN (0, 1)),
        created_by TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (agent, version)
    ) STRICT;
    -- Only a draft changes; stages only move forward; nothing is deleted.
    CREATE TRIGGER agent_versions_frozen BEFORE UPDATE OF spec ON agent_versions
        WHEN OLD.stage != 'draft'
        BEGIN SELECT RAISE(ABORT, 'only a draft version can be edited'); END;
    CREATE TRIGGER agent_versions_forward BEFORE UPDATE OF stage ON agent_versions
        WHEN NOT (OLD.stage = NEW.stage
            OR (OLD.stage = 'draft' AND NEW.stage = 'staging')
            OR (OLD.stage = 'staging' AND NEW.stage = 'production'))
        BEGIN SELECT RAISE(ABORT, 'a version moves draft -> staging -> production only'); END;
    CREATE TRIGGER agent_versions_never_delete BEFORE DELETE ON agent_versions
        BEGIN SELECT RAISE(ABORT, 'agent versions are kept'); END;
    CREATE UNIQUE INDEX agent_versions_one_shadow ON agent_versions(agent) WHERE shadow = 1;

    CREATE TABLE agent_traffic (
        agent   TEXT NOT NULL,
        seq     INTEGER NOT NULL CHECK (seq >= 1),
        action  TEXT NOT NULL CHECK (action IN ('set', 'rollback')),
        -- JSON: {version: percent}, the split in force after this change.
        weights TEXT NOT NULL,
        by      TEXT NOT NULL,
        at      TEXT NOT NULL,
        PRIMARY KEY (agent, seq)
    ) STRICT;
    CREATE TRIGGER agent_traffic_never_update BEFORE UPDATE ON agent_traffic
        BEGIN SELECT RAISE(ABORT, 'traffic history is append-only'); END;
    CREATE TRIGGER agent_traffic_never_delete BEFORE DELETE ON agent_traffic
        BEGIN SELECT RAISE(ABORT, 'traffic history is append-only'); END;

    -- Pinned once, never changed: a thread stays on its version.
    ALTER TABLE threads ADD COLUMN agent_version TEXT;
    CREATE TRIGGER threads_version_sticky BEFORE UPDATE OF agent_version ON threads
        WHEN OLD.agent_version IS NOT NULL
        BEGIN SELECT RAISE(ABORT, 'a thread stays on its agent version'); END;
    -- A shadow thread: the thread whose turns it copies. Never listed.
    ALTER TABLE threads ADD COLUMN shadow_of TEXT REFERENCES threads(id);
    CREATE INDEX threads_by_shadow_of ON threads(shadow_of) WHERE shadow_of IS NOT NULL;
    ALTER TABLE turns ADD COLUMN agent_version TEXT;
    "#,
    // 6: model calls outside turns (the OpenAI-compatible gateway), for costs and budgets.
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
    // 7: replicas (ADR 0019): the process that began each turn and claimed each
    // execution, and the registry of live processes with their heartbeats.
    r#"
    ALTER TABLE turns ADD COLUMN replica TEXT;
    CREATE INDEX turns_running_by_replica ON turns(replica) WHERE status = 'running';
    ALTER TABLE executions ADD COLUMN replica TEXT;
    CREATE INDEX executions_running_by_replica ON executions(replica)
        WHERE status = 'running';
    CREATE TABLE replicas (
        id           TEXT PRIMARY KEY NOT NULL,
        started_at   TEXT NOT NULL,
        heartbeat_at TEXT NOT NULL
    ) STRICT;
    "#,
    // 8: API keys (ADR 0030): each bound to a client and roles, stored as the digest of
    // its secret only; never deleted, revoked once.
    r#"
    CREATE TABLE api_keys (
        id          TEXT PRIMARY KEY NOT NULL,
        -- SHA-256 of the secret, hex. The secret itself is never stored.
        digest      TEXT NOT NULL UNIQUE,
        client_id   TEXT NOT NULL,
        -- JSON: an array of role names.
        roles       TEXT NOT NULL,
        description TEXT,
        created_by  TEXT NOT NULL,
        created_at  TEXT NOT NULL,
        expires_at  TEXT,
        revoked_at  TEXT
    ) STRICT;
    CREATE TRIGGER api_keys_fixed BEFORE UPDATE OF id, digest, client_id, roles, created_at,
        expires_at ON api_keys
        BEGIN SELECT RAISE(ABORT, 'a key never changes, it is revoked'); END;
    CREATE TRIGGER api_keys_revoked_once BEFORE UPDATE OF revoked_at ON api_keys
        WHEN OLD.revoked_at IS NOT NULL
        BEGIN SELECT RAISE(ABORT, 'a revoked key stays revoked'); END;
    CREATE TRIGGER api_keys_never_delete BEFORE DELETE ON api_keys
        BEGIN SELECT RAISE(ABORT, 'keys are kept for audit'); END;
    "#,
    // 9: the MCP gateway's log: one row per finished tool call, never changed.
    r#"
    CREATE TABLE mcp_calls (
        id          TEXT PRIMARY KEY NOT NULL,
        ts          TEXT NOT NULL,
        client_id   TEXT NOT NULL,
        agent       TEXT NOT NULL,
        server      TEXT NOT NULL,
        tool        TEXT NOT NULL,
        status      TEXT NOT NULL,
        detail      TEXT,
        policy      TEXT,
        approval_id TEXT UNIQUE,
        duration_ms INTEGER NOT NULL CHECK (duration_ms >= 0),
        usd_micros  INTEGER NOT NULL CHECK (usd_micros >= 0),
        -- JSON: the answer of a call that waited for an approval.
        result      TEXT
    ) STRICT;
    CREATE INDEX mcp_calls_by_client ON mcp_calls(client_id, ts);
    CREATE INDEX mcp_calls_by_ts ON mcp_calls(ts);
    CREATE TRIGGER mcp_calls_never_update BEFORE UPDATE ON mcp_calls
        BEGIN SELECT RAISE(ABORT, 'MCP gateway calls are an audit record'); END;
    CREATE TRIGGER mcp_calls_never_delete BEFORE DELETE ON mcp_calls
        BEGIN SELECT RAISE(ABORT, 'MCP gateway calls are an audit record'); END;
    "#,
    // 10: the audit chain (ADR 0048): each event's hash links it to the previous event
    // of its thread. Events already stored keep no hash; a thread's chain starts at the
    // first seq appended after this migration, which the thread records.
    r#"
    ALTER TABLE events ADD COLUMN hash TEXT CHECK (hash IS NULL OR length(hash) = 64);
    ALTER TABLE threads ADD COLUMN chained_since INTEGER NOT NULL DEFAULT 1
        CHECK (chained_since >= 1);
    UPDATE threads SET chained_since = next_seq;
    "#,
    // 11: the record chains (ADR 0048): the gateway's model calls and the MCP gateway's
    // calls each form one chain in the order they are stored. A record's position and
    // hash are given from its chain's row in `audit_chains`, updated in the same
    // transaction. Records already stored get neither: the chains start here.
    r#"
    ALTER TABLE model_calls ADD COLUMN chain_pos INTEGER CHECK (chain_pos IS NULL OR chain_pos >= 1);
    ALTER TABLE model_calls ADD COLUMN hash TEXT CHECK (hash IS NULL OR length(hash) = 64);
    CREATE UNIQUE INDEX model_calls_by_chain_pos ON model_calls(chain_pos);
    ALTER TABLE mcp_calls ADD COLUMN chain_pos INTEGER CHECK (chain_pos IS NULL OR chain_pos >= 1);
    ALTER TABLE mcp_calls ADD COLUMN hash TEXT CHECK (hash IS NULL OR length(hash) = 64);
    CREATE UNIQUE INDEX mcp_calls_by_chain_pos ON mcp_calls(chain_pos);
    CREATE TABLE audit_chains (
        chain     TEXT PRIMARY KEY NOT NULL,
        last_pos  INTEGER NOT NULL DEFAULT 0 CHECK (last_pos >= 0),
        last_hash TEXT CHECK (last_hash IS NULL OR length(last_hash) = 64)
    ) STRICT;
    INSERT INTO audit_chains (chain) VALUES ('model_calls'), ('mcp_calls');
    CREATE TRIGGER audit_chains_never_delete BEFORE DELETE ON audit_chains
        BEGIN SELECT RAISE(ABORT, 'the audit chains are an audit record'); END;
    "#,
    // 12: the approval policy a permission answers for (an external agent's ask that
    // an `approval_required` policy selects): JSON `{policy, approvers, separate}`, or
    // NULL when no policy asked. Permissions stored before have none.
    r#"
    ALTER TABLE permissions ADD COLUMN policy TEXT;
    "#,
    // 13: the ledger (docs/audit.md): one record chain for what no event holds —
    // threads' owners, workspaces and deletions, API keys, the policy sets loaded —
    // begun by its genesis, which `ledger::begin` writes in this same transaction
    // (where each chain began, and the threads and keys that exist now).
    r#"
    CREATE TABLE audit_ledger (
        chain_pos INTEGER PRIMARY KEY NOT NULL CHECK (chain_pos >= 1),
        kind      TEXT NOT NULL,
        ts        TEXT NOT NULL,
        subject   TEXT NOT NULL,
        -- JSON, hashed as written.
        detail    TEXT NOT NULL,
        hash      TEXT NOT NULL CHECK (length(hash) = 64)
    ) STRICT;
    CREATE INDEX audit_ledger_by_subject ON audit_ledger(subject);
    CREATE TRIGGER audit_ledger_never_update BEFORE UPDATE ON audit_ledger
        BEGIN SELECT RAISE(ABORT, 'the ledger is an audit record'); END;
    CREATE TRIGGER audit_ledger_never_delete BEFORE DELETE ON audit_ledger
        BEGIN SELECT RAISE(ABORT, 'the ledger is an audit record'); END;
    INSERT INTO audit_chains (chain) VALUES ('audit_ledger');
    "#,
    // 14: Responses-API answers kept for `previous_response_id`: the whole conversation
    // (JSON chat messages, screened), found by id and client together.
    r#"
    CREATE TABLE gateway_responses (
        id           TEXT PRIMARY KEY NOT NULL,
        client_id    TEXT NOT NULL,
        created_at   TEXT NOT NULL,
        conversation TEXT NOT NULL
    ) STRICT;
    CREATE TRIGGER gateway_responses_never_update BEFORE UPDATE ON gateway_responses
        BEGIN SELECT RAISE(ABORT, 'a kept response never changes'); END;
    "#,
    // 15: upstream MCP tools' definitions as approved and as last seen (JSON), so a
    // change is noticed across restarts; a pin is never deleted.
    r#"
    CREATE TABLE mcp_tool_pins (
        server        TEXT NOT NULL,
        tool          TEXT NOT NULL,
        approved_hash TEXT NOT NULL CHECK (length(approved_hash) = 64),
        approved      TEXT NOT NULL,
        seen_hash     TEXT NOT NULL CHECK (length(seen_hash) = 64),
        seen          TEXT NOT NULL,
        first_seen_at TEXT NOT NULL,
        changed_at    TEXT,
        approved_by   TEXT,
        PRIMARY KEY (server, tool)
    ) STRICT;
    "#,
];

/// The migration after which the ledger's genesis is written, in its transaction.
const LEDGER_MIGRATION: u32 = 13;

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
        if version + 1 == LEDGER_MIGRATION {
            crate::ledger::begin(&tx, LEDGER_MIGRATION)?;
        }
        // `user_version` lives in the file header, which the transaction covers: a
        // migration and its version number commit together or not at all.
        tx.pragma_update(None, "user_version", i64::from(version) + 1)
            .map_err(failed)?;
        tx.commit().map_err(failed)?;
        ran += 1;
    }
}
