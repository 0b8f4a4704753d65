//! The live feeds of threads in this process: each stored event is published to the
//! thread's broadcast feed, which streams follow; the observers that publish a turn's
//! events, and the guard that declines a turn's permissions when its client leaves.

use super::*;

impl Hub {
    /// A receiver of the thread's live feed, created on first use. Subscribing and
    /// removing happen under one lock, so a receiver never hangs on a dropped feed.
    pub(super) fn subscribe_feed(
        self: &Arc<Self>,
        thread: &ThreadId,
    ) -> (broadcast::Receiver<Event>, FeedLease) {
        let receiver = match self.feeds.lock() {
            Ok(mut feeds) => feeds
                .entry(thread.clone())
                .or_insert_with(Feed::new)
                .sender
                .subscribe(),
            // A poisoned map only loses live delivery; streams still read the store.
            Err(_) => broadcast::channel(1).1,
        };
        (
            receiver,
            FeedLease {
                hub: Arc::downgrade(self),
                thread: thread.clone(),
            },
        )
    }

    /// Drops a thread's feed once nobody listens and no turn runs on it.
    pub(super) fn release_feed(&self, thread: &ThreadId) {
        let busy = self
            .running
            .lock()
            .map(|r| r.values().any(|t| &t.thread == thread))
            .unwrap_or(true);
        if busy {
            return;
        }
        if let Ok(mut feeds) = self.feeds.lock()
            && feeds
                .get(thread)
                .is_some_and(|f| f.sender.receiver_count() == 0)
        {
            feeds.remove(thread);
        }
    }

    /// Sends a stored event to the thread's live subscribers.
    pub(super) fn publish(&self, event: &Event) {
        if let Ok(mut feeds) = self.feeds.lock()
            && let Some(feed) = feeds.get_mut(&event.thread_id)
        {
            feed.last = feed.last.max(Some(event.seq));
            // No receivers is fine: nobody is watching.
            let _ = feed.sender.send(event.clone());
        }
    }
}

/// A thread's live feed in this process.
pub(super) struct Feed {
    pub(super) sender: broadcast::Sender<Event>,
    /// The highest `seq` published on it; `None` before the first. Events committed by
    /// other replicas below it need no reading (`replicas.rs`).
    pub(super) last: Option<u64>,
}

impl Feed {
    pub(super) fn new() -> Self {
        Self {
            sender: broadcast::channel(FEED_CAPACITY).0,
            last: None,
        }
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
        if !self.hub.is_running(&self.turn) || self.hub.broker.pending_of(&self.turn).is_empty() {
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
