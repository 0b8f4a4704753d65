//! `PostgresStore`: the handle the rest of the program holds — a connection pool, this
//! process's replica id, and the `LISTEN` task. Each port method takes a connection,
//! runs its module's SQL (in one transaction for a write) and returns; it holds no SQL
//! of its own.

use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentplane_core::policy::Timestamp;
use agentplane_core::{
    ApprovalId, Event, EventPayload, PermissionDecision, PermissionId, ReplicaId, StopReason,
    ThreadId, TurnId,
};
use agentplane_engine::ports::records::stored_time;
use agentplane_engine::ports::{
    Announcement, ApprovalDecision, ApprovalQuery, ApprovalRecord, ApprovalStore, CallStore,
    CostQuery, CostRow, McpCallQuery, McpCallRecord, ModelCallRecord, NewApproval, NewPermission,
    NewThread, PermissionRecord, StoreError, ThreadRecord, ThreadStore, TurnLog, TurnRecord,
};
use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::{approvals, costs, events, listener, mcp_calls, schema};

/// Connections kept open per replica. Writes are short transactions; a few more than
/// the machine has cores keeps every worker busy without crowding the server.
const POOL_SIZE: usize = 16;

/// How long a new connection may take before the database counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a query waits for a free pooled connection.
const POOL_WAIT: Duration = Duration::from_secs(30);

/// Runs `$body` (an expression using `$db`, a `Db` on a fresh transaction, and
/// evaluating to a future of `Result<T, StoreError>`) and commits; any error rolls the
/// whole transaction back (dropping it sends `ROLLBACK`).
macro_rules! in_tx {
    ($store:expr, |$db:ident| $body:expr) => {{
        let mut conn = $store.conn().await?;
        let tx = conn.transaction().await.map_err($crate::rows::pg)?;
        let out = {
            let $db = $crate::db::Db::Tx(&tx);
            $body.await?
        };
        tx.commit().await.map_err($crate::rows::pg)?;
        Ok(out)
    }};
}

/// Runs `$body` on a pooled connection outside any transaction (one statement each).
macro_rules! on_conn {
    ($store:expr, |$db:ident| $body:expr) => {{
        let conn = $store.conn().await?;
        let $db = $crate::db::Db::Conn(&conn);
        $body.await
    }};
}

pub(crate) use {in_tx, on_conn};

/// The store on one PostgreSQL database, shared by every replica that connects to it.
///
/// A write's future resolves after its transaction committed; dropping the future
/// before that rolls the transaction back. Dropping the store stops its `LISTEN` task;
/// pooled connections close as they are released.
pub struct PostgresStore {
    pool: Pool,
    replica: ReplicaId,
    /// The `announcements` feed, until someone takes it.
    pub(crate) announcements: Arc<Mutex<Option<mpsc::Receiver<Announcement>>>>,
    listener: JoinHandle<()>,
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://user@host:port/db`, plain TCP or a
    /// Unix socket, no TLS) as replica `replica`, brings the schema up to date (once,
    /// however many replicas start together), and starts the task that `LISTEN`s for the
    /// events every replica commits.
    pub async fn connect(url: &str, replica: ReplicaId) -> Result<PostgresStore, StoreError> {
        let mut config = tokio_postgres::Config::from_str(url)
            .map_err(|e| StoreError::Backend(format!("the PostgreSQL URL is not valid: {e}")))?;
        config.connect_timeout(CONNECT_TIMEOUT);
        if config.get_application_name().is_none() {
            config.application_name("agentplane");
        }
        let manager = Manager::from_config(
            config.clone(),
            tokio_postgres::NoTls,
            ManagerConfig {
                // A round trip per checkout: a connection the server ended while it sat
                // in the pool (a restart, a cut, `pg_terminate_backend`) is replaced
                // instead of failing the request that drew it (ADR 0027).
                recycling_method: RecyclingMethod::Verified,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(POOL_WAIT))
            .create_timeout(Some(CONNECT_TIMEOUT))
            .build()
            .map_err(|e| StoreError::Backend(format!("cannot build the connection pool: {e}")))?;
        let mut conn = pool
            .get()
            .await
            .map_err(|e| StoreError::Backend(format!("cannot connect to PostgreSQL: {e}")))?;
        let ran = schema::migrate(&mut conn).await?;
        drop(conn);
        if ran > 0 {
            tracing::info!(migrations = ran, "postgres store schema migrated");
        }
        let announcements = Arc::new(Mutex::new(None));
        let listener = listener::spawn(config, Arc::clone(&announcements)).await?;
        tracing::debug!(%replica, "postgres store connected");
        Ok(PostgresStore {
            pool,
            replica,
            announcements,
            listener,
        })
    }

    /// A pooled connection.
    pub(crate) async fn conn(&self) -> Result<Object, StoreError> {
        self.pool
            .get()
            .await
            .map_err(|e| StoreError::Backend(format!("no PostgreSQL connection: {e}")))
    }

    /// The connection pool.
    pub(crate) fn pool(&self) -> &Pool {
        &self.pool
    }

    /// This process's replica id (also `ReplicaStore::replica`).
    pub(crate) fn replica_id(&self) -> &ReplicaId {
        &self.replica
    }
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

#[async_trait]
impl ThreadStore for PostgresStore {
    async fn create_thread(&self, thread: NewThread) -> Result<ThreadRecord, StoreError> {
        in_tx!(self, |db| events::create_thread(db, thread))
    }

    async fn thread(&self, id: &ThreadId) -> Result<Option<ThreadRecord>, StoreError> {
        on_conn!(self, |db| events::thread(db, id))
    }

    async fn list_threads(&self, client_id: &str) -> Result<Vec<ThreadRecord>, StoreError> {
        on_conn!(self, |db| events::threads_of_client(db, client_id))
    }

    async fn threads_active_since(
        &self,
        since: Option<Timestamp>,
    ) -> Result<Vec<ThreadRecord>, StoreError> {
        let since = since.map(stored_time);
        on_conn!(self, |db| events::threads_active_since(
            db,
            since.as_deref()
        ))
    }

    async fn delete_thread(&self, id: &ThreadId) -> Result<(), StoreError> {
        in_tx!(self, |db| events::delete_thread(db, id))
    }

    async fn set_summary(&self, id: &ThreadId, summary: &str) -> Result<(), StoreError> {
        in_tx!(self, |db| events::set_summary(db, id, summary))
    }
}

#[async_trait]
impl TurnLog for PostgresStore {
    async fn begin_turn(
        &self,
        thread: &ThreadId,
        turn: &TurnId,
        input: &str,
        internal: bool,
    ) -> Result<TurnRecord, StoreError> {
        in_tx!(self, |db| events::begin_turn(
            db,
            thread,
            turn,
            input,
            internal,
            &self.replica
        ))
    }

    async fn start_turn(
        &self,
        thread: &ThreadId,
        turn: &TurnId,
        input: &str,
        internal: bool,
        started: EventPayload,
    ) -> Result<(TurnRecord, Event), StoreError> {
        in_tx!(self, |db| events::start_turn(
            db,
            thread,
            turn,
            input,
            internal,
            &self.replica,
            started
        ))
    }

    async fn append(
        &self,
        thread: &ThreadId,
        turn: &TurnId,
        payload: EventPayload,
    ) -> Result<Event, StoreError> {
        in_tx!(self, |db| events::append(db, thread, turn, payload))
    }

    async fn complete_turn(
        &self,
        thread: &ThreadId,
        turn: &TurnId,
        stop_reason: StopReason,
        result: serde_json::Value,
    ) -> Result<Event, StoreError> {
        in_tx!(self, |db| events::complete_turn(
            db,
            thread,
            turn,
            stop_reason,
            result
        ))
    }

    async fn append_all(
        &self,
        thread: &ThreadId,
        turn: &TurnId,
        payloads: Vec<EventPayload>,
    ) -> Result<Vec<Event>, StoreError> {
        in_tx!(self, |db| events::append_all(db, thread, turn, payloads))
    }

    async fn complete_turn_after(
        &self,
        thread: &ThreadId,
        turn: &TurnId,
        before: Vec<EventPayload>,
        stop_reason: StopReason,
        result: serde_json::Value,
    ) -> Result<(Vec<Event>, Event), StoreError> {
        in_tx!(self, |db| events::complete_turn_after(
            db,
            thread,
            turn,
            before,
            stop_reason,
            result
        ))
    }

    async fn turn(&self, id: &TurnId) -> Result<Option<TurnRecord>, StoreError> {
        on_conn!(self, |db| events::turn(db, id))
    }

    /// As on SQLite: an unknown thread has none, and a deleted thread's turns are still
    /// listed (they are its audit record).
    async fn list_turns(&self, thread: &ThreadId) -> Result<Vec<TurnRecord>, StoreError> {
        on_conn!(self, |db| events::turns_of_thread(db, thread))
    }

    async fn answered_turns(
        &self,
        thread: &ThreadId,
        limit: usize,
    ) -> Result<Vec<TurnRecord>, StoreError> {
        on_conn!(self, |db| events::answered_turns(db, thread, limit))
    }

    async fn turn_events(&self, turn: &TurnId) -> Result<Vec<Event>, StoreError> {
        on_conn!(self, |db| events::turn_events(db, turn))
    }

    async fn thread_events(
        &self,
        thread: &ThreadId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        on_conn!(self, |db| events::thread_events(db, thread, after, limit))
    }

    /// Ends every running turn of every replica, as on SQLite. On a database shared by
    /// live replicas use `ReplicaStore::interrupt_turns_of` instead, which touches only
    /// a dead replica's turns.
    async fn interrupt_running_turns(&self) -> Result<Vec<TurnId>, StoreError> {
        in_tx!(self, |db| events::interrupt_turns(db, None))
    }
}

#[async_trait]
impl ApprovalStore for PostgresStore {
    async fn create_permission(
        &self,
        permission: NewPermission,
    ) -> Result<(PermissionRecord, Event), StoreError> {
        in_tx!(self, |db| events::create_permission(db, permission))
    }

    async fn resolve_permission(
        &self,
        id: &PermissionId,
        decision: PermissionDecision,
        reason: &str,
    ) -> Result<(PermissionRecord, Event), StoreError> {
        in_tx!(self, |db| events::resolve_permission(
            db, id, decision, reason
        ))
    }

    async fn permission(&self, id: &PermissionId) -> Result<Option<PermissionRecord>, StoreError> {
        on_conn!(self, |db| events::permission(db, id))
    }

    async fn create_approval(
        &self,
        approval: NewApproval,
    ) -> Result<(ApprovalRecord, Event), StoreError> {
        in_tx!(self, |db| approvals::create(db, approval))
    }

    async fn decide_approval(
        &self,
        id: &ApprovalId,
        decision: ApprovalDecision,
    ) -> Result<(ApprovalRecord, Event), StoreError> {
        in_tx!(self, |db| approvals::decide(db, id, decision))
    }

    async fn claim_approval(&self, id: &ApprovalId) -> Result<ApprovalRecord, StoreError> {
        in_tx!(self, |db| approvals::claim(db, id, &self.replica))
    }

    async fn approval(&self, id: &ApprovalId) -> Result<Option<ApprovalRecord>, StoreError> {
        on_conn!(self, |db| approvals::get(db, id))
    }

    async fn list_approvals(
        &self,
        query: &ApprovalQuery,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        on_conn!(self, |db| approvals::list(db, query))
    }
}

#[async_trait]
impl CallStore for PostgresStore {
    async fn costs(&self, query: &CostQuery) -> Result<Vec<CostRow>, StoreError> {
        on_conn!(self, |db| costs::costs(db, query))
    }

    async fn record_model_call(&self, call: ModelCallRecord) -> Result<(), StoreError> {
        in_tx!(self, |db| costs::record_model_call(db, call))
    }

    async fn record_mcp_call(&self, call: McpCallRecord) -> Result<(), StoreError> {
        in_tx!(self, |db| mcp_calls::record(db, call))
    }

    async fn mcp_calls(&self, query: &McpCallQuery) -> Result<Vec<McpCallRecord>, StoreError> {
        on_conn!(self, |db| mcp_calls::list(db, query))
    }
}
