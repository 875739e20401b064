//! The result a caller gets back quotes none of the call's secret argument values: not in
//! `error`, `message`, string `data` at any depth, nor the text content blocks a tool built.

mod support;

use milpa::audit::MemoryAuditSink;
use milpa::{ToolContext, ToolDefinition, ToolError, ToolRegistry, ToolResult};
use serde_json::{Value, json};
use support::audited;

const SECRET: &str = "hunter22-s3cret";

fn registry() -> (ToolRegistry, std::sync::Arc<MemoryAuditSink>) {
    let (mut registry, sink) = audited(ToolRegistry::builder());
    registry
        .register(
            ToolDefinition::builder("login_echo").sync(|args: &Value, _: &ToolContext| {
                let password = args["password"].as_str().unwrap_or_default();
                let mut result = ToolResult::success(json!({
                    "echo": format!("you sent {password}"),
                    "nested": [{"again": password}],
                    "content": [{"type": "text", "text": format!("password={password}")}],
                }))
                .with_message(format!("logged in with {password}"));
                result.meta.insert("mcp_content", json!(true));
                result
            }),
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::builder("login_fail").sync(|args: &Value, _: &ToolContext| {
                Err::<Value, _>(ToolError::new(format!(
                    "exit 1: bad password {} for {}",
                    args["password"].as_str().unwrap_or_default(),
                    args["user"].as_str().unwrap_or_default(),
                )))
            }),
        )
        .unwrap();
    (registry, sink)
}

#[tokio::test]
async fn a_tool_that_echoes_its_password_returns_it_scrubbed() {
    let (registry, _sink) = registry();
    let result = registry
        .call(
            "login_echo",
            json!({"user": "ann", "password": SECRET}),
            &ToolContext::cli(),
        )
        .await;
    assert!(result.success, "{result:?}");
    let wire = serde_json::to_string(&result).unwrap();
    assert!(!wire.contains(SECRET), "{wire}");
    assert_eq!(result.message.as_deref(), Some("logged in with [REDACTED]"));
    assert_eq!(result.data["echo"], "you sent [REDACTED]");
    assert_eq!(result.data["nested"][0]["again"], "[REDACTED]");
    assert_eq!(result.data["content"][0]["text"], "password=[REDACTED]");
}

#[tokio::test]
async fn a_failure_quoting_the_password_is_scrubbed_for_the_caller_and_the_audit() {
    let (registry, sink) = registry();
    let result = registry
        .call(
            "login_fail",
            json!({"user": "ann", "password": SECRET}),
            &ToolContext::cli(),
        )
        .await;
    assert!(!result.success);
    assert_eq!(
        result.error.as_deref(),
        Some("exit 1: bad password [REDACTED] for ann")
    );
    let record = support::only_record(&sink);
    assert_eq!(
        record.error.as_deref(),
        Some("exit 1: bad password [REDACTED] for ann")
    );
}

#[tokio::test]
async fn values_under_ordinary_keys_come_back_as_they_are() {
    let (registry, _sink) = registry();
    // `user` and `passage` are not secret keys: their values are the caller's own texts.
    let result = registry
        .call(
            "login_fail",
            json!({"user": SECRET, "passage": "x"}),
            &ToolContext::cli(),
        )
        .await;
    assert_eq!(
        result.error,
        Some(format!("exit 1: bad password  for {SECRET}"))
    );
}
