//! The audit trail in SQLite: sealed, one chain across stores on one file, queryable, and
//! any edit, removal or swap of a row is caught by `verify`.

use std::sync::Arc;

use milpa::audit::chain::{ChainBreakKind, GENESIS_HASH};
use milpa::audit::trail::AuditQuery;
use milpa::audit::{AuditOutcome, AuditRecord, AuditSink, Redactor};
use milpa_sqlite::SqliteStore;
use serde_json::{Value, json};

fn write(sink: &dyn AuditSink, tool: &str, principal: Option<&str>, outcome: AuditOutcome, n: u64) {
    let redactor = Redactor::default();
    let args = json!({"n": n, "password": "hunter2"});
    sink.record(&AuditRecord {
        request_id: &format!("req-{n}"),
        channel: "mcp",
        tool,
        kind: Default::default(),
        principal,
        outcome,
        success: outcome == AuditOutcome::Executed,
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

fn parse(line: &str) -> Value {
    serde_json::from_str(line).unwrap()
}

#[test]
fn two_stores_appending_alternately_to_one_file_keep_one_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let a = SqliteStore::open(&path).unwrap();
    let b = SqliteStore::open(&path).unwrap();
    let sinks = [a.audit_sink(), b.audit_sink()];
    for n in 0..10 {
        let sink = &sinks[n % 2];
        write(
            sink.as_ref(),
            "echo",
            Some("alice"),
            AuditOutcome::Executed,
            n as u64,
        );
        // Each store's record is committed before the other appends.
        sink.flush();
    }
    let summary = a.audit_trail().verify().unwrap().unwrap();
    assert_eq!(summary.records, 10);
    assert_eq!(summary.head.seq, 10);
    let lines = b.audit_trail().query(&AuditQuery::default()).unwrap();
    let seqs: Vec<u64> = lines
        .iter()
        .map(|l| parse(l)["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=10).rev().collect::<Vec<_>>());
    assert_eq!(parse(&lines[9])["prev_hash"], GENESIS_HASH);
    assert!(!lines.iter().any(|l| l.contains("hunter2")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_appends_from_two_stores_keep_one_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let stores = [
        SqliteStore::open(&path).unwrap(),
        SqliteStore::open(&path).unwrap(),
    ];
    let tasks: Vec<_> = (0..200u64)
        .map(|n| {
            let sink = stores[(n % 2) as usize].audit_sink();
            tokio::task::spawn_blocking(move || {
                write(sink.as_ref(), "echo", None, AuditOutcome::Executed, n)
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    for store in &stores {
        store.audit_sink().flush();
    }
    let summary = stores[1].audit_trail().verify().unwrap().unwrap();
    assert_eq!(summary.records, 200);
}

#[test]
fn dropping_the_store_commits_what_is_queued() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    {
        let store = SqliteStore::open(&path).unwrap();
        let sink = store.audit_sink();
        for n in 0..500 {
            write(sink.as_ref(), "echo", None, AuditOutcome::Executed, n);
        }
        // No flush: dropping the last handles must write everything.
    }
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.audit_trail().verify().unwrap().unwrap().records, 500);
}

#[test]
fn a_check_reports_its_progress_out_of_the_records_counted_first() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    {
        let store = SqliteStore::open(&path).unwrap();
        let sink = store.audit_sink();
        for n in 0..600 {
            write(sink.as_ref(), "echo", None, AuditOutcome::Executed, n);
        }
    }
    let store = SqliteStore::open(&path).unwrap();
    let mut reports = Vec::new();
    let summary = store
        .audit_trail()
        .verify_reporting(&mut |checked, total| reports.push((checked, total)))
        .unwrap()
        .unwrap();
    assert_eq!(summary.records, 600);
    // The count first, then every 256 records, then the end.
    assert_eq!(reports, [(0, 600), (256, 600), (512, 600), (600, 600)]);
}

#[test]
fn query_filters_newest_first_with_a_limit() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("state.db")).unwrap();
    let sink = store.audit_sink();
    write(
        sink.as_ref(),
        "echo",
        Some("alice"),
        AuditOutcome::Executed,
        1,
    );
    write(
        sink.as_ref(),
        "notes_delete",
        Some("bob"),
        AuditOutcome::RateLimited,
        2,
    );
    write(sink.as_ref(), "echo", Some("bob"), AuditOutcome::Denied, 3);
    write(sink.as_ref(), "echo", None, AuditOutcome::Executed, 4);
    sink.flush();
    let trail = store.audit_trail();
    let ns = |q: AuditQuery| -> Vec<u64> {
        trail
            .query(&q)
            .unwrap()
            .iter()
            .map(|l| parse(l)["args"]["n"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(ns(AuditQuery::default()), [4, 3, 2, 1]);
    assert_eq!(ns(AuditQuery::default().with_tool("echo")), [4, 3, 1]);
    assert_eq!(ns(AuditQuery::default().with_principal("bob")), [3, 2]);
    assert_eq!(ns(AuditQuery::default().with_outcome("executed")), [4, 1]);
    assert_eq!(
        ns(AuditQuery::default()
            .with_tool("echo")
            .with_principal("bob")),
        [3]
    );
    assert_eq!(ns(AuditQuery::default().with_limit(2)), [4, 3]);
    assert_eq!(ns(AuditQuery::default().with_since_ms(0)), [4, 3, 2, 1]);
    assert!(ns(AuditQuery::default().with_since_ms(u64::MAX)).is_empty());
    assert!(ns(AuditQuery::default().with_tool("x'; DROP TABLE milpa_audit; --")).is_empty());
    assert_eq!(ns(AuditQuery::default()).len(), 4);
}

/// Five records, then `tamper` run on the file through a plain connection.
fn tampered(tamper: &str) -> (usize, Option<u64>, ChainBreakKind) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("state.db")).unwrap();
    let sink = store.audit_sink();
    for n in 1..=5 {
        write(
            sink.as_ref(),
            "echo",
            Some("alice"),
            AuditOutcome::Executed,
            n,
        );
    }
    sink.flush();
    assert!(store.audit_trail().verify().unwrap().is_ok());
    store
        .open_connection()
        .unwrap()
        .execute_batch(tamper)
        .unwrap();
    let broken = store.audit_trail().verify().unwrap().unwrap_err();
    (broken.line, broken.seq, broken.kind)
}

#[test]
fn an_updated_line_is_caught() {
    let (line, seq, kind) = tampered(
        "UPDATE milpa_audit SET line = replace(line, '\"outcome\":\"executed\"', '\"outcome\":\"denied\"') WHERE seq = 3",
    );
    assert_eq!((line, seq, kind), (3, Some(3), ChainBreakKind::Edited));
}

#[test]
fn a_deleted_row_is_caught() {
    let (line, seq, kind) = tampered("DELETE FROM milpa_audit WHERE seq = 2");
    assert_eq!(
        (line, seq, kind),
        (2, Some(3), ChainBreakKind::OutOfSequence { expected: 2 })
    );
}

#[test]
fn swapped_rows_are_caught() {
    let (line, seq, kind) = tampered(
        "UPDATE milpa_audit SET line = CASE seq WHEN 2 THEN (SELECT line FROM milpa_audit WHERE seq = 4)
                                               ELSE (SELECT line FROM milpa_audit WHERE seq = 2) END
         WHERE seq IN (2, 4)",
    );
    assert_eq!(
        (line, seq, kind),
        (2, Some(4), ChainBreakKind::OutOfSequence { expected: 2 })
    );
}

#[test]
fn the_sink_is_usable_behind_the_trait_object() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("state.db")).unwrap();
    let sink: Arc<dyn AuditSink> = store.audit_sink();
    write(sink.as_ref(), "echo", None, AuditOutcome::Executed, 1);
    sink.flush();
    let lines = store.audit_trail().query(&AuditQuery::default()).unwrap();
    let record = parse(&lines[0]);
    assert_eq!(record["tool"], "echo");
    assert_eq!(record["args"]["password"], "***REDACTED***");
    assert_eq!(record["seq"], 1);
}
