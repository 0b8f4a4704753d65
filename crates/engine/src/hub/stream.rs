//! Event streams: stored events, then live ones, each exactly once and in `seq` order.
//!
//! A stream subscribes to the thread's live feed *before* reading the store, so nothing
//! written in between is missed; live events at or below the last delivered `seq` are
//! dropped, and a gap (a lagging receiver, an event published out of order) is filled
//! from the store. The store is the truth; the feed is only a wake-up with a payload.

use std::collections::VecDeque;
use std::sync::Arc;

use agentplane_core::{Event, EventPayload, ThreadId, TurnId};
use tokio::sync::broadcast;

use super::shared_event::{Shared, SharedEvent};
use super::{Hub, HubError};

/// How many stored events are read at once when replaying.
const PAGE: usize = 500;

/// Where a stream stops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Scope {
    /// Every event of the thread after a `seq`, following live ones until dropped.
    Thread { after: u64 },
    /// One turn's events, ending after its `turn_completed`.
    Turn { turn: TurnId },
}

/// A stream of a thread's events.
pub struct EventStream {
    hub: Arc<Hub>,
    thread: ThreadId,
    scope: Scope,
    /// The last delivered thread `seq`; `None` before a turn stream's first event.
    last: Option<u64>,
    live: broadcast::Receiver<Shared>,
    ready: VecDeque<Shared>,
    /// A thread stream replays stored pages until one comes back short.
    catching_up: bool,
    done: bool,
    /// Keeps the feed alive; released when the stream is dropped.
    _feed: super::feeds::FeedLease,
}

impl EventStream {
    pub(super) fn new(
        hub: Arc<Hub>,
        thread: ThreadId,
        scope: Scope,
        live: broadcast::Receiver<Shared>,
        feed: super::feeds::FeedLease,
    ) -> Self {
        let catching_up = matches!(scope, Scope::Thread { .. });
        let last = match &scope {
            Scope::Thread { after } => Some(*after),
            Scope::Turn { .. } => None,
        };
        Self {
            hub,
            thread,
            scope,
            last,
            live,
            catching_up,
            ready: VecDeque::new(),
            done: false,
            _feed: feed,
        }
    }

    /// The next event, or `None` when a turn stream has delivered `turn_completed`.
    /// A thread stream never ends by itself.
    pub async fn next(&mut self) -> Option<Result<Event, HubError>> {
        Some(
            self.next_shared()
                .await?
                .map(|shared| shared.event().clone()),
        )
    }

    /// [`Self::next`] as the feed shares it: the same allocation (and frame) every
    /// subscriber of the thread gets.
    pub async fn next_shared(&mut self) -> Option<Result<Arc<SharedEvent>, HubError>> {
        if self.done {
            return None;
        }
        if self.catching_up && self.ready.is_empty() {
            // Replay what is stored, a page at a time, before following live events.
            match self.fill_from_store().await {
                Ok(read) => self.catching_up = read == PAGE,
                Err(e) => return Some(Err(e)),
            }
        }
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Some(Ok(self.deliver(event)));
            }
            match self.live.recv().await {
                Ok(shared) => {
                    let event = shared.event();
                    if !self.in_scope(event) {
                        continue;
                    }
                    match self.last {
                        Some(last) if event.seq <= last => continue,
                        Some(last) if event.seq > last + 1 => {
                            if let Err(e) = self.fill_from_store().await {
                                return Some(Err(e));
                            }
                        }
                        None if !matches!(event.payload, EventPayload::TurnStarted { .. }) => {
                            if let Err(e) = self.fill_from_store().await {
                                return Some(Err(e));
                            }
                        }
                        _ => self.ready.push_back(shared),
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    if let Err(e) = self.fill_from_store().await {
                        return Some(Err(e));
                    }
                }
                // The hub dropped the feed: it is shutting down. Deliver what is stored.
                Err(broadcast::error::RecvError::Closed) => {
                    if let Err(e) = self.fill_from_store().await {
                        return Some(Err(e));
                    }
                    if self.ready.is_empty() {
                        self.done = true;
                        return None;
                    }
                }
            }
        }
    }

    fn in_scope(&self, event: &Event) -> bool {
        match &self.scope {
            Scope::Thread { .. } => true,
            Scope::Turn { turn } => &event.turn_id == turn,
        }
    }

    fn deliver(&mut self, shared: Shared) -> Shared {
        let event = shared.event();
        self.last = Some(event.seq);
        if let Scope::Turn { turn } = &self.scope
            && &event.turn_id == turn
            && matches!(event.payload, EventPayload::TurnCompleted { .. })
        {
            self.done = true;
        }
        shared
    }

    /// Queues stored events after the last delivered one; returns how many were read.
    async fn fill_from_store(&mut self) -> Result<usize, HubError> {
        let store = &self.hub.deps.store;
        let events = match (&self.scope, self.last) {
            (Scope::Turn { turn }, last) => store
                .turn_events(turn)
                .await?
                .into_iter()
                .filter(|e| last.is_none_or(|l| e.seq > l))
                .collect::<Vec<_>>(),
            (Scope::Thread { .. }, last) => {
                store
                    .thread_events(&self.thread, last.unwrap_or(0), PAGE)
                    .await?
            }
        };
        let read = events.len();
        let after = self.ready.back().map(|e| e.event().seq).or(self.last);
        self.ready.extend(
            events
                .into_iter()
                .filter(|e| after.is_none_or(|a| e.seq > a))
                .map(|e| Arc::new(SharedEvent::new(e))),
        );
        Ok(read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_frame_is_built_once_and_shared_by_every_reader() {
        let shared = SharedEvent::new(Event {
            thread_id: ThreadId::new(),
            turn_id: TurnId::new(),
            seq: 7,
            ts: "2026-11-27T10:00:00.000Z".into(),
            payload: EventPayload::MessageDelta {
                text: "line\r\n\"quoted\" é\n\ndata: forged".into(),
            },
        });
        let first = shared.sse_frame().expect("frame");
        let second = shared.sse_frame().expect("frame");
        assert_eq!(first.as_ptr(), second.as_ptr(), "built once, then shared");
        let json = serde_json::to_string(shared.event()).expect("serde");
        let expected = format!("id: 7\nevent: message_delta\ndata: {json}\n\n");
        assert_eq!(first, expected.as_bytes());
        // The text's line breaks are escaped: the frame is three lines and its end, so a
        // delta cannot forge a field or end the event early.
        let text = std::str::from_utf8(&first).expect("utf-8");
        assert_eq!(text.matches('\n').count(), 4);
        assert!(!text.contains('\r'));
    }
}
