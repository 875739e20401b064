//! The wire shape of results: key order, `meta.code`, runtime meta on every result.

mod support;

use milpa::{ErrorCode, ToolContext, ToolDefinition, ToolRegistry, ToolResult};
use serde_json::{Value, json};
use support::{Runs, add_tool};

#[tokio::test]
async fn a_success_has_the_five_keys_in_order_and_runtime_meta() {
    let mut registry = ToolRegistry::new();
    registry.register(add_tool(&Runs::default())).unwrap();
    let ctx = ToolContext::builder("cli")
        .principal("local-shell")
        .request_id("req-9")
        .build();
    let result = registry.call("add", json!({"a": 2, "b": 3}), &ctx).await;
    let text = serde_json::to_string(&result).unwrap();
    let took = result.meta.runtime().unwrap().took_ms();
    assert_eq!(
        text,
        format!(
            r#"{{"success":true,"data":5,"message":null,"error":null,"meta":{{"tool":"add","took_ms":{took},"request_id":"req-9","channel":"cli","principal":"local-shell"}}}}"#
        )
    );
}

#[tokio::test]
async fn a_refusal_carries_its_code_in_meta_and_its_message_in_error() {
    let registry = ToolRegistry::new();
    let ctx = ToolContext::builder("web").request_id("r").build();
    let result = registry.call("nope", json!({}), &ctx).await;
    let value = serde_json::to_value(&result).unwrap();
    assert_eq!(value["success"], false);
    assert_eq!(value["error"], "Tool not found: nope");
    assert_eq!(value["meta"]["code"], "TOOL_NOT_FOUND");
    assert_eq!(value["meta"]["type"], "error");
    assert_eq!(value["meta"]["tool"], "nope");
    assert_eq!(value["meta"]["principal"], Value::Null);
}

#[tokio::test]
async fn results_a_tool_built_itself_also_get_runtime_meta() {
    let mut registry = ToolRegistry::new();
    registry
        .register(
            ToolDefinition::builder("listing")
                .description("A paginated listing")
                .sync(|_args, _ctx| ToolResult::paginated(vec![json!({"id": 1})], 1, 1, 10, None)),
        )
        .unwrap();
    let result = registry
        .call("listing", json!({}), &ToolContext::cli())
        .await;
    assert_eq!(result.result_type(), "list");
    let runtime = result.meta.runtime().expect("runtime meta");
    assert_eq!(runtime.tool(), "listing");
    assert_eq!(runtime.channel(), "cli");
    let meta = serde_json::to_value(&result.meta).unwrap();
    assert_eq!(meta["pagination"]["total_pages"], 1);
    assert_eq!(meta["principal"], "local-shell");
}

#[test]
fn round_trips_through_json() {
    let result = ToolResult::error_with_code(ErrorCode::RateLimited, "slow down")
        .with_meta("retry_after_seconds", json!(3));
    let back: ToolResult = serde_json::from_str(&serde_json::to_string(&result).unwrap()).unwrap();
    assert_eq!(back, result);
    assert_eq!(back.code(), Some(&ErrorCode::RateLimited));
}
