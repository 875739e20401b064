//! Audit records linger before their commit (`SqliteOptions::audit_linger`), and the
//! guarantees hold anyway: a clean drop writes them all, chained; a flush, and any write
//! a caller waits for, end the linger at once.

use std::sync::Arc;
use std::time::Duration;

use milpa::audit::trail::AuditQuery;
use milpa::audit::{AuditOutcome, AuditRecord, AuditSink, Redactor};
use milpa::rate_limit::{Quota, RateDecision, RateKey};
use milpa_sqlite::{SqliteOptions, SqliteStore};
use serde_json::json;

/// Longer than any test runs: a record committed at all was committed by something
/// other than the linger running out.
const FOREVER: Duration = Duration::from_secs(3600);

fn lingering(path: &std::path::Path) -> SqliteStore {
    let options = SqliteOptions::default().with_audit_linger(FOREVER);
    SqliteStore::open_with(path, options).unwrap()
}

fn write(sink: &dyn AuditSink, n: u64) {
    let redactor = Redactor::default();
    let args = json!({ "n": n });
    sink.record(&AuditRecord {
        request_id: &format!("req-{n}"),
        channel: "mcp",
        tool: "echo",
        kind: Default::default(),
        principal: Some("alice"),
        outcome: AuditOutcome::Executed,
        success: true,
        code: None,
        error: None,
        took_ms: 0,
        timeout_exceeded: false,
        args: &args,
        redactor: &redactor,
        count: 1,
        ip: None,
        max_args_bytes: 16 * 1024,
    });
}

/// The records another store on the file sees (another process, say).
fn committed(path: &std::path::Path) -> usize {
    let other = SqliteStore::open(path).unwrap();
    other
        .audit_trail()
        .query(&AuditQuery::default())
        .unwrap()
        .len()
}

#[test]
fn records_lingering_at_a_clean_drop_are_all_written_and_chained() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let store = lingering(&path);
    let sink = store.audit_sink();
    for n in 0..50 {
        write(sink.as_ref(), n);
    }
    assert_eq!(committed(&path), 0, "still lingering");
    drop(sink);
    drop(store);
    let reopened = SqliteStore::open(&path).unwrap();
    let summary = reopened.audit_trail().verify().unwrap().unwrap();
    assert_eq!(summary.records, 50);
    assert_eq!(summary.head.seq, 50);
}

#[test]
fn a_flush_ends_the_linger() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let store = lingering(&path);
    let sink = store.audit_sink();
    for n in 0..3 {
        write(sink.as_ref(), n);
    }
    sink.flush();
    assert_eq!(committed(&path), 3);
    assert!(store.audit_trail().verify().unwrap().is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_a_caller_waits_for_is_not_held_by_the_linger_and_takes_the_records_along() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let store = lingering(&path);
    let sink = store.audit_sink();
    write(sink.as_ref(), 1);
    write(sink.as_ref(), 2);
    let limiter = store.rate_limiter();
    let key = RateKey {
        channel: "mcp",
        principal: "alice",
        tool: "echo",
    };
    // An hour-long linger would hold the charge (and fail this timeout) if it applied.
    let decision = tokio::time::timeout(
        Duration::from_secs(30),
        limiter.consume(key, 1, Quota::new(5, Duration::from_secs(60))),
    )
    .await
    .expect("the charge is committed without waiting for the linger")
    .unwrap();
    assert!(matches!(decision, RateDecision::Allowed { .. }));
    // The records queued before the charge were committed in its transaction.
    let path = Arc::new(path);
    let seen = tokio::task::spawn_blocking(move || committed(&path))
        .await
        .unwrap();
    assert_eq!(seen, 2);
}
