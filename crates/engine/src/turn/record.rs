//! How a turn records its events: each durable before anyone sees it, and the events
//! that end a step held for the turn's next write, so a step is one store round trip
//! (ADR 0052).

use agentplane_core::{Event, EventPayload};

use super::active::*;
use crate::ports::StoreError;

impl ActiveTurn<'_> {
    /// Records `payload`, after the events held for it, in one store write.
    pub(super) async fn record(&self, payload: EventPayload) -> Result<Event, StoreError> {
        let mut payloads = self.take_held();
        if payloads.is_empty() {
            let event = self
                .deps
                .store
                .append(&self.thread, &self.turn, payload)
                .await?;
            self.observer.on_event(&event);
            return Ok(event);
        }
        payloads.push(payload);
        let mut events = self
            .deps
            .store
            .append_all(&self.thread, &self.turn, payloads)
            .await?;
        for event in &events {
            self.observer.on_event(event);
        }
        events
            .pop()
            .ok_or_else(|| StoreError::Backend("the store recorded none of a turn's events".into()))
    }

    /// Holds `payload` for the turn's next write (its next event, or its end), so the
    /// events that end one step of the turn (its last text, usage and cost) and what
    /// follows them are one store round trip. Only for events another write follows at
    /// once: nothing slow (a tool, a person, closing tools) runs while events are
    /// held, so a crash loses no more than it could before.
    pub(super) fn hold(&self, payload: EventPayload) {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(payload);
    }

    pub(super) fn take_held(&self) -> Vec<EventPayload> {
        std::mem::take(
            &mut *self
                .held
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// Writes the held events now, before something slow or a write of another kind.
    pub(super) async fn flush(&self) -> Result<(), StoreError> {
        let held = self.take_held();
        if held.is_empty() {
            return Ok(());
        }
        let events = self
            .deps
            .store
            .append_all(&self.thread, &self.turn, held)
            .await?;
        for event in &events {
            self.observer.on_event(event);
        }
        Ok(())
    }
}
