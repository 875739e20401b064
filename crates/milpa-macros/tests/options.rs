//! `#[tool(...)]` options: they reach `ToolOptions` and the pipeline honours them.

use std::time::Duration;

use milpa::{Clamp, ErrorCode, ToolContext, ToolRegistry, tool};
use serde_json::json;

/// Sets the volume.
#[tool(
    scopes = ["audio:write", "admin"],
    mutating,
    timeout = 5,
    hard_timeout = 0.5,
    version = "1.2",
    clamps(level = [0, 100], balance = [-1.5, 1.5])
)]
fn set_volume(level: i64, balance: f64) -> serde_json::Value {
    json!({"level": level, "balance": balance})
}

#[test]
fn options_reach_the_definition() {
    let definition = set_volume_tool();
    let options = definition.options();
    assert_eq!(options.scopes, ["audio:write", "admin"]);
    assert!(options.mutating);
    assert!(!options.requires_confirmation);
    assert_eq!(options.timeout, Duration::from_secs(5));
    assert_eq!(options.hard_timeout, Some(Duration::from_millis(500)));
    assert_eq!(options.version.as_deref(), Some("1.2"));
    assert_eq!(
        options.clamps[0],
        ("level".to_owned(), Clamp::range(0, 100))
    );
    assert_eq!(options.clamps[1].0, "balance");
    assert_eq!(
        options.clamps[1].1.min.as_ref().and_then(|n| n.as_f64()),
        Some(-1.5)
    );
}

/// Reads something.
#[tool]
fn plain() {}

#[test]
fn defaults_are_the_runtime_defaults() {
    let definition = plain_tool();
    assert_eq!(definition.options(), &milpa::ToolOptions::default());
    assert!(definition.tool().runs_blocking(), "a sync fn runs blocking");
}

#[tokio::test]
async fn clamps_are_applied_before_the_tool_runs() {
    let mut registry = ToolRegistry::new();
    registry.register(set_volume_tool()).unwrap();
    let ctx = ToolContext::cli();
    let result = registry
        .call("set_volume", json!({"level": 500, "balance": -9}), &ctx)
        .await;
    assert!(result.success, "{result:?}");
    assert_eq!(result.data, json!({"level": 100, "balance": -1.5}));
    let result = registry
        .call("set_volume", json!({"level": 42, "balance": 0.25}), &ctx)
        .await;
    assert_eq!(result.data, json!({"level": 42, "balance": 0.25}));
}

#[tokio::test]
async fn scopes_are_enforced() {
    let mut registry = ToolRegistry::new();
    registry.register(set_volume_tool()).unwrap();
    let reader = ToolContext::mcp("r1", Some("bob".into()), ["audio:read"]);
    let denied = registry
        .call("set_volume", json!({"level": 1, "balance": 0}), &reader)
        .await;
    assert_eq!(denied.code(), Some(&ErrorCode::Forbidden));
    let admin = ToolContext::mcp("r2", Some("ann".into()), ["admin"]);
    let allowed = registry
        .call("set_volume", json!({"level": 1, "balance": 0}), &admin)
        .await;
    assert!(allowed.success, "{allowed:?}");
}

/// Takes its time.
#[tool(hard_timeout = 0.05)]
async fn slow() -> &'static str {
    tokio::time::sleep(Duration::from_secs(5)).await;
    "done"
}

/// Blocks its thread.
#[tool(hard_timeout = 0.05)]
fn blocking() -> &'static str {
    std::thread::sleep(Duration::from_millis(400));
    "done"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hard_timeouts_cancel_sync_and_async_tools() {
    let mut registry = ToolRegistry::new();
    registry.register(slow_tool()).unwrap();
    registry.register(blocking_tool()).unwrap();
    assert!(!registry.get("slow").unwrap().tool().runs_blocking());
    assert!(registry.get("blocking").unwrap().tool().runs_blocking());
    let ctx = ToolContext::cli();
    let slow = registry.call("slow", json!({}), &ctx).await;
    assert_eq!(slow.code(), Some(&ErrorCode::Timeout));
    let blocking = registry.call("blocking", json!({}), &ctx).await;
    assert_eq!(blocking.code(), Some(&ErrorCode::Timeout));
}
