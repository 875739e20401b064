//! # milpa
//!
//! A runtime that makes Rust functions safely callable by AI agents. Every call, from any
//! caller (a person on the CLI, a model over MCP, a bot), runs one fixed pipeline:
//!
//! resolve → validate → clamp → authorize → rate limit → plan mode → confirm →
//! `tool.executing` → execute (timeouts, panics contained) → audit →
//! `tool.executed` / `tool.failed`.
//!
//! The pipeline is data ([`StepKind::ORDER`]); refusals are values ([`ToolResult`] with
//! `meta.code`), never panics or `Err`.
//!
//! ```
//! use milpa::{ErrorCode, ToolContext, ToolDefinition, ToolRegistry};
//! use serde_json::json;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let mut registry = ToolRegistry::new();
//! registry.register(
//!     ToolDefinition::builder("delete_note")
//!         .description("Deletes a note")
//!         .input_schema(json!({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}))
//!         .scopes(["notes:write"])
//!         .mutating(true)
//!         .sync(|args, _ctx| json!({"deleted": args["id"]})),
//! ).unwrap();
//!
//! // An MCP caller without the scope is refused before anything runs.
//! let ctx = ToolContext::mcp("req-1", Some("bot".into()), ["notes:read"]);
//! let denied = registry.call("delete_note", json!({"id": 7}), &ctx).await;
//! assert_eq!(denied.code(), Some(&ErrorCode::Forbidden));
//!
//! let ctx = ToolContext::mcp("req-2", Some("alice".into()), ["notes:*"]);
//! let done = registry.call("delete_note", json!({"id": 7}), &ctx).await;
//! assert_eq!(done.data, json!({"deleted": 7}));
//! # });
//! ```

pub mod audit;
pub mod call_handle;
pub mod confirm;
mod context;
mod deferred;
mod definition;
pub mod events;
pub mod pipeline;
pub mod policy;
pub mod rate_limit;
mod registry;
mod result;
pub mod schema;

pub use call_handle::{CallHandle, CallPeer, LogLevel, PeerError};
pub use context::{
    Mode, ToolContext, ToolContextBuilder, channel, generate_request_id, scope_matches,
};
pub use deferred::{BoxFuture, Deferred, DeferredFuture};
pub use definition::{
    AsyncTool, Clamp, DEFAULT_TIMEOUT, IntoOutcome, Invocation, SyncTool, Tool, ToolDefinition,
    ToolDefinitionBuilder, ToolError, ToolOptions, ToolOutput, ToolProvider,
};
pub use events::{Dispatcher, Event, InterceptionSlot};
pub use pipeline::{StageTrace, StepKind};
pub use registry::{RegistryError, ToolRegistry, ToolRegistryBuilder};
pub use result::{ErrorCode, Meta, RuntimeMeta, ToolResult, asks_for_confirmation};
