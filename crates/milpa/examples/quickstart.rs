//! A tour of the pipeline with hand-registered tools: a call that runs, one that validation
//! refuses, one the policy gate denies, a dry run, and a confirmation round trip.
//!
//! `cargo run --release -p milpa --example quickstart`

use milpa::{ToolContext, ToolDefinition, ToolRegistry, ToolResult};
use serde_json::json;

fn show(label: &str, result: &ToolResult) {
    println!(
        "{label}:\n{}\n",
        serde_json::to_string_pretty(result).expect("results serialize")
    );
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), milpa::RegistryError> {
    let mut registry = ToolRegistry::new();
    registry.register(
        ToolDefinition::builder("add")
            .description("Adds two integers")
            .input_schema(json!({
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"]
            }))
            .sync(|args, _ctx| {
                json!(args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0))
            }),
    )?;
    registry.register(
        ToolDefinition::builder("delete_everything")
            .description("Deletes everything (asks first)")
            .scopes(["admin"])
            .mutating(true)
            .requires_confirmation(true)
            .sync(|_args, ctx| json!({"deleted_by": ctx.principal()})),
    )?;

    let cli = ToolContext::cli();
    show(
        "add 2 + 3",
        &registry.call("add", json!({"a": 2, "b": 3}), &cli).await,
    );
    show(
        "add with a string",
        &registry.call("add", json!({"a": "2"}), &cli).await,
    );

    let agent = ToolContext::mcp("req-1", Some("agent".into()), ["notes:read"]);
    show(
        "an agent without the scope",
        &registry.call("delete_everything", json!({}), &agent).await,
    );
    show(
        "plan mode",
        &registry
            .call("delete_everything", json!({}), &cli.as_plan())
            .await,
    );

    let asked = registry.call("delete_everything", json!({}), &cli).await;
    show("first call asks for confirmation", &asked);
    let token = asked.confirm_token().unwrap_or_default().to_owned();
    show(
        "the replay with the token runs",
        &registry
            .call("delete_everything", json!({"confirm_token": token}), &cli)
            .await,
    );
    Ok(())
}
