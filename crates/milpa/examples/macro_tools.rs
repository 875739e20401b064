//! Declaring tools with `#[tool]` and `#[tools]`, and calling them through the registry.
//!
//! Run with `cargo run -p milpa --example macro_tools`.

use std::sync::Arc;

use milpa::{ErrorCode, Json, ToolContext, ToolError, ToolRegistry, ToolResult, tool, tools};
use parking_lot::Mutex;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

/// Adds two integers.
#[tool]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

/// Greets someone in their language.
#[tool(hard_timeout = 2)]
async fn greet(
    #[param(description = "Who to greet")] name: String,
    #[param(enum = ["en", "es"], default = "en")] lang: String,
    ctx: &ToolContext,
) -> String {
    // Stands in for real asynchronous work (a database, an HTTP call).
    tokio::task::yield_now().await;
    let hello = if lang == "es" { "Hola" } else { "Hello" };
    format!("{hello}, {name} (via {})", ctx.channel())
}

/// A note.
#[derive(Clone, Serialize, JsonSchema)]
struct Note {
    /// Its position.
    id: usize,
    /// What it says.
    text: String,
}

/// A notebook whose methods are tools sharing its state.
#[derive(Default)]
struct Notebook {
    notes: Mutex<Vec<Note>>,
}

#[tools]
impl Notebook {
    /// Writes a note.
    #[tool(mutating, scopes = ["notes:write"], clamps(priority = [1, 5]))]
    fn add_note(&self, #[param(min_length = 1)] text: String, priority: Option<u8>) -> Json<Note> {
        let mut notes = self.notes.lock();
        let note = Note {
            id: notes.len(),
            text: format!("[p{}] {text}", priority.unwrap_or(3)),
        };
        notes.push(note.clone());
        Json(note)
    }

    /// Reads a note.
    #[tool(scopes = ["notes:read"])]
    async fn get_note(&self, id: usize) -> Result<Json<Note>, ToolError> {
        let notes = self.notes.lock();
        match notes.get(id) {
            Some(note) => Ok(Json(note.clone())),
            None => Err(ToolError::with_code(
                ErrorCode::NotFound,
                format!("No note {id}"),
            )),
        }
    }

    /// Deletes every note.
    #[tool(mutating, confirm, scopes = ["notes:write"])]
    fn clear_notes(&self) -> usize {
        let mut notes = self.notes.lock();
        let count = notes.len();
        notes.clear();
        count
    }
}

fn show(name: &str, result: &ToolResult) {
    let json = serde_json::to_string(result).unwrap_or_else(|e| e.to_string());
    println!("{name:>12} -> {json}");
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), milpa::RegistryError> {
    let mut registry = ToolRegistry::new();
    registry.register(add_tool())?;
    registry.register(greet_tool())?;
    let count = registry.register_provider(Arc::new(Notebook::default()))?;
    println!(
        "registered {} tools ({count} from the notebook)",
        registry.len()
    );
    let schema = registry.get("greet").map(|d| d.input_schema().to_string());
    println!("greet's input schema: {}", schema.unwrap_or_default());

    let ctx = ToolContext::cli();
    show(
        "add",
        &registry.call("add", json!({"a": 2, "b": 40}), &ctx).await,
    );
    show(
        "greet",
        &registry
            .call("greet", json!({"name": "Ana", "lang": "es"}), &ctx)
            .await,
    );
    show(
        "greet",
        &registry.call("greet", json!({"name": "Bo"}), &ctx).await,
    );
    show(
        "add_note",
        &registry
            .call("add_note", json!({"text": "buy milk", "priority": 9}), &ctx)
            .await,
    );
    show(
        "get_note",
        &registry.call("get_note", json!({"id": 0}), &ctx).await,
    );
    show(
        "get_note",
        &registry.call("get_note", json!({"id": 7}), &ctx).await,
    );
    show(
        "add",
        &registry.call("add", json!({"a": "two"}), &ctx).await,
    );

    // A reader over MCP may read but not write.
    let reader = ToolContext::mcp("req-1", Some("bot".into()), ["notes:read"]);
    show(
        "add_note",
        &registry
            .call("add_note", json!({"text": "spam"}), &reader)
            .await,
    );

    // Clearing asks for confirmation first (a ticket); redeeming the ticket runs it.
    let asked = registry.invoke("clear_notes", json!({}), &ctx).await;
    if let milpa::CallOutcome::NeedsConfirmation(ticket) = asked {
        show("clear_notes", &ticket.to_result());
        let done = registry.redeem("clear_notes", ticket.token(), &ctx).await;
        show("clear_notes", &done.into_result());
    }
    Ok(())
}
