//! The single writer: one OS thread owns the write connection, takes commands from a
//! channel and commits everything queued in ONE transaction (group commit), so many
//! concurrent appends cost one WAL commit. Each command runs inside its own savepoint,
//! so a refused command (a conflict, an unknown turn) undoes only its own writes while
//! the rest of the batch commits. Replies are sent only after COMMIT succeeds: an event
//! is durable before `append` returns.
//!
//! Every write SQL statement of the store lives here; reads live in `reader.rs`.

use std::sync::mpsc::Receiver;

use agentplane_core::{
    ApprovalId, Event, EventPayload, PermissionDecision, PermissionId, StopReason, ThreadId, TurnId,
};
use agentplane_engine::ports::records;
use agentplane_engine::ports::records::stored_now;
use agentplane_engine::ports::{
    ApprovalDecision, ApprovalRecord, NewApproval, NewPermission, NewThread, PermissionRecord,
    StoreError, ThreadRecord, TurnRecord, TurnStatus,
};
use rusqlite::{Connection, Transaction, TransactionBehavior, params};
use tokio::sync::oneshot;

use crate::permissions::{create_permission, resolve_permission};
use crate::rows::{
    PRIMARY_KEY_VIOLATION, UNIQUE_VIOLATION, backend, insert_event, insert_events, require_running,
};
use crate::{approvals, reader};

/// Where a command's answer goes. Nobody may be listening any more (the caller was
/// cancelled); the write still stands, as it would if the answer had been lost.
pub(crate) type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

/// The most commands one transaction takes, so one huge burst cannot hold the write
/// lock (and delay every reply in it) for long.
const MAX_BATCH: usize = 256;

/// Why `interrupt_running_turns` declines the permissions it finds pending.
const STOPPED_WHILE_PENDING: &str = "agentplane stopped while this permission was pending";

/// A write the store's writer performs.
pub(crate) enum Command {
    CreateThread {
        thread: NewThread,
        reply: Reply<ThreadRecord>,
    },
    DeleteThread {
        thread: ThreadId,
        reply: Reply<()>,
    },
    SetSummary {
        thread: ThreadId,
        summary: String,
        reply: Reply<()>,
    },
    BeginTurn {
        thread: ThreadId,
        turn: TurnId,
        input: String,
        internal: bool,
        /// The process beginning it (ADR 0019).
        replica: String,
        reply: Reply<TurnRecord>,
    },
    Append {
        thread: ThreadId,
        turn: TurnId,
        payload: EventPayload,
        reply: Reply<Event>,
    },
    CompleteTurn {
        thread: ThreadId,
        turn: TurnId,
        stop_reason: StopReason,
        result: serde_json::Value,
        reply: Reply<Event>,
    },
    CreatePermission {
        permission: NewPermission,
        reply: Reply<(PermissionRecord, Event)>,
    },
    ResolvePermission {
        id: PermissionId,
        decision: PermissionDecision,
        reason: String,
        reply: Reply<(PermissionRecord, Event)>,
    },
    InterruptRunningTurns {
        reply: Reply<Vec<TurnId>>,
    },
    CreateApproval {
        approval: NewApproval,
        reply: Reply<(ApprovalRecord, Event)>,
    },
    DecideApproval {
        id: ApprovalId,
        decision: ApprovalDecision,
        reply: Reply<(ApprovalRecord, Event)>,
    },
    ClaimApproval {
        id: ApprovalId,
        reply: Reply<ApprovalRecord>,
    },
    /// A write whose SQL lives in another module (executions, versions); see [`job`].
    Job(Box<dyn AnyJob>),
}

/// A write defined outside this file, run in its own savepoint like every command and
/// answered once the batch's fate is known. New writes use this instead of a new
/// variant each, so their SQL stays in their own module.
pub(crate) fn job<T: Send + 'static>(
    work: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    reply: Reply<T>,
) -> Command {
    Command::Job(Box::new(TypedJob {
        work: Box::new(work),
        reply,
    }))
}

/// A [`job`] with its answer's type erased.
pub(crate) trait AnyJob: Send {
    /// Runs the write in the batch and returns how to answer once it is settled.
    fn execute(self: Box<Self>, batch: &mut Batch<'_>) -> Answer;
    fn refuse(self: Box<Self>, error: StoreError);
}

/// Sends a job's answer given the transaction's fate.
type Answer = Box<dyn FnOnce(&Result<(), StoreError>) + Send>;

/// The output of one write function.
type Work<T> = Box<dyn FnOnce(&Connection) -> Result<T, StoreError> + Send>;

struct TypedJob<T> {
    work: Work<T>,
    reply: Reply<T>,
}

impl<T: Send + 'static> AnyJob for TypedJob<T> {
    fn execute(self: Box<Self>, batch: &mut Batch<'_>) -> Answer {
        let TypedJob { work, reply } = *self;
        let outcome = batch.isolated(work);
        Box::new(move |committed| deliver(reply, outcome, committed))
    }

    fn refuse(self: Box<Self>, error: StoreError) {
        drop(self.reply.send(Err(error)));
    }
}

/// The writer thread's body: returns when every sender is gone (the store was dropped).
pub(crate) fn run(mut conn: Connection, commands: Receiver<Command>) {
    while let Ok(first) = commands.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match commands.try_recv() {
                Ok(command) => batch.push(command),
                Err(_) => break,
            }
        }
        commit_batch(&mut conn, batch);
    }
}

/// Runs `batch` in one transaction and answers every command once its fate is known.
fn commit_batch(conn: &mut Connection, batch: Vec<Command>) {
    let tx = match conn.transaction_with_behavior(TransactionBehavior::Immediate) {
        Ok(tx) => tx,
        Err(e) => {
            let error = backend(e);
            tracing::warn!(%error, "event store cannot start a write transaction");
            for command in batch {
                command.refuse(error.clone());
            }
            return;
        }
    };
    let mut batch_state = Batch { tx, broken: None };
    let settled: Vec<Settled> = batch
        .into_iter()
        .map(|command| batch_state.execute(command))
        .collect();
    let Batch { tx, broken } = batch_state;
    let committed = match broken {
        // A savepoint could not be rolled back or released: what the transaction holds
        // is unknown, so none of it may commit.
        Some(error) => {
            drop(tx.rollback());
            Err(error)
        }
        None => tx.commit().map_err(backend),
    };
    if let Err(error) = &committed {
        tracing::warn!(%error, commands = settled.len(), "event store batch not committed");
    }
    for one in settled {
        one.send(&committed);
    }
}

/// One open group-commit transaction.
pub(crate) struct Batch<'c> {
    tx: Transaction<'c>,
    /// Set when a savepoint failed to close: the whole batch must roll back.
    broken: Option<StoreError>,
}

impl Batch<'_> {
    fn execute(&mut self, command: Command) -> Settled {
        match command {
            Command::CreateThread { thread, reply } => {
                Settled::Thread(reply, self.isolated(|c| create_thread(c, thread)))
            }
            Command::DeleteThread { thread, reply } => {
                Settled::Done(reply, self.isolated(|c| delete_thread(c, &thread)))
            }
            Command::SetSummary {
                thread,
                summary,
                reply,
            } => Settled::Done(reply, self.isolated(|c| set_summary(c, &thread, &summary))),
            Command::BeginTurn {
                thread,
                turn,
                input,
                internal,
                replica,
                reply,
            } => Settled::Turn(
                reply,
                self.isolated(|c| begin_turn(c, thread, turn, input, internal, &replica)),
            ),
            Command::Append {
                thread,
                turn,
                payload,
                reply,
            } => Settled::Event(reply, self.isolated(|c| append(c, thread, turn, payload))),
            Command::CompleteTurn {
                thread,
                turn,
                stop_reason,
                result,
                reply,
            } => Settled::Event(
                reply,
                self.isolated(|c| complete_turn(c, &thread, &turn, stop_reason, result)),
            ),
            Command::CreatePermission { permission, reply } => Settled::Permission(
                reply,
                Box::new(self.isolated(|c| create_permission(c, permission))),
            ),
            Command::ResolvePermission {
                id,
                decision,
                reason,
                reply,
            } => Settled::Permission(
                reply,
                Box::new(self.isolated(|c| resolve_permission(c, &id, decision, &reason))),
            ),
            Command::InterruptRunningTurns { reply } => {
                Settled::Turns(reply, self.isolated(interrupt_running_turns))
            }
            Command::CreateApproval { approval, reply } => Settled::Approval(
                reply,
                Box::new(self.isolated(|c| approvals::create(c, approval))),
            ),
            Command::DecideApproval {
                id,
                decision,
                reply,
            } => Settled::Approval(
                reply,
                Box::new(self.isolated(|c| approvals::decide(c, &id, decision))),
            ),
            Command::ClaimApproval { id, reply } => {
                Settled::Claimed(reply, Box::new(self.isolated(|c| approvals::claim(c, &id))))
            }
            Command::Job(job) => Settled::Job(job.execute(self)),
        }
    }

    /// Runs `write` in a savepoint: on error its writes are undone and the rest of the
    /// batch carries on.
    fn isolated<T>(
        &mut self,
        write: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        if let Some(error) = &self.broken {
            return Err(error.clone());
        }
        // Prepared once per connection: every write of every batch opens and closes one.
        let run = |sql: &str| {
            self.tx
                .prepare_cached(sql)
                .and_then(|mut statement| statement.execute([]))
        };
        run("SAVEPOINT command").map_err(backend)?;
        let outcome = write(&self.tx);
        let closed = if outcome.is_ok() {
            run("RELEASE command")
        } else {
            run("ROLLBACK TO command").and_then(|_| run("RELEASE command"))
        };
        if let Err(e) = closed {
            let error = backend(e);
            self.broken = Some(error.clone());
            return Err(error);
        }
        outcome
    }
}

impl Command {
    fn refuse(self, error: StoreError) {
        // A dropped receiver means the caller stopped waiting; nothing to tell it.
        match self {
            Self::CreateThread { reply, .. } => drop(reply.send(Err(error))),
            Self::DeleteThread { reply, .. } | Self::SetSummary { reply, .. } => {
                drop(reply.send(Err(error)))
            }
            Self::BeginTurn { reply, .. } => drop(reply.send(Err(error))),
            Self::Append { reply, .. } | Self::CompleteTurn { reply, .. } => {
                drop(reply.send(Err(error)))
            }
            Self::CreatePermission { reply, .. } | Self::ResolvePermission { reply, .. } => {
                drop(reply.send(Err(error)))
            }
            Self::InterruptRunningTurns { reply } => drop(reply.send(Err(error))),
            Self::CreateApproval { reply, .. } | Self::DecideApproval { reply, .. } => {
                drop(reply.send(Err(error)))
            }
            Self::ClaimApproval { reply, .. } => drop(reply.send(Err(error))),
            Self::Job(job) => job.refuse(error),
        }
    }
}

/// A command's outcome, held back until its transaction's fate is known.
enum Settled {
    Thread(Reply<ThreadRecord>, Result<ThreadRecord, StoreError>),
    Done(Reply<()>, Result<(), StoreError>),
    Turn(Reply<TurnRecord>, Result<TurnRecord, StoreError>),
    Event(Reply<Event>, Result<Event, StoreError>),
    Turns(Reply<Vec<TurnId>>, Result<Vec<TurnId>, StoreError>),
    /// Boxed: a permission and its event are several times the size of the others,
    /// and a batch holds up to `MAX_BATCH` of these.
    Permission(
        Reply<(PermissionRecord, Event)>,
        Box<Result<(PermissionRecord, Event), StoreError>>,
    ),
    Approval(
        Reply<(ApprovalRecord, Event)>,
        Box<Result<(ApprovalRecord, Event), StoreError>>,
    ),
    Claimed(
        Reply<ApprovalRecord>,
        Box<Result<ApprovalRecord, StoreError>>,
    ),
    Job(Answer),
}

impl Settled {
    fn send(self, committed: &Result<(), StoreError>) {
        match self {
            Self::Thread(reply, outcome) => deliver(reply, outcome, committed),
            Self::Done(reply, outcome) => deliver(reply, outcome, committed),
            Self::Turn(reply, outcome) => deliver(reply, outcome, committed),
            Self::Event(reply, outcome) => deliver(reply, outcome, committed),
            Self::Turns(reply, outcome) => deliver(reply, outcome, committed),
            Self::Permission(reply, outcome) => deliver(reply, *outcome, committed),
            Self::Approval(reply, outcome) => deliver(reply, *outcome, committed),
            Self::Claimed(reply, outcome) => deliver(reply, *outcome, committed),
            Self::Job(answer) => answer(committed),
        }
    }
}

/// A success counts only if the transaction committed; a refusal stands either way.
fn deliver<T>(reply: Reply<T>, outcome: Result<T, StoreError>, committed: &Result<(), StoreError>) {
    let answer = match (outcome, committed) {
        (Ok(_), Err(error)) => Err(error.clone()),
        (outcome, _) => outcome,
    };
    drop(reply.send(answer));
}

fn create_thread(c: &Connection, thread: NewThread) -> Result<ThreadRecord, StoreError> {
    let created_at = stored_now();
    let inserted = c
        .prepare_cached(
            "INSERT INTO threads (id, client_id, agent, cwd, title, created_at, agent_version)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )
        .and_then(|mut insert| {
            insert.execute(params![
                thread.id.as_str(),
                thread.client_id,
                thread.agent,
                thread.cwd,
                thread.title,
                created_at,
                thread.agent_version,
            ])
        });
    match inserted {
        Ok(_) => {
            let created = agentplane_core::audit::ledger::ThreadCreated {
                client_id: thread.client_id.clone(),
                agent: thread.agent.clone(),
                cwd: thread.cwd.clone(),
                created_at: created_at.clone(),
            };
            crate::ledger::append(
                c,
                &agentplane_core::audit::ledger::Entry::ThreadCreated(created),
                thread.id.as_str(),
            )?;
            Ok(thread.created(created_at))
        }
        Err(e) if e.sqlite_extended_error_code() == Some(PRIMARY_KEY_VIOLATION) => Err(
            StoreError::Conflict(format!("thread {} already exists", thread.id)),
        ),
        Err(e) => Err(backend(e)),
    }
}

/// Marks `thread` deleted. A running turn would go on writing to a thread nobody can
/// see, so it must end first.
fn delete_thread(c: &Connection, thread: &ThreadId) -> Result<(), StoreError> {
    require_live_thread(c, thread)?;
    let running = c
        .prepare_cached("SELECT 1 FROM turns WHERE thread_id = ?1 AND status = 'running'")
        .and_then(|mut find| find.exists([thread.as_str()]))
        .map_err(backend)?;
    if running {
        return Err(StoreError::Conflict(format!(
            "thread {thread} has a running turn; it cannot be deleted until the turn ends"
        )));
    }
    let deleted_at = stored_now();
    let changed = c
        .prepare_cached("UPDATE threads SET deleted_at = ?2 WHERE id = ?1 AND deleted_at IS NULL")
        .and_then(|mut update| update.execute(params![thread.as_str(), deleted_at]))
        .map_err(backend)?;
    if changed == 1 {
        let deleted = agentplane_core::audit::ledger::ThreadDeleted { deleted_at };
        crate::ledger::append(
            c,
            &agentplane_core::audit::ledger::Entry::ThreadDeleted(deleted),
            thread.as_str(),
        )?;
    }
    Ok(())
}

fn set_summary(c: &Connection, thread: &ThreadId, summary: &str) -> Result<(), StoreError> {
    let changed = c
        .prepare_cached("UPDATE threads SET summary = ?2 WHERE id = ?1 AND deleted_at IS NULL")
        .and_then(|mut update| update.execute(params![thread.as_str(), summary]))
        .map_err(backend)?;
    if changed == 0 {
        return Err(StoreError::NotFound(format!("thread {thread}")));
    }
    Ok(())
}

/// `NotFound` unless `thread` exists and is not deleted.
fn require_live_thread(c: &Connection, thread: &ThreadId) -> Result<(), StoreError> {
    let live = c
        .prepare_cached("SELECT 1 FROM threads WHERE id = ?1 AND deleted_at IS NULL")
        .and_then(|mut find| find.exists([thread.as_str()]))
        .map_err(backend)?;
    if live {
        Ok(())
    } else {
        Err(StoreError::NotFound(format!("thread {thread}")))
    }
}

fn begin_turn(
    c: &Connection,
    thread: ThreadId,
    turn: TurnId,
    input: String,
    internal: bool,
    replica: &str,
) -> Result<TurnRecord, StoreError> {
    require_live_thread(c, &thread)?;
    let created_at = stored_now();
    // The turn records the version its thread is pinned to (ADR 0016).
    let inserted = c
        .prepare_cached(
            "INSERT INTO turns (id, thread_id, input, status, created_at, internal,
                                agent_version, replica)
             VALUES (?1, ?2, ?3, 'running', ?4, ?5,
                     (SELECT agent_version FROM threads WHERE id = ?2), ?6)
             RETURNING agent_version",
        )
        .and_then(|mut insert| {
            insert.query_row(
                params![
                    turn.as_str(),
                    thread.as_str(),
                    input,
                    created_at,
                    internal,
                    replica
                ],
                |row| row.get::<_, Option<String>>(0),
            )
        });
    match inserted {
        Ok(agent_version) => Ok(TurnRecord {
            id: turn,
            thread_id: thread,
            input,
            status: TurnStatus::Running,
            created_at,
            ended_at: None,
            internal,
            result: None,
            agent_version,
        }),
        // The partial index `turns_one_running_per_thread` is the only UNIQUE one.
        Err(e) if e.sqlite_extended_error_code() == Some(UNIQUE_VIOLATION) => Err(
            StoreError::Conflict(format!("thread {thread} already has a running turn")),
        ),
        Err(e) if e.sqlite_extended_error_code() == Some(PRIMARY_KEY_VIOLATION) => {
            Err(StoreError::Conflict(format!("turn {turn} already exists")))
        }
        Err(e) => Err(backend(e)),
    }
}

/// [`begin_turn`] and the turn's first event, in the caller's savepoint.
pub(crate) fn start_turn(
    c: &Connection,
    thread: ThreadId,
    turn: TurnId,
    input: String,
    internal: bool,
    replica: &str,
    started: EventPayload,
) -> Result<(TurnRecord, Event), StoreError> {
    let record = begin_turn(c, thread.clone(), turn.clone(), input, internal, replica)?;
    let event = append(c, thread, turn, started)?;
    Ok((record, event))
}

fn append(
    c: &Connection,
    thread: ThreadId,
    turn: TurnId,
    payload: EventPayload,
) -> Result<Event, StoreError> {
    records::refuse_turn_completed(&turn, std::iter::once(&payload))?;
    require_running(c, &thread, &turn)?;
    insert_event(c, thread, turn, payload)
}

/// Appends `payloads` in order to a running turn, in the caller's savepoint: the turn
/// is checked once for all of them.
pub(crate) fn append_all(
    c: &Connection,
    thread: &ThreadId,
    turn: &TurnId,
    payloads: Vec<EventPayload>,
) -> Result<Vec<Event>, StoreError> {
    records::refuse_turn_completed(turn, payloads.iter())?;
    require_running(c, thread, turn)?;
    insert_events(c, thread, turn, payloads)
}

/// [`append_all`] of `before`, then the turn's end, in the caller's savepoint.
pub(crate) fn complete_turn_after(
    c: &Connection,
    thread: &ThreadId,
    turn: &TurnId,
    before: Vec<EventPayload>,
    stop_reason: StopReason,
    result: serde_json::Value,
) -> Result<(Vec<Event>, Event), StoreError> {
    let appended = append_all(c, thread, turn, before)?;
    let end = end_turn(c, thread, turn, stop_reason, result)?;
    Ok((appended, end))
}

fn complete_turn(
    c: &Connection,
    thread: &ThreadId,
    turn: &TurnId,
    stop_reason: StopReason,
    result: serde_json::Value,
) -> Result<Event, StoreError> {
    require_running(c, thread, turn)?;
    end_turn(c, thread, turn, stop_reason, result)
}

fn interrupt_running_turns(c: &Connection) -> Result<Vec<TurnId>, StoreError> {
    interrupt_turns(c, None)
}

/// Ends the running turns (of `replica` only, when given) as `interrupted`, turns
/// suspended on an approval excepted; pending permissions are declined first.
pub(crate) fn interrupt_turns(
    c: &Connection,
    replica: Option<&str>,
) -> Result<Vec<TurnId>, StoreError> {
    let running: Vec<(String, String)> = c
        .prepare_cached(
            "SELECT id, thread_id FROM turns
             WHERE status = 'running' AND (?1 IS NULL OR replica = ?1) ORDER BY rowid",
        )
        .and_then(|mut select| {
            select
                .query_map([replica], |row| Ok((row.get(0)?, row.get(1)?)))?
                .collect()
        })
        .map_err(backend)?;
    let mut ended = Vec::with_capacity(running.len());
    for (turn, thread) in running {
        let turn = TurnId::parse(&turn).map_err(StoreError::Backend)?;
        let thread = ThreadId::parse(&thread).map_err(StoreError::Backend)?;
        // A turn suspended on an approval is not running anywhere: it resumes on the
        // decision, whichever process is up then.
        if approvals::suspends(c, &turn)? {
            continue;
        }
        // Nobody is left to answer them, and a turn must not end with a question open.
        for permission in reader::pending_permissions_of_turn(c, &turn)? {
            resolve_permission(
                c,
                &permission,
                PermissionDecision::Declined,
                STOPPED_WHILE_PENDING,
            )?;
        }
        end_turn(
            c,
            &thread,
            &turn,
            StopReason::Interrupted,
            serde_json::Value::Null,
        )?;
        ended.push(turn);
    }
    Ok(ended)
}

/// Writes `turn_completed` and the turn's end together (the caller's savepoint makes
/// them one unit); `ended_at` is the event's `ts`.
fn end_turn(
    c: &Connection,
    thread: &ThreadId,
    turn: &TurnId,
    stop_reason: StopReason,
    result: serde_json::Value,
) -> Result<Event, StoreError> {
    let (payload, result_json) = records::turn_completed(turn, stop_reason, result)?;
    let event = insert_event(c, thread.clone(), turn.clone(), payload)?;
    let changed = c
        .prepare_cached(
            "UPDATE turns SET status = ?2, ended_at = ?3, result = ?4
             WHERE id = ?1 AND status = 'running'",
        )
        .and_then(|mut update| {
            update.execute(params![
                turn.as_str(),
                stop_reason.as_str(),
                event.ts,
                result_json
            ])
        })
        .map_err(backend)?;
    if changed != 1 {
        return Err(StoreError::Backend(format!(
            "turn {turn} was not running when its end was recorded"
        )));
    }
    Ok(event)
}
