//! The `execute_tool` span every call runs in, named and attributed after the OpenTelemetry
//! semantic conventions for generative AI (`gen_ai.*`) and for MCP (`mcp.*`).
//!
//! The core only creates a plain [`tracing`] span: exporting it is the business of whatever
//! subscriber the host installs (the `milpa` command adds an OTLP exporter through
//! `tracing-opentelemetry` when `OTEL_EXPORTER_OTLP_ENDPOINT` is set). With no subscriber
//! interested, creating the span is one check of a cached callsite interest, and none of the
//! field values below is computed.
//!
//! The span's fields, which `tracing-opentelemetry` turns into the span's name, kind, status
//! and attributes:
//!
//! | field | value |
//! | --- | --- |
//! | `otel.name` | `execute_tool <tool>` (the tracing name is the static [`SPAN_NAME`]) |
//! | `otel.kind` | `server` for a call a transport brought in (MCP attributes set), else `internal` |
//! | `gen_ai.operation.name` | `execute_tool` |
//! | `gen_ai.tool.name` | the tool name as called |
//! | `gen_ai.tool.call.id` | the call's request id (the result's `meta.request_id`, the audit record's) |
//! | `mcp.method.name`, `mcp.session.id`, `mcp.protocol.version`, `jsonrpc.request.id` | from the context's [`McpAttributes`], when the transport set them |
//! | `error.type` | the result's `meta.code` when the call failed (`_OTHER` when it has none) |
//! | `otel.status_code` | `error` when the call failed |
//!
//! The span opens when the call starts (its first poll) and closes when `audit` is done. Its
//! parent is the span current then, or else the OpenTelemetry context current then: the MCP
//! server attaches the W3C trace context of a request's `_meta.traceparent` around its
//! call, so the span joins the caller's trace. It is not entered while the stages run (see
//! `execute_call` for the measured reason), so spans and events inside a tool are not its
//! children.

use tracing::Span;
use tracing::field::Empty;

use crate::context::ToolContext;
pub use crate::mcp_attributes::McpAttributes;
use crate::result::ToolResult;

/// The tracing name of the call span (exporters show its `otel.name`, `execute_tool <tool>`).
pub const SPAN_NAME: &str = "execute_tool";

/// The tracing target of the call span, for a subscriber's filters.
pub const SPAN_TARGET: &str = "milpa::call";

/// The span of one call of `name`. Disabled (and nothing below evaluated) unless a
/// subscriber wants it.
#[inline]
pub(crate) fn start(name: &str, ctx: &ToolContext) -> Span {
    let mcp = ctx.mcp_attributes();
    tracing::info_span!(
        target: SPAN_TARGET,
        SPAN_NAME,
        otel.name = format!("execute_tool {name}"),
        otel.kind = if mcp.is_some() { "server" } else { "internal" },
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = name,
        gen_ai.tool.call.id = ctx.request_id(),
        mcp.method.name = mcp.map(|m| m.method.as_str()),
        mcp.session.id = mcp.and_then(|m| m.session_id.as_deref()),
        mcp.protocol.version = mcp.and_then(|m| m.protocol_version.as_deref()),
        jsonrpc.request.id = mcp.and_then(|m| m.request_id.as_deref()),
        error.type = Empty,
        otel.status_code = Empty,
    )
}

/// Records how the call ended: a failed result's code as `error.type`, and the error status.
pub(crate) fn record_result(span: &Span, result: &ToolResult) {
    if result.success {
        return;
    }
    let code = result.code().map_or("_OTHER", |code| code.as_str());
    span.record("error.type", code);
    span.record("otel.status_code", "error");
}
