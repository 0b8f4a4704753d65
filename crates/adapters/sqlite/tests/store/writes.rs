//! Writes as a busy server makes them: one at a time, each its own commit, and many at
//! once from several threads. Every event is kept, in order, and the write-ahead log
//! is checkpointed along the way rather than left to grow.

use std::sync::Arc;

use agentplane_core::{EventPayload, ThreadId, TurnId};
use agentplane_engine::ports::TurnLog;
use agentplane_sqlite::SqliteStore;

use super::{db_path, open, raw, running_turn};

fn wal_bytes(path: &std::path::Path) -> u64 {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::metadata(wal).map(|m| m.len()).unwrap_or(0)
}

/// Appends `count` deltas of 64 KiB to `turn`, each awaited before the next.
async fn append_large_deltas(store: &SqliteStore, thread: &ThreadId, turn: &TurnId, count: usize) {
    let text = "x".repeat(64 * 1024);
    for _ in 0..count {
        store
            .append(
                thread,
                turn,
                EventPayload::MessageDelta { text: text.clone() },
            )
            .await
            .expect("append");
    }
}

/// A checkpoint runs once the log passes 1,000 pages (4 MiB); the log restarts from
/// its beginning at the first commit after it, so it never holds all that was written.
fn assert_checkpointed(path: &std::path::Path) {
    let wal = wal_bytes(path);
    assert!(
        wal < 12 * 1024 * 1024,
        "the write-ahead log grew to {wal} bytes: it is not being checkpointed"
    );
}

/// Sequential appends are each their own commit: without a checkpoint along the way,
/// 24 MiB of events would leave a log of at least that size.
#[tokio::test]
async fn a_log_written_one_commit_at_a_time_is_checkpointed() {
    let (_dir, path) = db_path();
    let store = open(&path).await;
    let (thread, turn) = running_turn(&store).await;
    append_large_deltas(&store, &thread, &turn, 384).await;
    assert_checkpointed(&path);
    let stored: i64 = raw(&path)
        .query_row(
            "SELECT count(*) FROM events WHERE turn_id = ?1",
            [turn.as_str()],
            |row| row.get(0),
        )
        .expect("count");
    assert_eq!(stored, 384, "every delta is stored");
}

/// Many tasks on several worker threads append at once, so their writes share
/// commits: every event is stored once, each turn's seqs are gapless and in the order
/// its task appended them, and the file is sound after.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writes_keep_every_event_in_order() {
    let (_dir, path) = db_path();
    let store = Arc::new(open(&path).await);
    let mut tasks = Vec::new();
    for _ in 0..24 {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            let (thread, turn) = running_turn(&store).await;
            let mut seqs = Vec::new();
            for i in 0..60 {
                let event = store
                    .append(
                        &thread,
                        &turn,
                        EventPayload::MessageDelta {
                            text: format!("{i}"),
                        },
                    )
                    .await
                    .expect("append");
                seqs.push(event.seq);
            }
            (turn, seqs)
        }));
    }
    for task in tasks {
        let (turn, seqs) = task.await.expect("task");
        // The thread holds this turn alone, begun without a start event.
        assert_eq!(seqs, (1..61).collect::<Vec<u64>>());
        let texts: Vec<String> = store
            .turn_events(&turn)
            .await
            .expect("events")
            .into_iter()
            .filter_map(|e| match e.payload {
                EventPayload::MessageDelta { text } => Some(text),
                _ => None,
            })
            .collect();
        assert_eq!(
            texts,
            (0..60).map(|i| i.to_string()).collect::<Vec<_>>(),
            "turn {turn}: stored in the order appended"
        );
    }
    drop(store);
    let verified: String = raw(&path)
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .expect("integrity check");
    assert_eq!(verified, "ok");
}

/// Writers that overlap share commits, and the log is still copied whole and
/// restarted while writes keep coming, not left to grow; a write after the burst
/// still commits, and the file is sound.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_log_written_by_many_at_once_is_checkpointed() {
    let (_dir, path) = db_path();
    let store = Arc::new(open(&path).await);
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            let (thread, turn) = running_turn(&store).await;
            append_large_deltas(&store, &thread, &turn, 48).await;
            turn
        }));
    }
    let mut turns = Vec::new();
    for task in tasks {
        turns.push(task.await.expect("task"));
    }
    // 24 MiB went through the log, in commits of one to eight deltas.
    assert_checkpointed(&path);
    let (thread, turn) = running_turn(&store).await;
    let last = store
        .append(
            &thread,
            &turn,
            EventPayload::MessageDelta {
                text: "after".into(),
            },
        )
        .await
        .expect("an append after the burst");
    assert_eq!(last.seq, 1);
    for turn in &turns {
        assert_eq!(store.turn_events(turn).await.expect("events").len(), 48);
    }
    drop(store);
    let verified: String = raw(&path)
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .expect("integrity check");
    assert_eq!(verified, "ok");
}
