//! The gateway's call records, written in batches that form by themselves: the first
//! record starts a writer task, which writes what is pending, then whatever arrived
//! while it wrote, until nothing is left. A busy gateway writes many calls per commit;
//! an idle one writes each call at once, so a crash loses no more than before (the
//! writes in flight). The caller never waits for it: the answer goes out first.
//!
//! A graceful stop writes everything (the hub's task tracker waits for the writer).

use std::sync::{Arc, Mutex, PoisonError};

use tokio_util::task::TaskTracker;

use crate::ports::{CallStore, ModelCallRecord};

/// The most records one batch takes; more start the next.
const MAX_BATCH: usize = 256;

/// The records waiting for their batch; one per hub.
pub struct CallRecords {
    store: Arc<dyn CallStore>,
    tasks: TaskTracker,
    pending: Mutex<Pending>,
}

/// The records not yet written, and whether a writer task is at work.
#[derive(Default)]
struct Pending {
    records: Vec<ModelCallRecord>,
    writing: bool,
}

impl std::fmt::Debug for CallRecords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallRecords").finish_non_exhaustive()
    }
}

impl CallRecords {
    /// Records written to `store` by tasks of `tasks` (which a graceful stop waits for).
    pub fn new(store: Arc<dyn CallStore>, tasks: TaskTracker) -> Arc<Self> {
        Arc::new(Self {
            store,
            tasks,
            pending: Mutex::new(Pending::default()),
        })
    }

    /// Queues `record`; starts the writer task unless one is at work.
    pub fn record(self: &Arc<Self>, record: ModelCallRecord) {
        let start = {
            let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            pending.records.push(record);
            !std::mem::replace(&mut pending.writing, true)
        };
        if start {
            let this = Arc::clone(self);
            self.tasks.spawn(async move { this.write_pending().await });
        }
    }

    /// Writes what is pending, and what arrives meanwhile, until nothing is; each
    /// batch's writes are sent before any is awaited, so the store takes them together.
    async fn write_pending(&self) {
        loop {
            let batch = {
                let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
                if pending.records.is_empty() {
                    pending.writing = false;
                    return;
                }
                let take = pending.records.len().min(MAX_BATCH);
                pending.records.drain(..take).collect::<Vec<_>>()
            };
            let writes = batch.into_iter().map(|record| async move {
                let id = record.id.clone();
                if let Err(e) = self.store.record_model_call(record).await {
                    tracing::error!(call = %id, error = %e, "a gateway call could not be recorded");
                }
            });
            futures_util::future::join_all(writes).await;
        }
    }
}
