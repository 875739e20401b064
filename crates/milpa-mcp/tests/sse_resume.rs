//! Resumable call streams for 2025-11-25 clients (SEP-1699): the priming event, ids on
//! every event, a call that closes its stream and runs on, and the resume with
//! `Last-Event-ID` on `GET`.

mod common;

use std::time::Duration;

use common::*;
use std::sync::Arc;

use milpa::audit::{AuditOutcome, MemoryAuditSink};
use milpa::{ToolContext, ToolDefinition, ToolRegistry};
use milpa_mcp::HttpServer;
use serde_json::{Value, json};

/// Reports progress, closes its stream, waits, reports again and answers whether the
/// transport closed the stream.
fn releasing_tool() -> ToolDefinition {
    ToolDefinition::builder("release")
        .description("Closes its response stream mid-call")
        .input_schema(json!({"type": "object"}))
        .asynchronous(|_: Value, ctx: ToolContext| async move {
            let handle = ctx.call_handle();
            handle.progress(1.0, Some(2.0), Some("before"));
            let closed = handle.close_response_stream();
            tokio::time::sleep(Duration::from_millis(300)).await;
            handle.progress(2.0, Some(2.0), Some("after"));
            json!({"closed": closed})
        })
}

fn with_releasing_tool() -> Fixture {
    let audit = Arc::new(MemoryAuditSink::new());
    let mut registry =
        common::anonymous_callers_allowed(ToolRegistry::builder().audit_sink(audit.clone()))
            .build();
    registry.register(releasing_tool()).unwrap();
    Fixture {
        registry: Arc::new(registry),
        audit,
    }
}

/// One SSE event: its id, retry and data lines.
#[derive(Debug, Default)]
struct SseEvent {
    id: Option<String>,
    retry: Option<String>,
    data: Option<String>,
}

fn events(body: &str) -> Vec<SseEvent> {
    body.split("\n\n")
        .filter(|block| !block.trim().is_empty() && !block.starts_with(':'))
        .map(|block| {
            let mut event = SseEvent::default();
            for line in block.lines() {
                let (field, value) = line.split_once(':').unwrap_or((line, ""));
                let value = value.strip_prefix(' ').unwrap_or(value).to_owned();
                match field {
                    "id" => event.id = Some(value),
                    "retry" => event.retry = Some(value),
                    "data" => event.data = Some(value),
                    _ => {}
                }
            }
            event
        })
        .collect()
}

fn message(event: &SseEvent) -> Value {
    serde_json::from_str(event.data.as_deref().unwrap_or("")).unwrap()
}

async fn initialize(addr: std::net::SocketAddr, version: &str) -> String {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}
    }});
    let response = http(addr, "POST", &JSON_HEADERS, body.to_string().as_bytes()).await;
    assert_eq!(response.status, 200, "{response:?}");
    response.header("mcp-session-id").unwrap().to_owned()
}

fn call(id: i64) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "release", "arguments": {}, "_meta": {"progressToken": "p"}
    }})
    .to_string()
    .into_bytes()
}

async fn resume(addr: std::net::SocketAddr, session: &str, last: &str) -> common::HttpResponse {
    let headers = [
        ("Accept", "text/event-stream"),
        ("Mcp-Session-Id", session),
        ("Last-Event-ID", last),
    ];
    http(addr, "GET", &headers, b"").await
}

#[tokio::test]
async fn a_closed_stream_resumes_with_last_event_id_and_the_call_runs_on() {
    let f = with_releasing_tool();
    let (addr, _stop) = start_http(HttpServer::new(f.registry.clone())).await;
    let session = initialize(addr, "2025-11-25").await;
    let mut headers = JSON_HEADERS.to_vec();
    headers.push(("Mcp-Session-Id", &session));

    // The POST stream: the priming event, the progress sent before the close, and no result.
    let first = http(addr, "POST", &headers, &call(2)).await;
    assert_eq!(first.status, 200);
    assert_eq!(first.header("content-type"), Some("text/event-stream"));
    let sent = events(&first.body);
    assert_eq!(sent.len(), 2, "{:?}", first.body);
    let stream = sent[0]
        .id
        .as_deref()
        .unwrap()
        .split('-')
        .next()
        .unwrap()
        .to_owned();
    assert_eq!(sent[0].id.as_deref(), Some(format!("{stream}-0").as_str()));
    assert_eq!(sent[0].retry.as_deref(), Some("500"));
    assert_eq!(
        sent[0].data.as_deref(),
        Some(""),
        "the priming event has empty data"
    );
    assert_eq!(sent[1].id.as_deref(), Some(format!("{stream}-1").as_str()));
    assert_eq!(message(&sent[1])["params"]["message"], "before");

    // The resume from the last event seen: the rest of the call, result last.
    let rest = resume(addr, &session, &format!("{stream}-1")).await;
    assert_eq!(rest.status, 200);
    let rest = events(&rest.body);
    assert_eq!(rest.len(), 2, "{rest:?}");
    assert_eq!(rest[0].id.as_deref(), Some(format!("{stream}-2").as_str()));
    assert_eq!(message(&rest[0])["params"]["message"], "after");
    assert_eq!(rest[1].id.as_deref(), Some(format!("{stream}-3").as_str()));
    let result = message(&rest[1]);
    assert_eq!(result["id"], 2);
    assert_eq!(
        result["result"]["structuredContent"],
        json!({"closed": true})
    );

    // A resume from the priming event replays everything kept, and the finished stream ends.
    let again = resume(addr, &session, &format!("{stream}-0")).await;
    let again = events(&again.body);
    let ids: Vec<_> = again.iter().map(|e| e.id.clone().unwrap()).collect();
    assert_eq!(ids, ["1", "2", "3"].map(|seq| format!("{stream}-{seq}")));

    // The call ran once, to the end: closing the stream did not cancel it.
    let records = f.audit.records();
    let outcomes: Vec<_> = records
        .iter()
        .filter(|r| r.tool == "release")
        .map(|r| r.outcome)
        .collect();
    assert_eq!(outcomes, [AuditOutcome::Executed]);
}

#[tokio::test]
async fn a_resume_names_only_streams_of_its_own_session() {
    let f = with_releasing_tool();
    let (addr, _stop) = start_http(HttpServer::new(f.registry.clone())).await;
    let owner = initialize(addr, "2025-11-25").await;
    let other = initialize(addr, "2025-11-25").await;
    let mut headers = JSON_HEADERS.to_vec();
    headers.push(("Mcp-Session-Id", &owner));
    let first = http(addr, "POST", &headers, &call(2)).await;
    let id = events(&first.body)[0].id.clone().unwrap();

    // The other session's GET with that id gets its own standalone stream: nothing of the
    // owner's call, however long it waits.
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "GET /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {other}\r\nLast-Event-ID: {id}\r\n\r\n"
    );
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_millis(800);
    while let Ok(Ok(n)) = tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
        if n == 0 {
            break;
        }
        seen.extend_from_slice(&buf[..n]);
    }
    let seen = String::from_utf8_lossy(&seen);
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
    assert!(
        !seen.contains("structuredContent") && !seen.contains("after"),
        "{seen}"
    );

    // The owner still gets it.
    let rest = resume(addr, &owner, &id).await;
    assert!(rest.body.contains("\"closed\":true"), "{}", rest.body);
}

#[tokio::test]
async fn older_clients_get_plain_streams_the_call_cannot_close() {
    let f = with_releasing_tool();
    let (addr, _stop) = start_http(HttpServer::new(f.registry.clone())).await;
    let session = initialize(addr, "2025-06-18").await;
    let mut headers = JSON_HEADERS.to_vec();
    headers.push(("Mcp-Session-Id", &session));
    let response = http(addr, "POST", &headers, &call(2)).await;
    let sent = events(&response.body);
    assert!(
        sent.iter().all(|e| e.id.is_none() && e.retry.is_none()),
        "{sent:?}"
    );
    let last = message(sent.last().unwrap());
    assert_eq!(
        last["result"]["structuredContent"],
        json!({"closed": false})
    );
}
