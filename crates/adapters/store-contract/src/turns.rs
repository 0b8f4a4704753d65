//! Threads and turns: creation, the one-running-turn rule, atomic completion, and the
//! recovery of turns a previous process left running.

use std::sync::Arc;

use agentplane_core::{EventPayload, StopReason, ThreadId, TurnId};
use agentplane_engine::ports::{NewThread, StoreError, TurnStatus};

use crate::fixtures::{RawSql, Store, delta, new_thread, running_turn, sabotage, unsabotage};

pub async fn a_thread_is_created_and_read_back_with_hostile_fields<S: Store>(
    store: Arc<S>,
    raw: &dyn RawSql,
) {
    let wanted = NewThread {
        agent_version: None,
        id: ThreadId::new(),
        client_id: "client'); DROP TABLE threads; --".into(),
        agent: "agent \"quoted\" \\ back\\slash".into(),
        cwd: "/home/ünïcødé/プロジェクト/\u{202e}txt.exe".into(),
        title: Some("emoji 🚀, nul \0 inside, tab\tand newline\n".into()),
    };
    let created = store.create_thread(wanted.clone()).await.unwrap();
    assert_eq!(created.id, wanted.id);
    assert_eq!(created.client_id, wanted.client_id);
    assert_eq!(created.cwd, wanted.cwd);
    assert_eq!(created.title, wanted.title);
    assert_eq!(created.created_at.len(), "2026-01-02T03:04:05.678Z".len());
    assert!(created.created_at.ends_with('Z'));

    assert_eq!(store.thread(&wanted.id).await.unwrap(), Some(created));
    assert_eq!(store.thread(&ThreadId::new()).await.unwrap(), None);

    let again = store.create_thread(wanted.clone()).await;
    assert!(
        matches!(&again, Err(StoreError::Conflict(m)) if m.contains("already exists")),
        "{again:?}"
    );
    let count = raw.query_i64("SELECT count(*) FROM threads").await.unwrap();
    assert_eq!(count, 1);
}

pub async fn a_turn_begins_and_reads_back<S: Store>(store: Arc<S>, _raw: &dyn RawSql) {
    let thread = store.create_thread(new_thread()).await.unwrap().id;
    let turn = TurnId::new();
    let input = "fix the bug in 'main.rs' — \"now\" 🐛";
    let record = store
        .begin_turn(&thread, &turn, input, false)
        .await
        .unwrap();
    assert_eq!(record.id, turn);
    assert_eq!(record.thread_id, thread);
    assert_eq!(record.input, input);
    assert_eq!(record.status, TurnStatus::Running);
    assert_eq!(record.ended_at, None);
    assert!(!record.internal);
    assert_eq!(record.result, None);
    assert_eq!(store.turn(&turn).await.unwrap(), Some(record.clone()));
    assert_eq!(store.turn(&TurnId::new()).await.unwrap(), None);
    assert_eq!(store.list_turns(&thread).await.unwrap(), vec![record]);
    assert_eq!(store.list_turns(&ThreadId::new()).await.unwrap(), vec![]);
}

pub async fn begin_turn_on_an_unknown_thread_is_not_found<S: Store>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    let result = store
        .begin_turn(&ThreadId::new(), &TurnId::new(), "hi", false)
        .await;
    assert!(matches!(result, Err(StoreError::NotFound(_))), "{result:?}");
}

pub async fn a_second_running_turn_is_a_conflict_until_the_first_ends<S: Store>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    let (thread, first) = running_turn(&*store).await;

    let second = TurnId::new();
    let result = store.begin_turn(&thread, &second, "again", false).await;
    match &result {
        Err(StoreError::Conflict(message)) => {
            assert!(message.contains("already has a running turn"), "{message}");
            assert!(message.contains(thread.as_str()), "{message}");
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(store.turn(&second).await.unwrap(), None);

    // Another thread is not blocked by this one.
    running_turn(&*store).await;

    store
        .complete_turn(&thread, &first, StopReason::Finished, serde_json::json!({}))
        .await
        .unwrap();
    store
        .begin_turn(&thread, &second, "again", false)
        .await
        .unwrap();
    let ids: Vec<TurnId> = store
        .list_turns(&thread)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(ids, vec![first.clone(), second]);

    // Reusing a turn id is refused too.
    let result = store.begin_turn(&thread, &first, "reuse", false).await;
    assert!(matches!(result, Err(StoreError::Conflict(_))), "{result:?}");
}

pub async fn the_database_itself_refuses_a_second_running_turn<S: Store>(
    store: Arc<S>,
    raw: &dyn RawSql,
) {
    let (thread, _) = running_turn(&*store).await;
    let inserted = raw
        .execute(&format!(
            "INSERT INTO turns (id, thread_id, input, status, created_at)
             VALUES ('{}', '{thread}', 'x', 'running', '2026-01-01T00:00:00.000Z')",
            TurnId::new()
        ))
        .await;
    assert!(inserted.is_err(), "the partial unique index must refuse it");
}

pub async fn complete_turn_records_the_event_and_the_end_together<S: Store>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    let (thread, turn) = running_turn(&*store).await;
    store.append(&thread, &turn, delta("hello")).await.unwrap();
    let result = serde_json::json!({"summary": "done", "files": ["a.rs"]});
    let event = store
        .complete_turn(&thread, &turn, StopReason::Finished, result.clone())
        .await
        .unwrap();
    assert_eq!(event.seq, 2);
    assert_eq!(
        event.payload,
        EventPayload::TurnCompleted {
            stop_reason: StopReason::Finished,
            result: result.clone()
        }
    );
    let record = store.turn(&turn).await.unwrap().unwrap();
    assert_eq!(record.status, TurnStatus::Ended(StopReason::Finished));
    assert_eq!(record.ended_at.as_deref(), Some(event.ts.as_str()));
    assert_eq!(record.result, Some(result));
    assert_eq!(store.turn_events(&turn).await.unwrap().last(), Some(&event));
}

pub async fn every_stop_reason_reads_back_as_the_turns_status<S: Store>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    for reason in [
        StopReason::Finished,
        StopReason::TextAnswer,
        StopReason::StepLimit,
        StopReason::Cancelled,
        StopReason::Error,
        StopReason::Interrupted,
    ] {
        let (thread, turn) = running_turn(&*store).await;
        store
            .complete_turn(&thread, &turn, reason, serde_json::Value::Null)
            .await
            .unwrap();
        let status = store.turn(&turn).await.unwrap().unwrap().status;
        assert_eq!(status, TurnStatus::Ended(reason));
    }
}

pub async fn writes_to_an_ended_or_unknown_turn_are_refused<S: Store>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    let (thread, turn) = running_turn(&*store).await;
    store
        .complete_turn(
            &thread,
            &turn,
            StopReason::Cancelled,
            serde_json::Value::Null,
        )
        .await
        .unwrap();

    let late = store.append(&thread, &turn, delta("late")).await;
    assert!(
        matches!(&late, Err(StoreError::Conflict(m)) if m.contains("already ended")),
        "{late:?}"
    );
    let twice = store
        .complete_turn(
            &thread,
            &turn,
            StopReason::Finished,
            serde_json::Value::Null,
        )
        .await;
    assert!(matches!(twice, Err(StoreError::Conflict(_))), "{twice:?}");

    let unknown = store.append(&thread, &TurnId::new(), delta("x")).await;
    assert!(
        matches!(unknown, Err(StoreError::NotFound(_))),
        "{unknown:?}"
    );

    // A running turn addressed through the wrong thread is not found there.
    let (_, other_turn) = running_turn(&*store).await;
    let crossed = store.append(&thread, &other_turn, delta("x")).await;
    assert!(
        matches!(crossed, Err(StoreError::NotFound(_))),
        "{crossed:?}"
    );

    // Nothing of the refused writes reached the log.
    let events = store.thread_events(&thread, 0, 100).await.unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(
        store.turn(&turn).await.unwrap().unwrap().status,
        TurnStatus::Ended(StopReason::Cancelled)
    );
}

pub async fn turn_completed_cannot_be_smuggled_through_append<S: Store>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    let (thread, turn) = running_turn(&*store).await;
    let payload = EventPayload::TurnCompleted {
        stop_reason: StopReason::Finished,
        result: serde_json::Value::Null,
    };
    let result = store.append(&thread, &turn, payload).await;
    assert!(matches!(result, Err(StoreError::Conflict(_))), "{result:?}");
    assert_eq!(
        store.turn(&turn).await.unwrap().unwrap().status,
        TurnStatus::Running
    );
    assert!(store.turn_events(&turn).await.unwrap().is_empty());
}

pub async fn a_failed_completion_leaves_neither_the_event_nor_the_end<S: Store>(
    store: Arc<S>,
    raw: &dyn RawSql,
) {
    let (thread, turn) = running_turn(&*store).await;
    store.append(&thread, &turn, delta("one")).await.unwrap();
    // The end cannot be recorded: the event written just before must vanish with it.
    sabotage(
        raw,
        "BEFORE UPDATE OF status ON turns",
        None,
        "sabotaged end",
    )
    .await;
    let failed = store
        .complete_turn(
            &thread,
            &turn,
            StopReason::Finished,
            serde_json::Value::Null,
        )
        .await;
    assert!(
        matches!(&failed, Err(StoreError::Backend(m)) if m.contains("sabotaged end")),
        "{failed:?}"
    );
    assert_eq!(
        store.turn(&turn).await.unwrap().unwrap().status,
        TurnStatus::Running
    );
    assert_eq!(store.turn_events(&turn).await.unwrap().len(), 1);
    unsabotage(raw, "turns").await;

    // The event cannot be written: the turn must not look ended.
    sabotage(
        raw,
        "BEFORE INSERT ON events",
        Some("NEW.kind = 'turn_completed'"),
        "sabotaged event",
    )
    .await;
    let failed = store
        .complete_turn(
            &thread,
            &turn,
            StopReason::Finished,
            serde_json::Value::Null,
        )
        .await;
    assert!(matches!(failed, Err(StoreError::Backend(_))), "{failed:?}");
    let record = store.turn(&turn).await.unwrap().unwrap();
    assert_eq!(record.status, TurnStatus::Running);
    assert_eq!(record.ended_at, None);
    assert_eq!(record.result, None);
    unsabotage(raw, "events").await;

    // The failed attempts gave their seqs back: the log stays gapless.
    let next = store.append(&thread, &turn, delta("two")).await.unwrap();
    assert_eq!(next.seq, 2);
    let done = store
        .complete_turn(
            &thread,
            &turn,
            StopReason::Finished,
            serde_json::Value::Null,
        )
        .await
        .unwrap();
    assert_eq!(done.seq, 3);
}

pub async fn turns_left_running_are_interrupted_after_a_reopen<S: Store>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    let (left_a, left_b, finished) = {
        let a = running_turn(&*store).await;
        store.append(&a.0, &a.1, delta("working")).await.unwrap();
        let b = running_turn(&*store).await;
        let done = running_turn(&*store).await;
        store
            .complete_turn(
                &done.0,
                &done.1,
                StopReason::Finished,
                serde_json::Value::Null,
            )
            .await
            .unwrap();
        (a, b, done)
    };
    let interrupted = store.interrupt_running_turns().await.unwrap();
    assert_eq!(interrupted, vec![left_a.1.clone(), left_b.1.clone()]);

    for ((thread, turn), expected_seq) in [(&left_a, 2), (&left_b, 1)] {
        let record = store.turn(turn).await.unwrap().unwrap();
        assert_eq!(record.status, TurnStatus::Ended(StopReason::Interrupted));
        let events = store.turn_events(turn).await.unwrap();
        let last = events.last().expect("a turn_completed event");
        assert_eq!(last.seq, expected_seq);
        assert_eq!(&last.thread_id, thread);
        assert_eq!(
            last.payload,
            EventPayload::TurnCompleted {
                stop_reason: StopReason::Interrupted,
                result: serde_json::Value::Null
            }
        );
        assert_eq!(record.ended_at.as_deref(), Some(last.ts.as_str()));
        assert_eq!(record.result, Some(serde_json::Value::Null));
        // The thread can run again.
        store
            .begin_turn(thread, &TurnId::new(), "resume", false)
            .await
            .unwrap();
    }
    let untouched = store.turn(&finished.1).await.unwrap().unwrap();
    assert_eq!(untouched.status, TurnStatus::Ended(StopReason::Finished));
    assert_eq!(store.turn_events(&finished.1).await.unwrap().len(), 1);

    // Only the turns begun since are running now; a second call ends just those.
    let again = store.interrupt_running_turns().await.unwrap();
    assert_eq!(again.len(), 2);
    assert_eq!(store.interrupt_running_turns().await.unwrap(), vec![]);
}

pub async fn the_internal_flag_and_the_result_round_trip<S: Store>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    let results = [
        serde_json::json!({"summary": "done", "nested": {"list": [1, "two", null]}}),
        serde_json::json!("a text answer with 'quotes' and \"more\" 🚀"),
        serde_json::Value::Null,
        serde_json::json!(-1.5),
    ];
    let (thread, turns) = {
        let thread = store.create_thread(new_thread()).await.unwrap().id;
        let mut turns = Vec::new();
        for (i, result) in results.iter().enumerate() {
            let turn = TurnId::new();
            let internal = i % 2 == 1;
            let begun = store
                .begin_turn(&thread, &turn, "compact", internal)
                .await
                .unwrap();
            assert_eq!(begun.internal, internal);
            store
                .complete_turn(&thread, &turn, StopReason::Finished, result.clone())
                .await
                .unwrap();
            turns.push(turn);
        }
        let running = TurnId::new();
        store
            .begin_turn(&thread, &running, "still going", true)
            .await
            .unwrap();
        turns.push(running);
        (thread, turns)
    };
    let listed = store.list_turns(&thread).await.unwrap();
    let ids: Vec<TurnId> = listed.iter().map(|t| t.id.clone()).collect();
    assert_eq!(ids, turns, "internal turns are listed too, in order");
    let flags: Vec<bool> = listed.iter().map(|t| t.internal).collect();
    assert_eq!(flags, [false, true, false, true, true]);
    let stored: Vec<Option<serde_json::Value>> = listed.iter().map(|t| t.result.clone()).collect();
    let mut expected: Vec<Option<serde_json::Value>> = results.iter().cloned().map(Some).collect();
    expected.push(None);
    assert_eq!(stored, expected);
    for record in listed {
        assert_eq!(store.turn(&record.id).await.unwrap(), Some(record));
    }
}

fn started(input: &str) -> EventPayload {
    EventPayload::TurnStarted {
        agent: "chat".into(),
        input: input.into(),
        model: "m".into(),
        workspace: "/w".into(),
        agent_version: None,
        shadow_of: None,
    }
}

pub async fn start_turn_stores_the_turn_and_its_start_together_or_neither<S: Store>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    let thread = store.create_thread(new_thread()).await.unwrap().id;
    let first = TurnId::new();
    let (record, event) = store
        .start_turn(&thread, &first, "hello", false, started("hello"))
        .await
        .expect("start");
    assert_eq!(
        (record.id.clone(), record.status),
        (first.clone(), TurnStatus::Running)
    );
    assert_eq!((event.seq, event.turn_id.clone()), (1, first.clone()));
    assert!(matches!(event.payload, EventPayload::TurnStarted { .. }));

    // A second start while the first runs: refused, and nothing of it is stored.
    let second = TurnId::new();
    let refused = store
        .start_turn(&thread, &second, "again", false, started("again"))
        .await
        .expect_err("a running turn");
    assert!(matches!(refused, StoreError::Conflict(_)), "{refused:?}");
    assert!(store.turn(&second).await.unwrap().is_none());
    let events = store.thread_events(&thread, 0, 100).await.unwrap();
    assert_eq!(events.len(), 1, "{events:?}");

    // A start on no thread stores nothing either.
    let ghost = ThreadId::new();
    let missing = store
        .start_turn(&ghost, &TurnId::new(), "x", false, started("x"))
        .await
        .expect_err("no thread");
    assert!(matches!(missing, StoreError::NotFound(_)), "{missing:?}");

    // After the first ends, a new start continues the thread's seqs.
    store
        .complete_turn(
            &thread,
            &first,
            StopReason::TextAnswer,
            serde_json::json!("ok"),
        )
        .await
        .unwrap();
    let (_, event) = store
        .start_turn(&thread, &second, "again", false, started("again"))
        .await
        .expect("start after the end");
    assert_eq!(event.seq, 3);
}

/// One step's events are one write: stored in order with gapless seqs and their audit
/// chain, or none of them; a turn's last events and its end the same.
pub async fn a_steps_events_are_stored_together_or_not_at_all<S: Store>(
    store: Arc<S>,
    raw: &dyn RawSql,
) {
    let (thread, turn) = running_turn(&*store).await;
    let events = store
        .append_all(
            &thread,
            &turn,
            vec![delta("a"), delta("b\u{0}\"'"), delta("c")],
        )
        .await
        .unwrap();
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [1, 2, 3]);
    assert_eq!(store.turn_events(&turn).await.unwrap(), events);

    // turn_completed cannot hide among them, and nothing of the refused write stays.
    let smuggled = store
        .append_all(
            &thread,
            &turn,
            vec![
                delta("d"),
                EventPayload::TurnCompleted {
                    stop_reason: StopReason::Finished,
                    result: serde_json::Value::Null,
                },
            ],
        )
        .await;
    assert!(
        matches!(smuggled, Err(StoreError::Conflict(_))),
        "{smuggled:?}"
    );
    assert_eq!(store.turn_events(&turn).await.unwrap().len(), 3);

    // The third of three cannot be written: the first two vanish with it.
    sabotage(
        raw,
        "BEFORE INSERT ON events",
        Some("CAST(NEW.payload AS TEXT) LIKE '%third%'"),
        "sabotaged step",
    )
    .await;
    let failed = store
        .append_all(
            &thread,
            &turn,
            vec![delta("first"), delta("second"), delta("third")],
        )
        .await;
    assert!(
        matches!(&failed, Err(StoreError::Backend(m)) if m.contains("sabotaged step")),
        "{failed:?}"
    );
    let failed = store
        .complete_turn_after(
            &thread,
            &turn,
            vec![delta("third")],
            StopReason::Finished,
            serde_json::Value::Null,
        )
        .await;
    assert!(matches!(failed, Err(StoreError::Backend(_))), "{failed:?}");
    assert_eq!(store.turn_events(&turn).await.unwrap().len(), 3);
    assert_eq!(
        store.turn(&turn).await.unwrap().unwrap().status,
        TurnStatus::Running
    );
    unsabotage(raw, "events").await;

    let (last, end) = store
        .complete_turn_after(
            &thread,
            &turn,
            vec![delta("last"), delta("words")],
            StopReason::TextAnswer,
            serde_json::json!("ok"),
        )
        .await
        .unwrap();
    assert_eq!(last.iter().map(|e| e.seq).collect::<Vec<_>>(), [4, 5]);
    assert_eq!(end.seq, 6);
    let record = store.turn(&turn).await.unwrap().unwrap();
    assert_eq!(record.status, TurnStatus::Ended(StopReason::TextAnswer));
    assert_eq!(store.turn_events(&turn).await.unwrap().len(), 6);

    // The ended turn takes no more, in either form.
    let late = store.append_all(&thread, &turn, vec![delta("late")]).await;
    assert!(matches!(late, Err(StoreError::Conflict(_))), "{late:?}");
    let late = store
        .complete_turn_after(
            &thread,
            &turn,
            vec![],
            StopReason::Finished,
            serde_json::Value::Null,
        )
        .await;
    assert!(matches!(late, Err(StoreError::Conflict(_))), "{late:?}");
    let report = agentplane_engine::services::reports::verify_chains(&*store, None)
        .await
        .unwrap();
    assert_eq!(
        report.broken, None,
        "the refused writes left the chain whole"
    );
}

/// A new turn's context reads only the last answered turns: internal turns, turns that
/// failed, were cancelled or still run, and other threads' turns are never among them,
/// and the newest are kept when there are more than asked for.
pub async fn the_last_answered_turns_are_read_in_order<S: Store>(store: Arc<S>, _raw: &dyn RawSql) {
    let thread = store.create_thread(new_thread()).await.unwrap().id;
    let other = store.create_thread(new_thread()).await.unwrap().id;
    let ends = [
        (false, StopReason::Finished),
        (false, StopReason::Error),
        (true, StopReason::Finished),
        (false, StopReason::TextAnswer),
        (false, StopReason::Cancelled),
        (false, StopReason::Finished),
        (false, StopReason::StepLimit),
        (false, StopReason::TextAnswer),
    ];
    let mut answered = Vec::new();
    for (i, (internal, stop)) in ends.into_iter().enumerate() {
        for (on, counted) in [(&other, false), (&thread, true)] {
            let turn = TurnId::new();
            store
                .begin_turn(on, &turn, &format!("input {i} '\"; --"), internal)
                .await
                .unwrap();
            store
                .complete_turn(
                    on,
                    &turn,
                    stop,
                    serde_json::json!({"text": format!("answer {i}")}),
                )
                .await
                .unwrap();
            if counted && !internal && stop.is_success() {
                answered.push(turn);
            }
        }
    }
    let running = TurnId::new();
    store
        .begin_turn(&thread, &running, "still going", false)
        .await
        .unwrap();
    let ids = |turns: Vec<agentplane_engine::ports::TurnRecord>| -> Vec<TurnId> {
        turns.into_iter().map(|t| t.id).collect()
    };
    assert_eq!(answered.len(), 4);
    assert_eq!(
        ids(store.answered_turns(&thread, 100).await.unwrap()),
        answered
    );
    assert_eq!(
        ids(store.answered_turns(&thread, 2).await.unwrap()),
        answered[2..]
    );
    assert!(store.answered_turns(&thread, 0).await.unwrap().is_empty());
    assert!(
        store
            .answered_turns(&ThreadId::new(), 8)
            .await
            .unwrap()
            .is_empty()
    );
    let last = store.answered_turns(&thread, 1).await.unwrap();
    assert_eq!(last[0].input, "input 7 '\"; --");
    assert_eq!(
        last[0].result,
        Some(serde_json::json!({"text": "answer 7"}))
    );
    assert_eq!(
        store
            .answered_turns(&thread, usize::MAX)
            .await
            .unwrap()
            .len(),
        4
    );
}
