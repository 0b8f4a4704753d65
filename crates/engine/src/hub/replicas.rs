//! Replicas sharing one database (ADR 0019), as the hub sees them: events committed by
//! any process reach this process's live feeds, so an SSE client on one replica follows
//! a turn running on another; and a permission answered on another replica wakes the
//! turn waiting for it here (the answer is in the store; only the wake-up was local).
//!
//! The store's feed of commits (`ReplicaStore::appended`) is only a wake-up: the events
//! themselves are read from the store, and only for threads this process has a live
//! feed for. Streams drop what they have already delivered and fill gaps from the store
//! (`stream.rs`), so an event published twice, or late, is harmless.

use std::collections::HashMap;
use std::sync::Arc;

use agentplane_core::{Event, EventPayload, PermissionId, ThreadId, TurnId};
use tokio::sync::mpsc;

use super::Hub;
use crate::ports::Appended;

/// How many stored events one read of a catch-up takes.
const PAGE: usize = 256;

impl Hub {
    /// Forwards the events other processes commit into this process's live feeds,
    /// until shutdown. `appended` is the store's feed (`ReplicaStore::appended`).
    pub fn follow_replicas(self: &Arc<Self>, mut appended: mpsc::Receiver<Appended>) {
        // Weakly held: the store this feed comes from belongs to the hub, so a strong
        // reference here would keep both alive for ever.
        let hub = Arc::downgrade(self);
        let stopping = self.stopping.clone();
        self.tasks.spawn(async move {
            loop {
                let first = tokio::select! {
                    () = stopping.cancelled() => return,
                    next = appended.recv() => match next {
                        Some(first) => first,
                        None => return,
                    },
                };
                let Some(hub) = hub.upgrade() else {
                    return;
                };
                // A burst of commits is read once per thread, up to its highest seq.
                let mut due: HashMap<ThreadId, u64> = HashMap::new();
                due.insert(first.thread, first.seq);
                while let Ok(more) = appended.try_recv() {
                    let seq = due.entry(more.thread).or_insert(more.seq);
                    *seq = (*seq).max(more.seq);
                }
                for (thread, seq) in due {
                    hub.catch_up(&thread, seq).await;
                }
            }
        });
    }

    /// Publishes what the store holds of turns another process ended (a dead replica's
    /// turns, interrupted by this one), for streams here that follow them.
    pub async fn announce_ended(&self, turns: &[TurnId]) {
        for turn in turns {
            let events = match self.deps.store.turn_events(turn).await {
                Ok(events) => events,
                Err(e) => {
                    tracing::warn!(%turn, error = %e, "could not read an interrupted turn");
                    continue;
                }
            };
            let Some(thread) = events.first().map(|e| e.thread_id.clone()) else {
                continue;
            };
            let last = self.feed_last(&thread);
            if last == FeedState::Absent {
                continue;
            }
            for event in events {
                if !last.covers(event.seq) {
                    self.forward(&event);
                }
            }
        }
    }

    /// Reads and publishes the stored events of `thread` after the last one published
    /// here, when this process has a live feed for it and has not reached `seq`.
    async fn catch_up(&self, thread: &ThreadId, seq: u64) {
        let mut after = match self.feed_last(thread) {
            FeedState::Absent => return,
            FeedState::Published(last) if last >= seq => return,
            FeedState::Published(last) => last,
            // A new feed: its streams read the store themselves; only the news is due.
            FeedState::Empty => seq.saturating_sub(1),
        };
        loop {
            let events = match self.deps.store.thread_events(thread, after, PAGE).await {
                Ok(events) => events,
                Err(e) => {
                    tracing::warn!(%thread, error = %e, "could not read events another replica committed");
                    return;
                }
            };
            for event in &events {
                self.forward(event);
            }
            match events.last() {
                Some(last) if events.len() == PAGE => after = last.seq,
                _ => return,
            }
        }
    }

    /// Publishes an event committed elsewhere, waking a turn here that waits for the
    /// permission it resolves.
    fn forward(&self, event: &Event) {
        if let EventPayload::PermissionResolved { permission_id, .. } = &event.payload
            && let Ok(id) = PermissionId::parse(permission_id)
        {
            self.broker.wake(&id);
        }
        self.publish(event);
    }

    fn feed_last(&self, thread: &ThreadId) -> FeedState {
        match self.feeds.lock() {
            Ok(feeds) => match feeds.get(thread) {
                None => FeedState::Absent,
                Some(feed) => feed.last.map_or(FeedState::Empty, FeedState::Published),
            },
            Err(_) => FeedState::Absent,
        }
    }
}

/// What this process has published on a thread's feed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FeedState {
    /// No feed: nobody here follows the thread.
    Absent,
    /// A feed with nothing published yet.
    Empty,
    /// Published up to this `seq`.
    Published(u64),
}

impl FeedState {
    fn covers(self, seq: u64) -> bool {
        matches!(self, Self::Published(last) if last >= seq)
    }
}
