//! Turns read back as protocol tasks (A2A): one turn of the caller's with its stored
//! events, and a protocol request recorded in the thread it names. Tenancy as for
//! threads: another client's turn is `NotFound`, never "forbidden".

use agentplane_core::{EventPayload, TurnId};

use super::history::HistoryTurn;
use super::{Hub, HubError};
use crate::identity::{Access, AsCaller};
use crate::ports::{StoreError, TurnStatus};

impl Hub {
    /// One turn of the caller's thread, with its stored events (by `seq`): what a
    /// protocol reads a task back from, after a restart too. Another client's turn,
    /// an internal turn, or a deleted thread's is `NotFound`.
    pub async fn turn_with_events(
        &self,
        caller: &(impl AsCaller + ?Sized),
        turn: &TurnId,
    ) -> Result<HistoryTurn, HubError> {
        let caller = self
            .identity
            .require(caller, Access::Read, "reading a turn")?;
        let client = caller.client();
        let not_found = || HubError::NotFound(format!("turn {turn}"));
        let record = self.deps.store.turn(turn).await?.ok_or_else(not_found)?;
        if record.internal {
            return Err(not_found());
        }
        match self.deps.store.thread(&record.thread_id).await? {
            Some(thread) if thread.client_id == client => {}
            _ => return Err(not_found()),
        }
        let events = self.deps.store.turn_events(turn).await?;
        Ok(HistoryTurn {
            turn: record,
            events: Some(events),
        })
    }

    /// Records a protocol request (an `a2a_request` event) in the running turn it
    /// names, on the caller's thread, and publishes it to the thread's followers. The
    /// store appends only to running turns: `Ok(false)` when the turn has ended (the
    /// request is then in the access log and metrics only).
    pub async fn record_request(
        &self,
        caller: &(impl AsCaller + ?Sized),
        turn: &TurnId,
        payload: EventPayload,
    ) -> Result<bool, HubError> {
        if !matches!(payload, EventPayload::A2aRequest { .. }) {
            return Err(HubError::InvalidArgument(
                "only protocol requests are recorded this way".into(),
            ));
        }
        let found = self.turn_with_events(caller, turn).await;
        let record = match found {
            Ok(found) => found.turn,
            Err(e) => return Err(e),
        };
        if record.status != TurnStatus::Running {
            return Ok(false);
        }
        match self
            .deps
            .store
            .append(&record.thread_id, turn, payload)
            .await
        {
            Ok(event) => {
                self.publish(&event);
                Ok(true)
            }
            // Ended between the read and the append.
            Err(StoreError::Conflict(_)) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}
