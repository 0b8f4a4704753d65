//! Replicas sharing one database (ADR 0019, 0027), as the hub sees them: events
//! committed by any process reach this process's live feeds, so an SSE client on one
//! replica follows a turn running on another; a permission answered on another replica
//! wakes the turn waiting for it here (the answer is in the store; only the wake-up was
//! local); and a cancel received by another replica stops the turn running here.
//!
//! The store's feed (`ReplicaStore::announcements`) is only a wake-up: the events
//! themselves are read from the store, and only for threads this process has a live
//! feed for. Streams drop what they have already delivered and fill gaps from the store
//! (`stream.rs`), so an event published twice, or late, is harmless. When the feed says
//! it may have missed something (`Announcement::Resumed`), every live feed catches up
//! from the store at once and every requested cancel is read again.

use std::collections::HashMap;
use std::sync::Arc;

use agentplane_core::{Event, EventPayload, PermissionId, ThreadId, TurnId};
use tokio::sync::mpsc;

use super::{Hub, HubError};
use crate::ports::Announcement;

/// How many stored events one read of a catch-up takes.
const PAGE: usize = 256;

impl Hub {
    /// Forwards the events other processes commit into this process's live feeds and
    /// stops the turns running here that another replica was asked to cancel, until
    /// shutdown. `feed` is the store's (`ReplicaStore::announcements`); the store
    /// itself, through which cancels reach other replicas, was given to the builder.
    pub fn follow_replicas(self: &Arc<Self>, mut feed: mpsc::Receiver<Announcement>) {
        // Weakly held: the store this feed comes from belongs to the hub, so a strong
        // reference here would keep both alive for ever.
        let hub = Arc::downgrade(self);
        let stopping = self.stopping.clone();
        self.tasks.spawn(async move {
            loop {
                let first = tokio::select! {
                    () = stopping.cancelled() => return,
                    next = feed.recv() => match next {
                        Some(first) => first,
                        None => return,
                    },
                };
                let Some(hub) = hub.upgrade() else {
                    return;
                };
                // A burst of commits is read once per thread, up to its highest seq.
                let mut due: HashMap<ThreadId, u64> = HashMap::new();
                let mut resumed = false;
                let mut next = Some(first);
                while let Some(announcement) = next {
                    match announcement {
                        Announcement::Appended(appended) => {
                            let seq = due.entry(appended.thread).or_insert(appended.seq);
                            *seq = (*seq).max(appended.seq);
                        }
                        Announcement::CancelRequested(turn) => {
                            if !hub.cancel_here(&turn) {
                                hub.remember_cancel(turn);
                            }
                        }
                        Announcement::Resumed => resumed = true,
                    }
                    next = feed.try_recv().ok();
                }
                if resumed {
                    hub.resume_feeds().await;
                    hub.honour_cancel_requests().await;
                }
                for (thread, seq) in due {
                    hub.catch_up(&thread, seq).await;
                }
            }
        });
    }

    /// Asks the replica running `turn` to cancel it (`cancel_turn` for a turn running
    /// elsewhere). The answer is the owner's: accepted while the turn runs.
    pub(super) async fn cancel_elsewhere(&self, turn: &TurnId) -> Result<(), HubError> {
        let Some(replicas) = self.replicas.as_ref().filter(|r| r.shared()) else {
            // One process (SQLite): a running turn is in this hub's memory (maybe since
            // a moment: a resumed approval); a stored one that is not is ending.
            if self.cancel_here(turn) {
                return Ok(());
            }
            return Err(HubError::Conflict(format!("turn {turn} is not running")));
        };
        if replicas.request_cancel(turn).await? {
            // This replica hears its own request too, but the turn may have been
            // registered here meanwhile: stop it without waiting for the round trip.
            self.cancel_here(turn);
            Ok(())
        } else {
            Err(HubError::Conflict(format!("turn {turn} is not running")))
        }
    }

    /// Stops the turns running here whose cancel was requested on any replica. Called
    /// after the feed resumes and after every heartbeat, so a request whose
    /// announcement was missed (or came before the turn was registered) is honoured.
    pub async fn honour_cancel_requests(&self) {
        let Some(replicas) = self.replicas.as_ref() else {
            return;
        };
        match replicas.cancels_requested().await {
            Ok(turns) => {
                for turn in &turns {
                    self.cancel_here(turn);
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not read requested cancels"),
        }
    }

    /// Cancels `turn` if it runs in this process; `false` otherwise.
    fn cancel_here(&self, turn: &TurnId) -> bool {
        let token = self.live.cancel_token(turn, None);
        if let Some(token) = &token {
            tracing::info!(%turn, "cancel requested through the store");
            token.cancel();
        }
        token.is_some()
    }

    /// Keeps a cancel announced for a turn that does not run here: it may be about to
    /// (a decided approval being resumed here), and is then cancelled as it registers.
    fn remember_cancel(&self, turn: TurnId) {
        self.live.remember_cancel(turn);
    }

    /// Those of `turns` that no task of this process runs. The runtime asks this of the
    /// turns the store records as running here: one found idle twice in a row is an
    /// orphan (its end could not be written, or its start failed halfway) and is ended.
    pub fn not_running_here(&self, turns: Vec<TurnId>) -> Vec<TurnId> {
        self.live.not_running(turns)
    }

    /// After a gap in the feed: every live feed here reads what the store committed
    /// since the last event it published. A feed that has published nothing yet gets
    /// the thread's stored events, which its streams drop or use to fill their gaps.
    async fn resume_feeds(&self) {
        let threads: Vec<(ThreadId, FeedState)> = self
            .live
            .feeds_last()
            .into_iter()
            .map(|(thread, last)| {
                let state = last.map_or(FeedState::Empty, FeedState::Published);
                (thread, state)
            })
            .collect();
        for (thread, state) in threads {
            let after = match state {
                FeedState::Published(last) => last,
                _ => 0,
            };
            self.publish_after(&thread, after).await;
        }
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
        let after = match self.feed_last(thread) {
            FeedState::Absent => return,
            FeedState::Published(last) if last >= seq => return,
            FeedState::Published(last) => last,
            // A new feed: its streams read the store themselves; only the news is due.
            FeedState::Empty => seq.saturating_sub(1),
        };
        self.publish_after(thread, after).await;
    }

    /// Reads and publishes the stored events of `thread` after `after`.
    async fn publish_after(&self, thread: &ThreadId, mut after: u64) {
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
        match self.live.feed_last(thread) {
            None => FeedState::Absent,
            Some(last) => last.map_or(FeedState::Empty, FeedState::Published),
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
