//! The gateway's call records, written in small batches. A call's record waits at most
//! [`LINGER`] for the records of the calls around it, then they are written together:
//! on SQLite one transaction (the writer's group commit) instead of one per call. The
//! caller never waits for it: the answer has gone before the record is written.
//!
//! What a crash can lose is what it could lose before: the records not yet written,
//! now of the last [`LINGER`] instead of the calls still in flight. A graceful stop
//! writes everything (the hub's task tracker waits for the pending batch).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio_util::task::TaskTracker;

use crate::ports::{EventStore, ModelCallRecord};

/// How long a record waits for others before its batch is written.
pub const LINGER: Duration = Duration::from_millis(2);

/// The most records one batch takes; more start the next.
const MAX_BATCH: usize = 256;

/// The records waiting for their batch; one per hub.
pub struct CallRecords {
    store: Arc<dyn EventStore>,
    tasks: TaskTracker,
    pending: Mutex<Vec<ModelCallRecord>>,
}

impl std::fmt::Debug for CallRecords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallRecords").finish_non_exhaustive()
    }
}

impl CallRecords {
    /// Records written to `store` by tasks of `tasks` (which a graceful stop waits for).
    pub fn new(store: Arc<dyn EventStore>, tasks: TaskTracker) -> Arc<Self> {
        Arc::new(Self {
            store,
            tasks,
            pending: Mutex::new(Vec::new()),
        })
    }

    /// Queues `record`; the first record of a batch starts the task that writes it.
    pub fn record(self: &Arc<Self>, record: ModelCallRecord) {
        let starts_batch = {
            let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            pending.push(record);
            pending.len() == 1
        };
        if starts_batch {
            let this = Arc::clone(self);
            self.tasks.spawn(async move {
                tokio::time::sleep(LINGER).await;
                this.write_pending().await;
            });
        }
    }

    /// Writes what is pending, in batches of at most [`MAX_BATCH`], each record's
    /// write sent before any is awaited so the store takes them together.
    async fn write_pending(&self) {
        let batch =
            std::mem::take(&mut *self.pending.lock().unwrap_or_else(PoisonError::into_inner));
        let mut batch = batch.into_iter().peekable();
        while batch.peek().is_some() {
            let writes = batch.by_ref().take(MAX_BATCH).map(|record| async move {
                let id = record.id.clone();
                if let Err(e) = self.store.record_model_call(record).await {
                    tracing::error!(call = %id, error = %e, "a gateway call could not be recorded");
                }
            });
            futures_util::future::join_all(writes).await;
        }
    }
}
