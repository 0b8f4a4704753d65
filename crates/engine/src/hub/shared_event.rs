//! What a thread's live feed carries: each stored event once, shared by every
//! subscriber, with its Server-Sent Events frame encoded once for all of them. The feed
//! is `live.rs`; the streams that read it are `stream.rs`.

use std::sync::{Arc, OnceLock};

use agentplane_core::Event;
use bytes::Bytes;

/// A stored event as the live feed hands it out: one allocation shared by every
/// subscriber of its thread, and its Server-Sent Events frame encoded once, by the first
/// stream that sends it, for all of them (a turn followed by 10,000 clients is
/// serialized and framed once per event, not 10,000 times).
#[derive(Debug)]
pub struct SharedEvent {
    event: Event,
    frame: OnceLock<Result<Bytes, String>>,
}

impl SharedEvent {
    pub(super) fn new(event: Event) -> Self {
        Self {
            event,
            frame: OnceLock::new(),
        }
    }

    /// The event.
    pub fn event(&self) -> &Event {
        &self.event
    }

    /// The event as one Server-Sent Events frame, `id: <seq>`, `event: <kind>` and
    /// `data: <the event's JSON>`, built on first use and shared after (a clone is a
    /// reference count); the error's text when it cannot be serialized. Compact JSON
    /// escapes every line break, so the data is always one line.
    pub fn sse_frame(&self) -> Result<Bytes, String> {
        self.frame
            .get_or_init(|| {
                let json = serde_json::to_string(&self.event).map_err(|e| e.to_string())?;
                let kind = self.event.payload.kind();
                Ok(Bytes::from(format!(
                    "id: {}\nevent: {kind}\ndata: {json}\n\n",
                    self.event.seq
                )))
            })
            .clone()
    }
}

/// What the live feed carries.
pub(super) type Shared = Arc<SharedEvent>;
