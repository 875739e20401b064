//! Shared fixtures: a registry of a few echoing tools behind a Cedar policy, audited in
//! memory.
#![allow(dead_code)]

use std::sync::Arc;

use milpa::audit::{AuditOutcome, MemoryAuditSink};
use milpa::catalog::{
    CatalogError, Resource, ResourceContents, ResourceProvider, ResourceTemplate,
};
use milpa::{Deferred, ToolContext, ToolDefinition, ToolRegistry};
use milpa_cedar::{CedarPolicy, DefaultEffect};
use serde_json::json;

/// Loads `text` as `test.cedar`, panicking with the load error.
pub fn policy(text: &str, default: DefaultEffect) -> Arc<CedarPolicy> {
    Arc::new(CedarPolicy::from_str("test.cedar", text, default).unwrap_or_else(|e| panic!("{e}")))
}

/// `refund` (amount), `read_file` (path, read-only) and `fs_write` (path, upstream "fs").
pub fn registry(policy: Arc<CedarPolicy>) -> (ToolRegistry, Arc<MemoryAuditSink>) {
    let sink = Arc::new(MemoryAuditSink::new());
    let mut registry = ToolRegistry::builder()
        .call_policy(policy)
        .audit_sink(sink.clone())
        .build();
    let echo = |args: &serde_json::Value, _: &ToolContext| args.clone();
    registry
        .register(
            ToolDefinition::builder("refund")
                .description("Refunds an amount")
                .input_schema(
                    json!({"type": "object", "properties": {"amount": {"type": "integer"}}}),
                )
                .mutating(true)
                .sync(echo),
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::builder("read_file")
                .description("Reads a file")
                .input_schema(json!({"type": "object", "properties": {"path": {"type": "string"}}}))
                .mutating(false)
                .sync(echo),
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::builder("fs_write")
                .description("Writes a file upstream")
                .input_schema(json!({"type": "object", "properties": {"path": {"type": "string"}}}))
                .mutating(true)
                .upstream("fs")
                .sync(echo),
        )
        .unwrap();
    (registry, sink)
}

/// An authenticated MCP caller with `scopes`.
pub fn caller(principal: &str, scopes: &[&str]) -> ToolContext {
    ToolContext::mcp("r1", Some(principal.into()), scopes.iter().copied())
}

/// The outcomes of the audit records so far, in order.
pub fn outcomes(sink: &MemoryAuditSink) -> Vec<AuditOutcome> {
    sink.take().into_iter().map(|r| r.outcome).collect()
}

/// `docs://public`, `docs://private/plan` and the template `docs://notes/{id}`; every read
/// answers `text`.
pub struct Docs;

impl ResourceProvider for Docs {
    fn resources(&self) -> Vec<Resource> {
        vec![
            Resource::new("docs://public", "public"),
            Resource::new("docs://private/plan", "plan"),
        ]
    }

    fn templates(&self) -> Vec<ResourceTemplate> {
        vec![ResourceTemplate::new("docs://notes/{id}", "note").unwrap()]
    }

    fn read<'a>(
        &'a self,
        uri: &'a str,
        _ctx: &'a ToolContext,
    ) -> Deferred<'a, Result<Vec<ResourceContents>, CatalogError>> {
        Deferred::ready(Ok(vec![ResourceContents::text(uri, "text/plain", "text")]))
    }
}
