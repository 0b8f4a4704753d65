//! What every contract test builds on: the store bound, raw SQL behind the store's
//! back, and small constructors. No assertions live here.

use agentplane_core::{EventPayload, PermissionId, ThreadId, TurnId};
use agentplane_engine::ports::{
    AuditStore, EventStore, ExecutionStore, KeyStore, NewPermission, NewThread, ResponseStore,
    ToolPinStore, VersionStore,
};
use async_trait::async_trait;

/// A store under test: every port the contract covers.
pub trait Store:
    EventStore
    + ExecutionStore
    + VersionStore
    + AuditStore
    + KeyStore
    + ResponseStore
    + ToolPinStore
    + 'static
{
}

impl<T> Store for T where
    T: EventStore
        + ExecutionStore
        + VersionStore
        + AuditStore
        + KeyStore
        + ResponseStore
        + ToolPinStore
        + 'static
{
}

/// Which SQL a [`RawSql`] speaks, for the few statements that differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// A connection to the store's database that bypasses the store.
#[async_trait]
pub trait RawSql: Send + Sync {
    fn dialect(&self) -> Dialect;

    /// Runs one statement; the rows it changed, or the database's refusal.
    async fn execute(&self, sql: &str) -> Result<u64, String>;

    /// Runs several statements (schema changes).
    async fn batch(&self, sql: &str) -> Result<(), String>;

    /// The first column of the first row, as an integer.
    async fn query_i64(&self, sql: &str) -> Result<i64, String>;

    /// The first column of every row, as text.
    async fn query_texts(&self, sql: &str) -> Result<Vec<String>, String>;
}

/// Lifts the trigger `trigger` on `table`, as an operator with the database's password
/// could: what the audit must still see through.
pub async fn unguard(raw: &dyn RawSql, table: &str, trigger: &str) {
    let sql = match raw.dialect() {
        Dialect::Sqlite => format!("DROP TRIGGER {trigger}"),
        Dialect::Postgres => format!("ALTER TABLE {table} DISABLE TRIGGER {trigger}"),
    };
    raw.batch(&sql).await.expect("lift the guard");
}

/// Makes every `timing` (e.g. `BEFORE INSERT ON events`) statement fail with `message`,
/// when `condition` holds, until [`unsabotage`].
pub async fn sabotage(raw: &dyn RawSql, timing: &str, condition: Option<&str>, message: &str) {
    let table = timing.rsplit(' ').next().unwrap_or_default();
    let sql = match raw.dialect() {
        Dialect::Sqlite => format!(
            "CREATE TRIGGER sabotage_{table} {timing} {when}
             BEGIN SELECT RAISE(ABORT, '{message}'); END;",
            when = condition.map(|c| format!("WHEN {c}")).unwrap_or_default()
        ),
        Dialect::Postgres => format!(
            "CREATE FUNCTION sabotage_{table}() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN RAISE EXCEPTION '{message}'; END $$;
             CREATE TRIGGER sabotage_{table} {timing} FOR EACH ROW {when}
             EXECUTE FUNCTION sabotage_{table}();",
            when = condition.map(|c| format!("WHEN ({c})")).unwrap_or_default()
        ),
    };
    raw.batch(&sql).await.expect("create the sabotage trigger");
}

/// Removes what [`sabotage`] put on `table`.
pub async fn unsabotage(raw: &dyn RawSql, table: &str) {
    let sql = match raw.dialect() {
        Dialect::Sqlite => format!("DROP TRIGGER sabotage_{table}"),
        Dialect::Postgres => {
            format!("DROP TRIGGER sabotage_{table} ON {table}; DROP FUNCTION sabotage_{table}();")
        }
    };
    raw.batch(&sql).await.expect("drop the sabotage trigger");
}

pub fn new_thread() -> NewThread {
    NewThread {
        agent_version: None,
        id: ThreadId::new(),
        client_id: "local".into(),
        agent: "coder".into(),
        cwd: "/tmp/work".into(),
        title: None,
    }
}

pub fn delta(text: impl Into<String>) -> EventPayload {
    EventPayload::MessageDelta { text: text.into() }
}

/// A new thread with a running turn.
pub async fn running_turn<S: Store>(store: &S) -> (ThreadId, TurnId) {
    let thread = store
        .create_thread(new_thread())
        .await
        .expect("create thread")
        .id;
    let turn = TurnId::new();
    store
        .begin_turn(&thread, &turn, "do the thing", false)
        .await
        .expect("begin turn");
    (thread, turn)
}

/// A permission request for a call of `write_file` in `turn`, asked for by an approval
/// policy (so the store keeps who may decide it).
pub fn new_permission(thread: &ThreadId, turn: &TurnId) -> NewPermission {
    NewPermission {
        id: PermissionId::new(),
        thread_id: thread.clone(),
        turn_id: turn.clone(),
        call_id: "call_1".into(),
        tool: "write_file".into(),
        arguments: serde_json::json!({"path": "src/main.rs", "content": "fn main() {}"}),
        options: vec!["approved".into(), "declined".into()],
        runs: None,
        policy: Some(agentplane_engine::ports::PermissionPolicy {
            policy: "edits-need-approval".into(),
            approvers: vec!["role:security".into()],
            separate: true,
        }),
    }
}
