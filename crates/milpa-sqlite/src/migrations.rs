//! Versioned schema migrations, applied on open. The file's `user_version` is the number of
//! migrations applied; each runs in its own immediate transaction that re-reads the version
//! first, so two processes opening one file at once apply each migration once.

use std::path::Path;

use milpa::StoreError;
use rusqlite::{Connection, TransactionBehavior};

use crate::error::store_error;

/// The schema, one step per version (index 0 takes a file from version 0 to 1). Append,
/// never edit: a released step has already run on someone's file. Table names start with
/// `milpa_` so an application's own tables (see `SqliteStore::open_connection`) can share
/// the file.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: the stores and the audit trail.
    "CREATE TABLE milpa_confirmations (
         token TEXT PRIMARY KEY,
         tool TEXT NOT NULL,
         principal TEXT,
         channel TEXT NOT NULL,
         args TEXT NOT NULL,
         action_summary TEXT NOT NULL,
         expires_at_ms INTEGER NOT NULL
     ) WITHOUT ROWID;
     CREATE INDEX milpa_confirmations_expiry ON milpa_confirmations (expires_at_ms);

     CREATE TABLE milpa_verifications (
         id TEXT PRIMARY KEY,
         revision INTEGER NOT NULL,
         status TEXT NOT NULL,
         created_at_ms INTEGER NOT NULL,
         record TEXT NOT NULL
     ) WITHOUT ROWID;
     CREATE INDEX milpa_verifications_status ON milpa_verifications (status, created_at_ms);

     CREATE TABLE milpa_rate_limits (
         key TEXT PRIMARY KEY,
         tat INTEGER NOT NULL
     ) WITHOUT ROWID;

     CREATE TABLE milpa_audit (
         seq INTEGER PRIMARY KEY,
         line TEXT NOT NULL,
         hash TEXT NOT NULL,
         ts_ms INTEGER NOT NULL,
         tool TEXT NOT NULL,
         principal TEXT,
         outcome TEXT NOT NULL
     );
     -- Only the time is indexed (it grows with seq: an append). Indexes on tool, principal
     -- and outcome doubled a call's cost with 32 callers in flight (each commit rewrote a
     -- leaf page per distinct principal); those filters scan newest first, and a query
     -- stops at its limit.
     CREATE INDEX milpa_audit_ts ON milpa_audit (ts_ms);",
    // 2: when a request was resolved, as a column, for the "last decisions" list
    // (`VerificationStore::list_resolved`), backfilled from the records. The index holds only
    // resolved requests and sorts them as that list does (`coalesce`: a resolved record
    // without the time sorts as 0, as the in-memory store sorts it); its trailing `id`
    // breaks ties, so the list reads it backwards and stops at its limit, no sort.
    "ALTER TABLE milpa_verifications ADD COLUMN resolved_at_ms INTEGER;
     UPDATE milpa_verifications SET resolved_at_ms = json_extract(record, '$.resolved_at_ms');
     CREATE INDEX milpa_verifications_resolved
         ON milpa_verifications (coalesce(resolved_at_ms, 0), id)
         WHERE status <> 'pending';",
    // 3: named secrets shared by every process on the file (the key that seals the MCP
    // 2026-07-28 `requestState`, so any process can check what another one sealed).
    "CREATE TABLE milpa_secrets (
         name TEXT PRIMARY KEY,
         value BLOB NOT NULL
     ) WITHOUT ROWID;",
    // 4: approvers' passkeys (public credentials only) and one-time enrolment tokens (their
    // SHA-256), for the approvals page's WebAuthn decisions.
    "CREATE TABLE milpa_passkeys (
         credential_id TEXT PRIMARY KEY,
         actor TEXT NOT NULL,
         public_credential TEXT NOT NULL,
         created_at_ms INTEGER NOT NULL
     ) WITHOUT ROWID;
     CREATE INDEX milpa_passkeys_actor ON milpa_passkeys (actor, created_at_ms);

     CREATE TABLE milpa_passkey_enrolments (
         token_hash TEXT PRIMARY KEY,
         actor TEXT NOT NULL,
         expires_at_ms INTEGER NOT NULL
     ) WITHOUT ROWID;",
    // 5: pinned tool and prompt definitions (their digest and JSON), so a definition an
    // upstream changes after the first sight is held for a person, across restarts and
    // processes.
    "CREATE TABLE milpa_pins (
         scope TEXT NOT NULL,
         kind TEXT NOT NULL,
         name TEXT NOT NULL,
         digest TEXT NOT NULL,
         definition TEXT NOT NULL,
         pinned_at_ms INTEGER NOT NULL,
         PRIMARY KEY (scope, kind, name)
     ) WITHOUT ROWID;",
];

/// Brings the file at `path` (open as `conn`) up to `migrations.len()`. Refuses a file
/// whose version is newer than this build knows, changing nothing.
pub(crate) fn migrate(
    conn: &mut Connection,
    migrations: &[&str],
    path: &Path,
) -> Result<(), StoreError> {
    let known = migrations.len() as u32;
    loop {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(store_error)?;
        let version: u32 = tx
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .map_err(store_error)?;
        if version > known {
            return Err(StoreError::corrupt(format!(
                "{} has schema version {version}, newer than this milpa knows ({known}): \
                 it was written by a newer milpa; upgrade milpa or use another file",
                path.display()
            )));
        }
        if version == known {
            return Ok(());
        }
        tx.execute_batch(migrations[version as usize])
            .map_err(store_error)?;
        tx.pragma_update(None, "user_version", version + 1)
            .map_err(store_error)?;
        tx.commit().map_err(store_error)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STEPS: &[&str] = &[
        "CREATE TABLE a (x INTEGER);",
        "CREATE TABLE b (y INTEGER); INSERT INTO a VALUES (1);",
    ];

    fn version(conn: &Connection) -> u32 {
        conn.pragma_query_value(None, "user_version", |row| row.get(0))
            .unwrap()
    }

    #[test]
    fn an_old_file_gets_only_the_steps_it_lacks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let mut conn = crate::connection::open(&path).unwrap();
        migrate(&mut conn, &STEPS[..1], &path).unwrap();
        assert_eq!(version(&conn), 1);
        conn.execute("INSERT INTO a VALUES (7)", []).unwrap();
        migrate(&mut conn, STEPS, &path).unwrap();
        assert_eq!(version(&conn), 2);
        let rows: i64 = conn
            .query_row("SELECT count(*) FROM a", [], |r| r.get(0))
            .unwrap();
        // Step 1 did not run again (it would fail: table a exists), step 2 ran once.
        assert_eq!(rows, 2);
        migrate(&mut conn, STEPS, &path).unwrap();
        assert_eq!(version(&conn), 2);
    }

    #[test]
    fn a_failing_step_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let mut conn = crate::connection::open(&path).unwrap();
        let broken = ["CREATE TABLE a (x INTEGER); CREATE TABLE a (x INTEGER);"];
        assert!(migrate(&mut conn, &broken, &path).is_err());
        assert_eq!(version(&conn), 0);
        let tables: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE name = 'a'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(tables, 0);
    }
}
