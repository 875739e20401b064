//! What every handle onto one open [`SqliteStore`](crate::SqliteStore) shares: the file's
//! path, its writer thread and its read connection. Below the store and below each of
//! its handles (confirmations, budgets, verifications, passkeys, pins, the audit trail), so a
//! handle never imports the store that hands it out.

use std::path::PathBuf;

use milpa::StoreError;
use parking_lot::Mutex;
use rusqlite::Connection;

use crate::writer::Writer;

/// What every handle of one open store shares. Dropped with the last handle: the writer
/// commits what is queued and its thread is joined.
pub(crate) struct Shared {
    pub(crate) path: PathBuf,
    pub(crate) writer: Writer,
    /// For reads that need no transaction with writes (a verification request, the
    /// audit trail): WAL lets them run beside the writer.
    reader: Mutex<Connection>,
}

impl Shared {
    /// The state of the store in `path`: its writer, and a second connection for reads.
    pub(crate) fn new(path: PathBuf, writer: Writer, reader: Connection) -> Shared {
        Shared {
            path,
            writer,
            reader: Mutex::new(reader),
        }
    }

    /// Runs `read` on the read connection.
    pub(crate) fn read<T>(
        &self,
        read: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let conn = self.reader.lock();
        read(&conn)
    }
}
