//! Opening a connection to the store's file with the pragmas every connection needs.
//!
//! Durability: the file is in WAL mode with `synchronous = NORMAL`. A commit is written to
//! the WAL (through the operating system) before the store answers, so a crash of the
//! *process* loses nothing committed; the WAL is synced to disk at checkpoints, so a
//! *power loss* (or kernel crash) may roll back the transactions committed since the last
//! checkpoint, never corrupt the file. `FULL` would sync on every commit: on this class of
//! machine that is a disk flush per group commit, milliseconds instead of microseconds.

use std::path::Path;
use std::time::Duration;

use milpa::StoreError;
use rusqlite::{Connection, OpenFlags};

use crate::error::{sqlite_failure, store_error};

/// How long a statement waits for another connection's write lock (another process
/// writing to the same file) before it fails with `Unavailable`.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// A connection to `path` with the store's pragmas; creates the file when missing.
pub(crate) fn open(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(store_error)?;
    configure(&conn).map_err(store_error)?;
    Ok(conn)
}

fn configure(conn: &Connection) -> rusqlite::Result<()> {
    // First, so that switching to WAL below waits for another process instead of failing.
    conn.busy_timeout(BUSY_TIMEOUT)?;
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(sqlite_failure(
            rusqlite::ffi::SQLITE_CANTOPEN,
            format!("the database refused WAL mode (journal_mode is {mode})"),
        ));
    }
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", true)?;
    Ok(())
}
