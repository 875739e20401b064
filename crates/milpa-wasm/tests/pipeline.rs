//! A component tool registered in a `ToolRegistry` goes through the whole pipeline: a call
//! without the tool's scope is refused before the component runs, every call is audited,
//! and a guest stopped by the sandbox is a result with its code like any failed call.

mod common;

use std::sync::Arc;
use std::time::Duration;

use milpa::audit::{AuditOutcome, MemoryAuditSink};
use milpa::{ToolContext, ToolDefinition, ToolRegistry};
use milpa_wasm::Sandbox;
use serde_json::json;

fn caller(scopes: &[&str]) -> ToolContext {
    ToolContext::builder("mcp")
        .principal("alice")
        .scopes(scopes.iter().copied())
        .request_id("req-pipeline")
        .build()
}

#[tokio::test]
async fn scopes_are_checked_before_the_component_runs_and_every_call_is_audited() {
    let folder = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new()
        .allow_write(folder.path())
        .with_timeout(Duration::from_millis(500));
    let Some(tool) = common::load("probe", sandbox).await else {
        return;
    };
    let sink = Arc::new(MemoryAuditSink::new());
    let mut registry = ToolRegistry::builder().audit_sink(sink.clone()).build();
    registry
        .register(
            tool.definition(
                ToolDefinition::builder("probe")
                    .description("does what its arguments say")
                    .input_schema(json!({"type": "object"}))
                    .scopes(["files:write"])
                    .mutating(true),
            ),
        )
        .unwrap();
    let target = folder.path().canonicalize().unwrap().join("ran.txt");
    let args = json!({"do": "write", "path": target});

    let refused = registry.call("probe", args.clone(), &caller(&[])).await;
    assert!(!refused.success);
    assert_eq!(common::code(&refused), "FORBIDDEN", "{refused:?}");
    assert!(!target.exists(), "the component must not have run");

    let ran = registry
        .call("probe", args.clone(), &caller(&["files:write"]))
        .await;
    assert!(ran.success, "{ran:?}");
    assert!(target.exists());
    assert_eq!(ran.meta.runtime().unwrap().principal(), Some("alice"));

    let stopped = registry
        .call("probe", json!({"do": "loop"}), &caller(&["files:write"]))
        .await;
    assert_eq!(common::code(&stopped), "TIMEOUT", "{stopped:?}");

    let records = sink.records();
    assert_eq!(records.len(), 3, "{records:?}");
    assert_eq!(records[0].outcome, AuditOutcome::Denied);
    assert_eq!(records[1].outcome, AuditOutcome::Executed);
    assert!(records[1].success);
    assert_eq!(records[1].request_id, "req-pipeline");
    assert_eq!(
        records[2].code.as_ref().map(|c| c.as_str()),
        Some("TIMEOUT")
    );
    assert!(!records[2].success);
    assert!(records.iter().all(|record| record.tool == "probe"));
}

#[tokio::test]
async fn sandbox_failures_reach_the_caller_with_their_codes() {
    let Some(tool) = common::load("probe", Sandbox::new().with_memory_mib(16)).await else {
        return;
    };
    let sink = Arc::new(MemoryAuditSink::new());
    let mut registry = ToolRegistry::builder().audit_sink(sink.clone()).build();
    registry
        .register(tool.definition(ToolDefinition::builder("probe")))
        .unwrap();
    let ctx = ToolContext::cli();
    let result = registry.call("probe", json!({"do": "memory"}), &ctx).await;
    assert_eq!(common::code(&result), "SANDBOX_LIMIT");
    assert_eq!(result.meta.get("sandbox_limit"), Some(&json!("memory")));
    let result = registry.call("probe", json!({"do": "invalid"}), &ctx).await;
    assert_eq!(common::code(&result), "VALIDATION_ERROR");
    let result = registry.call("probe", json!({"do": "echo"}), &ctx).await;
    assert!(result.success, "{result:?}");
    let codes: Vec<_> = sink
        .records()
        .iter()
        .map(|record| record.code.as_ref().map(|c| c.as_str().to_owned()))
        .collect();
    assert_eq!(
        codes,
        [
            Some("SANDBOX_LIMIT".to_owned()),
            Some("VALIDATION_ERROR".to_owned()),
            None
        ]
    );
}
