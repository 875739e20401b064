//! What the fuzz targets share: a registry with a few tools of every kind (sync, async with
//! progress and logs, mutating with confirmation, failing, clamped), reachable without
//! authentication so inputs get past the gate and into the tools.

use std::sync::Arc;

use milpa::policy::ChannelPolicy;
use milpa::{Clamp, LogLevel, ToolContext, ToolDefinition, ToolError, ToolRegistry};
use serde_json::{Value, json};

/// The tools every protocol target serves.
pub fn tools() -> Vec<ToolDefinition> {
    vec![
        ToolDefinition::builder("echo")
            .description("Echoes the text")
            .input_schema(json!({
                "type": "object",
                "properties": {"text": {"type": "string", "maxLength": 64}},
                "required": ["text"]
            }))
            .sync(|args, _| args["text"].clone()),
        ToolDefinition::builder("add")
            .description("Adds two clamped integers")
            .input_schema(json!({
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
                "additionalProperties": false
            }))
            .clamp("a", Clamp::range(-1000, 1000))
            .output_schema(json!({"type": "object", "properties": {"result": {"type": "integer"}}}))
            .sync(|args, _| {
                json!({"result": args["a"].as_i64().unwrap_or(0).saturating_add(args["b"].as_i64().unwrap_or(0))})
            }),
        ToolDefinition::builder("delete_note")
            .description("Deletes a note (needs a confirmation)")
            .input_schema(json!({
                "type": "object",
                "properties": {"id": {"type": "integer"}, "password": {"type": "string"}},
                "required": ["id"]
            }))
            .mutating(true)
            .requires_confirmation(true)
            .sync(|args, _| json!({"deleted": args["id"]})),
        ToolDefinition::builder("progress")
            .description("Reports progress and logs, then answers")
            .input_schema(json!({"type": "object", "properties": {"steps": {"type": "integer", "minimum": 0, "maximum": 5}}}))
            .asynchronous(|args: Value, ctx: ToolContext| async move {
                let steps = args["steps"].as_u64().unwrap_or(1);
                let handle = ctx.call_handle();
                for step in 0..steps {
                    handle.progress(step as f64, Some(steps as f64), Some("working"));
                    handle.log(LogLevel::Info, json!({"step": step}));
                    tokio::task::yield_now().await;
                }
                json!({"steps": steps})
            }),
        ToolDefinition::builder("fails")
            .description("Fails")
            .input_schema(json!({"type": "object"}))
            .sync(|_, _| -> Result<Value, ToolError> { Err(ToolError::new("it broke")) }),
    ]
}

/// A registry with [`tools`] whose `mcp` channel lets anonymous callers through.
pub fn registry() -> Arc<ToolRegistry> {
    let mut registry = ToolRegistry::builder()
        .channel_policy("mcp", ChannelPolicy::CLI)
        .build();
    for tool in tools() {
        registry.register(tool).expect("the fuzz tools register");
    }
    Arc::new(registry)
}
