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
//! Confirmation: a call whose outcome is a confirmation ticket ([`milpa::CallOutcome`]) is
//! confirmed through `elicitation/create` when the client declared elicitation (and
//! [`ServerOptions::elicitation_confirmation`] is on), and the ticket redeemed
//! ([`milpa::ToolRegistry::redeem`]); otherwise the ticket is rendered as the result that
//! tells the caller to repeat the call with `confirm_token` (taken off the arguments again
//! by [`milpa::split_confirm_token`] when the replay arrives).
//!
//! Human approvals: a call parked for a person (`confirm = "human"`) answers
//! `APPROVAL_PENDING`, with `approve_url` when the HTTP server knows its approvals page
//! ([`HttpServer::approval_page_url`]). A client that declared URL-mode elicitation is sent
//! that URL (`elicitation/create`, `mode: "url"`) and, once it accepts, its call completes
//! when a person decides (the tool's result, or `FORBIDDEN`), the approval expires, or the
//! call is cancelled; the client's accept never approves anything.
//!
//! ## Features
//!
//! Every feature is on by default; a program that needs less turns the rest off
//! (`default-features = false`) and links less: a stdio-only build (`features = ["stdio"]`)
//! has no HTTP server, JWT or TLS crate in it.
//!
//! | Feature | What it gives |
//! |---|---|
//! | `stdio` | [`serve_stdio`], [`serve_stdio_with`], [`serve_io`] |
//! | `http` | [`HttpServer`]: the Streamable HTTP transport, bearer tokens through an [`auth::Authenticator`] |
//! | `oauth` (implies `http`) | [`auth::oauth`] and `HttpServer::oauth`: access tokens from an OAuth 2.1 issuer, its JWKS fetched over https |
//! | `approvals-page` (implies `http`) | [`approvals`] and `HttpServer::approvals_page`: the page where people grant or reject parked calls, with passkeys |
//! | `otel` | a `tools/call`'s `_meta.traceparent` becomes the parent of its `execute_tool` span (without it the trace context is read and ignored) |
//!
//! The protocol itself (sessions, [`mapping`], [`content`], [`jsonrpc`], confirmation and
//! approvals through the registry) is in every build.
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

#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "approvals-page")]
#[cfg_attr(docsrs, doc(cfg(feature = "approvals-page")))]
pub mod approvals;
pub mod auth;
#[cfg_attr(
    not(all(feature = "stdio", feature = "http")),
    allow(dead_code, unused_imports)
)]
pub mod catalog_mapping;
mod client_link;
pub mod content;
#[cfg(feature = "http")]
mod http;
pub mod jsonrpc;
#[cfg(feature = "http")]
mod listener;
pub mod mapping;
mod method;
mod peer;
pub mod protocol;
// The session is shared by both transports, and each uses only part of it: its dead code
// is judged in a build with both (the default, which CI lints), not in one with either alone.
#[cfg_attr(
    not(all(feature = "stdio", feature = "http")),
    allow(dead_code, unused_imports)
)]
mod session;
#[cfg(feature = "stdio")]
mod stdio;
mod trace_context;

#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use http::{
    HttpServer, METRICS_SCOPE, MetricsAccess, Readiness, ReadinessCheck, UpstreamReport,
    UpstreamReports,
};
pub use protocol::{LATEST_VERSION, SUPPORTED_VERSIONS, ServerOptions};
#[cfg(feature = "stdio")]
#[cfg_attr(docsrs, doc(cfg(feature = "stdio")))]
pub use stdio::{STDIO_SPIN_ENV, serve_io, serve_stdio, serve_stdio_with};
