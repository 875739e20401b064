//! Opening a file migrates it to this build's schema; a newer file is refused.

use milpa::StoreErrorKind;
use milpa_sqlite::SqliteStore;
use milpa_sqlite::rusqlite::Connection;

fn user_version(conn: &Connection) -> u32 {
    conn.pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap()
}

#[test]
fn an_old_file_is_migrated_and_keeps_its_own_tables() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    {
        // A version-0 file: an application's table and nothing of milpa's.
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT); INSERT INTO notes (text) VALUES ('keep me');")
            .unwrap();
        assert_eq!(user_version(&conn), 0);
    }
    let store = SqliteStore::open(&path).unwrap();
    let conn = store.open_connection().unwrap();
    assert_eq!(user_version(&conn), 1);
    let text: String = conn
        .query_row("SELECT text FROM notes", [], |r| r.get(0))
        .unwrap();
    assert_eq!(text, "keep me");
    for table in [
        "milpa_confirmations",
        "milpa_verifications",
        "milpa_rate_limits",
        "milpa_audit",
    ] {
        let found: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
                [table],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(found, 1, "{table}");
    }
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    drop(store);
    // Opening again is a no-op migration.
    SqliteStore::open(&path).unwrap();
    assert_eq!(user_version(&conn), 1);
}

#[test]
fn a_file_from_a_newer_version_is_refused_clearly_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    {
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE future (x); PRAGMA user_version = 99;")
            .unwrap();
    }
    let error = SqliteStore::open(&path).unwrap_err();
    assert_eq!(error.kind(), StoreErrorKind::Corrupt);
    let message = error.to_string();
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains("schema version 99"), "{message}");
    assert!(message.contains("newer"), "{message}");
    let conn = Connection::open(&path).unwrap();
    assert_eq!(user_version(&conn), 99);
    let tables: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name LIKE 'milpa_%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(tables, 0);
}

#[test]
fn a_file_that_is_not_a_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    std::fs::write(
        &path,
        b"this is not a database, it is a text file of some length....",
    )
    .unwrap();
    let error = SqliteStore::open(&path).unwrap_err();
    assert_eq!(error.kind(), StoreErrorKind::Corrupt, "{error}");
}
