//! `#[tools]`: methods with state, sync and async, context injection, one registration.

use std::sync::Arc;
use std::sync::Mutex;

use milpa::call_handle::CallHandle;
use milpa::{ErrorCode, ToolContext, ToolError, ToolProvider, ToolRegistry, tools};
use serde_json::{Value, json};

struct Notes {
    prefix: String,
    notes: Mutex<Vec<String>>,
}

impl Notes {
    fn new(prefix: &str) -> Notes {
        Notes {
            prefix: prefix.to_owned(),
            notes: Mutex::new(Vec::new()),
        }
    }
}

#[tools]
impl Notes {
    /// Adds a note.
    #[tool(mutating)]
    fn add_note(&self, text: String) -> usize {
        let mut notes = self.notes.lock().unwrap();
        notes.push(format!("{}{text}", self.prefix));
        notes.len()
    }

    /// Reads a note by position.
    #[tool]
    async fn get_note(&self, index: usize) -> Result<String, ToolError> {
        tokio::task::yield_now().await;
        let notes = self.notes.lock().unwrap();
        notes
            .get(index)
            .cloned()
            .ok_or_else(|| ToolError::with_code(ErrorCode::NotFound, format!("No note {index}")))
    }

    /// Says who is asking.
    #[tool]
    fn whoami(&self, ctx: &ToolContext, handle: &CallHandle, owned: ToolContext) -> Value {
        json!({
            "principal": ctx.principal(),
            "channel": owned.channel(),
            "attached": handle.is_attached(),
        })
    }

    /// Says who is asking, later.
    #[tool]
    async fn whoami_later(&self, handle: CallHandle, ctx: &ToolContext) -> Value {
        tokio::task::yield_now().await;
        json!({"request_id": ctx.request_id(), "attached": handle.is_attached()})
    }

    /// A tool without a receiver.
    #[tool(name = "notes.version")]
    fn version() -> &'static str {
        "1"
    }

    /// Not a tool: left alone.
    fn count(&self) -> usize {
        self.notes.lock().unwrap().len()
    }
}

#[test]
fn the_block_provides_its_tools_in_order() {
    let names: Vec<String> = Arc::new(Notes::new(""))
        .tool_definitions()
        .iter()
        .map(|d| d.name().to_owned())
        .collect();
    assert_eq!(
        names,
        [
            "add_note",
            "get_note",
            "whoami",
            "whoami_later",
            "notes.version"
        ]
    );
}

#[tokio::test]
async fn methods_share_the_providers_state() {
    let notes = Arc::new(Notes::new("> "));
    let mut registry = ToolRegistry::new();
    assert_eq!(registry.register_provider(notes.clone()).unwrap(), 5);
    assert!(registry.get("add_note").unwrap().is_mutating());
    let ctx = ToolContext::cli();

    let added = registry
        .call("add_note", json!({"text": "milk"}), &ctx)
        .await;
    assert_eq!(added.data, json!(1));
    registry
        .call("add_note", json!({"text": "eggs"}), &ctx)
        .await;
    assert_eq!(notes.count(), 2);

    let got = registry.call("get_note", json!({"index": 1}), &ctx).await;
    assert_eq!(got.data, json!("> eggs"));
    let missing = registry.call("get_note", json!({"index": 5}), &ctx).await;
    assert_eq!(missing.code(), Some(&ErrorCode::NotFound));
    assert_eq!(missing.error.as_deref(), Some("No note 5"));

    let version = registry.call("notes.version", json!({}), &ctx).await;
    assert_eq!(version.data, json!("1"));
}

#[tokio::test]
async fn context_and_call_handle_are_injected_not_arguments() {
    let mut registry = ToolRegistry::new();
    registry
        .register_provider(Arc::new(Notes::new("")))
        .unwrap();
    let whoami = registry.get("whoami").unwrap();
    let schema = whoami.input_schema();
    assert_eq!(schema["properties"], json!({}));
    assert!(schema.get("required").is_none());

    let ctx = ToolContext::web("alice", ["*"]);
    let result = registry.call("whoami", json!({}), &ctx).await;
    assert_eq!(
        result.data,
        json!({"principal": "alice", "channel": "web", "attached": false})
    );
    let later = registry.call("whoami_later", json!({}), &ctx).await;
    assert_eq!(
        later.data,
        json!({"request_id": ctx.request_id(), "attached": false})
    );
}
