//! `SqliteStore`: the handle the rest of the program holds. It sends writes to the
//! writer thread (`writer.rs`) and runs reads on the blocking pool (`reader.rs`); it
//! holds no SQL of its own.

use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;

use agentplane_core::policy::Timestamp;
use agentplane_core::{
    ApprovalId, Event, EventPayload, PermissionDecision, PermissionId, ReplicaId, StopReason,
    ThreadId, TurnId,
};
use agentplane_engine::ports::records::stored_time;
use agentplane_engine::ports::{
    ApprovalDecision, ApprovalQuery, ApprovalRecord, ApprovalStore, CallStore, CostQuery, CostRow,
    McpCallQuery, McpCallRecord, ModelCallRecord, NewApproval, NewPermission, NewThread,
    PermissionRecord, StoreError, ThreadRecord, ThreadStore, TurnLog, TurnRecord,
};
use async_trait::async_trait;
use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::reader::{self, Readers};
use crate::writer::{self, Command, Reply};
use crate::{approvals, connection};

/// Read-only connections kept open. Reads are short and the machine is small; WAL lets
/// them all run beside the writer.
const READERS: usize = 2;

/// The event store on one SQLite file.
///
/// Writes go through a single writer thread that commits whatever is queued in one
/// transaction; a write's future resolves only after its commit, so an event is durable
/// (against a process crash) before `append` returns. Dropping a write's future after
/// it was sent does not undo it. Dropping the store stops the writer after its current
/// batch and waits for it, so the file is closed when `drop` returns.
pub struct SqliteStore {
    path: PathBuf,
    /// This process, recorded on the turns it begins and the executions it claims.
    pub(crate) replica: ReplicaId,
    /// `None` only during `drop`.
    commands: Option<mpsc::Sender<Command>>,
    writer: Option<JoinHandle<()>>,
    readers: Arc<Readers>,
    /// The exclusive lock on the database file (ADR 0019): released last, on drop,
    /// after every SQLite connection of this store is closed.
    lock: Option<std::fs::File>,
}

impl SqliteStore {
    /// Opens or creates the database at `path` (creating its parent directories) and
    /// brings its schema up to date. Refuses, leaving the file as it was, a file that is
    /// not SQLite, a SQLite file of another program, and a schema newer than this code.
    ///
    /// The file is locked to this store until it is dropped: another process (or
    /// another store in this one) opening it fails with a message saying so.
    pub async fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        Self::open_as(path, ReplicaId::new()).await
    }

    /// [`SqliteStore::open`] as the given replica.
    pub async fn open_as(path: &Path, replica: ReplicaId) -> Result<SqliteStore, StoreError> {
        Self::open_with(path, replica, true).await
    }

    /// Opens the database without taking its lock, for a command that only reads
    /// (`agentplane costs`) beside a running server. Never run or recover turns
    /// through it: that is what the lock is for.
    pub async fn open_unlocked(path: &Path) -> Result<SqliteStore, StoreError> {
        Self::open_with(path, ReplicaId::new(), false).await
    }

    /// Opens an existing database for reading only (`agentplane audit verify`): never
    /// creates, migrates or writes the file, takes no lock, and refuses a missing
    /// file, one that is not agentplane's, and a schema other than this code's (an
    /// older one is migrated by starting agentplane, not by a verifier). Every write
    /// through it fails.
    pub async fn open_read_only(path: &Path) -> Result<SqliteStore, StoreError> {
        let path = path.to_path_buf();
        let (readers, path) = tokio::task::spawn_blocking(move || {
            match std::fs::metadata(&path) {
                Ok(meta) if meta.is_file() => {}
                Ok(_) => {
                    return Err(StoreError::Backend(format!(
                        "{} is not a file; there is no store to read",
                        path.display()
                    )));
                }
                Err(e) => {
                    return Err(StoreError::Backend(format!(
                        "there is no store at {}: {e}",
                        path.display()
                    )));
                }
            }
            let readers = Readers::open(&path, 1)?;
            let version = readers.with(|c| crate::migrations::check(c, &path))?;
            if version != crate::migrations::SCHEMA_VERSION {
                return Err(StoreError::Backend(format!(
                    "{} has schema version {version}; this agentplane reads version {}: start \
                     agentplane on it once to migrate it (or use the agentplane that wrote it)",
                    path.display(),
                    crate::migrations::SCHEMA_VERSION
                )));
            }
            Ok::<_, StoreError>((readers, path))
        })
        .await
        .map_err(|e| StoreError::Backend(format!("opening the event store: {e}")))??;
        Ok(SqliteStore {
            path,
            replica: ReplicaId::new(),
            commands: None,
            writer: None,
            readers: Arc::new(readers),
            lock: None,
        })
    }

    /// Whether another store (a running `serve`) holds the file's lock right now, so
    /// a command must go through that server's API instead (`agentplane keys`). A
    /// missing or unreadable file is not held.
    pub fn held_elsewhere(path: &Path) -> bool {
        connection::held(path)
    }

    async fn open_with(
        path: &Path,
        replica: ReplicaId,
        exclusive: bool,
    ) -> Result<SqliteStore, StoreError> {
        let path = path.to_path_buf();
        let (conn, readers, lock, path) = tokio::task::spawn_blocking(move || {
            let conn = connection::open_writer(&path)?;
            let lock = exclusive.then(|| connection::lock(&path)).transpose()?;
            let readers = Readers::open(&path, READERS)?;
            Ok::<_, StoreError>((conn, readers, lock, path))
        })
        .await
        .map_err(|e| StoreError::Backend(format!("opening the event store: {e}")))??;
        let (commands, receiver) = mpsc::channel();
        let writer = spawn_writer(conn, receiver)?;
        tracing::debug!(path = %path.display(), "event store open");
        Ok(SqliteStore {
            path,
            replica,
            commands: Some(commands),
            writer: Some(writer),
            readers: Arc::new(readers),
            lock,
        })
    }

    /// The database file, as given to `open`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sends a command to the writer and waits for its committed answer.
    pub(crate) async fn write<T>(
        &self,
        command: impl FnOnce(Reply<T>) -> Command,
    ) -> Result<T, StoreError> {
        let stopped = || StoreError::Backend("the event store's writer has stopped".into());
        let (reply, answer) = oneshot::channel();
        self.commands
            .as_ref()
            .ok_or_else(stopped)?
            .send(command(reply))
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    /// A read of a few rows by key (a thread, a turn, a key): run where it is asked,
    /// when a reader connection is free at once, because the hop to the blocking pool
    /// and back (two thread wake-ups) costs more than the read (ADR 0052). Otherwise, or
    /// for anything that reads many rows, [`Self::read`].
    pub(crate) async fn read_point<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        match self.readers.try_with(read) {
            Ok(done) => done,
            Err(read) => self.read(read).await,
        }
    }

    /// Runs `read` on a reader connection in the blocking pool.
    pub(crate) async fn read<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let readers = Arc::clone(&self.readers);
        tokio::task::spawn_blocking(move || readers.with(read))
            .await
            .map_err(|e| StoreError::Backend(format!("event store read failed: {e}")))?
    }
}

fn spawn_writer(
    conn: Connection,
    receiver: mpsc::Receiver<Command>,
) -> Result<JoinHandle<()>, StoreError> {
    std::thread::Builder::new()
        .name("agentplane-store-writer".into())
        .spawn(move || writer::run(conn, receiver))
        .map_err(|e| StoreError::Backend(format!("cannot start the event store's writer: {e}")))
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        // Closing the channel ends the writer's loop once its current batch is
        // committed. No write can be waiting: each one borrows the store until answered.
        self.commands = None;
        if let Some(writer) = self.writer.take()
            && writer.join().is_err()
        {
            tracing::error!(path = %self.path.display(), "the event store's writer panicked");
        }
        // Closing a descriptor of the file drops every POSIX lock this process holds on
        // it, SQLite's included: the readers go first, the lock's descriptor last.
        self.readers = Arc::new(Readers::empty());
        drop(self.lock.take());
    }
}

#[async_trait]
impl ThreadStore for SqliteStore {
    async fn create_thread(&self, thread: NewThread) -> Result<ThreadRecord, StoreError> {
        self.write(|reply| Command::CreateThread { thread, reply })
            .await
    }

    async fn thread(&self, id: &ThreadId) -> Result<Option<ThreadRecord>, StoreError> {
        let id = id.clone();
        self.read_point(move |c| reader::thread(c, &id)).await
    }

    async fn list_threads(&self, client_id: &str) -> Result<Vec<ThreadRecord>, StoreError> {
        let client_id = client_id.to_owned();
        self.read(move |c| reader::threads_of_client(c, &client_id))
            .await
    }

    async fn threads_active_since(
        &self,
        since: Option<Timestamp>,
    ) -> Result<Vec<ThreadRecord>, StoreError> {
        let since = since.map(stored_time);
        self.read(move |c| reader::threads_active_since(c, since.as_deref()))
            .await
    }

    async fn delete_thread(&self, id: &ThreadId) -> Result<(), StoreError> {
        self.write(|reply| Command::DeleteThread {
            thread: id.clone(),
            reply,
        })
        .await
    }

    async fn set_summary(&self, id: &ThreadId, summary: &str) -> Result<(), StoreError> {
        self.write(|reply| Command::SetSummary {
            thread: id.clone(),
            summary: summary.to_owned(),
            reply,
        })
        .await
    }
}

#[async_trait]
impl TurnLog for SqliteStore {
    async fn begin_turn(
        &self,
        thread: &ThreadId,
        turn: &TurnId,
        input: &str,
        internal: bool,
    ) -> Result<TurnRecord, StoreError> {
        self.write(|reply| Command::BeginTurn {
            thread: thread.clone(),
            turn: turn.clone(),
            input: input.to_owned(),
            internal,
            replica: self.replica.as_str().to_owned(),
            reply,
        })
        .await
    }

    async fn start_turn(
        &self,
        thread: &ThreadId,
        turn: &TurnId,
        input: &str,
        internal: bool,
        started: EventPayload,
    ) -> Result<(TurnRecord, Event), StoreError> {
        let (thread, turn, input) = (thread.clone(), turn.clone(), input.to_owned());
        let replica = self.replica.as_str().to_owned();
        self.write(|reply| {
            crate::writer::job(
                move |c| {
                    crate::writer::start_turn(c, thread, turn, input, internal, &replica, started)
                },
                reply,
            )
        })
        .await
    }

    async fn append(
        &self,
        thread: &ThreadId,
        turn: &TurnId,
        payload: EventPayload,
    ) -> Result<Event, StoreError> {
        self.write(|reply| Command::Append {
            thread: thread.clone(),
            turn: turn.clone(),
            payload,
            reply,
        })
        .await
    }

    async fn complete_turn(
        &self,
        thread: &ThreadId,
        turn: &TurnId,
        stop_reason: StopReason,
        result: serde_json::Value,
    ) -> Result<Event, StoreError> {
        self.write(|reply| Command::CompleteTurn {
            thread: thread.clone(),
            turn: turn.clone(),
            stop_reason,
            result,
            reply,
        })
        .await
    }

    async fn append_all(
        &self,
        thread: &ThreadId,
        turn: &TurnId,
        payloads: Vec<EventPayload>,
    ) -> Result<Vec<Event>, StoreError> {
        let (thread, turn) = (thread.clone(), turn.clone());
        self.write(|reply| {
            crate::writer::job(
                move |c| crate::writer::append_all(c, &thread, &turn, payloads),
                reply,
            )
        })
        .await
    }

    async fn complete_turn_after(
        &self,
        thread: &ThreadId,
        turn: &TurnId,
        before: Vec<EventPayload>,
        stop_reason: StopReason,
        result: serde_json::Value,
    ) -> Result<(Vec<Event>, Event), StoreError> {
        let (thread, turn) = (thread.clone(), turn.clone());
        self.write(|reply| {
            crate::writer::job(
                move |c| {
                    crate::writer::complete_turn_after(
                        c,
                        &thread,
                        &turn,
                        before,
                        stop_reason,
                        result,
                    )
                },
                reply,
            )
        })
        .await
    }

    async fn turn(&self, id: &TurnId) -> Result<Option<TurnRecord>, StoreError> {
        let id = id.clone();
        self.read_point(move |c| reader::turn(c, &id)).await
    }

    /// An unknown thread has none; ask `thread()` to tell "no turns yet" from "no such
    /// thread". A deleted thread's turns are still listed, like `turn` and the events:
    /// they are its audit record, and only the thread itself is hidden.
    async fn list_turns(&self, thread: &ThreadId) -> Result<Vec<TurnRecord>, StoreError> {
        let thread = thread.clone();
        self.read(move |c| reader::turns_of_thread(c, &thread))
            .await
    }

    async fn answered_turns(
        &self,
        thread: &ThreadId,
        limit: usize,
    ) -> Result<Vec<TurnRecord>, StoreError> {
        let thread = thread.clone();
        let read = move |c: &Connection| reader::answered_turns(c, &thread, limit);
        // A context's few turns are a point read; a compaction's whole thread is not.
        if limit <= 64 {
            self.read_point(read).await
        } else {
            self.read(read).await
        }
    }

    async fn turn_events(&self, turn: &TurnId) -> Result<Vec<Event>, StoreError> {
        let turn = turn.clone();
        self.read(move |c| reader::turn_events(c, &turn)).await
    }

    async fn thread_events(
        &self,
        thread: &ThreadId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        let thread = thread.clone();
        self.read(move |c| reader::thread_events(c, &thread, after, limit))
            .await
    }

    async fn interrupt_running_turns(&self) -> Result<Vec<TurnId>, StoreError> {
        self.write(|reply| Command::InterruptRunningTurns { reply })
            .await
    }
}

#[async_trait]
impl ApprovalStore for SqliteStore {
    async fn create_permission(
        &self,
        permission: NewPermission,
    ) -> Result<(PermissionRecord, Event), StoreError> {
        self.write(|reply| Command::CreatePermission { permission, reply })
            .await
    }

    async fn resolve_permission(
        &self,
        id: &PermissionId,
        decision: PermissionDecision,
        reason: &str,
    ) -> Result<(PermissionRecord, Event), StoreError> {
        self.write(|reply| Command::ResolvePermission {
            id: id.clone(),
            decision,
            reason: reason.to_owned(),
            reply,
        })
        .await
    }

    async fn permission(&self, id: &PermissionId) -> Result<Option<PermissionRecord>, StoreError> {
        let id = id.clone();
        self.read(move |c| reader::permission(c, &id)).await
    }

    async fn create_approval(
        &self,
        approval: NewApproval,
    ) -> Result<(ApprovalRecord, Event), StoreError> {
        self.write(|reply| Command::CreateApproval { approval, reply })
            .await
    }

    async fn decide_approval(
        &self,
        id: &ApprovalId,
        decision: ApprovalDecision,
    ) -> Result<(ApprovalRecord, Event), StoreError> {
        self.write(|reply| Command::DecideApproval {
            id: id.clone(),
            decision,
            reply,
        })
        .await
    }

    async fn claim_approval(&self, id: &ApprovalId) -> Result<ApprovalRecord, StoreError> {
        self.write(|reply| Command::ClaimApproval {
            id: id.clone(),
            reply,
        })
        .await
    }

    async fn approval(&self, id: &ApprovalId) -> Result<Option<ApprovalRecord>, StoreError> {
        let id = id.clone();
        self.read(move |c| approvals::get(c, &id)).await
    }

    async fn list_approvals(
        &self,
        query: &ApprovalQuery,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        let query = query.clone();
        self.read(move |c| approvals::list(c, &query)).await
    }
}

#[async_trait]
impl CallStore for SqliteStore {
    async fn costs(&self, query: &CostQuery) -> Result<Vec<CostRow>, StoreError> {
        let query = query.clone();
        self.read(move |c| crate::costs::costs(c, &query)).await
    }

    async fn record_model_call(&self, call: ModelCallRecord) -> Result<(), StoreError> {
        self.write(|reply| crate::writer::job(move |c| crate::model_calls::record(c, call), reply))
            .await
    }

    async fn record_mcp_call(&self, call: McpCallRecord) -> Result<(), StoreError> {
        self.write(|reply| crate::writer::job(move |c| crate::mcp_calls::record(c, call), reply))
            .await
    }

    async fn mcp_calls(&self, query: &McpCallQuery) -> Result<Vec<McpCallRecord>, StoreError> {
        let query = query.clone();
        self.read(move |c| crate::mcp_calls::list(c, &query)).await
    }
}
