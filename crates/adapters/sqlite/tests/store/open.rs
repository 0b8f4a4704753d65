//! Opening: creation, migrations, and the files the store must refuse without touching.

use std::path::Path;

use agentplane_core::{EventPayload, PermissionDecision, StopReason, ThreadId, TurnId};
use agentplane_engine::ports::{ApprovalStore, StoreError, ThreadStore, TurnLog, TurnStatus};
use agentplane_engine::services::reports::verify_chains;
use agentplane_sqlite::SqliteStore;

use crate::{db_path, new_permission, new_thread, open, raw};

/// What the fixture holds: a thread of `local` with a finished turn and a turn left
/// running, and a thread of `other` with a text answer.
const V1_LOCAL_THREAD: &str = "thr_01a2076b7dbc775286d0444a830f43c6";
const V1_FINISHED_TURN: &str = "turn_01a2076b7dbd74c28b4c16774bb1ede3";
const V1_RUNNING_TURN: &str = "turn_01a2076b7dbd74c28b4c16782b96fe60";
const V1_OTHER_THREAD: &str = "thr_01a2076b7dbd74c28b4c1679e6c9124d";
const V1_ANSWER_TURN: &str = "turn_01a2076b7dbd74c28b4c167a5b1d06ac";

/// Writes, at `path`, the database an agentplane of schema version 1 left behind.
fn write_v1_database(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let conn = raw(path);
    conn.execute_batch(include_str!("fixtures/schema_v1.sql"))
        .unwrap();
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "wal", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

/// The schema version this build migrates to: the latest, however many migrations
/// other parts append.
const CURRENT_VERSION: u32 = agentplane_sqlite::SCHEMA_VERSION;

fn user_version(path: &Path) -> u32 {
    raw(path)
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap()
}

fn backend_message(result: Result<SqliteStore, StoreError>) -> String {
    match result {
        Err(StoreError::Backend(message)) => message,
        Err(other) => panic!("expected a Backend error, got {other:?}"),
        Ok(_) => panic!("expected the open to fail"),
    }
}

#[tokio::test]
async fn creates_the_file_and_its_directories_in_wal_mode() {
    let (_dir, path) = db_path();
    let store = open(&path).await;
    assert_eq!(store.path(), path);
    assert!(path.is_file());
    let conn = raw(&path);
    let mode: String = conn
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let version: u32 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, CURRENT_VERSION);
}

#[tokio::test]
async fn reopening_keeps_the_schema_and_data() {
    let (_dir, path) = db_path();
    let thread = open(&path).await.create_thread(new_thread()).await.unwrap();
    let store = open(&path).await;
    assert_eq!(store.thread(&thread.id).await.unwrap(), Some(thread));
    let version: u32 = raw(&path)
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, CURRENT_VERSION);
}

#[tokio::test]
async fn a_file_of_garbage_is_refused_and_left_untouched() {
    let (dir, path) = db_path();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let garbage: Vec<u8> = (0..8192u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&path, &garbage).unwrap();

    let message = backend_message(SqliteStore::open(&path).await);
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains("not a SQLite database"), "{message}");
    assert_eq!(std::fs::read(&path).unwrap(), garbage);
    let mut names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(names, ["agentplane.db"], "no -wal or -shm left behind");
    drop(dir);
}

#[tokio::test]
async fn a_text_file_is_refused_and_left_untouched() {
    let (_dir, path) = db_path();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let text = b"this is my shopping list, not a database\n".repeat(200);
    std::fs::write(&path, &text).unwrap();
    let message = backend_message(SqliteStore::open(&path).await);
    assert!(message.contains("not a SQLite database"), "{message}");
    assert_eq!(std::fs::read(&path).unwrap(), text);
}

#[tokio::test]
async fn a_newer_schema_is_refused_never_downgraded() {
    let (_dir, path) = db_path();
    drop(open(&path).await);
    raw(&path).pragma_update(None, "user_version", 99).unwrap();
    let before = std::fs::read(&path).unwrap();

    let message = backend_message(SqliteStore::open(&path).await);
    assert!(message.contains("99"), "{message}");
    assert!(message.contains("newer"), "{message}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    let version: u32 = raw(&path)
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, 99);
}

#[tokio::test]
async fn another_programs_database_is_refused() {
    let (_dir, path) = db_path();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    raw(&path)
        .execute_batch("CREATE TABLE recipes (name TEXT); INSERT INTO recipes VALUES ('soup');")
        .unwrap();
    let message = backend_message(SqliteStore::open(&path).await);
    assert!(message.contains("something else"), "{message}");
    let version: u32 = raw(&path)
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, 0);
    let tables: i64 = raw(&path)
        .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
        .unwrap();
    assert_eq!(tables, 1);
}

#[tokio::test]
async fn a_directory_is_refused_with_its_path() {
    let (dir, _) = db_path();
    let message = backend_message(SqliteStore::open(dir.path()).await);
    assert!(
        message.contains(&dir.path().display().to_string()),
        "{message}"
    );
}

#[tokio::test]
async fn a_parent_that_is_a_file_is_refused() {
    let (dir, _) = db_path();
    let blocker = dir.path().join("blocker");
    std::fs::write(&blocker, b"x").unwrap();
    let message = backend_message(SqliteStore::open(&blocker.join("db.sqlite")).await);
    assert!(message.contains("blocker"), "{message}");
}

#[tokio::test]
async fn dropping_the_store_closes_the_file_completely() {
    let (_dir, path) = db_path();
    {
        let store = open(&path).await;
        crate::running_turn(&store).await;
    }
    // The writer was joined and every connection closed: the WAL was checkpointed
    // into the file and removed, so the file alone holds everything.
    let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["agentplane.db"]);
    let threads: i64 = raw(&path)
        .query_row("SELECT count(*) FROM threads", [], |r| r.get(0))
        .unwrap();
    assert_eq!(threads, 1);
}

#[tokio::test]
async fn a_version_1_database_upgrades_and_keeps_its_data() {
    let (_dir, path) = db_path();
    write_v1_database(&path);
    assert_eq!(user_version(&path), 1);

    let local = ThreadId::parse(V1_LOCAL_THREAD).unwrap();
    let other = ThreadId::parse(V1_OTHER_THREAD).unwrap();
    let finished = TurnId::parse(V1_FINISHED_TURN).unwrap();
    let running = TurnId::parse(V1_RUNNING_TURN).unwrap();
    let answered = TurnId::parse(V1_ANSWER_TURN).unwrap();
    {
        let store = open(&path).await;
        assert_eq!(user_version(&path), CURRENT_VERSION);

        let threads = store.list_threads("local").await.unwrap();
        assert_eq!(threads.len(), 1);
        let thread = &threads[0];
        assert_eq!(thread.id, local);
        assert_eq!(thread.agent, "coder");
        assert_eq!(thread.cwd, "/home/me/project");
        assert_eq!(thread.title.as_deref(), Some("fix the 'parser'"));
        assert_eq!(thread.created_at, "2026-11-23T08:00:14.780Z");
        assert_eq!(thread.summary, None);

        // Turns that ended before the result column existed got their result back
        // from their own turn_completed event.
        let turns = store.list_turns(&local).await.unwrap();
        assert_eq!(turns.len(), 2);
        assert_eq!(turns[0].id, finished);
        assert_eq!(turns[0].status, TurnStatus::Ended(StopReason::Finished));
        assert_eq!(
            turns[0].result,
            Some(serde_json::json!({"summary": "fixed", "files": ["src/parse.rs"]}))
        );
        assert_eq!(turns[1].id, running);
        assert_eq!(turns[1].status, TurnStatus::Running);
        assert_eq!(turns[1].result, None);
        assert!(turns.iter().all(|t| !t.internal));
        let answer = store.turn(&answered).await.unwrap().unwrap();
        assert_eq!(answer.result, Some(serde_json::json!("hi there")));

        let seqs: Vec<u64> = store
            .thread_events(&local, 0, 100)
            .await
            .unwrap()
            .iter()
            .map(|e| e.seq)
            .collect();
        assert_eq!(seqs, [1, 2, 3]);
        assert_eq!(
            store.turn_events(&running).await.unwrap()[0].payload,
            EventPayload::MessageDelta {
                text: "running tests".into()
            }
        );

        // The turn the old process left running ends where its log left off.
        assert_eq!(
            store.interrupt_running_turns().await.unwrap(),
            vec![running.clone()]
        );
        let last = store.turn_events(&running).await.unwrap();
        assert_eq!(last.last().unwrap().seq, 4);

        // What the new schema adds works on the old data.
        store.set_summary(&local, "fixed the parser").await.unwrap();
        let turn = TurnId::new();
        store
            .begin_turn(&local, &turn, "next", false)
            .await
            .unwrap();
        let (permission, event) = store
            .create_permission(new_permission(&local, &turn))
            .await
            .unwrap();
        assert_eq!(event.seq, 5);
        store
            .resolve_permission(&permission.id, PermissionDecision::Declined, "no")
            .await
            .unwrap();
        store
            .complete_turn(&local, &turn, StopReason::Finished, serde_json::json!(1))
            .await
            .unwrap();
        store.delete_thread(&other).await.unwrap();
    }

    // A second open finds nothing to migrate and everything in place.
    let store = open(&path).await;
    assert_eq!(user_version(&path), CURRENT_VERSION);
    assert_eq!(
        store
            .thread(&local)
            .await
            .unwrap()
            .unwrap()
            .summary
            .as_deref(),
        Some("fixed the parser")
    );
    assert_eq!(store.thread(&other).await.unwrap(), None);
    assert_eq!(store.list_turns(&local).await.unwrap().len(), 3);
    assert_eq!(store.thread_events(&local, 0, 100).await.unwrap().len(), 7);
    let check: String = raw(&path)
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");

    // The events written before the chain are counted, not broken: the migration that
    // began the ledger put both old threads in its genesis, from the seq each chain
    // starts at, and recorded their owners, workspaces and deletion as they were.
    let report = verify_chains(&store, None).await.unwrap();
    assert!(report.holds(), "{report:#?}");
    let local_chain = report
        .intact
        .iter()
        .find(|s| s.thread_id == V1_LOCAL_THREAD)
        .unwrap();
    assert_eq!(
        (local_chain.unchained, local_chain.first_chained),
        (3, Some(4))
    );
    // …and an old thread moved to another owner is named all the same.
    raw(&path)
        .execute(
            &format!("UPDATE threads SET client_id = 'mallory' WHERE id = '{V1_LOCAL_THREAD}'"),
            [],
        )
        .unwrap();
    let report = verify_chains(&store, None).await.unwrap();
    let subjects: Vec<_> = report
        .mismatches
        .iter()
        .map(|m| m.subject.as_str())
        .collect();
    assert_eq!(
        subjects,
        [format!("thread {V1_LOCAL_THREAD}")],
        "{report:#?}"
    );
}

#[tokio::test]
async fn a_failed_migration_leaves_the_old_schema_and_data_untouched() {
    let (_dir, path) = db_path();
    write_v1_database(&path);
    // Something in the way of migration 2, halfway through its script.
    raw(&path)
        .execute_batch("CREATE TABLE permissions (squatter TEXT)")
        .unwrap();

    let message = backend_message(SqliteStore::open(&path).await);
    assert!(message.contains("migrating"), "{message}");
    assert!(message.contains("permissions"), "{message}");
    assert_eq!(user_version(&path), 1);
    let columns: Vec<String> = raw(&path)
        .prepare("SELECT name FROM pragma_table_info('threads')")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(
        !columns.iter().any(|c| c == "summary" || c == "deleted_at"),
        "the columns added before the failure were rolled back: {columns:?}"
    );

    raw(&path).execute_batch("DROP TABLE permissions").unwrap();
    let store = open(&path).await;
    assert_eq!(user_version(&path), CURRENT_VERSION);
    assert_eq!(store.list_threads("local").await.unwrap().len(), 1);
}
