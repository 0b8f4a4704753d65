//! What is live in this process, apart from what is stored: the turns running here
//! (to cancel them), each followed thread's broadcast feed, and cancels announced for
//! turns not running here yet (a resumed approval about to start here, ADR 0027).
//!
//! Only state and its rules live here, under short locks that are never held across an
//! await; what to do with it (tenancy, the store, other replicas) is the hub's. A
//! poisoned lock loses only live delivery or a cancel's speed: streams still read the
//! store, and a turn still ends.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use agentplane_core::{Event, ThreadId, TurnId};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

/// Live events buffered per thread before a slow subscriber falls back to the store.
const FEED_CAPACITY: usize = 1024;

/// How long a cancel announced for a turn not running here is kept for it.
const EARLY_CANCEL_KEPT: Duration = Duration::from_secs(30);

/// A turn running in this process.
struct RunningTurn {
    thread: ThreadId,
    client: String,
    cancel: CancellationToken,
}

/// A thread's live feed in this process.
struct Feed {
    sender: broadcast::Sender<super::shared_event::Shared>,
    /// The highest `seq` published on it; `None` before the first. Events committed by
    /// other replicas below it need no reading (`replicas.rs`).
    last: Option<u64>,
}

/// The live state of one hub.
#[derive(Default)]
pub(super) struct Live {
    running: Mutex<HashMap<TurnId, RunningTurn>>,
    feeds: Mutex<HashMap<ThreadId, Feed>>,
    early_cancels: Mutex<HashMap<TurnId, Instant>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Live {
    // ----- running turns ---------------------------------------------------------------

    /// Registers a turn of `client` on `thread`; its token is already cancelled when a
    /// cancel was announced for it before it got here.
    pub(super) fn register(
        &self,
        turn: &TurnId,
        thread: &ThreadId,
        client: &str,
    ) -> CancellationToken {
        let cancel = CancellationToken::new();
        lock(&self.running).insert(
            turn.clone(),
            RunningTurn {
                thread: thread.clone(),
                client: client.to_owned(),
                cancel: cancel.clone(),
            },
        );
        if lock(&self.early_cancels).remove(turn).is_some() {
            cancel.cancel();
        }
        cancel
    }

    /// Forgets a turn that ended; returns its thread.
    pub(super) fn unregister(&self, turn: &TurnId) -> Option<ThreadId> {
        lock(&self.running).remove(turn).map(|r| r.thread)
    }

    pub(super) fn is_running(&self, turn: &TurnId) -> bool {
        lock(&self.running).contains_key(turn)
    }

    /// How many turns run here.
    pub(super) fn running_count(&self) -> usize {
        lock(&self.running).len()
    }

    /// The cancel token of a turn running here, when `client` (if given) owns it.
    pub(super) fn cancel_token(
        &self,
        turn: &TurnId,
        client: Option<&str>,
    ) -> Option<CancellationToken> {
        lock(&self.running)
            .get(turn)
            .filter(|r| client.is_none_or(|c| r.client == c))
            .map(|r| r.cancel.clone())
    }

    /// Every running turn's cancel token (shutdown).
    pub(super) fn all_cancel_tokens(&self) -> Vec<CancellationToken> {
        lock(&self.running)
            .values()
            .map(|t| t.cancel.clone())
            .collect()
    }

    /// Those of `turns` that do not run here.
    pub(super) fn not_running(&self, turns: Vec<TurnId>) -> Vec<TurnId> {
        let running = lock(&self.running);
        turns
            .into_iter()
            .filter(|t| !running.contains_key(t))
            .collect()
    }

    /// Keeps a cancel announced for a turn that does not run here: it may be about to,
    /// and is then cancelled as it registers.
    pub(super) fn remember_cancel(&self, turn: TurnId) {
        let mut early = lock(&self.early_cancels);
        let now = Instant::now();
        early.retain(|_, at| now.duration_since(*at) < EARLY_CANCEL_KEPT);
        early.insert(turn, now);
    }

    // ----- feeds -----------------------------------------------------------------------

    /// A receiver of the thread's feed, created on first use. Subscribing and removing
    /// happen under one lock, so a receiver never hangs on a dropped feed.
    pub(super) fn subscribe(
        &self,
        thread: &ThreadId,
    ) -> broadcast::Receiver<super::shared_event::Shared> {
        lock(&self.feeds)
            .entry(thread.clone())
            .or_insert_with(|| Feed {
                sender: broadcast::channel(FEED_CAPACITY).0,
                last: None,
            })
            .sender
            .subscribe()
    }

    /// Drops a thread's feed once nobody listens and no turn runs on it.
    pub(super) fn release(&self, thread: &ThreadId) {
        if lock(&self.running).values().any(|t| &t.thread == thread) {
            return;
        }
        let mut feeds = lock(&self.feeds);
        if feeds
            .get(thread)
            .is_some_and(|f| f.sender.receiver_count() == 0)
        {
            feeds.remove(thread);
        }
    }

    /// Sends a stored event to the thread's live subscribers, if it has a feed here.
    pub(super) fn publish(&self, event: &Event) {
        if let Some(feed) = lock(&self.feeds).get_mut(&event.thread_id) {
            feed.last = feed.last.max(Some(event.seq));
            // One copy for every receiver (they share it); none without receivers.
            if feed.sender.receiver_count() > 0 {
                let shared = super::shared_event::SharedEvent::new(event.clone());
                let _ = feed.sender.send(std::sync::Arc::new(shared));
            }
        }
    }

    /// Whether the thread has a feed here and the highest `seq` published on it.
    pub(super) fn feed_last(&self, thread: &ThreadId) -> Option<Option<u64>> {
        lock(&self.feeds).get(thread).map(|f| f.last)
    }

    /// Every feed here with the highest `seq` published on it.
    pub(super) fn feeds_last(&self) -> Vec<(ThreadId, Option<u64>)> {
        lock(&self.feeds)
            .iter()
            .map(|(thread, feed)| (thread.clone(), feed.last))
            .collect()
    }

    /// Closes every feed: live streams end once they have delivered what is stored.
    pub(super) fn close_feeds(&self) {
        lock(&self.feeds).clear();
    }
}
