//! The built-in demo toolset, served when there is no manifest: `echo`, `add`, a small notes
//! service (whose `notes_clear` waits for a person's approval), the two verification
//! tools, the notes as a resource (`notes://all`) and a prompt (`summarize_notes`).
//! Written with `#[tools]`, like a user's tools.
//!
//! The notes live where the store does: in a table `demo_notes` of the SQLite file when the
//! store is SQLite (so `notes_add` in one `milpa call` shows in the next `notes_list`), in
//! the process's memory otherwise.

use std::collections::BTreeMap;
use std::sync::Arc;

use milpa::catalog::{
    CatalogError, Prompt, PromptArgument, PromptMessage, PromptProvider, PromptReply, Resource,
    ResourceContents, ResourceProvider,
};
use milpa::verification::VerificationTools;
use milpa::{Deferred, ErrorCode, RegistryError, ToolContext, ToolError, ToolRegistry, tools};
use milpa_sqlite::rusqlite;
use parking_lot::Mutex;
use serde_json::{Value, json};

use crate::store::Stores;

/// The scope `resolve_verification` needs in the demo toolset.
pub const RESOLVE_SCOPE: &str = "verification:resolve";

/// The demo tools and their notes.
#[derive(Debug)]
pub struct DemoTools {
    notes: NoteBook,
}

impl Default for DemoTools {
    fn default() -> Self {
        DemoTools {
            notes: NoteBook::Memory(Mutex::default()),
        }
    }
}

/// Where the notes are kept.
#[derive(Debug)]
enum NoteBook {
    Memory(Mutex<Notes>),
    Sqlite(Mutex<rusqlite::Connection>),
    /// The SQLite table could not be opened: every notes call says why (the other tools
    /// keep working).
    Unavailable(String),
}

#[derive(Debug, Default)]
struct Notes {
    next_id: u64,
    items: Vec<(u64, String)>,
}

/// A note as the tools return it.
fn note(id: u64, text: &str) -> Value {
    json!({"id": id, "text": text})
}

/// A database failure, as the tools report it.
fn unavailable(error: impl std::fmt::Display) -> ToolError {
    ToolError::with_code(
        ErrorCode::Unavailable,
        format!("The notes are unavailable: {error}"),
    )
}

impl NoteBook {
    fn on_sqlite(connection: rusqlite::Connection) -> rusqlite::Result<NoteBook> {
        connection.execute_batch(
            "CREATE TABLE IF NOT EXISTS demo_notes (
                 id INTEGER PRIMARY KEY AUTOINCREMENT,
                 text TEXT NOT NULL
             )",
        )?;
        Ok(NoteBook::Sqlite(Mutex::new(connection)))
    }

    fn add(&self, text: &str) -> Result<Value, ToolError> {
        match self {
            NoteBook::Memory(notes) => {
                let mut notes = notes.lock();
                notes.next_id += 1;
                let id = notes.next_id;
                notes.items.push((id, text.to_owned()));
                Ok(note(id, text))
            }
            NoteBook::Sqlite(db) => {
                let db = db.lock();
                let id: u64 = db
                    .query_row(
                        "INSERT INTO demo_notes (text) VALUES (?1) RETURNING id",
                        [text],
                        |row| row.get(0),
                    )
                    .map_err(unavailable)?;
                Ok(note(id, text))
            }
            NoteBook::Unavailable(why) => Err(unavailable(why)),
        }
    }

    fn list(&self) -> Result<Value, ToolError> {
        match self {
            NoteBook::Memory(notes) => {
                let notes = notes.lock();
                Ok(notes
                    .items
                    .iter()
                    .map(|(id, text)| note(*id, text))
                    .collect())
            }
            NoteBook::Sqlite(db) => {
                let db = db.lock();
                let mut statement = db
                    .prepare_cached("SELECT id, text FROM demo_notes ORDER BY id")
                    .map_err(unavailable)?;
                let rows = statement
                    .query_map([], |row| Ok(note(row.get(0)?, &row.get::<_, String>(1)?)))
                    .map_err(unavailable)?;
                rows.collect::<Result<Value, _>>().map_err(unavailable)
            }
            NoteBook::Unavailable(why) => Err(unavailable(why)),
        }
    }

    fn delete(&self, id: u64) -> Result<Option<String>, ToolError> {
        match self {
            NoteBook::Memory(notes) => {
                let mut notes = notes.lock();
                Ok(notes
                    .items
                    .iter()
                    .position(|(i, _)| *i == id)
                    .map(|at| notes.items.remove(at).1))
            }
            NoteBook::Sqlite(db) => {
                let db = db.lock();
                let text = db.query_row(
                    "DELETE FROM demo_notes WHERE id = ?1 RETURNING text",
                    [id],
                    |row| row.get(0),
                );
                match text {
                    Ok(text) => Ok(Some(text)),
                    Err(rusqlite::Error::QueryReturnedNoRows) => Ok(None),
                    Err(error) => Err(unavailable(error)),
                }
            }
            NoteBook::Unavailable(why) => Err(unavailable(why)),
        }
    }

    /// Deletes every note; how many there were.
    fn clear(&self) -> Result<u64, ToolError> {
        match self {
            NoteBook::Memory(notes) => {
                let mut notes = notes.lock();
                let count = notes.items.len() as u64;
                notes.items.clear();
                Ok(count)
            }
            NoteBook::Sqlite(db) => {
                let db = db.lock();
                let count = db
                    .execute("DELETE FROM demo_notes", [])
                    .map_err(unavailable)?;
                Ok(count as u64)
            }
            NoteBook::Unavailable(why) => Err(unavailable(why)),
        }
    }
}

impl DemoTools {
    /// The demo tools with their notes where `stores` keeps state: the SQLite file when the
    /// store is SQLite, else memory.
    pub fn new(stores: &Stores) -> DemoTools {
        let notes = match stores.sqlite() {
            Some(sqlite) => sqlite
                .open_connection()
                .map_err(|e| e.to_string())
                .and_then(|db| NoteBook::on_sqlite(db).map_err(|e| e.to_string()))
                .unwrap_or_else(|why| {
                    tracing::warn!(%why, "the demo notes table could not be opened");
                    NoteBook::Unavailable(why)
                }),
            None => NoteBook::Memory(Mutex::default()),
        };
        DemoTools { notes }
    }
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
    ) -> Result<Value, ToolError> {
        self.notes.add(&text)
    }

    /// Lists the notes, oldest first.
    #[tool]
    fn notes_list(&self) -> Result<Value, ToolError> {
        self.notes.list()
    }

    /// Deletes a note (asks for confirmation first).
    #[tool(mutating, confirm, scopes = ["notes:write"])]
    fn notes_delete(
        &self,
        #[param(description = "The note's id", minimum = 1)] id: u64,
    ) -> Result<Value, ToolError> {
        match self.notes.delete(id)? {
            Some(text) => Ok(json!({"deleted": id, "text": text})),
            None => Err(ToolError::with_code(
                ErrorCode::NotFound,
                format!("No note with id {id}"),
            )),
        }
    }

    /// Deletes every note (waits for a person other than the caller to approve it).
    #[tool(mutating, confirm = "human", scopes = ["notes:write"])]
    fn notes_clear(&self) -> Result<Value, ToolError> {
        Ok(json!({"deleted": self.notes.clear()?}))
    }
}

/// The resource `notes://all`: the notes, as `notes_list` returns them (JSON).
struct NotesResource(Arc<DemoTools>);

impl ResourceProvider for NotesResource {
    fn resources(&self) -> Vec<Resource> {
        vec![
            Resource::new("notes://all", "notes")
                .with_description("Every note, oldest first, as JSON")
                .with_mime_type("application/json"),
        ]
    }

    fn read<'a>(
        &'a self,
        uri: &'a str,
        _ctx: &'a ToolContext,
    ) -> Deferred<'a, Result<Vec<ResourceContents>, CatalogError>> {
        Deferred::ready(match self.0.notes.list() {
            Ok(notes) => Ok(vec![ResourceContents::text(
                uri,
                "application/json",
                notes.to_string(),
            )]),
            Err(error) => Err(CatalogError::failed(error.to_string())),
        })
    }
}

/// The prompt `summarize_notes(style?)`.
struct NotesPrompt;

impl PromptProvider for NotesPrompt {
    fn prompts(&self) -> Vec<Prompt> {
        vec![
            Prompt::new("summarize_notes", "Asks the model to summarize the notes").with_argument(
                PromptArgument::optional("style")
                    .with_description("How to summarize, e.g. \"one line\" or \"bullets\""),
            ),
        ]
    }

    fn get<'a>(
        &'a self,
        _name: &'a str,
        arguments: &'a BTreeMap<String, String>,
        _ctx: &'a ToolContext,
    ) -> Deferred<'a, Result<PromptReply, CatalogError>> {
        let style = arguments
            .get("style")
            .map_or("a few bullets", String::as_str);
        Deferred::ready(Ok(PromptReply::new(vec![PromptMessage::user(format!(
            "Read the resource notes://all (or call notes_list) and summarize the notes in {style}."
        ))])))
    }
}

/// Registers the demo toolset with everything in memory: `echo`, `add`, `notes_add`,
/// `notes_list`, `notes_delete`, `notes_clear`, `request_verification` and
/// `resolve_verification` (which needs [`RESOLVE_SCOPE`]), the resource `notes://all` and
/// the prompt `summarize_notes`.
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
    register_on(registry, &Stores::memory())
}

/// Registers the demo toolset with its notes on `stores`. Verification requests go to the
/// registry's approval queue (where `notes_clear` waits too), so people see both in one
/// list: [`build_registry`](crate::setup::build_registry) puts that queue on the store.
pub fn register_on(registry: &mut ToolRegistry, stores: &Stores) -> Result<(), RegistryError> {
    let demo = Arc::new(DemoTools::new(stores));
    registry.register_provider(Arc::clone(&demo))?;
    registry.register_resources(NotesResource(Arc::clone(&demo)))?;
    registry.register_prompts(NotesPrompt)?;
    VerificationTools::new(Arc::clone(registry.approvals().verifier()))
        .resolve_scopes([RESOLVE_SCOPE])
        .register(registry)
}
