//! Executions: claimed once under concurrency, one running per thread, idempotency
//! per client, finished rows never change, the webhook delivery enqueued with the
//! finish, retries scheduled, restart recovery, and deliveries claimed with a lease.

use std::sync::Arc;
use std::time::Duration;

use agentplane_core::{DeliveryId, ErrorCode, ExecutionId, ThreadId};
use agentplane_engine::ports::{
    CancelOutcome, DeliveryAttempt, DeliveryStatus, ExecutionEnd, ExecutionFailure, ExecutionQuery,
    ExecutionStatus, NewExecution, RestartMode, StoreError,
};
use serde_json::json;

use crate::fixtures::{RawSql, Store, new_thread};

async fn thread<S: Store>(store: &S) -> ThreadId {
    store.create_thread(new_thread()).await.expect("thread").id
}

fn new_execution(thread: &ThreadId, key: Option<&str>) -> NewExecution {
    NewExecution {
        id: ExecutionId::new(),
        client_id: "local".into(),
        agent: "coder".into(),
        input: "do it".into(),
        thread_id: thread.clone(),
        webhook_url: None,
        idempotency_key: key.map(str::to_owned),
        fingerprint: "{}".into(),
        max_attempts: 2,
    }
}

fn end(status: ExecutionStatus) -> ExecutionEnd {
    ExecutionEnd {
        status,
        turn_id: None,
        output: Some(json!({"text": "ok"})),
        error: None,
        delivery: DeliveryId::new(),
    }
}

pub async fn each_queued_execution_is_claimed_exactly_once_under_concurrency<S: Store>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    let mut ids = Vec::new();
    for _ in 0..20 {
        // One thread each: executions of one thread never run side by side.
        let thread = thread(&*store).await;
        let (record, created) = store
            .create_execution(new_execution(&thread, None))
            .await
            .expect("create");
        assert!(created);
        assert_eq!(record.status, ExecutionStatus::Queued);
        ids.push(record.id);
    }
    assert_eq!(store.queued_executions().await.expect("count"), 20);
    let mut workers = Vec::new();
    for w in 0..8 {
        let store = store.clone();
        workers.push(tokio::spawn(async move {
            let mut claimed = Vec::new();
            while let Some(record) = store
                .claim_execution(&format!("w{w}"))
                .await
                .expect("claim")
            {
                assert_eq!(record.status, ExecutionStatus::Running);
                assert_eq!(record.attempts, 1);
                claimed.push(record.id);
            }
            claimed
        }));
    }
    let mut claimed = Vec::new();
    for worker in workers {
        claimed.extend(worker.await.expect("worker"));
    }
    claimed.sort();
    ids.sort();
    assert_eq!(claimed, ids, "every execution once, none twice");
    assert_eq!(store.queued_executions().await.expect("count"), 0);
}

pub async fn one_thread_runs_one_execution_at_a_time<S: Store>(store: Arc<S>, _raw: &dyn RawSql) {
    let thread = thread(&*store).await;
    let (a, _) = store
        .create_execution(new_execution(&thread, None))
        .await
        .expect("a");
    let (b, _) = store
        .create_execution(new_execution(&thread, None))
        .await
        .expect("b");
    let first = store.claim_execution("w").await.expect("claim").expect("a");
    assert_eq!(first.id, a.id);
    assert!(store.claim_execution("w").await.expect("claim").is_none());
    store
        .finish_execution(&a.id, end(ExecutionStatus::Succeeded))
        .await
        .expect("finish");
    let second = store.claim_execution("w").await.expect("claim").expect("b");
    assert_eq!(second.id, b.id);
}

pub async fn an_idempotency_key_is_unique_per_client<S: Store>(store: Arc<S>, _raw: &dyn RawSql) {
    let thread = thread(&*store).await;
    let (first, created) = store
        .create_execution(new_execution(&thread, Some("k")))
        .await
        .expect("first");
    assert!(created);
    let (again, created) = store
        .create_execution(new_execution(&thread, Some("k")))
        .await
        .expect("again");
    assert!(!created);
    assert_eq!(again.id, first.id);
    let mut other = new_execution(&thread, Some("k"));
    other.client_id = "someone-else".into();
    let (other, created) = store.create_execution(other).await.expect("other");
    assert!(created);
    assert_ne!(other.id, first.id);
    assert_eq!(
        store
            .execution_by_key("local", "k")
            .await
            .expect("by key")
            .map(|e| e.id),
        Some(first.id)
    );
}

pub async fn a_finished_execution_never_changes_and_its_delivery_comes_with_it<S: Store>(
    store: Arc<S>,
    raw: &dyn RawSql,
) {
    let thread = thread(&*store).await;
    let mut new = new_execution(&thread, None);
    new.webhook_url = Some("https://hooks.example.com/x".into());
    let (record, _) = store.create_execution(new).await.expect("create");
    store.claim_execution("w").await.expect("claim");
    let delivery = DeliveryId::new();
    let done = store
        .finish_execution(
            &record.id,
            ExecutionEnd {
                delivery: delivery.clone(),
                ..end(ExecutionStatus::Succeeded)
            },
        )
        .await
        .expect("finish");
    assert_eq!(done.status, ExecutionStatus::Succeeded);
    assert_eq!(done.output, Some(json!({"text": "ok"})));
    assert!(done.finished_at.is_some());
    let deliveries = store.deliveries(&record.id).await.expect("deliveries");
    assert_eq!(deliveries.len(), 1);
    assert_eq!(deliveries[0].id, delivery);
    assert_eq!(deliveries[0].status, DeliveryStatus::Pending);
    // Finishing twice, retrying or cancelling a finished one is refused…
    assert!(matches!(
        store
            .finish_execution(&record.id, end(ExecutionStatus::Failed))
            .await,
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(
        store
            .retry_execution(
                &record.id,
                Duration::ZERO,
                ExecutionFailure {
                    code: ErrorCode::Timeout,
                    message: "x".into()
                }
            )
            .await,
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(
        store.cancel_execution(&record.id, DeliveryId::new()).await,
        Err(StoreError::Conflict(_))
    ));
    // …and so is a hand-typed update behind the store's back.
    let changed = raw
        .execute(&format!(
            "UPDATE executions SET status = 'queued' WHERE id = '{}'",
            record.id
        ))
        .await;
    assert!(changed.is_err(), "the trigger keeps a finished row");
    assert!(
        raw.execute("DELETE FROM executions").await.is_err(),
        "executions are kept"
    );
}

pub async fn a_retry_is_due_after_its_delay_and_keeps_the_failure<S: Store>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    let thread = thread(&*store).await;
    let (record, _) = store
        .create_execution(new_execution(&thread, None))
        .await
        .expect("create");
    store.claim_execution("w").await.expect("claim");
    let queued = store
        .retry_execution(
            &record.id,
            Duration::from_millis(300),
            ExecutionFailure {
                code: ErrorCode::UpstreamUnavailable,
                message: "503".into(),
            },
        )
        .await
        .expect("retry");
    assert_eq!(queued.status, ExecutionStatus::Queued);
    assert_eq!(queued.attempts, 1);
    assert_eq!(
        queued.error.as_ref().map(|e| e.code),
        Some(ErrorCode::UpstreamUnavailable)
    );
    assert!(
        store.claim_execution("w").await.expect("claim").is_none(),
        "not due yet"
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    let again = store
        .claim_execution("w")
        .await
        .expect("claim")
        .expect("due");
    assert_eq!(again.attempts, 2);
}

pub async fn cancel_ends_a_queued_execution_and_flags_a_running_one<S: Store>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    let (a, _) = store
        .create_execution(new_execution(&thread(&*store).await, None))
        .await
        .expect("a");
    let (b, _) = store
        .create_execution(new_execution(&thread(&*store).await, None))
        .await
        .expect("b");
    let running = store.claim_execution("w").await.expect("claim").expect("a");
    assert_eq!(running.id, a.id);
    match store.cancel_execution(&b.id, DeliveryId::new()).await {
        Ok(CancelOutcome::Cancelled(record)) => {
            assert_eq!(record.status, ExecutionStatus::Cancelled)
        }
        other => panic!("{other:?}"),
    }
    match store.cancel_execution(&a.id, DeliveryId::new()).await {
        Ok(CancelOutcome::Requested(record)) => {
            assert_eq!(record.status, ExecutionStatus::Running);
            assert!(record.cancel_requested);
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        store
            .cancel_execution(&ExecutionId::new(), DeliveryId::new())
            .await,
        Err(StoreError::NotFound(_))
    ));
}

pub async fn restart_recovery_requeues_or_interrupts_per_mode<S: Store>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    let mut ids = Vec::new();
    for _ in 0..3 {
        let (record, _) = store
            .create_execution(new_execution(&thread(&*store).await, None))
            .await
            .expect("create");
        store.claim_execution("w").await.expect("claim");
        ids.push(record.id);
    }
    let running = store
        .list_executions(&ExecutionQuery {
            status: Some(ExecutionStatus::Running),
            limit: 100,
            ..ExecutionQuery::default()
        })
        .await
        .expect("list");
    assert_eq!(running.len(), 3);
    let retried = store
        .recover_execution(&ids[0], RestartMode::Retry, DeliveryId::new())
        .await
        .expect("retry");
    assert_eq!(retried.status, ExecutionStatus::Queued);
    let interrupted = store
        .recover_execution(&ids[1], RestartMode::Interrupt, DeliveryId::new())
        .await
        .expect("interrupt");
    assert_eq!(interrupted.status, ExecutionStatus::Interrupted);
    assert_eq!(interrupted.error.map(|e| e.code), Some(ErrorCode::Internal));
    // Out of attempts, a retry is an interruption too.
    let last = store
        .claim_execution("w")
        .await
        .expect("claim")
        .expect("the retried one");
    assert_eq!(last.id, ids[0]);
    assert_eq!(last.attempts, 2, "the interrupted attempt counted");
    let out = store
        .recover_execution(&ids[0], RestartMode::Retry, DeliveryId::new())
        .await
        .expect("recover");
    assert_eq!(out.status, ExecutionStatus::Interrupted);
}

pub async fn a_delivery_is_leased_while_in_flight_and_recorded_once_settled<S: Store>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    let mut new = new_execution(&thread(&*store).await, None);
    new.webhook_url = Some("https://hooks.example.com/x".into());
    let (record, _) = store.create_execution(new).await.expect("create");
    store.claim_execution("w").await.expect("claim");
    store
        .finish_execution(&record.id, end(ExecutionStatus::Failed))
        .await
        .expect("finish");
    let lease = Duration::from_secs(60);
    let claimed = store
        .claim_delivery(lease)
        .await
        .expect("claim")
        .expect("due");
    assert_eq!(claimed.attempts, 1);
    assert!(
        store.claim_delivery(lease).await.expect("claim").is_none(),
        "leased while in flight"
    );
    let pending = store
        .record_delivery(
            &claimed.id,
            DeliveryAttempt {
                delivered: false,
                status: Some(500),
                error: Some("500".into()),
                retry_after: Some(Duration::ZERO),
            },
        )
        .await
        .expect("record");
    assert_eq!(pending.status, DeliveryStatus::Pending);
    assert_eq!(pending.last_status, Some(500));
    let again = store
        .claim_delivery(lease)
        .await
        .expect("claim")
        .expect("due");
    assert_eq!(again.attempts, 2);
    let done = store
        .record_delivery(
            &again.id,
            DeliveryAttempt {
                delivered: true,
                status: Some(204),
                error: None,
                retry_after: None,
            },
        )
        .await
        .expect("record");
    assert_eq!(done.status, DeliveryStatus::Delivered);
    assert!(done.delivered_at.is_some());
    assert!(matches!(
        store
            .record_delivery(
                &again.id,
                DeliveryAttempt {
                    delivered: true,
                    status: Some(200),
                    error: None,
                    retry_after: None
                }
            )
            .await,
        Err(StoreError::Conflict(_))
    ));
}
