//! The live feeds of threads in this process: each stored event is published to the
//! thread's broadcast feed, which streams follow; the observers that publish a turn's
//! events, and the guard that declines a turn's permissions when its client leaves.

use std::sync::Arc;

use agentplane_core::{Event, ThreadId, TurnId};
use tokio::sync::broadcast;

use super::Hub;
use crate::turn::TurnObserver;

impl Hub {
    /// A receiver of the thread's live feed (`live.rs`), with the lease that releases it.
    pub(super) fn subscribe_feed(
        self: &Arc<Self>,
        thread: &ThreadId,
    ) -> (broadcast::Receiver<super::shared_event::Shared>, FeedLease) {
        (
            self.live.subscribe(thread),
            FeedLease {
                hub: Arc::downgrade(self),
                thread: thread.clone(),
            },
        )
    }

    /// Drops a thread's feed once nobody listens and no turn runs on it.
    pub(super) fn release_feed(&self, thread: &ThreadId) {
        self.live.release(thread);
    }

    /// Sends a stored event to the thread's live subscribers.
    pub(super) fn publish(&self, event: &Event) {
        self.live.publish(event);
    }
}

/// Holds a thread's feed; releasing it may drop the feed.
pub(crate) struct FeedLease {
    hub: std::sync::Weak<Hub>,
    thread: ThreadId,
}

impl Drop for FeedLease {
    fn drop(&mut self) {
        if let Some(hub) = self.hub.upgrade() {
            hub.release_feed(&self.thread);
        }
    }
}

/// See [`StartedTurn::guard`].
pub struct DisconnectGuard {
    pub(super) hub: Arc<Hub>,
    pub(super) turn: TurnId,
}

impl Drop for DisconnectGuard {
    fn drop(&mut self) {
        if !self.hub.live.is_running(&self.turn)
            || self.hub.broker.pending_of(&self.turn).is_empty()
        {
            return;
        }
        let hub = self.hub.clone();
        let turn = self.turn.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { hub.client_gone(&turn).await });
        }
    }
}

/// Publishes a turn's stored events to the thread's feed and the governance tap.
pub(super) struct FeedObserver<'a> {
    pub(super) hub: &'a Hub,
    pub(super) agent: &'a str,
}

impl TurnObserver for FeedObserver<'_> {
    fn on_event(&self, event: &Event) {
        self.hub.publish(event);
        self.hub.deps.governance.tap(self.agent, event);
    }
}

/// Publishes and also tells the caller's observer.
pub(super) struct TeeObserver<'a> {
    pub(super) hub: &'a Hub,
    pub(super) agent: &'a str,
    pub(super) inner: &'a dyn TurnObserver,
}

impl TurnObserver for TeeObserver<'_> {
    fn on_event(&self, event: &Event) {
        self.hub.publish(event);
        self.hub.deps.governance.tap(self.agent, event);
        self.inner.on_event(event);
    }

    fn on_text(&self, text: &str) {
        self.inner.on_text(text);
    }
}
