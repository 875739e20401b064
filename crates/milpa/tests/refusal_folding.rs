//! Repeated refusals of one caller fold into one record with a count; every refusal is
//! still accounted for and the hash chain still verifies.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use milpa::audit::chain::verify_lines;
use milpa::audit::{AuditSink, FoldingAuditSink, JsonLinesAuditSink};
use milpa::{ToolContext, ToolDefinition, ToolRegistry};
use serde_json::{Value, json};

/// A writer into shared memory, so the test reads what the JSONL sink wrote.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Shared {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

fn anonymous(ip: &str, n: usize) -> ToolContext {
    ToolContext::builder("cli")
        .request_id(format!("r{n}"))
        .ip(ip)
        .build()
}

fn registry(sink: Arc<dyn AuditSink>) -> ToolRegistry {
    let mut registry = ToolRegistry::builder().audit_sink(sink).build();
    registry
        .register(ToolDefinition::builder("echo").sync(|args, _| args.clone()))
        .unwrap();
    registry
}

/// Sends 1000 anonymous unknown-tool calls through `sink`; returns the bytes written.
async fn burst(sink: Arc<dyn AuditSink>, out: &Shared) -> usize {
    let registry = registry(sink.clone());
    for n in 0..1000 {
        let result = registry
            .call("no_such_tool", json!({}), &anonymous("203.0.113.7", n))
            .await;
        assert!(!result.success);
    }
    sink.flush();
    out.text().len()
}

fn records(text: &str) -> Vec<Value> {
    text.lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn count(record: &Value) -> u64 {
    record.get("count").and_then(Value::as_u64).unwrap_or(1)
}

#[tokio::test]
async fn a_burst_of_refusals_folds_into_few_records_that_add_up() {
    let plain = Shared::default();
    let plain_bytes = burst(Arc::new(JsonLinesAuditSink::new(plain.clone())), &plain).await;
    assert_eq!(records(&plain.text()).len(), 1000);

    let folded = Shared::default();
    let sink = Arc::new(FoldingAuditSink::with_window(
        Arc::new(JsonLinesAuditSink::new(folded.clone())),
        Duration::from_secs(1),
    ));
    let folded_bytes = burst(sink, &folded).await;
    let text = folded.text();
    let lines = records(&text);
    assert!(lines.len() <= 10, "{} records", lines.len());
    assert_eq!(lines.iter().map(count).sum::<u64>(), 1000);
    assert!(lines.iter().all(|r| r["outcome"] == "not_found"));
    let summary = verify_lines(text.lines()).expect("the chain verifies");
    assert_eq!(summary.records as usize, lines.len());
    println!(
        "1000 anonymous unknown-tool refusals: {plain_bytes} audit bytes ({:.1} a refusal) plain, {folded_bytes} ({:.2} a refusal) folded",
        plain_bytes as f64 / 1000.0,
        folded_bytes as f64 / 1000.0
    );
    assert!(folded_bytes * 50 < plain_bytes);
}

#[tokio::test]
async fn other_callers_tools_and_calls_that_ran_are_written_as_they_come() {
    let out = Shared::default();
    let sink: Arc<dyn AuditSink> = Arc::new(FoldingAuditSink::with_window(
        Arc::new(JsonLinesAuditSink::new(out.clone())),
        Duration::from_secs(60),
    ));
    let registry = registry(sink.clone());
    for n in 0..3 {
        registry
            .call("nope", json!({}), &anonymous("198.51.100.1", n))
            .await;
        registry
            .call("nope", json!({}), &anonymous("198.51.100.2", n))
            .await;
        registry
            .call("other", json!({}), &anonymous("198.51.100.1", n))
            .await;
        let ran = registry
            .call("echo", json!({"n": n}), &anonymous("198.51.100.1", n))
            .await;
        assert!(ran.success);
    }
    // Before the flush: each caller×tool's first refusal and every call that ran.
    let before = records(&out.text());
    assert_eq!(before.len(), 3 + 3, "{before:?}");
    sink.flush();
    let after = records(&out.text());
    // Then one summary per caller×tool, counting the two folded refusals each.
    assert_eq!(after.len(), 6 + 3);
    assert!(after[6..].iter().all(|r| count(r) == 2), "{after:?}");
    assert_eq!(after.iter().map(count).sum::<u64>(), 12);
    verify_lines(out.text().lines()).expect("the chain verifies");
}

#[tokio::test]
async fn a_closed_window_is_written_before_the_next_record() {
    let out = Shared::default();
    let sink: Arc<dyn AuditSink> = Arc::new(FoldingAuditSink::with_window(
        Arc::new(JsonLinesAuditSink::new(out.clone())),
        Duration::from_millis(50),
    ));
    let registry = registry(sink.clone());
    for n in 0..5 {
        registry
            .call("nope", json!({}), &anonymous("192.0.2.1", n))
            .await;
    }
    tokio::time::sleep(Duration::from_millis(80)).await;
    registry
        .call("echo", json!({}), &anonymous("192.0.2.1", 9))
        .await;
    let lines = records(&out.text());
    let counts: Vec<u64> = lines.iter().map(count).collect();
    assert_eq!(counts, [1, 4, 1], "{lines:?}");
    assert_eq!(lines[1]["request_id"], "r1");
    assert_eq!(lines[2]["outcome"], "executed");
}

#[tokio::test]
async fn refusals_of_the_caller_budget_fold_too() {
    let out = Shared::default();
    let sink: Arc<dyn AuditSink> = Arc::new(FoldingAuditSink::new(Arc::new(
        JsonLinesAuditSink::new(out.clone()),
    )));
    let registry = ToolRegistry::builder()
        .audit_sink(sink.clone())
        .caller_budget(milpa::rate_limit::Quota::new(30, Duration::from_secs(60)))
        .build();
    for n in 0..1000 {
        registry
            .call("no_such_tool", json!({}), &anonymous("203.0.113.9", n))
            .await;
    }
    sink.flush();
    let lines = records(&out.text());
    let mut counts: Vec<(String, u64)> = lines
        .iter()
        .map(|r| (r["outcome"].as_str().unwrap().to_owned(), count(r)))
        .collect();
    // The first of each written at once, then their summaries (in any order).
    assert_eq!(counts[0], ("not_found".to_owned(), 1));
    assert_eq!(counts[1], ("rate_limited".to_owned(), 1));
    counts.sort();
    assert_eq!(
        counts,
        [
            ("not_found".to_owned(), 1),
            ("not_found".to_owned(), 29),
            ("rate_limited".to_owned(), 1),
            ("rate_limited".to_owned(), 969),
        ]
    );
    verify_lines(out.text().lines()).expect("the chain verifies");
}
