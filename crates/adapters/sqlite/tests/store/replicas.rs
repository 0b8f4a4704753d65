//! Replicas (ADR 0019) on SQLite: the file is locked to one store, turns and claimed
//! executions record their replica, a dead replica is claimed once and only its own
//! work is recovered.

use std::time::Duration;

use agentplane_core::{ExecutionId, ReplicaId, StopReason};
use agentplane_engine::ports::{
    ExecutionStatus, ExecutionStore, NewExecution, ReplicaStore, ThreadStore, TurnLog, TurnStatus,
};
use agentplane_sqlite::SqliteStore;

use super::{db_path, new_thread, running_turn};

async fn open_as(path: &std::path::Path, replica: &ReplicaId) -> SqliteStore {
    SqliteStore::open_as(path, replica.clone())
        .await
        .expect("open the store")
}

#[tokio::test]
async fn a_second_store_on_the_same_file_is_refused_while_the_first_is_open() {
    let (_dir, path) = db_path();
    let first = SqliteStore::open(&path).await.expect("first");
    let Err(refused) = SqliteStore::open(&path).await else {
        panic!("a second store opened the same file");
    };
    let message = refused.to_string();
    assert!(
        message.contains("in use by another agentplane process"),
        "{message}"
    );
    assert!(message.contains("agentplane.db"), "{message}");
    drop(first);
    SqliteStore::open(&path)
        .await
        .expect("free again once closed");
}

#[tokio::test]
async fn the_store_is_not_shared_and_appends_nothing_from_elsewhere() {
    let (_dir, path) = db_path();
    let replica = ReplicaId::new();
    let store = open_as(&path, &replica).await;
    assert_eq!(store.replica(), &replica);
    assert!(!store.shared());
    assert!(store.announcements().is_none());
}

#[tokio::test]
async fn a_dead_replica_is_claimed_once_and_a_live_one_never() {
    let (_dir, path) = db_path();
    let (a, b) = (ReplicaId::new(), ReplicaId::new());
    {
        let store = open_as(&path, &a).await;
        store.heartbeat().await.expect("beat");
    }
    let store = open_as(&path, &b).await;
    store.heartbeat().await.expect("beat");
    // A beat a moment ago is not stale after an hour.
    let none = store
        .claim_dead_replica(Duration::from_secs(3600))
        .await
        .expect("claim");
    assert_eq!(none, None);
    tokio::time::sleep(Duration::from_millis(5)).await;
    let dead = store
        .claim_dead_replica(Duration::ZERO)
        .await
        .expect("claim");
    assert_eq!(dead, Some(a), "the other replica, never this one");
    let again = store
        .claim_dead_replica(Duration::ZERO)
        .await
        .expect("claim");
    assert_eq!(
        again, None,
        "claimed once; this replica is never its own corpse"
    );
    store.leave().await.expect("leave");
}

#[tokio::test]
async fn interrupting_a_replica_ends_only_its_own_running_turns() {
    let (_dir, path) = db_path();
    let (a, b) = (ReplicaId::new(), ReplicaId::new());
    let (_, of_a) = {
        let store = open_as(&path, &a).await;
        running_turn(&store).await
    };
    let store = open_as(&path, &b).await;
    let (_, of_b) = running_turn(&store).await;
    let ended = store.interrupt_turns_of(&a).await.expect("interrupt");
    assert_eq!(ended, vec![of_a.clone()]);
    let record = store.turn(&of_a).await.expect("read").expect("turn");
    assert_eq!(record.status, TurnStatus::Ended(StopReason::Interrupted));
    let events = store.turn_events(&of_a).await.expect("events");
    assert!(
        events
            .last()
            .is_some_and(|e| e.payload.kind() == "turn_completed")
    );
    let record = store.turn(&of_b).await.expect("read").expect("turn");
    assert_eq!(record.status, TurnStatus::Running, "another replica's turn");
    assert!(
        store
            .interrupt_turns_of(&a)
            .await
            .expect("again")
            .is_empty()
    );
}

#[tokio::test]
async fn claimed_executions_are_listed_under_the_claiming_replica() {
    let (_dir, path) = db_path();
    let (a, b) = (ReplicaId::new(), ReplicaId::new());
    let claimed = {
        let store = open_as(&path, &a).await;
        let thread = store.create_thread(new_thread()).await.expect("thread").id;
        store
            .create_execution(NewExecution {
                id: ExecutionId::new(),
                client_id: "local".into(),
                agent: "coder".into(),
                input: "do it".into(),
                thread_id: thread,
                webhook_url: None,
                idempotency_key: None,
                fingerprint: "{}".into(),
                max_attempts: 2,
            })
            .await
            .expect("create");
        store
            .claim_execution("worker")
            .await
            .expect("claim")
            .expect("due")
    };
    let store = open_as(&path, &b).await;
    let of_a = store.executions_of(&a).await.expect("list");
    assert_eq!(of_a.len(), 1);
    assert_eq!(of_a[0].id, claimed.id);
    assert_eq!(of_a[0].status, ExecutionStatus::Running);
    assert!(store.executions_of(&b).await.expect("list").is_empty());
}
