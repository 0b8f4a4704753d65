//! What only a shared database can show: several `PostgresStore`s (replicas, each with
//! its own pool) on one database keep the ports' invariants between them — gapless seqs
//! and an unbroken audit chain,
//! one running turn per thread, claim-once executions, a dead replica recovered once,
//! every committed event announced to the others — and hostile input fails cleanly.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use agentplane_core::{EventPayload, ExecutionId, ReplicaId, ThreadId, TurnId};
use agentplane_engine::ports::{
    Announcement, ExecutionStore, NewExecution, NewThread, ReplicaStore, StoreError, ThreadStore,
    TurnLog, TurnStatus,
};
use agentplane_postgres::PostgresStore;
use agentplane_store_contract::RawSql;
use common::TestDb;

/// How long "it finishes" may take before the test fails: generous, not a timing check.
const DEADLINE: Duration = Duration::from_secs(30);

fn new_thread() -> NewThread {
    NewThread {
        agent_version: None,
        id: ThreadId::new(),
        client_id: "local".into(),
        agent: "coder".into(),
        cwd: "/tmp/work".into(),
        title: None,
    }
}

fn delta(text: impl Into<String>) -> EventPayload {
    EventPayload::MessageDelta { text: text.into() }
}

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

/// Two replicas on one fresh database.
async fn two() -> Option<(TestDb, Arc<PostgresStore>, Arc<PostgresStore>)> {
    let db = TestDb::create().await?;
    let a = Arc::new(db.store().await);
    let b = Arc::new(db.store().await);
    Some((db, a, b))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn appends_from_two_replicas_get_gapless_seqs() {
    const TASKS: usize = 16;
    const PER_TASK: usize = 25;
    let Some((_db, a, b)) = two().await else {
        return;
    };
    let thread = a.create_thread(new_thread()).await.unwrap().id;
    let turn = TurnId::new();
    a.begin_turn(&thread, &turn, "go", false).await.unwrap();

    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let store = if task % 2 == 0 { &a } else { &b };
        let store = Arc::clone(store);
        let (thread, turn) = (thread.clone(), turn.clone());
        tasks.push(tokio::spawn(async move {
            let mut seqs = Vec::new();
            for i in 0..PER_TASK {
                let event = store
                    .append(&thread, &turn, delta(format!("{task}:{i}")))
                    .await
                    .expect("append");
                seqs.push(event.seq);
            }
            seqs
        }));
    }
    let mut all = BTreeSet::new();
    for task in tasks {
        let seqs = task.await.expect("task");
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
        for seq in seqs {
            assert!(all.insert(seq), "seq {seq} given twice");
        }
    }
    let total = (TASKS * PER_TASK) as u64;
    assert_eq!(all, (1..=total).collect::<BTreeSet<_>>());
    let read = b.thread_events(&thread, 0, usize::MAX).await.unwrap();
    assert_eq!(
        read.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=total).collect::<Vec<_>>()
    );
    // Each append linked to the one committed before it, whichever replica wrote it.
    let report = agentplane_engine::services::reports::verify_chains(&*a, Some(&thread))
        .await
        .unwrap();
    assert_eq!(report.broken, None);
    assert_eq!(report.intact[0].chained, total);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_ledger_is_one_gapless_chain_across_replicas() {
    let Some((_db, a, b)) = two().await else {
        return;
    };
    const THREADS: usize = 24;
    let mut tasks = Vec::new();
    for i in 0..THREADS {
        let store = Arc::clone(if i % 2 == 0 { &a } else { &b });
        tasks.push(tokio::spawn(async move {
            let thread = store.create_thread(new_thread()).await.unwrap().id;
            if i % 4 == 0 {
                store.delete_thread(&thread).await.unwrap();
            }
        }));
    }
    for task in tasks {
        tokio::time::timeout(DEADLINE, task).await.unwrap().unwrap();
    }
    // Whichever replica wrote a record, it linked to the one committed before it, and
    // every thread agrees with its record.
    let report = agentplane_engine::services::reports::verify_chains(&*b, None)
        .await
        .unwrap();
    assert!(report.holds(), "{report:#?}");
    let ledger = report
        .records
        .iter()
        .find(|s| s.thread_id == "audit_ledger")
        .unwrap();
    assert_eq!(ledger.chained, (1 + THREADS + THREADS / 4) as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_turn_per_thread_holds_across_replicas() {
    let Some((_db, a, b)) = two().await else {
        return;
    };
    let thread = a.create_thread(new_thread()).await.unwrap().id;
    let mut tasks = Vec::new();
    for i in 0..20 {
        let store = Arc::clone(if i % 2 == 0 { &a } else { &b });
        let thread = thread.clone();
        tasks.push(tokio::spawn(async move {
            store
                .begin_turn(&thread, &TurnId::new(), "race", false)
                .await
        }));
    }
    let mut began = Vec::new();
    for task in tasks {
        match task.await.expect("task") {
            Ok(turn) => began.push(turn),
            Err(StoreError::Conflict(m)) => assert!(m.contains("running turn"), "{m}"),
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(began.len(), 1, "exactly one turn begins");
    let turns = b.list_turns(&thread).await.unwrap();
    assert_eq!(turns, began);

    // The replica that began it is recorded: exactly one replica's recovery ends it.
    let turn = began[0].id.clone();
    let mut ended = b.interrupt_turns_of(a.replica()).await.unwrap();
    ended.extend(a.interrupt_turns_of(b.replica()).await.unwrap());
    assert_eq!(ended, vec![turn.clone()]);
    assert!(matches!(
        a.turn(&turn).await.unwrap().unwrap().status,
        TurnStatus::Ended(_)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claims_from_two_replicas_never_take_one_execution_twice() {
    const THREADS: usize = 30;
    let Some((_db, a, b)) = two().await else {
        return;
    };
    let mut queued = BTreeSet::new();
    let mut shared_thread = None;
    for i in 0..THREADS {
        let thread = a.create_thread(new_thread()).await.unwrap().id;
        queued.insert(
            a.create_execution(new_execution(&thread))
                .await
                .unwrap()
                .0
                .id,
        );
        if i == 0 {
            // A second execution of the same thread: never running beside the first.
            queued.insert(
                a.create_execution(new_execution(&thread))
                    .await
                    .unwrap()
                    .0
                    .id,
            );
            shared_thread = Some(thread);
        }
    }
    let mut tasks = Vec::new();
    for worker in 0..8 {
        let store = Arc::clone(if worker % 2 == 0 { &a } else { &b });
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            while let Some(record) = store
                .claim_execution(&format!("w{worker}"))
                .await
                .expect("claim")
            {
                mine.push(record);
            }
            mine
        }));
    }
    let mut claimed: BTreeMap<ExecutionId, String> = BTreeMap::new();
    for task in tasks {
        for record in task.await.expect("task") {
            assert_eq!(record.attempts, 1);
            let previous = claimed.insert(record.id.clone(), record.thread_id.to_string());
            assert!(previous.is_none(), "{} claimed twice", record.id);
        }
    }
    // Every thread's first execution, and of the shared thread only one.
    assert_eq!(claimed.len(), THREADS);
    let shared = shared_thread.unwrap().to_string();
    assert_eq!(claimed.values().filter(|t| **t == shared).count(), 1);
    assert!(claimed.keys().all(|id| queued.contains(id)));
    assert_eq!(a.queued_executions().await.unwrap(), 1);

    // Each claimed execution records the replica that claimed it.
    let of_a = b.executions_of(a.replica()).await.unwrap();
    let of_b = a.executions_of(b.replica()).await.unwrap();
    assert_eq!(of_a.len() + of_b.len(), THREADS);
    assert!(
        of_a.iter()
            .chain(&of_b)
            .all(|e| claimed.contains_key(&e.id))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_dead_replica_is_handed_to_one_survivor() {
    let Some(db) = TestDb::create().await else {
        return;
    };
    let survivors: Vec<Arc<PostgresStore>> = vec![
        Arc::new(db.store().await),
        Arc::new(db.store().await),
        Arc::new(db.store().await),
    ];
    for survivor in &survivors {
        survivor.heartbeat().await.unwrap();
    }
    let raw = db.raw().await;
    let dead: BTreeSet<String> = (0..12).map(|_| ReplicaId::new().to_string()).collect();
    for id in &dead {
        raw.execute(&format!(
            "INSERT INTO replicas (id, joined_at, heartbeat_at)
             VALUES ('{id}', now() - interval '1 hour', now() - interval '1 hour')"
        ))
        .await
        .unwrap();
    }
    let mut tasks = Vec::new();
    for survivor in &survivors {
        let survivor = Arc::clone(survivor);
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            while let Some(id) = survivor
                .claim_dead_replica(Duration::from_secs(60))
                .await
                .expect("claim")
            {
                survivor.recovered(&id).await.expect("recovered");
                mine.push(id.to_string());
            }
            mine
        }));
    }
    let mut claimed = Vec::new();
    for task in tasks {
        claimed.extend(task.await.expect("task"));
    }
    claimed.sort();
    assert_eq!(claimed, dead.into_iter().collect::<Vec<_>>());
    // Nothing is ever stale after an unbounded wait.
    let raw_dead = ReplicaId::new();
    raw.execute(&format!(
        "INSERT INTO replicas (id, joined_at, heartbeat_at)
         VALUES ('{raw_dead}', now() - interval '1 hour', now() - interval '1 hour')"
    ))
    .await
    .unwrap();
    assert_eq!(
        survivors[0]
            .claim_dead_replica(Duration::MAX)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        survivors[0]
            .claim_dead_replica(Duration::ZERO)
            .await
            .unwrap(),
        Some(raw_dead.clone())
    );
    survivors[0].recovered(&raw_dead).await.unwrap();
    // The live ones stay registered; one leaving removes only itself.
    assert_eq!(
        raw.query_i64("SELECT count(*) FROM replicas")
            .await
            .unwrap(),
        3
    );
    survivors[0].leave().await.unwrap();
    assert_eq!(
        raw.query_i64("SELECT count(*) FROM replicas")
            .await
            .unwrap(),
        2
    );
    assert!(survivors[1].shared());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dead_replicas_turns_and_executions_are_recovered_by_another() {
    let Some((_db, a, b)) = two().await else {
        return;
    };
    let mine = a.create_thread(new_thread()).await.unwrap().id;
    let theirs = b.create_thread(new_thread()).await.unwrap().id;
    let (turn_a, turn_b) = (TurnId::new(), TurnId::new());
    a.begin_turn(&mine, &turn_a, "a", false).await.unwrap();
    b.begin_turn(&theirs, &turn_b, "b", false).await.unwrap();
    let execution = a.create_execution(new_execution(&mine)).await.unwrap().0;
    let claimed = a.claim_execution("w").await.unwrap().unwrap();
    assert_eq!(claimed.id, execution.id);

    assert_eq!(
        b.interrupt_turns_of(a.replica()).await.unwrap(),
        vec![turn_a.clone()]
    );
    assert!(matches!(
        b.turn(&turn_a).await.unwrap().unwrap().status,
        TurnStatus::Ended(_)
    ));
    assert_eq!(
        b.turn(&turn_b).await.unwrap().unwrap().status,
        TurnStatus::Running,
        "the survivor's own turn is untouched"
    );
    let running = b.executions_of(a.replica()).await.unwrap();
    assert_eq!(
        running.iter().map(|e| &e.id).collect::<Vec<_>>(),
        vec![&execution.id]
    );
    assert!(b.executions_of(b.replica()).await.unwrap().is_empty());
}

/// Receives wake-ups until `wanted` were all seen, or the deadline passes.
async fn receive(
    feed: &mut tokio::sync::mpsc::Receiver<Announcement>,
    wanted: &BTreeSet<(String, u64)>,
) -> BTreeSet<(String, u64)> {
    let mut seen = BTreeSet::new();
    let _ = tokio::time::timeout(DEADLINE, async {
        while !wanted.is_subset(&seen) {
            match feed.recv().await {
                Some(Announcement::Appended(a)) => {
                    seen.insert((a.thread.to_string(), a.seq));
                }
                Some(_) => {}
                None => break,
            }
        }
    })
    .await;
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn events_committed_by_one_replica_wake_the_other() {
    let Some((_db, a, b)) = two().await else {
        return;
    };
    let mut feed = b.announcements().expect("the feed");
    assert!(b.announcements().is_none(), "taken once");
    let thread = a.create_thread(new_thread()).await.unwrap().id;
    let turn = TurnId::new();
    a.begin_turn(&thread, &turn, "go", false).await.unwrap();
    let mut wanted = BTreeSet::new();
    for i in 0..20 {
        let event = a
            .append(&thread, &turn, delta(format!("{i}")))
            .await
            .unwrap();
        wanted.insert((thread.to_string(), event.seq));
    }
    let done = a
        .complete_turn(
            &thread,
            &turn,
            agentplane_core::StopReason::Finished,
            serde_json::Value::Null,
        )
        .await
        .unwrap();
    wanted.insert((thread.to_string(), done.seq));
    let seen = receive(&mut feed, &wanted).await;
    assert!(
        wanted.is_subset(&seen),
        "missing {:?}",
        wanted.difference(&seen)
    );

    // A refused (rolled back) write announces nothing.
    let late = a.append(&thread, &turn, delta("late")).await;
    assert!(matches!(late, Err(StoreError::Conflict(_))), "{late:?}");
    assert!(feed.try_recv().is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_feed_comes_back_after_its_connection_is_killed() {
    let Some((db, a, b)) = two().await else {
        return;
    };
    let mut feed = b.announcements().expect("the feed");
    let raw = db.raw().await;
    let killed = raw
        .query_i64(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
             WHERE application_name = 'agentplane-listener'
               AND datname = current_database()",
        )
        .await
        .unwrap();
    assert_eq!(killed, 2, "one listener per replica");

    let thread = a.create_thread(new_thread()).await.unwrap().id;
    let turn = TurnId::new();
    a.begin_turn(&thread, &turn, "go", false).await.unwrap();
    // Committed while the listener is away: not announced itself, but the feed says it
    // may have missed something before it announces anything newer (ADR 0027).
    let in_gap = a.append(&thread, &turn, delta("in the gap")).await.unwrap();
    let first = tokio::time::timeout(DEADLINE, async {
        loop {
            match feed.recv().await {
                // Only if the listener was back before the append committed.
                Some(Announcement::Appended(a)) if a.seq == in_gap.seq => continue,
                other => return other,
            }
        }
    })
    .await
    .expect("the listener reconnects");
    assert_eq!(first, Some(Announcement::Resumed));
    // And it listens again.
    let after = a.append(&thread, &turn, delta("after")).await.unwrap();
    let wanted = BTreeSet::from([(thread.to_string(), after.seq)]);
    assert_eq!(receive(&mut feed, &wanted).await, wanted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancel_request_is_announced_and_kept_until_the_turn_ends() {
    let Some((_db, a, b)) = two().await else {
        return;
    };
    let mut feed = a.announcements().expect("the feed");
    let thread = a.create_thread(new_thread()).await.unwrap().id;
    let turn = TurnId::new();
    a.begin_turn(&thread, &turn, "go", false).await.unwrap();
    assert!(b.cancels_requested().await.unwrap().is_empty());
    assert!(b.request_cancel(&turn).await.unwrap(), "the turn runs");
    let heard = tokio::time::timeout(DEADLINE, async {
        loop {
            match feed.recv().await {
                Some(Announcement::CancelRequested(t)) => return Some(t),
                Some(_) => continue,
                None => return None,
            }
        }
    })
    .await
    .expect("announced");
    assert_eq!(heard, Some(turn.clone()));
    assert_eq!(a.cancels_requested().await.unwrap(), vec![turn.clone()]);
    a.complete_turn(
        &thread,
        &turn,
        agentplane_core::StopReason::Cancelled,
        serde_json::Value::Null,
    )
    .await
    .unwrap();
    assert!(a.cancels_requested().await.unwrap().is_empty(), "ended");
    assert!(!b.request_cancel(&turn).await.unwrap(), "not running");
    assert!(
        !b.request_cancel(&TurnId::new()).await.unwrap(),
        "no such turn"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_claim_whose_claimer_dies_passes_to_another_survivor() {
    let Some((db, a, b)) = two().await else {
        return;
    };
    let raw = db.raw().await;
    a.heartbeat().await.unwrap();
    b.heartbeat().await.unwrap();
    let dead = ReplicaId::new();
    raw.execute(&format!(
        "INSERT INTO replicas (id, joined_at, heartbeat_at)
         VALUES ('{dead}', now() - interval '1 hour', now() - interval '1 hour')"
    ))
    .await
    .unwrap();
    let timeout = Duration::from_secs(60);
    assert_eq!(
        a.claim_dead_replica(timeout).await.unwrap(),
        Some(dead.clone())
    );
    // `a` is alive and recovering: nobody else gets it.
    assert_eq!(b.claim_dead_replica(timeout).await.unwrap(), None);
    // `a` dies before it reports the recovery done.
    raw.execute(&format!(
        "UPDATE replicas SET heartbeat_at = now() - interval '1 hour' WHERE id = '{}'",
        a.replica()
    ))
    .await
    .unwrap();
    let mut claimed = BTreeSet::new();
    while let Some(id) = b.claim_dead_replica(timeout).await.unwrap() {
        if !claimed.insert(id.clone()) {
            break;
        }
    }
    assert_eq!(
        claimed,
        BTreeSet::from([dead.clone(), a.replica().clone()]),
        "the dead one again, and its claimer"
    );
    b.recovered(&dead).await.unwrap();
    b.recovered(a.replica()).await.unwrap();
    assert_eq!(b.claim_dead_replica(timeout).await.unwrap(), None);
    assert_eq!(
        raw.query_i64("SELECT count(*) FROM replicas")
            .await
            .unwrap(),
        1,
        "only the survivor is left"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_starting_together_migrate_once() {
    let Some(db) = TestDb::create().await else {
        return;
    };
    let url = Arc::new(db.url.clone());
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let url = Arc::clone(&url);
        tasks.push(tokio::spawn(async move {
            PostgresStore::connect(&url, ReplicaId::new()).await
        }));
    }
    for task in tasks {
        task.await.expect("task").expect("every replica connects");
    }
    let raw = db.raw().await;
    assert_eq!(
        raw.query_i64("SELECT version FROM agentplane_schema")
            .await
            .unwrap(),
        i64::from(agentplane_postgres::SCHEMA_VERSION)
    );
    raw.execute("UPDATE agentplane_schema SET version = 999")
        .await
        .unwrap();
    match PostgresStore::connect(&db.url, ReplicaId::new()).await {
        Err(StoreError::Backend(m)) => assert!(m.contains("newer"), "{m}"),
        Err(other) => panic!("unexpected {other:?}"),
        Ok(_) => panic!("a newer schema must be refused"),
    }
}

#[tokio::test]
async fn an_unreachable_or_malformed_url_is_a_clear_error() {
    for url in ["not a url at all", "postgres://127.0.0.1:1/none"] {
        match PostgresStore::connect(url, ReplicaId::new()).await {
            Err(StoreError::Backend(m)) => assert!(!m.is_empty()),
            Err(other) => panic!("{url}: unexpected {other:?}"),
            Ok(_) => panic!("{url}: connected"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_input_is_stored_exactly() {
    let Some(db) = TestDb::create().await else {
        return;
    };
    let store = db.store().await;
    let raw = db.raw().await;
    let thread = store.create_thread(new_thread()).await.unwrap().id;

    // NUL in plain text, which PostgreSQL's TEXT cannot hold: stored escaped, read back
    // exactly, and still equal to itself in filters.
    let nul_turn = TurnId::new();
    let begun = store
        .begin_turn(&thread, &nul_turn, "before \0 after", false)
        .await
        .unwrap();
    assert_eq!(begun.input, "before \0 after");
    let read = store.turn(&nul_turn).await.unwrap().unwrap();
    assert_eq!(read.input, "before \0 after");
    let nul_client = "tenant \0 with nul";
    let created = store
        .create_thread(NewThread {
            client_id: nul_client.into(),
            title: Some("\0".into()),
            ..new_thread()
        })
        .await
        .unwrap();
    assert_eq!(store.list_threads(nul_client).await.unwrap(), vec![created]);
    assert!(store.list_threads("tenant ").await.unwrap().is_empty());
    store.set_summary(&thread, "\0").await.unwrap();
    let summary = store.thread(&thread).await.unwrap().unwrap().summary;
    assert_eq!(summary.as_deref(), Some("\0"));
    // The escape is one-to-one: text that looks escaped is itself escaped.
    let stored = raw
        .query_texts("SELECT summary FROM threads WHERE summary IS NOT NULL")
        .await
        .unwrap();
    store.set_summary(&thread, &stored[0]).await.unwrap();
    let summary = store.thread(&thread).await.unwrap().unwrap().summary;
    assert_eq!(summary.as_deref(), Some(stored[0].as_str()));
    store
        .complete_turn(
            &thread,
            &nul_turn,
            agentplane_core::StopReason::Finished,
            serde_json::Value::Null,
        )
        .await
        .unwrap();

    // Huge and odd text, and NUL inside event JSON (escaped by serde): stored exactly.
    let huge = "é\u{202e}'\"\\; DROP TABLE turns; --🚀".repeat(200_000);
    let turn = TurnId::new();
    let begun = store
        .begin_turn(&thread, &turn, &huge, false)
        .await
        .unwrap();
    assert_eq!(begun.input, huge);
    assert_eq!(store.turn(&turn).await.unwrap().unwrap().input, huge);
    let odd = format!("nul \0 in json, {huge}");
    let event = store
        .append(&thread, &turn, delta(odd.clone()))
        .await
        .unwrap();
    assert_eq!(event.seq, 2, "after the first turn's turn_completed");
    let read = store.turn_events(&turn).await.unwrap();
    assert_eq!(read, vec![event]);
    assert_eq!(read[0].payload, delta(odd));
}
