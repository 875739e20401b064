//! `/metrics` on the library's `HttpServer`: call counts fed by a `CountingAuditSink`,
//! upstream reports of the embedder's, the session and stream gauges following real
//! connections, and who may read it (`MetricsAccess`).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{JSON_HEADERS, WAIT, fixture_with, http, http_initialize, start_http};
use milpa::audit::{CallCounts, CountingAuditSink, MemoryAuditSink};
use milpa_mcp::auth::StaticTokens;
use milpa_mcp::{HttpServer, MetricsAccess, UpstreamReport, UpstreamReports};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Two upstreams as an embedder reports them.
struct TwoUpstreams;

impl UpstreamReports for TwoUpstreams {
    fn upstreams(&self) -> Vec<UpstreamReport> {
        vec![
            UpstreamReport::new("files", true, 2),
            UpstreamReport::new("git", false, 0),
        ]
    }
}

/// An HTTP server on the test tools (anonymous callers allowed) whose calls are counted.
async fn counted_server(
    configure: impl FnOnce(HttpServer) -> HttpServer,
) -> (std::net::SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let counts = Arc::new(CallCounts::new());
    let sink = CountingAuditSink::new(Arc::new(MemoryAuditSink::new()), Arc::clone(&counts));
    let fixture = fixture_with(true, |b| b.audit_sink(Arc::new(sink)));
    counts.follow(&fixture.registry);
    let server = HttpServer::new(fixture.registry)
        .call_counts(counts)
        .upstream_reports(TwoUpstreams);
    start_http(configure(server)).await
}

/// `GET /metrics` with `headers`: status, headers and body.
async fn scrape_with(addr: std::net::SocketAddr, headers: &[(&str, &str)]) -> common::HttpResponse {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut head = "GET /metrics HTTP/1.1\r\nConnection: close\r\n".to_owned();
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(WAIT, stream.read_to_end(&mut raw))
        .await
        .expect("timed out reading /metrics")
        .unwrap();
    common::parse_response(&raw)
}

async fn scrape(addr: std::net::SocketAddr) -> String {
    let answer = scrape_with(addr, &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    answer.body
}

fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map(|value| value.trim().parse().unwrap())
}

/// Scrapes until `series` reads `want` (up to [`WAIT`]); the last text.
async fn scrape_until(addr: std::net::SocketAddr, series: &str, want: f64) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        let text = scrape(addr).await;
        if sample(&text, series) == Some(want) || Instant::now() > deadline {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn call_echo(addr: std::net::SocketAddr, session: &str) {
    let mut headers = JSON_HEADERS.to_vec();
    headers.push(("Mcp-Session-Id", session));
    headers.push(("MCP-Protocol-Version", "2025-11-25"));
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "hi"}}});
    let r = http(addr, "POST", &headers, body.to_string().as_bytes()).await;
    assert_eq!(r.status, 200, "{}", r.body);
}

#[tokio::test]
async fn calls_sessions_streams_and_upstreams_show_in_a_scrape() {
    let (addr, _stop) = counted_server(|s| s.metrics_access(MetricsAccess::Public)).await;
    let session = http_initialize(addr, &[]).await;
    call_echo(addr, &session).await;
    call_echo(addr, &session).await;

    let text = scrape(addr).await;
    for (series, want) in [
        (
            r#"milpa_tool_calls_total{tool="echo",channel="mcp",outcome="executed"}"#,
            2.0,
        ),
        (
            r#"milpa_tool_call_duration_seconds_count{tool="echo"}"#,
            2.0,
        ),
        (
            r#"milpa_tool_call_duration_seconds_bucket{tool="echo",le="+Inf"}"#,
            2.0,
        ),
        ("milpa_calls_in_flight", 0.0),
        ("milpa_approvals_pending", 0.0),
        (r#"milpa_http_sessions{caller="anonymous"}"#, 1.0),
        (r#"milpa_http_sessions{caller="authenticated"}"#, 0.0),
        (r#"milpa_http_streams{caller="anonymous"}"#, 0.0),
        (r#"milpa_upstream_up{upstream="files"}"#, 1.0),
        (r#"milpa_upstream_up{upstream="git"}"#, 0.0),
        (r#"milpa_upstream_restarts_total{upstream="files"}"#, 2.0),
    ] {
        assert_eq!(sample(&text, series), Some(want), "{series} in\n{text}");
    }

    // A GET stream held open counts while it is open.
    let get = format!(
        "GET /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n"
    );
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(get.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(WAIT, stream.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    let open = scrape_until(addr, r#"milpa_http_streams{caller="anonymous"}"#, 1.0).await;
    assert_eq!(
        sample(&open, r#"milpa_http_streams{caller="anonymous"}"#),
        Some(1.0),
        "{open}"
    );
    drop(stream);
    let closed = scrape_until(addr, r#"milpa_http_streams{caller="anonymous"}"#, 0.0).await;
    assert_eq!(
        sample(&closed, r#"milpa_http_streams{caller="anonymous"}"#),
        Some(0.0),
        "{closed}"
    );

    // The session ended: its gauge goes back down.
    let mut headers = vec![("Mcp-Session-Id", session.as_str())];
    headers.push(("MCP-Protocol-Version", "2025-11-25"));
    let ended = http(addr, "DELETE", &headers, b"").await;
    assert!(ended.status < 300, "{}", ended.status);
    let text = scrape(addr).await;
    assert_eq!(
        sample(&text, r#"milpa_http_sessions{caller="anonymous"}"#),
        Some(0.0),
        "{text}"
    );
}

#[tokio::test]
async fn by_default_a_scrape_needs_a_token_holding_metrics_read() {
    let mut tokens = StaticTokens::new();
    tokens.insert_token("watch", "watcher", ["metrics:read"]);
    tokens.insert_token("agent", "agent", ["notes:write"]);
    tokens.insert_token("all", "root", ["*"]);
    let (addr, _stop) = counted_server(|s| s.authenticator(tokens)).await;

    let anonymous = scrape_with(addr, &[]).await;
    assert_eq!(anonymous.status, 401, "{}", anonymous.body);
    assert_eq!(anonymous.header("www-authenticate"), Some("Bearer"));
    let agent = scrape_with(addr, &[("Authorization", "Bearer agent")]).await;
    assert_eq!(agent.status, 403, "{}", agent.body);
    assert!(!agent.body.contains("milpa_"), "{}", agent.body);
    let unknown = scrape_with(addr, &[("Authorization", "Bearer nobody")]).await;
    assert_eq!(unknown.status, 401, "{}", unknown.body);

    for token in ["Bearer watch", "Bearer all"] {
        let allowed = scrape_with(addr, &[("Authorization", token)]).await;
        assert_eq!(allowed.status, 200, "{token}: {}", allowed.body);
        assert_eq!(
            allowed.header("content-type"),
            Some("text/plain; version=0.0.4")
        );
        assert!(
            allowed.body.contains("milpa_calls_in_flight 0"),
            "{}",
            allowed.body
        );
    }

    // The Host check runs first, token or not.
    let foreign = scrape_with(
        addr,
        &[("Authorization", "Bearer watch"), ("Host", "evil.example")],
    )
    .await;
    assert_eq!(foreign.status, 403, "{}", foreign.body);
}
