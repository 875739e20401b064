//! # milpa-gateway
//!
//! Upstream MCP servers behind milpa's pipeline (DESIGN §7): stdio children and
//! Streamable HTTP servers (`http://`, with an optional bearer token). Each tool an upstream lists
//! becomes a tool of ours named `<prefix><name>` with the upstream's input schema (compiled
//! once by the registry), so every call is validated, authorized, rate limited, confirmed
//! or parked for approval, audited, and only then forwarded as `tools/call`. The
//! upstream's content blocks, `structuredContent` and `isError` come back unchanged (through
//! the content convention of [`milpa_mcp::content`]).
//!
//! ```no_run
//! # async fn run(registry: std::sync::Arc<milpa::ToolRegistry>) {
//! use milpa_gateway::{Upstream, UpstreamConfig};
//!
//! let config = UpstreamConfig::stdio("fs", vec!["mcp-server-filesystem".into(), "/srv".into()]);
//! let upstream = Upstream::spawn(config);        // starts in the background
//! upstream.follow_tool_list(&registry);         // fs__read_file, fs__write_file, … once it is up
//! // keep `upstream` alive while serving: dropping it ends the server's process tree
//! # }
//! ```
//!
//! - Upstreams start in the background: the server serves at once; an upstream that cannot
//!   start (within its [`start_timeout`](UpstreamConfig::start_timeout), a line in the log
//!   every few seconds while it is awaited) is down and tried again with backoff, never
//!   fatal. Its tools appear when it is up (the registry's change signal tells clients).
//! - An upstream tool the registry cannot take (an invalid or over-long name, a name
//!   another tool holds, a schema that does not compile) is left out with an error in the
//!   log naming the upstream and the tool; the rest are served.
//!
//! - A tool is mutating unless the upstream annotates it `readOnlyHint: true` (fail
//!   closed); overrides by glob ([`ToolOverride`]) set `mutating`, `confirm`, `scopes`,
//!   the timeout, or hide it.
//! - A stdio upstream runs with a cleared environment (`PATH`, `HOME`, `LANG` and its
//!   configured variables, see [`milpa_process::child_env`]); its standard error goes to the log (target
//!   `milpa::upstream`) with its name.
//! - While it is down its calls fail with `UPSTREAM_UNAVAILABLE` and a message naming it; a
//!   stdio server is restarted with backoff ([`UpstreamState`] says where it is); an HTTP
//!   server is tried again by each call.
//! - Cancelling a call (or its hard timeout) sends `notifications/cancelled` upstream; the
//!   upstream's progress for a call reaches our caller.
//! - The upstream's `sampling/createMessage`, `elicitation/create` and `roots/list` during
//!   a call are relayed to the client that made the call when it declared the capability
//!   (and the elicitation mode), and its answer goes back as it came; otherwise
//!   elicitation is declined (`{"action": "decline"}`) and sampling and roots refused with
//!   an error. Over stdio a
//!   request is tied to a call only while that call is the upstream's only one in flight
//!   (the protocol does not say which call asks); with several it is declined.
//!
//! - Its resources, resource templates and prompts are served through the registry's
//!   catalog: every read, prompt and completion runs the registry's gates and audit before
//!   it is forwarded; their list changes and a subscribed resource's updates reach the
//!   clients (see the module `upstream_catalog`).
//! - The upstream's log (`notifications/message`) reaches the clients with its name as the
//!   logger, each at the level it set; a client's `logging/setLevel` is asked of the
//!   upstreams that declared `logging` (the most verbose any client asked for). See
//!   [`milpa::server_log`].
//! - Rug-pull protection: an upstream started with [`Upstream::spawn_pinned`] has the first
//!   definition seen of each of its tools and prompts pinned in the store; a changed one is
//!   neither listed nor callable until a person grants the change through the approvals
//!   queue (see [`DefinitionPins`]).
//! - The revision: `server/discover` is asked first, and an upstream that lists 2026-07-28
//!   is spoken to in it (no session; each request carries its `_meta`; its requests to
//!   the client come as `input_required` results, relayed the same way; its list changes
//!   through `subscriptions/listen`); any other gets `initialize` ([`ProtocolChoice`],
//!   [`Upstream::protocol`]).
//! - When the upstream says its tool list changed (`notifications/tools/list_changed`), or
//!   after it restarted, its tools are discovered again and replace its previous ones in
//!   the registry ([`Upstream::follow_tool_list`]), overrides and `hide` applied again; a
//!   new list that would collide with another tool's name leaves the previous one in place
//!   (logged as an error). The registry's change signal
//!   ([`ToolRegistry::tool_list_changes`](milpa::ToolRegistry::tool_list_changes)) then
//!   makes milpa-mcp send `notifications/tools/list_changed` to its clients.
//!
//! `https://` upstreams are checked against the system's trusted roots.

pub mod config;
mod connection;
pub mod error;
mod forward;
mod http;
mod pinning;
mod relay;
mod revision;
mod unavailability;
pub mod upstream;
mod upstream_catalog;
mod upstream_link;
mod upstream_log;

pub use config::{CatalogOverride, Confirm, ToolOverride, Transport, UpstreamConfig};
pub use connection::CallError;
pub use error::{ConfigProblem, GatewayError, HandshakeFailure};
pub use pinning::{DefinitionPins, HeldDefinition};
pub use revision::ProtocolChoice;
pub use unavailability::Unavailability;
pub use upstream::{Upstream, UpstreamState, definitions, register};

/// The MCP protocol revision milpa asks for at `initialize`, of an upstream that does not
/// speak 2026-07-28 (see [`ProtocolChoice`]; it answers with the one it speaks, which later
/// HTTP requests name): 2025-11-25, so that URL-mode elicitation can
/// be relayed; an HTTP upstream's answer stream closed mid-call is taken up again with
/// `Last-Event-ID` (SEP-1699).
pub const PROTOCOL_VERSION: &str = "2025-11-25";
