//! The audit chain (ADR 0048): every appended event carries the link to the previous
//! event of its thread, under concurrency too; an edit behind the store's back is found
//! and named; events from before the chain are reported as such, not as broken.

use std::sync::Arc;

use agentplane_core::StopReason;
use agentplane_core::audit::BreakReason;
use agentplane_engine::services::reports::verify_chains;

use crate::fixtures::{Dialect, RawSql, Store, delta, new_thread, running_turn};

pub async fn the_chain_holds_under_concurrent_appends_to_many_threads<S: Store>(
    store: Arc<S>,
    _raw: &dyn RawSql,
) {
    const THREADS: usize = 6;
    const TASKS: usize = 24;
    const PER_TASK: usize = 10;
    let mut turns = Vec::new();
    for _ in 0..THREADS {
        turns.push(running_turn(&*store).await);
    }
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let store = Arc::clone(&store);
        let (thread, turn) = turns[task % THREADS].clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..PER_TASK {
                store
                    .append(&thread, &turn, delta(format!("{task}:{i}")))
                    .await
                    .expect("append");
            }
        }));
    }
    for task in tasks {
        task.await.expect("task");
    }
    for (thread, turn) in &turns {
        store
            .complete_turn(thread, turn, StopReason::Finished, serde_json::json!("ok"))
            .await
            .expect("complete");
    }
    let report = verify_chains(&*store, None).await.expect("verify");
    assert_eq!(report.broken, None);
    assert_eq!(report.intact.len(), THREADS);
    let per_thread = (TASKS / THREADS * PER_TASK + 1) as u64;
    for summary in &report.intact {
        assert_eq!(
            (summary.unchained, summary.chained, summary.first_chained),
            (0, per_thread, Some(1))
        );
        let thread = agentplane_core::ThreadId::parse(&summary.thread_id).expect("id");
        let head = store.chain_head(&thread).await.expect("head").expect("one");
        assert_eq!(Some((head.seq, head.hash)), summary.head.clone());
    }
}

pub async fn an_edited_event_is_named_by_verify<S: Store>(store: Arc<S>, raw: &dyn RawSql) {
    let (thread, turn) = running_turn(&*store).await;
    for text in ["one", "two", "three"] {
        store.append(&thread, &turn, delta(text)).await.unwrap();
    }
    let (other, other_turn) = running_turn(&*store).await;
    store
        .append(&other, &other_turn, delta("fine"))
        .await
        .unwrap();
    assert_eq!(verify_chains(&*store, None).await.unwrap().broken, None);

    // What an operator with the database's password could do: lift the append-only
    // guard and rewrite one payload.
    let unguard = match raw.dialect() {
        Dialect::Sqlite => "DROP TRIGGER events_never_update",
        Dialect::Postgres => "ALTER TABLE events DISABLE TRIGGER events_append_only",
    };
    raw.batch(unguard).await.expect("lift the guard");
    let changed = raw
        .execute(&format!(
            "UPDATE events SET payload = '{{\"kind\":\"message_delta\",\"text\":\"TWO\"}}'
             WHERE thread_id = '{thread}' AND seq = 2"
        ))
        .await
        .expect("edit");
    assert_eq!(changed, 1);

    let report = verify_chains(&*store, None).await.unwrap();
    let broken = report.broken.expect("the edit is found");
    assert_eq!(
        (broken.thread_id.as_str(), broken.seq),
        (thread.as_str(), 2)
    );
    assert!(
        matches!(broken.reason, BreakReason::HashMismatch { .. }),
        "{broken:?}"
    );
    // The other thread's chain, checked alone, still holds.
    let alone = verify_chains(&*store, Some(&other)).await.unwrap();
    assert_eq!((alone.broken, alone.intact.len()), (None, 1));

    // Removing the hash does not hide the edit either.
    raw.execute(&format!(
        "UPDATE events SET hash = NULL WHERE thread_id = '{thread}' AND seq = 2"
    ))
    .await
    .expect("strip");
    let broken = verify_chains(&*store, Some(&thread))
        .await
        .unwrap()
        .broken
        .expect("still found");
    assert_eq!((broken.seq, broken.reason), (2, BreakReason::MissingHash));
}

pub async fn events_claimed_before_the_chain_are_counted_and_the_claim_named<S: Store>(
    store: Arc<S>,
    raw: &dyn RawSql,
) {
    // A thread as a migration leaves it: two events without a hash, the chain starting
    // at the next seq.
    let thread = store.create_thread(new_thread()).await.unwrap().id;
    let turn = agentplane_core::TurnId::new();
    store
        .begin_turn(&thread, &turn, "old", false)
        .await
        .unwrap();
    for seq in 1..=2 {
        raw.execute(&format!(
            "INSERT INTO events (thread_id, seq, turn_id, kind, ts, payload)
             VALUES ('{thread}', {seq}, '{turn}', 'message_delta', '2026-01-01T00:00:00.000Z',
                     '{{\"kind\":\"message_delta\",\"text\":\"old\"}}')"
        ))
        .await
        .expect("an old event");
    }
    raw.execute(&format!(
        "UPDATE threads SET next_seq = 3, chained_since = 3 WHERE id = '{thread}'"
    ))
    .await
    .expect("the migration's mark");
    let appended = store.append(&thread, &turn, delta("new")).await.unwrap();
    assert_eq!(appended.seq, 3);

    let report = verify_chains(&*store, Some(&thread)).await.unwrap();
    assert_eq!(report.broken, None);
    let summary = &report.intact[0];
    assert_eq!(
        (summary.unchained, summary.chained, summary.first_chained),
        (2, 1, Some(3))
    );
    let head = store.chain_head(&thread).await.unwrap().expect("head");
    assert_eq!(head.seq, 3);
    let threads = store.audited_threads(Some(&thread)).await.unwrap();
    assert_eq!((threads[0].chained_since, threads[0].events), (3, 3));
    // But this store was created chained: its genesis puts no thread before the chain,
    // so the claim itself is named — the laundering of edited events as "old".
    let claims: Vec<_> = report
        .mismatches
        .iter()
        .filter(|m| m.subject == format!("thread {thread}"))
        .map(|m| m.against.as_str())
        .collect();
    assert!(
        claims.contains(&"the genesis (ledger record 1)"),
        "{:#?}",
        report.mismatches
    );
    // A thread without events has no head.
    let empty = store.create_thread(new_thread()).await.unwrap().id;
    assert_eq!(store.chain_head(&empty).await.unwrap(), None);
}
