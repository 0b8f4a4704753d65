//! The event log: gapless seqs under concurrency, durability across reopen, exact
//! round trips of hostile payloads, and damaged rows reported rather than hidden.

use std::sync::Arc;

use agentplane_core::{ErrorCode, Event, EventPayload, StopReason, ToolErrorKind, ToolStatus};
use agentplane_engine::ports::{StoreError, TurnStatus};

use crate::fixtures::{Dialect, RawSql, Store, delta, running_turn};

pub async fn concurrent_appends_get_gapless_seqs_per_thread<S: Store>(
    store: Arc<S>,
    raw: &dyn RawSql,
) {
    const THREADS: usize = 5;
    const TASKS: usize = 50;
    const PER_TASK: usize = 20;
    let mut turns = Vec::new();
    for _ in 0..THREADS {
        turns.push(running_turn(&*store).await);
    }
    // Refused writes are mixed into the same batches; they must not disturb the rest.
    let closed = running_turn(&*store).await;
    store
        .complete_turn(
            &closed.0,
            &closed.1,
            StopReason::Cancelled,
            serde_json::Value::Null,
        )
        .await
        .unwrap();

    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let store = Arc::clone(&store);
        let (thread, turn) = turns[task % THREADS].clone();
        let closed = closed.clone();
        tasks.push(tokio::spawn(async move {
            let mut seqs = Vec::new();
            for i in 0..PER_TASK {
                let event = store
                    .append(&thread, &turn, delta(format!("{task}:{i}")))
                    .await
                    .expect("append");
                seqs.push(event.seq);
                if i % 5 == 0 {
                    let refused = store.append(&closed.0, &closed.1, delta("late")).await;
                    assert!(
                        matches!(refused, Err(StoreError::Conflict(_))),
                        "{refused:?}"
                    );
                }
            }
            (task, seqs)
        }));
    }
    for handle in tasks {
        let (task, seqs) = handle.await.expect("task");
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "task {task}: {seqs:?}"
        );
    }

    let per_thread = TASKS / THREADS * PER_TASK;
    for (thread, turn) in &turns {
        let events = store.thread_events(thread, 0, usize::MAX).await.unwrap();
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=per_thread as u64).collect::<Vec<_>>());
        assert!(
            events
                .iter()
                .all(|e| &e.turn_id == turn && &e.thread_id == thread)
        );
        // Each task's own events are in the order it appended them.
        for task in (0..TASKS).filter(|t| &turns[t % THREADS].0 == thread) {
            let mine: Vec<String> = events
                .iter()
                .filter_map(|e| match &e.payload {
                    EventPayload::MessageDelta { text } => {
                        text.strip_prefix(&format!("{task}:")).map(str::to_owned)
                    }
                    _ => None,
                })
                .collect();
            let expected: Vec<String> = (0..PER_TASK).map(|i| i.to_string()).collect();
            assert_eq!(mine, expected, "task {task}");
        }
        assert_eq!(store.turn_events(turn).await.unwrap(), events);
    }
    assert_eq!(
        store.thread_events(&closed.0, 0, 100).await.unwrap().len(),
        1
    );

    if raw.dialect() == Dialect::Sqlite {
        let check = raw.query_texts("PRAGMA integrity_check").await.unwrap();
        assert_eq!(check, vec!["ok".to_owned()]);
        let fk = raw
            .query_i64("SELECT count(*) FROM pragma_foreign_key_check")
            .await
            .unwrap();
        assert_eq!(fk, 0);
    }
}

pub async fn events_survive_closing_and_reopening<S: Store>(store: Arc<S>, _raw: &dyn RawSql) {
    let (thread, turn, written) = {
        let (thread, turn) = running_turn(&*store).await;
        let mut written = Vec::new();
        for i in 0..10 {
            written.push(
                store
                    .append(&thread, &turn, delta(format!("d{i}")))
                    .await
                    .unwrap(),
            );
        }
        written.push(
            store
                .complete_turn(
                    &thread,
                    &turn,
                    StopReason::TextAnswer,
                    serde_json::json!({"text": "hi"}),
                )
                .await
                .unwrap(),
        );
        (thread, turn, written)
    };
    assert_eq!(
        store.thread_events(&thread, 0, 1000).await.unwrap(),
        written
    );
    assert_eq!(store.turn_events(&turn).await.unwrap(), written);
    let record = store.turn(&turn).await.unwrap().unwrap();
    assert_eq!(record.status, TurnStatus::Ended(StopReason::TextAnswer));

    // The seq counter survived too.
    let next_turn = agentplane_core::TurnId::new();
    store
        .begin_turn(&thread, &next_turn, "more", false)
        .await
        .unwrap();
    let next = store
        .append(&thread, &next_turn, delta("after"))
        .await
        .unwrap();
    assert_eq!(next.seq, 12);
    assert_eq!(
        store.turn_events(&turn).await.unwrap(),
        written,
        "turn_events is per turn"
    );
}

pub async fn thread_events_pages_by_seq<S: Store>(store: Arc<S>, _raw: &dyn RawSql) {
    let (thread, turn) = running_turn(&*store).await;
    for i in 0..7 {
        store
            .append(&thread, &turn, delta(i.to_string()))
            .await
            .unwrap();
    }
    let seqs = |events: Vec<Event>| events.into_iter().map(|e| e.seq).collect::<Vec<_>>();
    assert_eq!(
        seqs(store.thread_events(&thread, 0, 3).await.unwrap()),
        [1, 2, 3]
    );
    assert_eq!(
        seqs(store.thread_events(&thread, 3, 3).await.unwrap()),
        [4, 5, 6]
    );
    assert_eq!(seqs(store.thread_events(&thread, 6, 3).await.unwrap()), [7]);
    assert!(store.thread_events(&thread, 7, 3).await.unwrap().is_empty());
    assert!(store.thread_events(&thread, 0, 0).await.unwrap().is_empty());
    assert!(
        store
            .thread_events(&thread, u64::MAX, usize::MAX)
            .await
            .unwrap()
            .is_empty()
    );
    let unknown = agentplane_core::ThreadId::new();
    assert!(
        store
            .thread_events(&unknown, 0, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn hostile_payloads_round_trip_exactly<S: Store>(store: Arc<S>, raw: &dyn RawSql) {
    // Nine bytes of quotes, a backslash and multi-byte characters, past one MiB.
    let megabyte: String = "ü'\"\\𝄞".repeat(1024 * 1024 / 9 + 1);
    assert!(megabyte.len() > 1024 * 1024);
    let (thread, turn) = {
        let thread = store
            .create_thread(crate::fixtures::new_thread())
            .await
            .unwrap()
            .id;
        let turn = agentplane_core::TurnId::new();
        store
            .begin_turn(&thread, &turn, &megabyte, false)
            .await
            .unwrap();
        (thread, turn)
    };
    assert_eq!(store.turn(&turn).await.unwrap().unwrap().input, megabyte);

    let payloads = vec![
        delta(megabyte.clone()),
        delta("'); DELETE FROM events; --"),
        delta("nul \0 and \u{1b}[31m escape and \u{202e} rtl and \u{feff} bom"),
        delta(""),
        EventPayload::ToolCallPlanned {
            call_id: "c\"1".into(),
            tool: "write_file".into(),
            arguments: serde_json::json!({
                "path": "../../etc/passwd",
                "kind": "not the event kind",
                "nested": {"seq": -1, "list": [1.5, null, true, "🚀"]},
                "": "empty key",
            }),
            args_preview_hash: "00".repeat(32),
            title: Some("edit \u{202e}evil".into()),
            recovered: true,
        },
        EventPayload::ToolCallResult {
            call_id: "c1".into(),
            tool: "shell".into(),
            status: ToolStatus::Error,
            latency_ms: u64::MAX,
            error_type: Some(ToolErrorKind::SandboxViolation),
            output: megabyte.chars().take(1000).collect(),
            truncated: true,
            args_preview_hash: "ab".into(),
        },
        EventPayload::SecurityEvent {
            event_type: "path_escape".into(),
            tool: None,
            detail: "<script>alert(1)</script>".into(),
        },
        EventPayload::Usage {
            provider: "p".into(),
            model: "m".into(),
            input_tokens: u64::MAX,
            output_tokens: 0,
            reported: false,
        },
        EventPayload::Error {
            code: ErrorCode::UpstreamUnavailable,
            message: "{\"not\": \"json\"".into(),
        },
        EventPayload::TurnStarted {
            agent: "a".into(),
            input: "i".into(),
            model: "m".into(),
            workspace: "/ws".into(),
            agent_version: None,
            shadow_of: None,
        },
    ];
    let mut written = Vec::new();
    for payload in payloads {
        let event = store.append(&thread, &turn, payload.clone()).await.unwrap();
        assert_eq!(event.payload, payload);
        written.push(event);
    }
    assert_eq!(store.turn_events(&turn).await.unwrap(), written);

    // The kind column agrees with the payload.
    let kinds = raw
        .query_texts(&format!(
            "SELECT kind FROM events WHERE thread_id = '{thread}' ORDER BY seq"
        ))
        .await
        .unwrap();
    let expected: Vec<&str> = written.iter().map(|e| e.payload.kind()).collect();
    assert_eq!(kinds, expected);
}

pub async fn a_damaged_row_is_an_error_naming_it<S: Store>(store: Arc<S>, raw: &dyn RawSql) {
    let (thread, turn) = running_turn(&*store).await;
    store.append(&thread, &turn, delta("fine")).await.unwrap();
    raw.execute(&format!(
        "INSERT INTO events (thread_id, seq, turn_id, kind, ts, payload)
         VALUES ('{thread}', 2, '{turn}', 'message_delta', '2026-01-01T00:00:00.000Z',
                 '{{\"kind\":\"nope\"')"
    ))
    .await
    .unwrap();
    for result in [
        store.thread_events(&thread, 0, 10).await,
        store.turn_events(&turn).await,
    ] {
        match result {
            Err(StoreError::Backend(message)) => {
                assert!(message.contains("event 2"), "{message}");
                assert!(message.contains(thread.as_str()), "{message}");
            }
            other => panic!("expected a Backend error, got {other:?}"),
        }
    }
    // Reads before the damage still work.
    assert_eq!(store.thread_events(&thread, 0, 1).await.unwrap().len(), 1);
}

pub async fn the_log_refuses_updates_and_deletes<S: Store>(store: Arc<S>, raw: &dyn RawSql) {
    let (thread, turn) = running_turn(&*store).await;
    let event = store
        .append(&thread, &turn, delta("keep me"))
        .await
        .unwrap();
    assert!(
        raw.execute("UPDATE events SET payload = '{}'")
            .await
            .is_err()
    );
    assert!(raw.execute("DELETE FROM events").await.is_err());
    assert_eq!(store.turn_events(&turn).await.unwrap(), vec![event]);
}
