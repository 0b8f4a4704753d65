//! Opening: creation, migrations, and the files the store must refuse without touching.

use agentplane_engine::ports::{EventStore, StoreError};
use agentplane_store::SqliteStore;

use crate::{db_path, new_thread, open, raw};

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
    assert_eq!(version, 1);
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
    assert_eq!(version, 1);
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
