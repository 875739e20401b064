//! # milpa-mcp
//!
//! A Model Context Protocol server for a [`milpa::ToolRegistry`]: every `tools/call` runs
//! through the registry's full pipeline (validation, policy, rate limit, confirmation,
//! audit). Protocol versions 2025-11-25 (preferred), 2025-06-18, 2025-03-26 and 2024-11-05.
//!
//! - [`serve_stdio`] / [`serve_io`]: newline-delimited JSON-RPC over stdio or any streams.
//! - [`HttpServer`]: the Streamable HTTP transport (sessions, SSE, Host/Origin checks,
//!   bearer tokens through an [`auth::Authenticator`], OAuth 2.1 access tokens through
//!   [`auth::oauth`]), and beside it the [`approvals`]
//!   page, where a person signs in with a token and grants or rejects parked calls.
//! - Tools reach their caller through their context's [`milpa::CallHandle`]: progress
//!   (`notifications/progress`), log messages (`notifications/message`, filtered by the
//!   level the client set), sampling and elicitation requests, and cancellation.
//! - [`content`]: the convention for tools that return image, audio or resource blocks.
//! - [`mapping`]: how definitions and results appear on the wire (DESIGN §6).
//!
//! Confirmation: a call that needs confirmation is confirmed through `elicitation/create`
//! when the client declared elicitation (and [`ServerOptions::elicitation_confirmation`] is
//! on); otherwise the result tells the caller to repeat the call with `confirm_token`.
//!
//! Human approvals: a call parked for a person (`confirm = "human"`) answers
//! `APPROVAL_PENDING`, with `approve_url` when the HTTP server knows its approvals page
//! ([`HttpServer::approval_page_url`]). A client that declared URL-mode elicitation is sent
//! that URL (`elicitation/create`, `mode: "url"`) and, once it accepts, its call completes
//! when a person decides (the tool's result, or `FORBIDDEN`), the approval expires, or the
//! call is cancelled; the client's accept never approves anything.
//!
//! ```no_run
//! use std::sync::Arc;
//! use milpa::{ToolDefinition, ToolRegistry};
//! use serde_json::json;
//!
//! #[tokio::main]
//! async fn main() -> std::io::Result<()> {
//!     let mut registry = ToolRegistry::new();
//!     registry
//!         .register(
//!             ToolDefinition::builder("echo")
//!                 .description("Echoes the text")
//!                 .input_schema(json!({"type": "object", "properties": {"text": {"type": "string"}}}))
//!                 .sync(|args, _ctx| args["text"].clone()),
//!         )
//!         .unwrap();
//!     milpa_mcp::serve_stdio(Arc::new(registry)).await
//! }
//! ```

pub mod approvals;
pub mod auth;
pub mod content;
mod http;
pub mod jsonrpc;
pub mod mapping;
mod peer;
pub mod protocol;
mod session;
mod stdio;
mod trace_context;

pub use http::HttpServer;
pub use protocol::{LATEST_VERSION, SUPPORTED_VERSIONS, ServerOptions};
pub use stdio::{STDIO_SPIN_ENV, serve_io, serve_stdio, serve_stdio_with};
