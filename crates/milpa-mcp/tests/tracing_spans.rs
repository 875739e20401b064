//! OpenTelemetry: every `tools/call` over our MCP server is one `execute_tool <tool>` span
//! with the GenAI and MCP semantic-convention attributes, `error.type` when the call
//! failed, and the caller's trace (from `_meta.traceparent`) as its parent.
//!
//! One global subscriber for the whole binary (the server's tasks run wherever tokio puts
//! them): the OpenTelemetry layer over an in-memory exporter. Each test finds its own spans
//! by their tool call id (the result's `_meta.milpa.request_id`).

mod common;

use std::sync::OnceLock;
use std::time::Duration;

use common::{JSON_HEADERS, StdioClient, fixture, http, http_initialize, start_http};
use milpa_mcp::{HttpServer, ServerOptions};
use opentelemetry::trace::{SpanId, SpanKind, Status, TraceId, TracerProvider as _};
use opentelemetry::{Key, Value as OtelValue};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde_json::{Value, json};
use tracing_subscriber::layer::SubscriberExt;

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_SPAN_ID: &str = "00f067aa0ba902b7";

/// The exporter every span of this binary ends up in.
fn exporter() -> &'static InMemorySpanExporter {
    static EXPORTER: OnceLock<InMemorySpanExporter> = OnceLock::new();
    EXPORTER.get_or_init(|| {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("tracing_spans"));
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))
            .expect("no other subscriber in this binary");
        exporter
    })
}

/// The finished span whose `gen_ai.tool.call.id` is `call_id` (waits up to 5 s for it).
async fn span_of(call_id: &str) -> SpanData {
    for _ in 0..250 {
        let spans = exporter().get_finished_spans().unwrap();
        let mut mine: Vec<SpanData> = spans
            .into_iter()
            .filter(|span| attribute(span, "gen_ai.tool.call.id").as_deref() == Some(call_id))
            .collect();
        if let Some(span) = mine.pop() {
            assert!(mine.is_empty(), "one span per call");
            return span;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no span for call {call_id}");
}

fn attribute(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key == Key::new(key.to_owned()))
        .map(|kv| match &kv.value {
            OtelValue::String(text) => text.to_string(),
            other => other.to_string(),
        })
}

fn request_id(result: &Value) -> String {
    result["_meta"]["milpa"]["request_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no request id in {result}"))
        .to_owned()
}

async fn stdio_client() -> StdioClient {
    exporter();
    let mut client = StdioClient::start(fixture().registry, ServerOptions::default());
    client.initialize(json!({})).await;
    client
}

#[tokio::test]
async fn a_call_is_one_execute_tool_span_in_the_callers_trace() {
    let mut client = stdio_client().await;
    let reply = client
        .request(
            "tools/call",
            json!({
                "name": "echo",
                "arguments": {"text": "hi"},
                "_meta": {
                    "traceparent": format!("00-{TRACE_ID}-{PARENT_SPAN_ID}-01"),
                    "tracestate": "vendor=value",
                },
            }),
        )
        .await;
    let result = &reply["result"];
    assert_eq!(result["isError"], false, "{result}");
    let span = span_of(&request_id(result)).await;

    assert_eq!(span.name, "execute_tool echo");
    assert_eq!(span.span_kind, SpanKind::Server);
    assert_eq!(span.status, Status::Unset);
    let expected = [
        ("gen_ai.operation.name", "execute_tool"),
        ("gen_ai.tool.name", "echo"),
        ("mcp.method.name", "tools/call"),
        ("mcp.protocol.version", "2025-11-25"),
        ("jsonrpc.request.id", &reply["id"].to_string()),
    ];
    for (key, value) in expected {
        assert_eq!(attribute(&span, key).as_deref(), Some(value), "{key}");
    }
    assert_eq!(attribute(&span, "error.type"), None);
    // stdio has no session.
    assert_eq!(attribute(&span, "mcp.session.id"), None);

    // The parent is the caller's span, in the caller's trace, with its trace state.
    assert_eq!(span.span_context.trace_id().to_string(), TRACE_ID);
    assert_eq!(span.parent_span_id.to_string(), PARENT_SPAN_ID);
    assert!(span.parent_span_is_remote);
    assert_eq!(span.span_context.trace_state().get("vendor"), Some("value"));
}

#[tokio::test]
async fn a_failed_call_records_its_code_as_error_type() {
    let mut client = stdio_client().await;
    // `text` is required.
    let result = client.call("echo", json!({})).await;
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(result["_meta"]["milpa"]["code"], "VALIDATION_ERROR");
    let span = span_of(&request_id(&result)).await;
    assert_eq!(span.name, "execute_tool echo");
    assert_eq!(
        attribute(&span, "error.type").as_deref(),
        Some("VALIDATION_ERROR")
    );
    assert!(matches!(span.status, Status::Error { .. }), "{span:?}");

    // An unknown tool is a failed call too, named as called.
    let result = client.call("no_such_tool", json!({})).await;
    let span = span_of(&request_id(&result)).await;
    assert_eq!(span.name, "execute_tool no_such_tool");
    assert_eq!(
        attribute(&span, "error.type").as_deref(),
        Some("TOOL_NOT_FOUND")
    );
}

#[tokio::test]
async fn a_call_without_traceparent_starts_a_new_trace() {
    let mut client = stdio_client().await;
    let mut traces = Vec::new();
    for meta in [json!({}), json!({"traceparent": "00-not-a-trace-01"})] {
        let reply = client
            .request(
                "tools/call",
                json!({"name": "echo", "arguments": {"text": "hi"}, "_meta": meta}),
            )
            .await;
        let span = span_of(&request_id(&reply["result"])).await;
        assert_eq!(span.parent_span_id, SpanId::INVALID, "{meta}");
        assert!(!span.parent_span_is_remote);
        let trace = span.span_context.trace_id();
        assert_ne!(trace, TraceId::INVALID);
        assert_ne!(trace.to_string(), TRACE_ID);
        traces.push(trace);
    }
    assert_ne!(traces[0], traces[1], "each call is its own trace");
}

#[tokio::test]
async fn an_http_call_records_its_session() {
    exporter();
    // Anonymous over HTTP: the `mcp` channel refuses the call, which still has its span.
    let (addr, _stop) = start_http(HttpServer::new(fixture().registry)).await;
    let session = http_initialize(addr, &[]).await;
    let mut headers = JSON_HEADERS.to_vec();
    headers.push(("Mcp-Session-Id", &session));
    headers.push(("MCP-Protocol-Version", "2025-11-25"));
    let body = json!({"jsonrpc": "2.0", "id": "call-7", "method": "tools/call", "params": {
        "name": "echo", "arguments": {"text": "hi"},
        "_meta": {"traceparent": format!("00-{TRACE_ID}-{PARENT_SPAN_ID}-01")},
    }});
    let response = http(addr, "POST", &headers, body.to_string().as_bytes()).await;
    let message = response
        .sse_messages()
        .into_iter()
        .chain(serde_json::from_str::<Value>(&response.body).ok())
        .find(|m| m["id"] == "call-7")
        .unwrap_or_else(|| panic!("no answer in {response:?}"));
    let result = &message["result"];
    assert_eq!(result["_meta"]["milpa"]["code"], "FORBIDDEN", "{result}");
    let span = span_of(&request_id(result)).await;
    assert_eq!(attribute(&span, "mcp.session.id"), Some(session));
    assert_eq!(
        attribute(&span, "jsonrpc.request.id").as_deref(),
        Some("call-7")
    );
    assert_eq!(attribute(&span, "error.type").as_deref(), Some("FORBIDDEN"));
    assert_eq!(span.span_context.trace_id().to_string(), TRACE_ID);
}
