//! Opening a file migrates it to this build's schema; a newer file is refused.

use milpa::StoreErrorKind;
use milpa::verification::{
    ApprovalPolicy, Decision, VerificationRecord, VerificationStatus, VerificationStore,
};
use milpa_sqlite::SqliteStore;
use milpa_sqlite::rusqlite::{Connection, params};
use serde_json::json;

/// This build's schema version (the number of migrations).
const SCHEMA_VERSION: u32 = 5;

/// The schema as version 1 left a file: its statements (comments left out) and its version
/// stamp. A released migration never changes, so neither does this copy.
const SCHEMA_V1: &str = "CREATE TABLE milpa_confirmations (
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
     CREATE INDEX milpa_audit_ts ON milpa_audit (ts_ms);
     PRAGMA user_version = 1;";

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
    assert_eq!(user_version(&conn), SCHEMA_VERSION);
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
    assert_eq!(user_version(&conn), SCHEMA_VERSION);
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

fn request(
    id: &str,
    created_at_ms: u64,
    status: VerificationStatus,
    resolved_at_ms: Option<u64>,
) -> VerificationRecord {
    VerificationRecord {
        id: id.to_owned(),
        subject: format!("subject of {id}"),
        policy: ApprovalPolicy::Single,
        required_grants: 1,
        requested_by: None,
        payload: json!({}),
        status,
        grants: Vec::new(),
        rejection: None,
        created_at_ms,
        resolved_at_ms,
        revision: 0,
    }
}

#[tokio::test]
async fn a_version_1_file_gets_the_resolution_times_of_its_requests_backfilled() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    {
        // Requests as version 1 stored them: no resolved_at_ms column, the time only in
        // the JSON record.
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(SCHEMA_V1).unwrap();
        let mut rejected = request("old-rejected", 10, VerificationStatus::Failed, Some(500));
        rejected.rejection = Some(Decision {
            principal: "bob".to_owned(),
            reason: Some("no".to_owned()),
            at_ms: 500,
        });
        rejected.revision = 1;
        for (revision, record) in [
            (
                0,
                request("old-pending", 20, VerificationStatus::Pending, None),
            ),
            (1, rejected),
            (
                3,
                request("old-passed", 30, VerificationStatus::Passed, Some(900)),
            ),
        ] {
            conn.execute(
                "INSERT INTO milpa_verifications (id, revision, status, created_at_ms, record)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    record.id,
                    revision,
                    record.status.as_str(),
                    record.created_at_ms as i64,
                    serde_json::to_string(&record).unwrap()
                ],
            )
            .unwrap();
        }
    }
    let store = SqliteStore::open(&path).unwrap();
    let conn = store.open_connection().unwrap();
    assert_eq!(user_version(&conn), SCHEMA_VERSION);
    let column = |id: &str| -> Option<i64> {
        conn.query_row(
            "SELECT resolved_at_ms FROM milpa_verifications WHERE id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap()
    };
    assert_eq!(column("old-rejected"), Some(500));
    assert_eq!(column("old-passed"), Some(900));
    assert_eq!(column("old-pending"), None);

    let verifications = store.verification_store();
    // A request resolved after the upgrade sorts among the backfilled ones by its time.
    verifications
        .create(request(
            "new-passed",
            40,
            VerificationStatus::Passed,
            Some(700),
        ))
        .await
        .unwrap();
    let resolved = verifications.list_resolved(10).await.unwrap();
    let order: Vec<(&str, u64)> = resolved
        .iter()
        .map(|r| (r.id.as_str(), r.revision))
        .collect();
    assert_eq!(
        order,
        [("old-passed", 3), ("new-passed", 0), ("old-rejected", 1)]
    );
    assert_eq!(resolved[2].rejection.as_ref().unwrap().principal, "bob");
    let pending = verifications.list_pending(10).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].id, "old-pending");
}
