//! A small MCP server over stdio, built on milpa-mcp: the upstream the gateway's tests put
//! behind the pipeline. It lists two tools per `tools/list` page, so a client must follow
//! `nextCursor`.
//!
//! Tools: `echo(text)`, `pixel()` (an image block), `count_to(n)` (reports progress),
//! `environment()` (the names of its environment variables), `boom()` (an error result),
//! `wipe()` (mutating).

use std::sync::Arc;
use std::time::Duration;

use milpa::{ToolContext, ToolDefinition, ToolRegistry, ToolResult};
use milpa_mcp::{ServerOptions, content};
use serde_json::{Value, json};

fn tools() -> Vec<ToolDefinition> {
    vec![
        ToolDefinition::builder("echo")
            .description("Echoes its text")
            .input_schema(json!({
                "type": "object",
                "properties": {"text": {"type": "string", "description": "What to echo"}},
                "required": ["text"],
                "additionalProperties": false
            }))
            .sync(|args: &Value, _: &ToolContext| args["text"].clone()),
        ToolDefinition::builder("pixel")
            .description("A red pixel")
            .output_schema(json!({
                "type": "object",
                "properties": {"width": {"type": "integer"}}
            }))
            .sync(|_: &Value, _: &ToolContext| {
                content::result_with_structured(
                    [
                        content::text("A red pixel:"),
                        content::image("iVBORw0KGgo=", "image/png"),
                    ],
                    json!({"width": 1}),
                )
            }),
        ToolDefinition::builder("count_to")
            .description("Counts to n, reporting progress")
            .input_schema(json!({
                "type": "object",
                "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 20}},
                "required": ["n"]
            }))
            .asynchronous(|args: Value, ctx: milpa::ToolContext| async move {
                let n = args["n"].as_u64().unwrap_or(1);
                for i in 1..=n {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    ctx.call_handle()
                        .progress(i as f64, Some(n as f64), Some("counting"));
                }
                json!(n)
            }),
        ToolDefinition::builder("environment")
            .description("The names of the variables in its environment")
            .sync(|_: &Value, _: &ToolContext| {
                let mut names: Vec<String> = std::env::vars_os()
                    .filter_map(|(k, _)| k.into_string().ok())
                    .collect();
                names.sort();
                json!(names)
            }),
        ToolDefinition::builder("boom")
            .description("Always fails")
            .sync(|_: &Value, _: &ToolContext| {
                content::error_result(
                    "the disk is on fire",
                    [content::text("the disk is on fire")],
                )
            }),
        ToolDefinition::builder("wipe")
            .description("Pretends to wipe everything")
            .mutating(true)
            .sync(|_: &Value, _: &ToolContext| ToolResult::success(json!("wiped"))),
    ]
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let mut registry = ToolRegistry::new();
    for tool in tools() {
        registry.register(tool).expect("a valid tool");
    }
    let mut options = ServerOptions::default();
    options.name = "stdio-example".into();
    options.page_size = 2;
    milpa_mcp::serve_stdio_with(Arc::new(registry), options).await
}
