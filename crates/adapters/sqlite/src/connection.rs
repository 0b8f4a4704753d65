//! Opening connections: the checks a file must pass before anything writes to it, and
//! the pragmas every connection runs with. No queries on threads, turns or events here.

use std::path::Path;
use std::time::Duration;

use agentplane_engine::ports::StoreError;
use rusqlite::{Connection, OpenFlags};

use crate::migrations;

/// How long a statement waits for a lock another process holds before failing. Inside
/// one process there is a single writer, so this only matters when two processes share
/// a database file.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Every connection's settings beyond the pragmas: a statement cache that holds the
/// whole store, and the query planner's stability guarantee. Without the guarantee the
/// planner weighs the bound values of a WHERE clause against the partial indexes
/// (`threads_live_by_client`, `turns_running_by_replica`…), so every statement on those
/// tables was parsed and planned again each time it ran with a new value — about 5 % of
/// a turn's CPU. The partial indexes are matched by literals in the SQL, which the
/// guarantee keeps.
fn tune(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .map_err(|e| opening(path, e))?;
    Ok(())
}

/// Prepared statements each connection keeps. rusqlite's default (16) is fewer than the
/// statements one turn runs, so they were evicted and parsed again on every turn; the
/// store has about 90 distinct statements.
const STATEMENT_CACHE: usize = 256;

/// Opens (or creates) the database at `path` for writing and brings its schema up to
/// date. The file is read before anything is written, so a file that is not SQLite, or
/// whose schema is newer than this code, is refused untouched.
pub(crate) fn open_writer(path: &Path) -> Result<Connection, StoreError> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| StoreError::Backend(format!("cannot create {}: {e}", parent.display())))?;
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut conn = Connection::open_with_flags(path, flags).map_err(|e| opening(path, e))?;
    // The first read parses the header: garbage fails here with SQLITE_NOTADB, before
    // any pragma below could write.
    conn.query_row("SELECT count(*) FROM sqlite_master", [], |row| {
        row.get::<_, i64>(0)
    })
    .map_err(|e| opening(path, e))?;
    let current = migrations::check(&conn, path)?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(|e| opening(path, e))?;
    tune(&conn, path)?;
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "wal", |row| row.get(0))
        .map_err(|e| opening(path, e))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::Backend(format!(
            "{} cannot use write-ahead logging (journal_mode is {mode})",
            path.display()
        )));
    }
    // In WAL mode, NORMAL syncs the log at checkpoints, not at every commit: a commit is
    // durable against a crash of the process (the OS has the write), while a power loss
    // may drop the last commits but never corrupts the database. That trade buys the
    // append latency an event log streamed live needs.
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(|e| opening(path, e))?;
    conn.pragma_update(None, "foreign_keys", true)
        .map_err(|e| opening(path, e))?;
    let ran = migrations::migrate(&mut conn, path)?;
    if current == 0 || ran > 0 {
        tracing::info!(path = %path.display(), from = current, migrations = ran, "event store schema migrated");
    }
    Ok(conn)
}

/// Takes the exclusive lock on the database file (an OS file lock, released when the
/// returned file is closed or the process dies), so that two processes never work on
/// one file: the second would take the first's running turns for a dead process's.
pub(crate) fn lock(path: &Path) -> Result<std::fs::File, StoreError> {
    let file = std::fs::File::open(path)
        .map_err(|e| StoreError::Backend(format!("cannot open {}: {e}", path.display())))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(StoreError::Backend(format!(
            "{} is in use by another agentplane process; a SQLite database serves one \
             process at a time (run several replicas on PostgreSQL, see docs/deploy.md)",
            path.display()
        ))),
        Err(std::fs::TryLockError::Error(e)) => Err(StoreError::Backend(format!(
            "cannot lock {}: {e}",
            path.display()
        ))),
    }
}

/// Whether another open file holds [`lock`]'s lock on `path` now. Taking it to see
/// releases it at once (the file is closed on return).
pub(crate) fn held(path: &Path) -> bool {
    std::fs::File::open(path)
        .is_ok_and(|file| matches!(file.try_lock(), Err(std::fs::TryLockError::WouldBlock)))
}

/// Opens a read-only connection to a database `open_writer` has already prepared. WAL
/// lets it read a consistent snapshot while the writer commits.
pub(crate) fn open_reader(path: &Path) -> Result<Connection, StoreError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| opening(path, e))?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(|e| opening(path, e))?;
    tune(&conn, path)?;
    Ok(conn)
}

fn opening(path: &Path, e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::NotADatabase) => not_sqlite(path),
        _ => StoreError::Backend(format!("cannot open {}: {e}", path.display())),
    }
}

fn not_sqlite(path: &Path) -> StoreError {
    StoreError::Backend(format!(
        "{} is not a SQLite database; refusing to use it as the event store",
        path.display()
    ))
}
