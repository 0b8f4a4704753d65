//! Permission requests: a tool call that waits for a person, failing closed.
//!
//! The store is the judge: a permission is pending until exactly one resolution is
//! written, by whoever comes first — the person's decision, the timeout, a client that
//! went away, or a restart. The broker only wakes the waiting turn, which then reads the
//! stored outcome, so a decision racing a timeout can never be applied twice or lost.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use std::sync::Arc;

use agentplane_core::{Event, PermissionDecision, PermissionId, TurnId};
use tokio::sync::Notify;

use crate::ports::{EventStore, NewPermission, PermissionRecord, PermissionStatus, StoreError};

/// Permission handling of a turn: who wakes it and how long it waits.
#[derive(Clone)]
pub struct PermissionSettings {
    pub broker: Arc<PermissionBroker>,
    pub timeout: Duration,
}

/// The answers offered for every permission request.
pub const OPTIONS: [&str; 2] = ["approved", "declined"];

/// Wakes turns that wait for a permission.
#[derive(Default)]
pub struct PermissionBroker {
    waiting: Mutex<HashMap<PermissionId, Waiter>>,
}

struct Waiter {
    turn: TurnId,
    wake: Arc<Notify>,
}

impl PermissionBroker {
    /// Registers a waiter before the request becomes visible, so no decision can be
    /// missed between the two.
    pub fn register(&self, id: &PermissionId, turn: &TurnId) -> Arc<Notify> {
        let wake = Arc::new(Notify::new());
        if let Ok(mut waiting) = self.waiting.lock() {
            waiting.insert(
                id.clone(),
                Waiter {
                    turn: turn.clone(),
                    wake: wake.clone(),
                },
            );
        }
        wake
    }

    /// Forgets a waiter once its turn has read the outcome.
    pub fn forget(&self, id: &PermissionId) {
        if let Ok(mut waiting) = self.waiting.lock() {
            waiting.remove(id);
        }
    }

    /// Wakes the turn waiting on `id`, if any.
    pub fn wake(&self, id: &PermissionId) {
        if let Ok(waiting) = self.waiting.lock()
            && let Some(waiter) = waiting.get(id)
        {
            // `notify_one` stores a permit, so a wake before the wait is not lost.
            waiter.wake.notify_one();
        }
    }

    /// The pending permissions of one turn.
    pub fn pending_of(&self, turn: &TurnId) -> Vec<PermissionId> {
        self.waiting
            .lock()
            .map(|w| {
                w.iter()
                    .filter(|(_, waiter)| &waiter.turn == turn)
                    .map(|(id, _)| id.clone())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Parses a decision from outside. Anything but exactly `approved` or `declined` is an
/// error for the caller, and the permission is declined (fail-closed).
pub fn parse_decision(text: &str) -> Result<PermissionDecision, String> {
    match text {
        "approved" => Ok(PermissionDecision::Approved),
        "declined" => Ok(PermissionDecision::Declined),
        other => Err(format!(
            "decision must be \"approved\" or \"declined\", got {other:?}; the permission was declined"
        )),
    }
}

/// Resolves a permission unless something else already did, and returns the stored
/// outcome either way, with the `permission_resolved` event when this call wrote it.
/// Wakes the waiting turn.
pub async fn settle(
    store: &dyn EventStore,
    broker: &PermissionBroker,
    id: &PermissionId,
    decision: PermissionDecision,
    reason: &str,
) -> Result<(PermissionRecord, Option<Event>), StoreError> {
    let result = match store.resolve_permission(id, decision, reason).await {
        Ok((record, event)) => Ok((record, Some(event))),
        Err(StoreError::Conflict(_)) => match store.permission(id).await? {
            Some(record) => Ok((record, None)),
            None => Err(StoreError::NotFound(format!("permission {id}"))),
        },
        Err(e) => Err(e),
    };
    broker.wake(id);
    result
}

/// Waits for a stored permission request's one resolution and settles it: a person's
/// decision (woken through `wake`), the timeout, cancellation, or `declined_by` (a
/// reason known before asking) at once; without settings nobody can answer, so it is
/// declined at once. Anything but an explicit approval settles as declined. Returns
/// the stored record, with the `permission_resolved` event when this call wrote it.
/// Shared by the model-and-tools turn loop and the external (ACP) turn driver.
pub async fn await_decision(
    store: &dyn EventStore,
    settings: Option<&PermissionSettings>,
    wake: Option<Arc<Notify>>,
    id: &PermissionId,
    declined_by: Option<String>,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<(PermissionRecord, Option<Event>), StoreError> {
    let reason = match (declined_by, settings, wake) {
        (Some(why), _, _) => why,
        (None, Some(settings), Some(wake)) => tokio::select! {
            _ = cancel.cancelled() => "the turn was cancelled".to_owned(),
            _ = wake.notified() => String::new(),
            _ = tokio::time::sleep(settings.timeout) => format!(
                "no decision within {} s", settings.timeout.as_secs()
            ),
        },
        _ => "nobody can answer permission requests here".to_owned(),
    };
    let broker = settings.map(|s| s.broker.clone()).unwrap_or_default();
    let reason = if reason.is_empty() {
        "declined"
    } else {
        &reason
    };
    let settled = settle(store, &broker, id, PermissionDecision::Declined, reason).await;
    broker.forget(id);
    settled
}

/// Asks a person: stores the request (announced as `permission_required` through
/// `on_event`), then waits for its one resolution as [`await_decision`] does. The one
/// ask-and-wait of native and external turns. Returns the decision: anything but an
/// explicit approval, and any cancellation, is `Declined`; plus the stored record.
pub async fn ask(
    store: &dyn EventStore,
    settings: Option<&PermissionSettings>,
    request: NewPermission,
    declined_by: Option<String>,
    on_event: &(dyn Fn(&Event) + Sync),
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<(PermissionDecision, PermissionRecord), StoreError> {
    let id = request.id.clone();
    let wake = settings.map(|s| s.broker.register(&id, &request.turn_id));
    let (_, event) = store.create_permission(request).await?;
    on_event(&event);
    let (record, ours) = await_decision(store, settings, wake, &id, declined_by, cancel).await?;
    // When this call resolved it (timeout, cancel, a policy, nobody to ask), show the
    // event; a decision from outside was shown by whoever wrote it.
    if let Some(event) = ours {
        on_event(&event);
    }
    let decision = if cancel.is_cancelled() {
        PermissionDecision::Declined
    } else {
        decision_of(&record)
    };
    Ok((decision, record))
}

/// The decision a stored record holds; a pending one counts as declined.
pub fn decision_of(record: &PermissionRecord) -> PermissionDecision {
    match record.status {
        PermissionStatus::Resolved(decision) => decision,
        PermissionStatus::Pending => PermissionDecision::Declined,
    }
}

/// How long a turn waits for a decision by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
