//! The PostgreSQL schema, as an ordered list of migrations, and the one function that
//! applies them. Replicas starting at once migrate once: every migration runs under a
//! transaction-scoped advisory lock, and the version is read after taking it.
//!
//! The tables mirror the SQLite store's (`crates/adapters/sqlite/src/migrations.rs`):
//! the same columns holding the same text (RFC 3339 timestamps, JSON as the exact text
//! serde wrote), so records read back identical on both. What PostgreSQL adds: the
//! replica that began each turn and claimed each execution, the replica registry, and
//! the trigger that announces every committed event (`NOTIFY`). Insertion order, which
//! SQLite reads from `rowid`, is an identity column `pos`. A migration, once released,
//! is never edited: a change is a new entry at the end. Nothing here runs other queries.

use agentplane_engine::ports::StoreError;
use deadpool_postgres::ClientWrapper;

use crate::rows::pg;

/// The channel every committed event is announced on; the payload is `thread_id:seq`.
pub(crate) const CHANNEL: &str = "agentplane_events";

/// The channel a cancel request is announced on; the payload is the turn's id.
pub(crate) const CANCEL_CHANNEL: &str = "agentplane_cancels";

/// The advisory lock key migrations hold ("agentpl" in ASCII, an arbitrary constant).
const MIGRATION_LOCK: i64 = 0x0061_6765_6e74_706c;

/// Every migration, oldest first. `agentplane_schema.version` is how many have run.
const MIGRATIONS: &[&str] = &[
    // 1: the whole schema of SQLite's migrations 1 to 6, plus replicas.
    r#"
    -- Timestamps are RFC 3339 UTC text of one width: compared and sorted as bytes
    -- (`COLLATE "C"`), they sort as time, whatever the database's default collation.
    CREATE TABLE threads (
        pos           BIGINT GENERATED ALWAYS AS IDENTITY,
        id            TEXT PRIMARY KEY,
        client_id     TEXT NOT NULL,
        agent         TEXT NOT NULL,
        cwd           TEXT NOT NULL,
        title         TEXT,
        created_at    TEXT COLLATE "C" NOT NULL,
        -- The seq the thread's next event gets: seqs are 1, 2, 3… with no gap. Bumped in
        -- the appending transaction, whose row lock orders concurrent appenders.
        next_seq      BIGINT NOT NULL DEFAULT 1 CHECK (next_seq >= 1),
        summary       TEXT,
        deleted_at    TEXT,
        agent_version TEXT,
        shadow_of     TEXT REFERENCES threads(id)
    );
    CREATE INDEX threads_live_by_client ON threads(client_id, pos) WHERE deleted_at IS NULL;
    CREATE INDEX threads_by_shadow_of ON threads(shadow_of) WHERE shadow_of IS NOT NULL;

    CREATE TABLE turns (
        pos           BIGINT GENERATED ALWAYS AS IDENTITY,
        id            TEXT PRIMARY KEY,
        thread_id     TEXT NOT NULL REFERENCES threads(id),
        input         TEXT NOT NULL,
        -- 'running', or the StopReason it ended with.
        status        TEXT NOT NULL,
        created_at    TEXT COLLATE "C" NOT NULL,
        ended_at      TEXT,
        internal      BOOLEAN NOT NULL DEFAULT FALSE,
        -- The JSON of the turn_completed event's result; NULL while the turn runs.
        result        TEXT,
        agent_version TEXT,
        -- The replica (process) that began it, which alone runs it ('' for a row
        -- written outside the store).
        replica       TEXT NOT NULL DEFAULT '',
        CHECK ((status = 'running') = (ended_at IS NULL))
    );
    -- At most one running turn per thread, whichever replica begins it.
    CREATE UNIQUE INDEX turns_one_running_per_thread ON turns(thread_id)
        WHERE status = 'running';
    CREATE INDEX turns_by_thread ON turns(thread_id, pos);
    CREATE INDEX turns_running_by_replica ON turns(replica) WHERE status = 'running';

    CREATE TABLE events (
        thread_id TEXT NOT NULL REFERENCES threads(id),
        seq       BIGINT NOT NULL CHECK (seq >= 1),
        turn_id   TEXT NOT NULL REFERENCES turns(id),
        kind      TEXT NOT NULL,
        ts        TEXT COLLATE "C" NOT NULL,
        -- The serde JSON of EventPayload, `kind` included, as text: byte for byte.
        payload   TEXT NOT NULL,
        PRIMARY KEY (thread_id, seq)
    );
    CREATE INDEX events_by_turn ON events(turn_id, seq);
    CREATE INDEX events_costs ON events(ts) WHERE kind = 'cost';

    CREATE TABLE permissions (
        pos         BIGINT GENERATED ALWAYS AS IDENTITY,
        id          TEXT PRIMARY KEY,
        thread_id   TEXT NOT NULL REFERENCES threads(id),
        turn_id     TEXT NOT NULL REFERENCES turns(id),
        call_id     TEXT NOT NULL,
        tool        TEXT NOT NULL,
        arguments   TEXT NOT NULL,
        options     TEXT NOT NULL,
        status      TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'declined')),
        reason      TEXT,
        created_at  TEXT COLLATE "C" NOT NULL,
        resolved_at TEXT,
        CHECK ((status = 'pending') = (resolved_at IS NULL))
    );
    CREATE INDEX permissions_pending_by_turn ON permissions(turn_id, pos)
        WHERE status = 'pending';

    CREATE TABLE approvals (
        id               TEXT PRIMARY KEY,
        thread_id        TEXT NOT NULL REFERENCES threads(id),
        turn_id          TEXT NOT NULL REFERENCES turns(id),
        call_id          TEXT NOT NULL,
        tool             TEXT NOT NULL,
        arguments        TEXT NOT NULL,
        policy           TEXT NOT NULL,
        approvers        TEXT NOT NULL,
        status           TEXT NOT NULL
            CHECK (status IN ('pending', 'approved', 'edited', 'rejected', 'expired')),
        edited_arguments TEXT,
        feedback         TEXT,
        decided_by       TEXT,
        snapshot         TEXT NOT NULL,
        created_at       TEXT COLLATE "C" NOT NULL,
        expires_at       TEXT COLLATE "C" NOT NULL,
        decided_at       TEXT,
        resumed_at       TEXT,
        CHECK ((status = 'pending') = (decided_at IS NULL)),
        CHECK (resumed_at IS NULL OR decided_at IS NOT NULL),
        CHECK (status != 'edited' OR edited_arguments IS NOT NULL)
    );
    CREATE UNIQUE INDEX approvals_one_open_per_turn ON approvals(turn_id)
        WHERE resumed_at IS NULL;
    CREATE INDEX approvals_by_created ON approvals(created_at);

    CREATE TABLE executions (
        pos              BIGINT GENERATED ALWAYS AS IDENTITY,
        id               TEXT PRIMARY KEY,
        client_id        TEXT NOT NULL,
        agent            TEXT NOT NULL,
        input            TEXT NOT NULL,
        thread_id        TEXT NOT NULL REFERENCES threads(id),
        turn_id          TEXT REFERENCES turns(id),
        status           TEXT NOT NULL CHECK (status IN
            ('queued', 'running', 'succeeded', 'failed', 'cancelled', 'interrupted')),
        attempts         BIGINT NOT NULL DEFAULT 0 CHECK (attempts >= 0),
        max_attempts     BIGINT NOT NULL CHECK (max_attempts >= 1),
        output           TEXT,
        error_code       TEXT,
        error_message    TEXT,
        webhook_url      TEXT,
        idempotency_key  TEXT,
        fingerprint      TEXT NOT NULL,
        cancel_requested BOOLEAN NOT NULL DEFAULT FALSE,
        claimed_by       TEXT,
        -- The replica whose worker claimed it while running.
        replica          TEXT,
        created_at       TEXT COLLATE "C" NOT NULL,
        updated_at       TEXT NOT NULL,
        started_at       TEXT,
        finished_at      TEXT,
        next_attempt_at  TEXT COLLATE "C",
        CHECK ((status IN ('queued', 'running')) = (finished_at IS NULL)),
        CHECK (status != 'queued' OR next_attempt_at IS NOT NULL)
    );
    CREATE UNIQUE INDEX executions_idempotency ON executions(client_id, idempotency_key)
        WHERE idempotency_key IS NOT NULL;
    CREATE INDEX executions_due ON executions(next_attempt_at, pos) WHERE status = 'queued';
    CREATE INDEX executions_by_client ON executions(client_id, created_at);
    CREATE INDEX executions_by_thread ON executions(thread_id, status);
    CREATE INDEX executions_running_by_replica ON executions(replica)
        WHERE status = 'running';
    -- A thread runs one execution at a time, also when two replicas claim at once.
    CREATE UNIQUE INDEX executions_one_running_per_thread ON executions(thread_id)
        WHERE status = 'running';

    CREATE TABLE webhook_deliveries (
        pos             BIGINT GENERATED ALWAYS AS IDENTITY,
        id              TEXT PRIMARY KEY,
        execution_id    TEXT NOT NULL UNIQUE REFERENCES executions(id),
        url             TEXT NOT NULL,
        status          TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
        attempts        BIGINT NOT NULL DEFAULT 0 CHECK (attempts >= 0),
        next_attempt_at TEXT COLLATE "C",
        last_status     BIGINT,
        last_error      TEXT,
        created_at      TEXT COLLATE "C" NOT NULL,
        delivered_at    TEXT,
        CHECK (status != 'pending' OR next_attempt_at IS NOT NULL)
    );
    CREATE INDEX webhook_deliveries_due ON webhook_deliveries(next_attempt_at, pos)
        WHERE status = 'pending';

    CREATE TABLE agent_versions (
        pos        BIGINT GENERATED ALWAYS AS IDENTITY,
        agent      TEXT NOT NULL,
        version    TEXT NOT NULL,
        stage      TEXT NOT NULL CHECK (stage IN ('draft', 'staging', 'production')),
        spec       TEXT NOT NULL,
        shadow     BOOLEAN NOT NULL DEFAULT FALSE,
        created_by TEXT NOT NULL,
        created_at TEXT COLLATE "C" NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (agent, version)
    );
    CREATE UNIQUE INDEX agent_versions_one_shadow ON agent_versions(agent) WHERE shadow;

    CREATE TABLE agent_traffic (
        agent   TEXT NOT NULL,
        seq     BIGINT NOT NULL CHECK (seq >= 1),
        action  TEXT NOT NULL CHECK (action IN ('set', 'rollback')),
        weights TEXT NOT NULL,
        by      TEXT NOT NULL,
        at      TEXT NOT NULL,
        PRIMARY KEY (agent, seq)
    );

    CREATE TABLE model_calls (
        id            TEXT PRIMARY KEY,
        ts            TEXT COLLATE "C" NOT NULL,
        client_id     TEXT NOT NULL,
        agent         TEXT NOT NULL,
        provider      TEXT NOT NULL,
        model         TEXT NOT NULL,
        input_tokens  BIGINT NOT NULL CHECK (input_tokens >= 0),
        output_tokens BIGINT NOT NULL CHECK (output_tokens >= 0),
        usd_micros    BIGINT NOT NULL CHECK (usd_micros >= 0)
    );
    CREATE INDEX model_calls_by_ts ON model_calls(ts);

    -- Replicas alive on this database: each beats `heartbeat_at` (the database's clock,
    -- so replicas on machines with skewed clocks agree on who is stale).
    CREATE TABLE replicas (
        id           TEXT PRIMARY KEY,
        joined_at    TIMESTAMPTZ NOT NULL,
        heartbeat_at TIMESTAMPTZ NOT NULL
    );

    -- The rules the port states, enforced here whatever the code above does.
    CREATE FUNCTION agentplane_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION '%', TG_ARGV[0] USING ERRCODE = 'restrict_violation';
    END $$;
    CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events
        FOR EACH ROW EXECUTE FUNCTION agentplane_refuse('events are append-only');
    CREATE TRIGGER threads_stay_deleted BEFORE UPDATE OF deleted_at ON threads
        FOR EACH ROW WHEN (OLD.deleted_at IS NOT NULL)
        EXECUTE FUNCTION agentplane_refuse('a deleted thread stays deleted');
    CREATE TRIGGER threads_version_sticky BEFORE UPDATE OF agent_version ON threads
        FOR EACH ROW WHEN (OLD.agent_version IS NOT NULL
                           AND OLD.agent_version IS DISTINCT FROM NEW.agent_version)
        EXECUTE FUNCTION agentplane_refuse('a thread stays on its agent version');
    CREATE TRIGGER permissions_resolved_once BEFORE UPDATE ON permissions
        FOR EACH ROW WHEN (OLD.status != 'pending')
        EXECUTE FUNCTION agentplane_refuse('a permission is resolved at most once');
    CREATE TRIGGER permissions_never_delete BEFORE DELETE ON permissions
        FOR EACH ROW EXECUTE FUNCTION agentplane_refuse('permissions are kept for audit');
    CREATE TRIGGER approvals_decided_once BEFORE UPDATE OF status ON approvals
        FOR EACH ROW WHEN (OLD.status != 'pending')
        EXECUTE FUNCTION agentplane_refuse('an approval is decided at most once');
    CREATE TRIGGER approvals_resumed_once BEFORE UPDATE OF resumed_at ON approvals
        FOR EACH ROW WHEN (OLD.resumed_at IS NOT NULL)
        EXECUTE FUNCTION agentplane_refuse('an approval is resumed at most once');
    CREATE TRIGGER approvals_never_delete BEFORE DELETE ON approvals
        FOR EACH ROW EXECUTE FUNCTION agentplane_refuse('approvals are kept for audit');
    CREATE TRIGGER executions_final BEFORE UPDATE ON executions
        FOR EACH ROW WHEN (OLD.status NOT IN ('queued', 'running'))
        EXECUTE FUNCTION agentplane_refuse('a finished execution never changes');
    CREATE TRIGGER executions_never_delete BEFORE DELETE ON executions
        FOR EACH ROW EXECUTE FUNCTION agentplane_refuse('executions are kept');
    CREATE TRIGGER agent_versions_frozen BEFORE UPDATE OF spec ON agent_versions
        FOR EACH ROW WHEN (OLD.stage != 'draft')
        EXECUTE FUNCTION agentplane_refuse('only a draft version can be edited');
    CREATE TRIGGER agent_versions_forward BEFORE UPDATE OF stage ON agent_versions
        FOR EACH ROW WHEN (NOT (OLD.stage = NEW.stage
            OR (OLD.stage = 'draft' AND NEW.stage = 'staging')
            OR (OLD.stage = 'staging' AND NEW.stage = 'production')))
        EXECUTE FUNCTION agentplane_refuse('a version moves draft -> staging -> production only');
    CREATE TRIGGER agent_versions_never_delete BEFORE DELETE ON agent_versions
        FOR EACH ROW EXECUTE FUNCTION agentplane_refuse('agent versions are kept');
    CREATE TRIGGER agent_traffic_append_only BEFORE UPDATE OR DELETE ON agent_traffic
        FOR EACH ROW EXECUTE FUNCTION agentplane_refuse('traffic history is append-only');
    CREATE TRIGGER model_calls_audit BEFORE UPDATE OR DELETE ON model_calls
        FOR EACH ROW EXECUTE FUNCTION agentplane_refuse('model calls are an audit record');

    -- Every event is announced to every replica once its transaction commits
    -- (PostgreSQL delivers notifications at commit, in commit order).
    CREATE FUNCTION agentplane_announce_event() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_notify('agentplane_events', NEW.thread_id || ':' || NEW.seq);
        RETURN NULL;
    END $$;
    CREATE TRIGGER events_announce AFTER INSERT ON events
        FOR EACH ROW EXECUTE FUNCTION agentplane_announce_event();
    "#,
    // 2: cancel anywhere and recoverable recovery (ADR 0027). A cancel request is a
    // flag on the running turn, announced on its own channel; a dead replica stays in
    // the registry, marked with its claimer, until its work is recovered.
    r#"
    ALTER TABLE turns ADD COLUMN cancel_requested BOOLEAN NOT NULL DEFAULT FALSE;
    CREATE INDEX turns_cancel_requested ON turns(id)
        WHERE status = 'running' AND cancel_requested;
    ALTER TABLE replicas ADD COLUMN claimed_by TEXT;
    "#,
    // 3: budget accounts shared by the replicas, and the holds on them (ADR 0029:
    // zero overspend).
    r#"
    CREATE TABLE budget_accounts (
        policy       TEXT   NOT NULL,
        key          TEXT   NOT NULL,
        period_start TEXT   NOT NULL,
        settled      BIGINT NOT NULL CHECK (settled >= 0),
        reserved     BIGINT NOT NULL CHECK (reserved >= 0),
        PRIMARY KEY (policy, key, period_start)
    );
    CREATE TABLE budget_holds (
        hold         TEXT   NOT NULL,
        replica      TEXT   NOT NULL,
        policy       TEXT   NOT NULL,
        key          TEXT   NOT NULL,
        period_start TEXT   NOT NULL,
        amount       BIGINT NOT NULL CHECK (amount >= 0),
        created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
        PRIMARY KEY (hold, policy, key, period_start)
    );
    CREATE INDEX budget_holds_by_replica ON budget_holds (replica);
    "#,
    // 4: API keys (ADR 0030), as in SQLite's migration 8: the digest of the secret
    // only; never changed but revoked once, never deleted.
    r#"
    CREATE TABLE api_keys (
        id          TEXT PRIMARY KEY,
        digest      TEXT NOT NULL UNIQUE,
        client_id   TEXT NOT NULL,
        roles       TEXT NOT NULL,
        description TEXT,
        created_by  TEXT NOT NULL,
        created_at  TEXT COLLATE "C" NOT NULL,
        expires_at  TEXT COLLATE "C",
        revoked_at  TEXT COLLATE "C",
        pos         BIGINT GENERATED ALWAYS AS IDENTITY
    );
    CREATE TRIGGER api_keys_fixed BEFORE UPDATE OF id, digest, client_id, roles, created_at,
        expires_at ON api_keys
        FOR EACH ROW EXECUTE FUNCTION agentplane_refuse('a key never changes, it is revoked');
    CREATE TRIGGER api_keys_revoked_once BEFORE UPDATE OF revoked_at ON api_keys
        FOR EACH ROW WHEN (OLD.revoked_at IS NOT NULL)
        EXECUTE FUNCTION agentplane_refuse('a revoked key stays revoked');
    CREATE TRIGGER api_keys_never_delete BEFORE DELETE ON api_keys
        FOR EACH ROW EXECUTE FUNCTION agentplane_refuse('keys are kept for audit');
    "#,
    // 5: the MCP gateway's log, as in SQLite's migration 9: one row per finished tool
    // call, never changed.
    r#"
    CREATE TABLE mcp_calls (
        id          TEXT PRIMARY KEY,
        ts          TEXT COLLATE "C" NOT NULL,
        client_id   TEXT NOT NULL,
        agent       TEXT NOT NULL,
        server      TEXT NOT NULL,
        tool        TEXT NOT NULL,
        status      TEXT NOT NULL,
        detail      TEXT,
        policy      TEXT,
        approval_id TEXT UNIQUE,
        duration_ms BIGINT NOT NULL CHECK (duration_ms >= 0),
        usd_micros  BIGINT NOT NULL CHECK (usd_micros >= 0),
        result      TEXT,
        pos         BIGINT GENERATED ALWAYS AS IDENTITY
    );
    CREATE INDEX mcp_calls_by_client ON mcp_calls(client_id, ts);
    CREATE INDEX mcp_calls_by_ts ON mcp_calls(ts);
    CREATE TRIGGER mcp_calls_audit BEFORE UPDATE OR DELETE ON mcp_calls
        FOR EACH ROW EXECUTE FUNCTION agentplane_refuse('MCP gateway calls are an audit record');
    "#,
    // 6: the audit chain (ADR 0048), as in SQLite's migration 10: each event's hash
    // links it to the previous event of its thread; the thread row keeps the last link,
    // read under the row lock that orders appends. Events already stored keep no hash;
    // a thread's chain starts at the first seq appended after this migration.
    r#"
    ALTER TABLE events ADD COLUMN hash TEXT CHECK (hash IS NULL OR length(hash) = 64);
    ALTER TABLE threads ADD COLUMN chained_since BIGINT NOT NULL DEFAULT 1
        CHECK (chained_since >= 1);
    ALTER TABLE threads ADD COLUMN last_hash TEXT;
    UPDATE threads SET chained_since = next_seq;
    "#,
    // 7: the record chains (ADR 0048), as in SQLite's migration 11: the gateway's model
    // calls and the MCP gateway's calls each form one chain. Whichever replica stores a
    // record takes its chain's row in `audit_chains` FOR UPDATE, so the replicas append
    // to one gapless chain. Records already stored get no position: the chains start here.
    r#"
    ALTER TABLE model_calls ADD COLUMN chain_pos BIGINT CHECK (chain_pos IS NULL OR chain_pos >= 1);
    ALTER TABLE model_calls ADD COLUMN hash TEXT CHECK (hash IS NULL OR length(hash) = 64);
    CREATE UNIQUE INDEX model_calls_by_chain_pos ON model_calls(chain_pos);
    ALTER TABLE mcp_calls ADD COLUMN chain_pos BIGINT CHECK (chain_pos IS NULL OR chain_pos >= 1);
    ALTER TABLE mcp_calls ADD COLUMN hash TEXT CHECK (hash IS NULL OR length(hash) = 64);
    CREATE UNIQUE INDEX mcp_calls_by_chain_pos ON mcp_calls(chain_pos);
    CREATE TABLE audit_chains (
        chain     TEXT PRIMARY KEY,
        last_pos  BIGINT NOT NULL DEFAULT 0 CHECK (last_pos >= 0),
        last_hash TEXT CHECK (last_hash IS NULL OR length(last_hash) = 64)
    );
    INSERT INTO audit_chains (chain) VALUES ('model_calls'), ('mcp_calls');
    "#,
    // The approval policy a permission answers for (SQLite's migration 12): JSON
    // `{policy, approvers, separate}`, or NULL when no policy asked.
    r#"
    ALTER TABLE permissions ADD COLUMN policy TEXT;
    "#,
    // 9: the ledger (SQLite's migration 13): one record chain for what no event holds,
    // begun by its genesis, which `ledger::begin` writes in this same transaction.
    r#"
    CREATE TABLE audit_ledger (
        chain_pos BIGINT PRIMARY KEY CHECK (chain_pos >= 1),
        kind      TEXT NOT NULL,
        ts        TEXT COLLATE "C" NOT NULL,
        subject   TEXT NOT NULL,
        detail    TEXT NOT NULL,
        hash      TEXT NOT NULL CHECK (length(hash) = 64)
    );
    CREATE INDEX audit_ledger_by_subject ON audit_ledger(subject);
    CREATE TRIGGER audit_ledger_append_only BEFORE UPDATE OR DELETE ON audit_ledger
        FOR EACH ROW EXECUTE FUNCTION agentplane_refuse('the ledger is an audit record');
    INSERT INTO audit_chains (chain) VALUES ('audit_ledger');
    "#,
    // 10: Responses-API answers kept for `previous_response_id` (SQLite's migration 14).
    r#"
    CREATE TABLE gateway_responses (
        id           TEXT PRIMARY KEY,
        client_id    TEXT NOT NULL,
        created_at   TEXT COLLATE "C" NOT NULL,
        conversation TEXT NOT NULL
    );
    CREATE TRIGGER gateway_responses_never_update BEFORE UPDATE ON gateway_responses
        FOR EACH ROW EXECUTE FUNCTION agentplane_refuse('a kept response never changes');
    "#,
    // 11: upstream MCP tools' definitions as approved and as last seen (SQLite's
    // migration 15).
    r#"
    CREATE TABLE mcp_tool_pins (
        server        TEXT NOT NULL,
        tool          TEXT NOT NULL,
        approved_hash TEXT NOT NULL CHECK (length(approved_hash) = 64),
        approved      TEXT NOT NULL,
        seen_hash     TEXT NOT NULL CHECK (length(seen_hash) = 64),
        seen          TEXT NOT NULL,
        first_seen_at TEXT COLLATE "C" NOT NULL,
        changed_at    TEXT,
        approved_by   TEXT,
        PRIMARY KEY (server, tool)
    );
    "#,
];

/// The migration after which the ledger's genesis is written, in its transaction.
const LEDGER_MIGRATION: usize = 9;

/// The schema version this code writes and understands.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// Brings the database's schema up to date and returns how many migrations ran.
/// Refuses a schema newer than this code (never a downgrade).
pub(crate) async fn migrate(client: &mut ClientWrapper) -> Result<usize, StoreError> {
    let tx = client.transaction().await.map_err(pg)?;
    // Held until COMMIT: a second replica waits here, then finds the work done.
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(pg)?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS agentplane_schema (
             one     BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
             version BIGINT NOT NULL
         );
         INSERT INTO agentplane_schema (version) VALUES (0) ON CONFLICT DO NOTHING;",
    )
    .await
    .map_err(pg)?;
    let current: i64 = tx
        .query_one("SELECT version FROM agentplane_schema", &[])
        .await
        .map_err(pg)?
        .get(0);
    let current = usize::try_from(current)
        .map_err(|_| StoreError::Backend(format!("schema version {current} is damaged")))?;
    if current > MIGRATIONS.len() {
        return Err(StoreError::Backend(format!(
            "the database has schema version {current}, newer than the {SCHEMA_VERSION} this \
             agentplane knows; refusing to use it (use a newer agentplane, never a downgrade)"
        )));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(current) {
        tx.batch_execute(sql).await.map_err(pg)?;
        if i + 1 == LEDGER_MIGRATION {
            crate::ledger::begin(crate::db::Db::Tx(&tx), LEDGER_MIGRATION as u32).await?;
        }
    }
    let ran = MIGRATIONS.len() - current;
    tx.execute(
        "UPDATE agentplane_schema SET version = $1",
        &[&(MIGRATIONS.len() as i64)],
    )
    .await
    .map_err(pg)?;
    tx.commit().await.map_err(pg)?;
    Ok(ran)
}
