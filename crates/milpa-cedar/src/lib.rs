//! Cedar policies for milpa: rules over whole calls, arguments included, for every tool
//! (native, command or upstream), and over resource reads and prompts, checked last in the
//! authorize stage.
//!
//! A [`CedarPolicy`] is a [`milpa::policy::CallPolicy`]: set it with
//! [`ToolRegistryBuilder::call_policy`](milpa::ToolRegistryBuilder::call_policy). It runs
//! only for calls scopes, channel policy and rules allowed, sees the arguments as validated
//! and clamped, and can only deny (`FORBIDDEN`, audited as denied).
//!
//! # The entity model
//!
//! | Cedar | milpa |
//! |---|---|
//! | `principal`: `Principal::"<name>"`, attribute `scopes` (set of strings) | the caller; an anonymous one is `Principal::"anonymous"` with `context.authenticated == false` |
//! | `action`: `Action::"call"`, `Action::"read_resource"`, `Action::"get_prompt"` | a tool call, a resource read, a prompt request |
//! | `resource`: `Tool::"<name>"`, attributes `mutating` (bool), `upstream` (string, `""` for a native or command tool) | the tool |
//! | `resource`: `Resource::"<uri>"`, attributes `uri`, `mutating` (`false`), `upstream` (`""`) | the resource read (its concrete URI, also for a template) |
//! | `resource`: `Prompt::"<name>"`, attributes `name`, `mutating` (`false`), `upstream` (`""`) | the prompt |
//! | `context.channel`, `context.mode` (`"execute"` / `"plan"`), `context.authenticated` | the call's context |
//! | `context.args` | the arguments (a prompt's: strings; a read's: none): an open record (any attribute), objects as records, arrays as sets, integers as `Long`, other numbers as `decimal` when exact to four places (else their text), `null` as the empty set |
//!
//! # Decisions
//!
//! - A `forbid` that matches denies: `Denied by policy '<@id>' for tool '<tool>' on channel
//!   '<channel>' (principal: <name>).` (the `@id("…")` annotation, else Cedar's `policyN`;
//!   several, comma-separated). A read or a prompt says `for resource '<uri>'` or
//!   `for prompt '<name>'`.
//! - Policies written for tool calls keep their meaning: a policy open on the action
//!   (`forbid(principal, action, resource) when { resource.mutating }`) still validates, and
//!   a read or prompt is never mutating nor upstream. Match URIs with
//!   `resource is Resource && resource.uri like "docs://private/*"`, or pin the action.
//! - A `forbid` whose condition fails to evaluate (an argument missing, or of another type)
//!   denies too: Cedar itself would skip it, which lets the call through on exactly the input
//!   nobody thought of. Guard conditions on arguments a tool may not have with `has`:
//!   `context.args has path && context.args.path like "/etc/*"`.
//! - Otherwise, with [`DefaultEffect::Allow`] (the default) the call goes on; with
//!   [`DefaultEffect::Deny`] a call no `permit` covers is denied (`… no Cedar policy permits it
//!   (default deny).`).
//!
//! # Loading
//!
//! Policies are parsed and validated when loaded, against the entity model above (unknown
//! entity types, actions and attributes, type errors); errors name the file, line and column.
//! Templates (`?principal`) are refused.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use milpa::{ErrorCode, ToolContext, ToolDefinition, ToolRegistry};
//! use milpa_cedar::{CedarPolicy, DefaultEffect};
//! use serde_json::json;
//!
//! let policy = CedarPolicy::from_str("refunds.cedar", r#"
//!     @id("refunds-under-100")
//!     forbid(principal, action, resource == Tool::"refund")
//!     when { context.args.amount >= 100 }
//!     unless { principal.scopes.contains("billing:admin") };
//! "#, DefaultEffect::Allow).unwrap();
//!
//! let mut registry = ToolRegistry::builder().call_policy(Arc::new(policy)).build();
//! registry.register(
//!     ToolDefinition::builder("refund")
//!         .input_schema(json!({"type": "object", "properties": {"amount": {"type": "integer"}}}))
//!         .sync(|args, _| json!({"refunded": args["amount"]})),
//! ).unwrap();
//!
//! let clerk = ToolContext::mcp("r1", Some("clerk".into()), ["billing"]);
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let small = registry.call("refund", json!({"amount": 40}), &clerk).await;
//! assert!(small.success);
//! let big = registry.call("refund", json!({"amount": 400}), &clerk).await;
//! assert_eq!(big.code(), Some(&ErrorCode::Forbidden));
//! assert_eq!(
//!     big.error.as_deref(),
//!     Some("Denied by policy 'refunds-under-100' for tool 'refund' on channel 'mcp' (principal: clerk).")
//! );
//! # });
//!
//! // Errors name the file, the line and the column.
//! let typo = CedarPolicy::from_str("p.cedar", "forbid(principal, action, resource)\nwhen { resource.mutatin };", DefaultEffect::Allow)
//!     .unwrap_err();
//! assert!(typo.to_string().starts_with("p.cedar:2:8: invalid policy"));
//! ```
//!
//! # Cost
//!
//! The schema, the policy set and, per tool, the tool's entity and the policies that can
//! apply to it (those whose resource scope is not pinned to another tool) are built once;
//! a call builds only the caller's entity and the context. See `benches/policy.rs`.

mod args;
mod argument_free;
mod entity_model;
mod error;
mod location;
mod policy;
mod tool_view;

pub use error::CedarLoadError;
pub use policy::{CedarPolicy, DefaultEffect};
