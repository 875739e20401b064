//! A tour of the pipeline with hand-registered tools: a call that runs, one that validation
//! refuses, one the policy gate denies, a dry run, and a confirmation round trip.
//!
//! `cargo run --release -p milpa --example quickstart`

use milpa::{CallOutcome, ToolContext, ToolDefinition, ToolRegistry, ToolResult};
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

    // The typed API: the first call hands back a ticket, and redeeming it runs the call.
    // (`call` renders the same ticket as the JSON `--json` and MCP clients see.)
    match registry.invoke("delete_everything", json!({}), &cli).await {
        CallOutcome::NeedsConfirmation(ticket) => {
            show("first call asks for confirmation", &ticket.to_result());
            println!(
                "confirm {} before {}?\n",
                ticket.summary(),
                ticket.expires_at_text()
            );
            let done = registry
                .redeem("delete_everything", ticket.token(), &cli)
                .await;
            show("redeeming the ticket runs it", &done.into_result());
        }
        other => show("unexpected", &other.into_result()),
    }
    Ok(())
}
