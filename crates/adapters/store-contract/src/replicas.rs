//! `ReplicaStore` as one store sees it: its turns and claimed executions carry its
//! replica, recovery scoped to a replica touches only that replica's work (with the
//! same events as `interrupt_running_turns`), the registry never hands a store itself,
//! and the appended feed is taken once. What needs two replicas on one database is
//! tested by the stores that can share one (`crates/adapters/postgres/tests/replicas.rs`).

use std::sync::Arc;
use std::time::Duration;

use agentplane_core::{ExecutionId, PermissionDecision, ReplicaId, StopReason, ThreadId};
use agentplane_engine::ports::{
    Announcement, NewExecution, PermissionStatus, ReplicaStore, TurnStatus,
};

use crate::fixtures::{RawSql, Store, delta, new_permission, running_turn};

/// A store that also implements `ReplicaStore`.
pub trait ReplicatedStore: Store + ReplicaStore {}

impl<T: Store + ReplicaStore> ReplicatedStore for T {}

fn new_execution(thread: &ThreadId) -> NewExecution {
    NewExecution {
        id: ExecutionId::new(),
        client_id: "local".into(),
        agent: "coder".into(),
        input: "do it".into(),
        thread_id: thread.clone(),
        webhook_url: None,
        idempotency_key: None,
        fingerprint: "{}".into(),
        max_attempts: 2,
    }
}

pub async fn recovery_of_a_replica_touches_only_its_own_turns<S: ReplicatedStore>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    let (thread, turn) = running_turn(&*store).await;
    let (pending, _) = store
        .create_permission(new_permission(&thread, &turn))
        .await
        .unwrap();
    store
        .append(&thread, &turn, delta("working"))
        .await
        .unwrap();

    // Another replica's recovery finds nothing of this one's.
    assert!(
        store
            .interrupt_turns_of(&ReplicaId::new())
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store.turn(&turn).await.unwrap().unwrap().status,
        TurnStatus::Running
    );

    // Its own: the pending permission declined first, then the turn interrupted.
    let me = store.replica().clone();
    assert_eq!(
        store.interrupt_turns_of(&me).await.unwrap(),
        vec![turn.clone()]
    );
    let events = store.turn_events(&turn).await.unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e.payload.kind()).collect();
    assert_eq!(
        kinds,
        [
            "permission_required",
            "message_delta",
            "permission_resolved",
            "turn_completed"
        ]
    );
    assert_eq!(
        store.permission(&pending.id).await.unwrap().unwrap().status,
        PermissionStatus::Resolved(PermissionDecision::Declined)
    );
    assert_eq!(
        store.turn(&turn).await.unwrap().unwrap().status,
        TurnStatus::Ended(StopReason::Interrupted)
    );
    assert!(store.interrupt_turns_of(&me).await.unwrap().is_empty());
}

pub async fn claimed_executions_carry_their_replica<S: ReplicatedStore>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    let thread = store
        .create_thread(crate::fixtures::new_thread())
        .await
        .unwrap()
        .id;
    let (queued, _) = store
        .create_execution(new_execution(&thread))
        .await
        .unwrap();
    let me = store.replica().clone();
    assert!(
        store.executions_of(&me).await.unwrap().is_empty(),
        "queued is not claimed"
    );
    let claimed = store.claim_execution("w").await.unwrap().unwrap();
    assert_eq!(claimed.id, queued.id);
    let mine = store.executions_of(&me).await.unwrap();
    assert_eq!(
        mine.iter().map(|e| &e.id).collect::<Vec<_>>(),
        vec![&queued.id]
    );
    assert!(
        store
            .executions_of(&ReplicaId::new())
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn the_registry_never_hands_a_replica_itself<S: ReplicatedStore>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    store.heartbeat().await.unwrap();
    store.heartbeat().await.unwrap();
    assert_eq!(
        store.claim_dead_replica(Duration::ZERO).await.unwrap(),
        None
    );
    store.leave().await.unwrap();
    store.leave().await.unwrap();
    assert_eq!(
        store.claim_dead_replica(Duration::ZERO).await.unwrap(),
        None
    );
}

pub async fn the_appended_feed_is_taken_once<S: ReplicatedStore>(store: Arc<S>, _raw: &dyn RawSql) {
    let feed = store.announcements();
    assert!(store.announcements().is_none(), "taken once");
    let Some(mut feed) = feed else {
        assert!(!store.shared(), "a shared database has a feed");
        return;
    };
    let (thread, turn) = running_turn(&*store).await;
    let event = store.append(&thread, &turn, delta("hello")).await.unwrap();
    // Generous: "it arrives", not how fast.
    let woke = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match feed.recv().await {
                Some(Announcement::Appended(a)) if a.thread == thread && a.seq == event.seq => {
                    return true;
                }
                Some(_) => continue,
                None => return false,
            }
        }
    })
    .await;
    assert_eq!(woke, Ok(true));
}

/// A cancel request is recorded for a running turn only, and only on a shared database
/// (one process cancels in memory); the same for the orphan sweep's reads (ADR 0027).
pub async fn cancel_requests_and_orphans_are_kept_for_running_turns_only<S: ReplicatedStore>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    let shared = store.shared();
    let (thread, turn) = running_turn(&*store).await;
    let me = store.replica().clone();
    assert_eq!(store.request_cancel(&turn).await.unwrap(), shared);
    let requested = store.cancels_requested().await.unwrap();
    assert_eq!(requested.contains(&turn), shared, "{requested:?}");
    let running = store.running_turns_of(&me).await.unwrap();
    assert_eq!(running.contains(&turn), shared, "{running:?}");
    assert!(
        store
            .running_turns_of(&ReplicaId::new())
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.interrupt_turn(&turn).await.unwrap(), shared);
    if !shared {
        store
            .complete_turn(
                &thread,
                &turn,
                StopReason::Cancelled,
                serde_json::Value::Null,
            )
            .await
            .unwrap();
    }
    let ended = store.turn(&turn).await.unwrap().unwrap();
    assert_ne!(ended.status, TurnStatus::Running);
    assert!(!store.request_cancel(&turn).await.unwrap(), "not running");
    assert!(!store.interrupt_turn(&turn).await.unwrap(), "not running");
    assert!(store.cancels_requested().await.unwrap().is_empty());
    assert!(
        !store
            .request_cancel(&agentplane_core::TurnId::new())
            .await
            .unwrap()
    );
}
