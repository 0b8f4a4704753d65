//! Who runs a write: the caller itself when the write connection is free and nothing
//! waits for it, otherwise the writer thread, which commits everything queued in one
//! transaction (group commit, `writer.rs`).
//!
//! Handing every write to the writer thread and waiting for its answer cost two thread
//! wake-ups per write, and a turn makes several writes on its path (ADR 0054). A lone
//! write, the common case, now commits on the thread that asked and answers before it
//! returns. Under load, writes queue and commit together: a caller that commits alone
//! while others arrive turns the queue to batching, and only a run of lone batches on
//! the writer thread turns it back. (Committing every free moment at once made batches
//! smaller, and cost a quarter more CPU per turn with ten at once, than waiting for the
//! writer's wake-up, while which more writes arrive.) Queued writes go first: a caller
//! runs its own write only when the queue is empty, so none waits behind a stream of
//! callers that arrive later.
//!
//! A commit here never syncs to disk (WAL with `synchronous = NORMAL`). Checkpoints,
//! which do, run on the writer thread: SQLite's automatic checkpoint would run inside
//! the commit that crosses its threshold, which may now be a tokio worker's, stalling
//! every task on it for an fsync. The write connection's WAL hook replaces it: past
//! the same threshold it marks a checkpoint due, writes queue from then on, and the
//! writer thread checkpoints before their batch, with no write in between, so the log
//! is copied whole and restarts at the next commit, as it did before.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use agentplane_engine::ports::StoreError;
use rusqlite::Connection;

use crate::writer::{self, Command};

/// The most commands one transaction takes, so one huge burst cannot hold the write
/// lock (and delay every reply in it) for long.
const MAX_BATCH: usize = 256;

/// WAL frames (pages) after which a checkpoint is due: SQLite's own default for its
/// automatic checkpoint.
const CHECKPOINT_AFTER: i32 = 1000;

/// Lone writes in a row on the writer thread after which callers commit their own
/// writes again.
const QUIET_BATCHES: u32 = 8;

/// The write connection and the writes waiting for it.
pub(crate) struct WriteQueue {
    state: Mutex<State>,
    /// Signalled when a write is queued, the connection comes back, or the store closes.
    changed: Condvar,
    /// Set by the WAL hook when the log has grown past [`CHECKPOINT_AFTER`].
    checkpoint_due: Arc<AtomicBool>,
}

struct State {
    /// `None` while a batch runs (on a caller's thread or the writer thread).
    conn: Option<Connection>,
    queue: Vec<Command>,
    /// False once the store is dropped: new writes are refused, queued ones still run.
    open: bool,
    /// Whether a caller finding the connection free commits its write itself.
    alone: bool,
    /// Batches of one write in a row on the writer thread, while batching.
    quiet: u32,
}

/// Who has the connection out.
enum By {
    Caller,
    /// The writer thread, with this many writes.
    Writer(usize),
}

impl WriteQueue {
    /// Takes over `conn`, replacing its automatic checkpoint with the writer thread's.
    pub(crate) fn new(mut conn: Connection) -> Result<WriteQueue, StoreError> {
        let checkpoint_due = Arc::new(AtomicBool::new(false));
        let due = Arc::clone(&checkpoint_due);
        conn.wal_hook(Some(move |_: &mut rusqlite::hooks::Wal, frames: i32| {
            if frames >= CHECKPOINT_AFTER {
                due.store(true, Ordering::Release);
            }
            Ok(())
        }))
        .map_err(|e| StoreError::Backend(format!("cannot hook the event store's log: {e}")))?;
        Ok(WriteQueue {
            state: Mutex::new(State {
                conn: Some(conn),
                queue: Vec::new(),
                open: true,
                alone: true,
                quiet: 0,
            }),
            changed: Condvar::new(),
            checkpoint_due,
        })
    }

    fn checkpoint_due(&self) -> bool {
        self.checkpoint_due.load(Ordering::Acquire)
    }

    /// Runs `commands` now, on this thread and in one transaction, if the connection
    /// is free, no write is queued and the queue is not batching; otherwise queues them
    /// for the writer thread, which commits them in a batch with whatever else waits.
    /// Either way each answer goes to its reply, after its batch's COMMIT (or refusal).
    pub(crate) fn submit(&self, mut commands: Vec<Command>) {
        let mut state = self.lock();
        if !state.open {
            drop(state);
            for command in commands {
                command.refuse(stopped());
            }
            return;
        }
        let free = if state.alone
            && state.queue.is_empty()
            && commands.len() <= MAX_BATCH
            && !self.checkpoint_due()
        {
            state.conn.take()
        } else {
            None
        };
        let Some(conn) = free else {
            state.queue.append(&mut commands);
            // Whoever has the connection out looks at the queue when it gives it back.
            let idle = state.conn.is_some();
            drop(state);
            if idle {
                self.changed.notify_one();
            }
            return;
        };
        drop(state);
        let mut borrowed = Borrowed {
            queue: self,
            conn: Some(conn),
            by: By::Caller,
        };
        if let Some(conn) = borrowed.conn.as_mut() {
            writer::commit_batch(conn, commands);
        }
    }

    /// The writer thread's body: checkpoints when one is due and commits queued writes
    /// in batches, until the store is closed and the queue is empty; then closes the
    /// connection.
    pub(crate) fn run_writer(&self) {
        loop {
            let mut state = self.lock();
            let (conn, batch) = loop {
                if (!state.queue.is_empty() || self.checkpoint_due())
                    && let Some(conn) = state.conn.take()
                {
                    let n = state.queue.len().min(MAX_BATCH);
                    let batch: Vec<Command> = state.queue.drain(..n).collect();
                    break (conn, batch);
                }
                if !state.open && state.queue.is_empty() {
                    // Every caller is gone (the store is being dropped), so the
                    // connection is here; closing it closes the file.
                    let conn = state.conn.take();
                    drop(state);
                    drop(conn);
                    return;
                }
                state = self
                    .changed
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            };
            drop(state);
            let mut borrowed = Borrowed {
                queue: self,
                conn: Some(conn),
                by: By::Writer(batch.len()),
            };
            if let Some(conn) = borrowed.conn.as_mut() {
                if self.checkpoint_due.swap(false, Ordering::AcqRel) {
                    checkpoint(conn);
                }
                if !batch.is_empty() {
                    writer::commit_batch(conn, batch);
                }
            }
        }
    }

    /// Refuses new writes and lets the writer thread finish the queued ones and stop.
    pub(crate) fn close(&self) {
        self.lock().open = false;
        self.changed.notify_all();
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is a handful of fields updated in place; a panic elsewhere while
        // the lock was held leaves them consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The connection taken out for one batch; it goes back, and the writer thread is told
/// if writes queued meanwhile, even if the batch panics (its transaction rolls back as
/// the panic unwinds through it).
struct Borrowed<'a> {
    queue: &'a WriteQueue,
    conn: Option<Connection>,
    by: By,
}

impl Drop for Borrowed<'_> {
    fn drop(&mut self) {
        let mut state = self.queue.lock();
        state.conn = self.conn.take();
        let contended = !state.queue.is_empty();
        match self.by {
            By::Caller if contended => {
                state.alone = false;
                state.quiet = 0;
            }
            By::Caller | By::Writer(0) => {}
            By::Writer(1) if !contended => {
                state.quiet += 1;
                if state.quiet >= QUIET_BATCHES {
                    state.alone = true;
                }
            }
            By::Writer(_) => state.quiet = 0,
        }
        let waiting = !state.queue.is_empty() || !state.open || self.queue.checkpoint_due();
        drop(state);
        if waiting {
            self.queue.changed.notify_all();
        }
    }
}

/// Copies the log into the database file. PASSIVE waits for no reader: pages a reader
/// still needs are copied at the next checkpoint.
fn checkpoint(conn: &Connection) {
    let done = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
        row.get::<_, i64>(0)
    });
    if let Err(error) = done {
        tracing::warn!(%error, "event store checkpoint failed; the log grows until one succeeds");
    }
}

fn stopped() -> StoreError {
    StoreError::Backend("the event store's writer has stopped".into())
}
