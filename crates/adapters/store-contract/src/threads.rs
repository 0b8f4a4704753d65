//! Threads as a client sees them: listing, soft deletion (hidden, never erased), and
//! the compaction summary.

use std::sync::Arc;

use agentplane_core::policy::Timestamp;
use agentplane_core::{StopReason, ThreadId, TurnId};
use agentplane_engine::ports::{NewThread, StoreError, ThreadRecord, TurnStatus};

use crate::fixtures::{RawSql, Store, delta, new_thread, running_turn};

fn thread_of(client_id: &str, title: &str) -> NewThread {
    NewThread {
        client_id: client_id.into(),
        title: Some(title.into()),
        ..new_thread()
    }
}

pub async fn threads_are_listed_per_client_newest_first<S: Store>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    let mut mine = Vec::new();
    for title in ["first", "second", "third"] {
        mine.push(
            store
                .create_thread(thread_of("local", title))
                .await
                .unwrap(),
        );
    }
    let theirs = store
        .create_thread(thread_of("other", "not yours"))
        .await
        .unwrap();

    mine.reverse();
    assert_eq!(store.list_threads("local").await.unwrap(), mine);
    assert_eq!(store.list_threads("other").await.unwrap(), vec![theirs]);
    assert_eq!(store.list_threads("nobody").await.unwrap(), vec![]);
    // A client id is a value, never SQL, and matches exactly.
    for hostile in ["local' OR '1'='1", "%", "LOCAL", "local ", ""] {
        assert_eq!(
            store.list_threads(hostile).await.unwrap(),
            vec![],
            "{hostile:?}"
        );
    }
}

/// A thread of `client_id` with one finished turn begun at `begun` (stored form).
async fn thread_with_turn_at<S: Store>(
    store: &S,
    raw: &dyn RawSql,
    client_id: &str,
    begun: &str,
) -> ThreadRecord {
    let thread = store
        .create_thread(thread_of(client_id, begun))
        .await
        .unwrap();
    let turn = TurnId::new();
    store
        .begin_turn(&thread.id, &turn, "hello", false)
        .await
        .unwrap();
    store
        .complete_turn(
            &thread.id,
            &turn,
            StopReason::Finished,
            serde_json::json!({}),
        )
        .await
        .unwrap();
    raw.execute(&format!(
        "UPDATE turns SET created_at = '{begun}' WHERE id = '{turn}'"
    ))
    .await
    .unwrap();
    thread
}

pub async fn threads_active_since_spans_every_client<S: Store>(store: Arc<S>, raw: &dyn RawSql) {
    let old = thread_with_turn_at(&*store, raw, "local", "2020-01-01T00:00:00.000Z").await;
    let recent = thread_with_turn_at(&*store, raw, "other", "2026-03-01T10:00:00.000Z").await;
    let idle = store
        .create_thread(thread_of("third", "no turn"))
        .await
        .unwrap();
    let deleted = thread_with_turn_at(&*store, raw, "other", "2026-03-01T11:00:00.000Z").await;
    store.delete_thread(&deleted.id).await.unwrap();

    let at = |t: &str| t.parse::<Timestamp>().unwrap();
    // Every live thread of every client, created first first.
    assert_eq!(
        store.threads_active_since(None).await.unwrap(),
        vec![old.clone(), recent.clone(), idle]
    );
    // A turn begun at the bound counts; a thread without a turn since does not.
    for since in ["2026-03-01T10:00:00Z", "2021-01-01T00:00:00+02:00"] {
        assert_eq!(
            store.threads_active_since(Some(at(since))).await.unwrap(),
            vec![recent.clone()],
            "{since}"
        );
    }
    assert_eq!(
        store
            .threads_active_since(Some(at("2026-03-01T10:00:00.001Z")))
            .await
            .unwrap(),
        vec![]
    );
}

pub async fn a_deleted_thread_is_hidden_but_its_log_stays<S: Store>(
    store: Arc<S>,
    raw: &dyn RawSql,
) {
    let (thread, turn, events) = {
        let kept = store
            .create_thread(thread_of("local", "kept"))
            .await
            .unwrap();
        let (thread, turn) = running_turn(&*store).await;
        store.append(&thread, &turn, delta("hello")).await.unwrap();
        store
            .complete_turn(&thread, &turn, StopReason::Finished, serde_json::json!({}))
            .await
            .unwrap();
        assert_eq!(store.list_threads("local").await.unwrap().len(), 2);

        store.delete_thread(&thread).await.unwrap();

        assert_eq!(store.thread(&thread).await.unwrap(), None);
        assert_eq!(store.list_threads("local").await.unwrap(), vec![kept]);
        let events = store.turn_events(&turn).await.unwrap();
        assert_eq!(events.len(), 2, "the log of a deleted thread stays");
        (thread, turn, events)
    };

    // Still hidden, still kept, after a restart.
    assert_eq!(store.thread(&thread).await.unwrap(), None);
    assert_eq!(store.list_threads("local").await.unwrap().len(), 1);
    assert_eq!(store.turn_events(&turn).await.unwrap(), events);
    assert_eq!(
        store.thread_events(&thread, 0, 10).await.unwrap(),
        events,
        "events stay readable for audit"
    );
    let record = store.turn(&turn).await.unwrap().expect("the turn is kept");
    assert_eq!(record.status, TurnStatus::Ended(StopReason::Finished));

    let begun = store
        .begin_turn(&thread, &TurnId::new(), "again", false)
        .await;
    assert!(matches!(begun, Err(StoreError::NotFound(_))), "{begun:?}");
    let summary = store.set_summary(&thread, "s").await;
    assert!(
        matches!(summary, Err(StoreError::NotFound(_))),
        "{summary:?}"
    );
    let twice = store.delete_thread(&thread).await;
    assert!(matches!(twice, Err(StoreError::NotFound(_))), "{twice:?}");
    let unknown = store.delete_thread(&ThreadId::new()).await;
    assert!(
        matches!(unknown, Err(StoreError::NotFound(_))),
        "{unknown:?}"
    );
    // Its id stays taken: a new thread cannot take over the old log.
    let reused = store
        .create_thread(NewThread {
            id: thread.clone(),
            ..new_thread()
        })
        .await;
    assert!(matches!(reused, Err(StoreError::Conflict(_))), "{reused:?}");

    // The database itself refuses to bring it back.
    let undeleted = raw
        .execute(&format!(
            "UPDATE threads SET deleted_at = NULL WHERE id = '{thread}'"
        ))
        .await;
    assert!(undeleted.is_err(), "{undeleted:?}");
    assert_eq!(store.thread(&thread).await.unwrap(), None);
}

pub async fn deleting_a_thread_with_a_running_turn_is_a_conflict<S: Store>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    let (thread, turn) = running_turn(&*store).await;

    let refused = store.delete_thread(&thread).await;
    match &refused {
        Err(StoreError::Conflict(message)) => {
            assert!(message.contains("running turn"), "{message}");
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert!(store.thread(&thread).await.unwrap().is_some());
    assert_eq!(store.list_threads("local").await.unwrap().len(), 1);
    // The turn goes on undisturbed.
    store
        .append(&thread, &turn, delta("still here"))
        .await
        .unwrap();

    store
        .complete_turn(
            &thread,
            &turn,
            StopReason::Cancelled,
            serde_json::Value::Null,
        )
        .await
        .unwrap();
    store.delete_thread(&thread).await.unwrap();
    assert_eq!(store.list_threads("local").await.unwrap(), vec![]);
}

pub async fn writes_to_a_thread_deleted_behind_the_stores_back_are_not_found<S: Store>(
    store: Arc<S>,
    raw: &dyn RawSql,
) {
    let (thread, turn) = running_turn(&*store).await;
    raw.execute(&format!(
        "UPDATE threads SET deleted_at = '2026-01-01T00:00:00.000Z' WHERE id = '{thread}'"
    ))
    .await
    .unwrap();

    let appended = store.append(&thread, &turn, delta("x")).await;
    assert!(
        matches!(&appended, Err(StoreError::NotFound(m)) if m.contains(thread.as_str())),
        "{appended:?}"
    );
    let completed = store
        .complete_turn(
            &thread,
            &turn,
            StopReason::Finished,
            serde_json::Value::Null,
        )
        .await;
    assert!(
        matches!(completed, Err(StoreError::NotFound(_))),
        "{completed:?}"
    );
    let asked = store
        .create_permission(crate::fixtures::new_permission(&thread, &turn))
        .await;
    assert!(matches!(asked, Err(StoreError::NotFound(_))), "{asked:?}");
    assert!(store.turn_events(&turn).await.unwrap().is_empty());

    // A restart still ends the turn it left running, deleted thread or not.
    assert_eq!(store.interrupt_running_turns().await.unwrap(), vec![turn]);
}

pub async fn the_summary_round_trips_and_is_replaced<S: Store>(store: Arc<S>, _raw: &dyn RawSql) {
    let thread = {
        let created = store.create_thread(new_thread()).await.unwrap();
        assert_eq!(created.summary, None);
        assert_eq!(
            store.thread(&created.id).await.unwrap().unwrap().summary,
            None
        );

        store.set_summary(&created.id, "first draft").await.unwrap();
        let hostile = "'); UPDATE threads SET deleted_at = 'x'; --\n\0 nul, 🚀, \u{202e}";
        store.set_summary(&created.id, hostile).await.unwrap();
        let read = store.thread(&created.id).await.unwrap().unwrap();
        assert_eq!(read.summary.as_deref(), Some(hostile));
        assert_eq!(
            store.list_threads("local").await.unwrap()[0]
                .summary
                .as_deref(),
            Some(hostile)
        );
        created.id
    };
    let long = "summary ".repeat(100_000);
    store.set_summary(&thread, &long).await.unwrap();
    assert_eq!(
        store.thread(&thread).await.unwrap().unwrap().summary,
        Some(long)
    );
    store.set_summary(&thread, "").await.unwrap();
    assert_eq!(
        store
            .thread(&thread)
            .await
            .unwrap()
            .unwrap()
            .summary
            .as_deref(),
        Some("")
    );

    let unknown = store.set_summary(&ThreadId::new(), "s").await;
    assert!(
        matches!(unknown, Err(StoreError::NotFound(_))),
        "{unknown:?}"
    );
}
