//! The built-in demo toolset, served when there is no manifest: `echo`, `add`, a small notes
//! service and the two verification tools. Written with `#[tools]`, like a user's tools.

use std::sync::{Arc, Mutex};

use milpa::verification::{HumanVerifier, VerificationTools};
use milpa::{ErrorCode, RegistryError, ToolError, ToolRegistry, tools};
use serde_json::{Value, json};

/// The scope `resolve_verification` needs in the demo toolset.
pub const RESOLVE_SCOPE: &str = "verification:resolve";

/// The demo tools and their (in-memory, per-process) notes.
#[derive(Debug, Default)]
pub struct DemoTools {
    notes: Mutex<Notes>,
}

#[derive(Debug, Default)]
struct Notes {
    next_id: u64,
    items: Vec<(u64, String)>,
}

#[tools]
impl DemoTools {
    /// Returns the text it is given.
    #[tool]
    fn echo(&self, #[param(description = "The text to return")] text: String) -> String {
        text
    }

    /// Adds two integers.
    #[tool]
    fn add(
        &self,
        #[param(description = "First addend")] a: i64,
        #[param(description = "Second addend")] b: i64,
    ) -> Result<i64, ToolError> {
        a.checked_add(b)
            .ok_or_else(|| ToolError::with_code(ErrorCode::ValidationError, "The sum overflows"))
    }

    /// Adds a note and returns it with its id.
    #[tool(mutating, scopes = ["notes:write"])]
    fn notes_add(
        &self,
        #[param(description = "What the note says", min_length = 1, max_length = 2000)]
        text: String,
    ) -> Value {
        let mut notes = self.notes.lock().unwrap_or_else(|p| p.into_inner());
        notes.next_id += 1;
        let id = notes.next_id;
        notes.items.push((id, text.clone()));
        json!({"id": id, "text": text})
    }

    /// Lists the notes, oldest first.
    #[tool]
    fn notes_list(&self) -> Value {
        let notes = self.notes.lock().unwrap_or_else(|p| p.into_inner());
        Value::Array(
            notes
                .items
                .iter()
                .map(|(id, text)| json!({"id": id, "text": text}))
                .collect(),
        )
    }

    /// Deletes a note (asks for confirmation first).
    #[tool(mutating, confirm, scopes = ["notes:write"])]
    fn notes_delete(
        &self,
        #[param(description = "The note's id", minimum = 1)] id: u64,
    ) -> Result<Value, ToolError> {
        let mut notes = self.notes.lock().unwrap_or_else(|p| p.into_inner());
        match notes.items.iter().position(|(i, _)| *i == id) {
            Some(at) => {
                let (id, text) = notes.items.remove(at);
                Ok(json!({"deleted": id, "text": text}))
            }
            None => Err(ToolError::with_code(
                ErrorCode::NotFound,
                format!("No note with id {id}"),
            )),
        }
    }
}

/// Registers the demo toolset: `echo`, `add`, `notes_add`, `notes_list`, `notes_delete`,
/// `request_verification` and `resolve_verification` (which needs
/// [`RESOLVE_SCOPE`]).
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use milpa::{ToolContext, ToolRegistry};
/// use serde_json::json;
///
/// let mut registry = ToolRegistry::new();
/// milpa_cli::demo::register(&mut registry).unwrap();
/// let sum = registry.call("add", json!({"a": 2, "b": 3}), &ToolContext::cli()).await;
/// assert_eq!(sum.data, json!(5));
/// # });
/// ```
pub fn register(registry: &mut ToolRegistry) -> Result<(), RegistryError> {
    registry.register_provider(Arc::new(DemoTools::default()))?;
    VerificationTools::new(HumanVerifier::in_memory())
        .resolve_scopes([RESOLVE_SCOPE])
        .register(registry)
}
