//! Tests of `SqliteStore` against real database files in temporary directories: one
//! test binary, one module per concern. Fixtures only, no assertions, live in this file.

//! The behaviour every store keeps is in `agentplane-store-contract` (run by
//! `tests/contract.rs`); what is SQLite's own — the file, its checks, its migrations —
//! is tested here.

mod open;
mod replicas;
mod writes;

use std::path::{Path, PathBuf};

use agentplane_core::{PermissionId, ThreadId, TurnId};
use agentplane_engine::ports::{NewPermission, NewThread, ThreadStore, TurnLog};
use agentplane_sqlite::SqliteStore;

/// A temporary directory and the database path inside it (in a subdirectory that does
/// not exist yet, so every test also exercises parent creation).
fn db_path() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state").join("agentplane.db");
    (dir, path)
}

async fn open(path: &Path) -> SqliteStore {
    SqliteStore::open(path).await.expect("open the store")
}

/// A second, raw connection to the same file: what an operator (or a damaged disk)
/// could do behind the store's back.
fn raw(path: &Path) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(path).expect("raw connection");
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .expect("busy timeout");
    conn
}

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

/// A new thread with a running turn.
async fn running_turn(store: &SqliteStore) -> (ThreadId, TurnId) {
    let thread = store
        .create_thread(new_thread())
        .await
        .expect("create thread")
        .id;
    let turn = TurnId::new();
    store
        .begin_turn(&thread, &turn, "do the thing", false)
        .await
        .expect("begin turn");
    (thread, turn)
}

/// A permission request for a call of `write_file` in `turn`.
fn new_permission(thread: &ThreadId, turn: &TurnId) -> NewPermission {
    NewPermission {
        id: PermissionId::new(),
        thread_id: thread.clone(),
        turn_id: turn.clone(),
        call_id: "call_1".into(),
        tool: "write_file".into(),
        arguments: serde_json::json!({"path": "src/main.rs", "content": "fn main() {}"}),
        options: vec!["approved".into(), "declined".into()],
        runs: None,
        policy: None,
    }
}
