//! Streamable HTTP under pressure: session caps per class of caller, header and body read
//! timeouts, bad tokens refused before the body, the connection cap, calls in flight and
//! batch sizes.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{JSON_HEADERS, fixture, fixture_with, http, http_initialize, start_http};
use milpa::{ToolContext, ToolDefinition};
use milpa_mcp::auth::StaticTokens;
use milpa_mcp::{HttpServer, ServerOptions};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const WAIT: Duration = Duration::from_secs(5);

fn initialize_body() -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}
    }})
    .to_string()
}

async fn initialize_status(addr: std::net::SocketAddr, extra: &[(&str, &str)]) -> (u16, Value) {
    let mut headers = JSON_HEADERS.to_vec();
    headers.extend_from_slice(extra);
    let r = http(addr, "POST", &headers, initialize_body().as_bytes()).await;
    let body = if r.body.is_empty() {
        Value::Null
    } else {
        r.json()
    };
    (r.status, body)
}

fn alice_and_bob() -> StaticTokens {
    let mut tokens = StaticTokens::new();
    tokens.insert_token("alice-token", "alice", ["*"]);
    tokens.insert_token("bob-token", "bob", ["*"]);
    tokens
}

const ALICE: [(&str, &str); 1] = [("Authorization", "Bearer alice-token")];
const BOB: [(&str, &str); 1] = [("Authorization", "Bearer bob-token")];

#[tokio::test]
async fn a_full_anonymous_class_never_locks_out_a_principal() {
    let server = HttpServer::new(fixture().registry)
        .authenticator(alice_and_bob())
        .max_sessions(3)
        .max_sessions_per_principal(2);
    let (addr, _stop) = start_http(server).await;
    for _ in 0..3 {
        http_initialize(addr, &[]).await;
    }
    let (status, body) = initialize_status(addr, &[]).await;
    assert_eq!(status, 503);
    assert_eq!(
        body["error"]["message"],
        "Service Unavailable: too many anonymous sessions"
    );
    // The anonymous class is full; principals still get sessions, up to their own cap.
    http_initialize(addr, &ALICE).await;
    http_initialize(addr, &ALICE).await;
    let (status, body) = initialize_status(addr, &ALICE).await;
    assert_eq!(status, 503);
    assert_eq!(
        body["error"]["message"],
        "Service Unavailable: too many sessions for this principal"
    );
    assert_eq!(body["id"], 1);
    http_initialize(addr, &BOB).await;
    // The overall cap counts authenticated sessions: alice 2 + bob 1.
    let (status, body) = initialize_status(addr, &BOB).await;
    assert_eq!(status, 503);
    assert_eq!(
        body["error"]["message"],
        "Service Unavailable: too many sessions"
    );
}

#[tokio::test]
async fn the_anonymous_cap_is_its_own() {
    let server = HttpServer::new(fixture().registry).max_anonymous_sessions(2);
    let (addr, _stop) = start_http(server).await;
    http_initialize(addr, &[]).await;
    http_initialize(addr, &[]).await;
    assert_eq!(initialize_status(addr, &[]).await.0, 503);
}

#[tokio::test]
async fn anonymous_sessions_expire_sooner() {
    let server = HttpServer::new(fixture().registry)
        .authenticator(alice_and_bob())
        .anonymous_session_idle_timeout(Duration::from_millis(100));
    let (addr, _stop) = start_http(server).await;
    let anonymous = http_initialize(addr, &[]).await;
    let alice = http_initialize(addr, &ALICE).await;
    tokio::time::sleep(Duration::from_millis(250)).await;
    // A new session sweeps expired ones.
    http_initialize(addr, &BOB).await;
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let with = |session: &str, auth: &[(&'static str, &'static str)]| {
        let mut headers = JSON_HEADERS.to_vec();
        headers.push(("Mcp-Session-Id", session));
        headers.extend_from_slice(auth);
        headers
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect::<Vec<_>>()
    };
    let headers = with(&anonymous, &[]);
    let headers: Vec<_> = headers.iter().map(|(k, v)| (&**k, &**v)).collect();
    assert_eq!(
        http(addr, "POST", &headers, ping.as_bytes()).await.status,
        404
    );
    let headers = with(&alice, &ALICE);
    let headers: Vec<_> = headers.iter().map(|(k, v)| (&**k, &**v)).collect();
    assert_eq!(
        http(addr, "POST", &headers, ping.as_bytes()).await.status,
        200
    );
}

/// Reads until the server closes the connection; panics if it does not within `WAIT`.
async fn read_until_closed(stream: &mut TcpStream) -> String {
    let mut raw = Vec::new();
    tokio::time::timeout(WAIT, stream.read_to_end(&mut raw))
        .await
        .expect("the server closes the connection")
        .ok();
    String::from_utf8_lossy(&raw).into_owned()
}

#[tokio::test]
async fn half_sent_headers_are_closed_after_the_header_timeout() {
    let server =
        HttpServer::new(fixture().registry).header_read_timeout(Duration::from_millis(200));
    let (addr, _stop) = start_http(server).await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(format!("POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: appl").as_bytes())
        .await
        .unwrap();
    let seen = read_until_closed(&mut stream).await;
    assert!(!seen.contains("200 OK"), "{seen}");
}

#[tokio::test]
async fn half_sent_bodies_get_408() {
    let server = HttpServer::new(fixture().registry).body_read_timeout(Duration::from_millis(200));
    let (addr, _stop) = start_http(server).await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"jsonrpc\""
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let seen = read_until_closed(&mut stream).await;
    let response = common::parse_response(seen.as_bytes());
    assert_eq!(response.status, 408, "{seen}");
    assert_eq!(
        response.json()["error"]["message"],
        "Request Timeout: the body did not arrive within 200 ms"
    );
}

#[tokio::test]
async fn an_unknown_token_is_refused_before_the_body_is_read() {
    // The body timeout is long: a server that waited for the body would not answer in time.
    let server = HttpServer::new(fixture().registry)
        .authenticator(alice_and_bob())
        .body_read_timeout(Duration::from_secs(60));
    let (addr, _stop) = start_http(server).await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAuthorization: Bearer stolen\r\nContent-Length: 4000000\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&[b' '; 1024]).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(WAIT, stream.read(&mut buf))
        .await
        .expect("answered without the body")
        .unwrap();
    let response = common::parse_response(&buf[..n]);
    assert_eq!(response.status, 401);
}

#[tokio::test]
async fn the_connection_cap_holds_the_next_connection_until_one_closes() {
    let server = HttpServer::new(fixture().registry).max_connections(1);
    let (addr, _stop) = start_http(server).await;
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{ping}",
        ping.len()
    );
    let mut first = TcpStream::connect(addr).await.unwrap();
    first.write_all(request.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(WAIT, first.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    // `first` stays open (keep-alive): the second connection is not served...
    let mut second = TcpStream::connect(addr).await.unwrap();
    second.write_all(request.as_bytes()).await.unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(300), second.read(&mut buf))
            .await
            .is_err(),
        "served beyond the connection cap"
    );
    // ...until the first one closes.
    drop(first);
    let n = tokio::time::timeout(WAIT, second.read(&mut buf))
        .await
        .expect("served once a connection closed")
        .unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
}

/// A tool that records how many of its calls run at once (and how many ran).
fn gauge() -> (ToolDefinition, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let ran = Arc::new(AtomicUsize::new(0));
    let definition = {
        let (most, ran) = (most.clone(), ran.clone());
        ToolDefinition::builder("gauge")
            .description("Sleeps briefly, counting concurrent calls")
            .input_schema(json!({"type": "object"}))
            .asynchronous(move |_args: Value, _ctx: ToolContext| {
                let (running, most, ran) = (running.clone(), most.clone(), ran.clone());
                async move {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    ran.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    running.fetch_sub(1, Ordering::SeqCst);
                    json!("ok")
                }
            })
    };
    (definition, most, ran)
}

fn batch_of_calls(n: usize) -> String {
    let calls: Vec<Value> = (0..n)
        .map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "gauge", "arguments": {}}}))
        .collect();
    Value::Array(calls).to_string()
}

async fn post_batch(server: HttpServer, n: usize) -> (u16, Value) {
    let (addr, _stop) = start_http(server).await;
    let session = http_initialize(addr, &[]).await;
    let mut headers = JSON_HEADERS.to_vec();
    headers.push(("Mcp-Session-Id", session.as_str()));
    let r = http(addr, "POST", &headers, batch_of_calls(n).as_bytes()).await;
    (r.status, r.json())
}

fn gauge_server(options: ServerOptions) -> (HttpServer, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let (definition, most, ran) = gauge();
    let f = fixture_with(true, |b| b);
    let mut registry = Arc::try_unwrap(f.registry).ok().unwrap();
    registry.register(definition).unwrap();
    let server = HttpServer::new(Arc::new(registry)).options(options);
    (server, most, ran)
}

#[tokio::test]
async fn a_batch_runs_no_more_calls_at_once_than_the_session_cap() {
    let mut options = ServerOptions::default();
    options.max_in_flight = 8;
    options.max_batch_len = 400;
    let (server, most, ran) = gauge_server(options);
    let (status, replies) = post_batch(server, 400).await;
    assert_eq!(status, 200);
    let replies = replies.as_array().unwrap();
    assert_eq!(replies.len(), 400);
    assert!(replies.iter().all(|r| r["result"]["isError"] == false));
    assert_eq!(ran.load(Ordering::SeqCst), 400);
    let most = most.load(Ordering::SeqCst);
    assert!((1..=8).contains(&most), "{most} calls ran at once");
}

#[tokio::test]
async fn the_server_wide_cap_holds_across_a_session() {
    let mut options = ServerOptions::default();
    options.max_batch_len = 400;
    let (server, most, ran) = gauge_server(options);
    let (status, _) = post_batch(server.max_calls_in_flight(3), 400).await;
    assert_eq!(status, 200);
    assert_eq!(ran.load(Ordering::SeqCst), 400);
    let most = most.load(Ordering::SeqCst);
    assert!((1..=3).contains(&most), "{most} calls ran at once");
}

#[tokio::test]
async fn batches_over_the_limit_are_refused_whole() {
    let mut options = ServerOptions::default();
    options.max_batch_len = 3;
    let (server, _, ran) = gauge_server(options);
    let (status, reply) = post_batch(server, 4).await;
    assert_eq!(status, 400);
    assert_eq!(reply["error"]["code"], -32600);
    assert_eq!(
        reply["error"]["message"],
        "Invalid Request: batch too large (at most 3 messages)"
    );
    assert_eq!(ran.load(Ordering::SeqCst), 0);

    // The default is 100.
    let (server, _, ran) = gauge_server(ServerOptions::default());
    let (status, _) = post_batch(server, 101).await;
    assert_eq!(status, 400);
    assert_eq!(ran.load(Ordering::SeqCst), 0);
}

/// Sends a POST on a fresh connection without reading the answer.
async fn start_post(addr: std::net::SocketAddr, session: &str, body: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json\r\nMcp-Session-Id: {session}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream
}

fn call(id: i64, name: &str, arguments: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
        .to_string()
}

#[tokio::test]
async fn a_call_abandoned_while_waiting_for_a_slot_is_forgotten() {
    let f = fixture_with(true, |b| b);
    let mut options = ServerOptions::default();
    options.max_in_flight = 1;
    let server = HttpServer::new(f.registry.clone())
        .options(options)
        .json_response(true);
    let (addr, _stop) = start_http(server).await;
    let session = http_initialize(addr, &[]).await;
    // The first call takes the session's only slot; the second waits, and its client
    // goes away.
    let first = start_post(addr, &session, &call(1, "sleep", json!({"ms": 10_000}))).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let second = start_post(addr, &session, &call(2, "echo", json!({"text": "b"}))).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(second);
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(first);
    assert!(common::wait_for_cancelled(&f.audit, Some("sleep")).await);
    // The abandoned call's id is free again: the session does not think it still runs.
    let mut headers = JSON_HEADERS.to_vec();
    headers.push(("Mcp-Session-Id", session.as_str()));
    let r = http(
        addr,
        "POST",
        &headers,
        call(2, "echo", json!({"text": "again"})).as_bytes(),
    )
    .await;
    assert_eq!(r.json()["result"]["content"][0]["text"], "again", "{r:?}");
    // The abandoned call never ran: the only echo record is the last call's.
    let echoes = f
        .audit
        .records()
        .iter()
        .filter(|r| r.tool == "echo")
        .count();
    assert_eq!(echoes, 1);
}

/// `initialize` padded with trailing whitespace (valid JSON) to `size` bytes.
fn padded_initialize(size: usize) -> Vec<u8> {
    let mut body = initialize_body().into_bytes();
    body.resize(size.max(body.len()), b' ');
    body
}

/// Sends `body` as a chunked `POST` (no declared length) and reads the answer.
async fn post_chunked(addr: std::net::SocketAddr, body: &[u8]) -> common::HttpResponse {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    for chunk in body.chunks(16 * 1024) {
        let frame = format!("{:x}\r\n", chunk.len());
        if stream.write_all(frame.as_bytes()).await.is_err()
            || stream.write_all(chunk).await.is_err()
            || stream.write_all(b"\r\n").await.is_err()
        {
            break;
        }
    }
    let _ = stream.write_all(b"0\r\n\r\n").await;
    common::parse_response(read_until_closed(&mut stream).await.as_bytes())
}

#[tokio::test]
async fn anonymous_bodies_are_small_unless_anonymous_callers_can_run_tools() {
    let server = HttpServer::new(fixture().registry).authenticator(alice_and_bob());
    let (addr, _stop) = start_http(server).await;
    let body = padded_initialize(100 * 1024);
    let r = http(addr, "POST", &JSON_HEADERS, &body).await;
    assert_eq!(r.status, 413, "{}", r.body);
    assert_eq!(
        r.json()["error"]["message"],
        "Payload Too Large: bodies are limited to 65536 bytes"
    );
    // Without a declared length: cut off while read.
    let r = post_chunked(addr, &body).await;
    assert_eq!(r.status, 413, "{}", r.body);
    // Within the limit, and for a principal, the same request is answered.
    let r = http(addr, "POST", &JSON_HEADERS, &padded_initialize(60 * 1024)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let mut alice = JSON_HEADERS.to_vec();
    alice.extend(ALICE);
    let r = http(addr, "POST", &alice, &body).await;
    assert_eq!(r.status, 200, "{}", r.body);

    // Anonymous callers who may run tools get the message limit.
    let (addr, _stop) = start_http(HttpServer::new(fixture_with(true, |b| b).registry)).await;
    let r = http(addr, "POST", &JSON_HEADERS, &body).await;
    assert_eq!(r.status, 200, "{}", r.body);
}

#[tokio::test]
async fn anonymous_bodies_being_read_share_a_byte_budget() {
    let server = HttpServer::new(fixture().registry)
        .authenticator(alice_and_bob())
        .anonymous_body_buffer_bytes(100_000)
        .body_read_timeout(Duration::from_secs(60));
    let (addr, _stop) = start_http(server).await;
    // One body of 60 000 bytes, half sent: its reservation is held.
    let mut slow = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: 60000\r\n\r\n"
    );
    slow.write_all(head.as_bytes()).await.unwrap();
    let body = padded_initialize(60_000);
    slow.write_all(&body[..30_000]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;

    // A second one does not fit: 503, unread.
    let r = http(addr, "POST", &JSON_HEADERS, &body).await;
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(r.header("retry-after"), Some("1"));
    // A principal's body is not counted.
    let mut alice = JSON_HEADERS.to_vec();
    alice.extend(ALICE);
    let r = http(addr, "POST", &alice, &body).await;
    assert_eq!(r.status, 200, "{}", r.body);

    // The first one ends: its bytes are free again.
    slow.write_all(&body[30_000..]).await.unwrap();
    let first = common::parse_response(read_until_closed(&mut slow).await.as_bytes());
    assert_eq!(first.status, 200, "{}", first.body);
    let r = http(addr, "POST", &JSON_HEADERS, &body).await;
    assert_eq!(r.status, 200, "{}", r.body);
}

/// Sends a `ping` on `stream` (kept alive) and reads one response.
async fn ping_on(stream: &mut TcpStream, auth: &[(&str, &str)]) -> common::HttpResponse {
    let addr = stream.peer_addr().unwrap();
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        ping.len()
    );
    for (k, v) in auth {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    head.push_str(&ping);
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(WAIT, stream.read(&mut buf))
        .await
        .expect("answered")
        .unwrap();
    common::parse_response(&buf[..n])
}

#[tokio::test]
async fn anonymous_connections_leave_the_reserved_slots_to_principals() {
    let server = HttpServer::new(fixture().registry)
        .authenticator(alice_and_bob())
        .max_connections(4)
        .reserved_connections(1);
    let (addr, _stop) = start_http(server).await;
    // Three anonymous keep-alive connections: their share.
    let mut anonymous = Vec::new();
    for _ in 0..3 {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        assert_eq!(ping_on(&mut stream, &[]).await.status, 200);
        anonymous.push(stream);
    }
    // A fourth anonymous one is answered 503 and closed.
    let mut fourth = TcpStream::connect(addr).await.unwrap();
    let r = ping_on(&mut fourth, &[]).await;
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(r.header("connection"), Some("close"));
    assert_eq!(r.header("retry-after"), Some("1"));
    let closed = read_until_closed(&mut fourth).await;
    assert!(closed.is_empty(), "{closed}");
    // The reserved slot serves a principal.
    let mut alice = TcpStream::connect(addr).await.unwrap();
    assert_eq!(ping_on(&mut alice, &ALICE).await.status, 200);
    // An anonymous connection closing frees its place.
    drop(anonymous.pop());
    drop(alice);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut again = TcpStream::connect(addr).await.unwrap();
    assert_eq!(ping_on(&mut again, &[]).await.status, 200);
}

fn listen_body() -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": 5, "method": "subscriptions/listen", "params": {
        "notifications": {"toolsListChanged": true},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    }})
    .to_string()
    .into_bytes()
}

fn listen_headers() -> Vec<(&'static str, &'static str)> {
    let mut headers = JSON_HEADERS.to_vec();
    headers.push(("MCP-Protocol-Version", "2026-07-28"));
    headers.push(("Mcp-Method", "subscriptions/listen"));
    headers
}

#[tokio::test]
async fn a_quiet_anonymous_listen_stream_ends_after_its_idle_limit() {
    let server = HttpServer::new(fixture().registry)
        .anonymous_stream_idle_timeout(Duration::from_millis(300));
    let (addr, _stop) = start_http(server).await;
    // `http` reads to the end: the stream must end by itself, within its wait.
    let r = http(addr, "POST", &listen_headers(), &listen_body()).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let messages = r.sse_messages();
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(
        messages[0]["method"],
        "notifications/subscriptions/acknowledged"
    );
}

#[tokio::test]
async fn get_streams_beyond_the_anonymous_budget_get_429() {
    let server = HttpServer::new(fixture().registry).max_anonymous_streams(1);
    let (addr, _stop) = start_http(server).await;
    let session = http_initialize(addr, &[]).await;
    let get = format!(
        "GET /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n"
    );
    let mut first = TcpStream::connect(addr).await.unwrap();
    first.write_all(get.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(WAIT, first.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    // The budget is held: a second stream, and a listen, are refused.
    let headers = [
        ("Accept", "text/event-stream"),
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let r = http(addr, "GET", &headers, b"").await;
    assert_eq!(r.status, 429, "{}", r.body);
    assert_eq!(r.header("retry-after"), Some("5"));
    let r = http(addr, "POST", &listen_headers(), &listen_body()).await;
    assert_eq!(r.status, 429, "{}", r.body);
    assert_eq!(r.json()["id"], 5);
    // The first stream closing gives its place back.
    drop(first);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut again = TcpStream::connect(addr).await.unwrap();
    again.write_all(get.as_bytes()).await.unwrap();
    let n = tokio::time::timeout(WAIT, again.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
}

#[tokio::test]
async fn a_call_beyond_the_stream_budget_is_answered_with_json() {
    let server = HttpServer::new(fixture_with(true, |b| b).registry).max_anonymous_streams(1);
    let (addr, _stop) = start_http(server).await;
    let session = http_initialize(addr, &[]).await;
    let mut headers = JSON_HEADERS.to_vec();
    headers.push(("Mcp-Session-Id", session.as_str()));
    headers.push(("MCP-Protocol-Version", "2025-11-25"));
    let echo = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "hi"}}})
    .to_string();
    // With room, the call is answered on its own stream.
    let r = http(addr, "POST", &headers, echo.as_bytes()).await;
    assert_eq!(
        r.header("content-type"),
        Some("text/event-stream"),
        "{}",
        r.body
    );
    // The one anonymous stream is held by a listen: the call gets JSON.
    let mut listen = TcpStream::connect(addr).await.unwrap();
    let body = listen_body();
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in listen_headers() {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    listen.write_all(head.as_bytes()).await.unwrap();
    listen.write_all(&body).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(WAIT, listen.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    let r = http(addr, "POST", &headers, echo.as_bytes()).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.json()["result"]["structuredContent"]["result"], "hi");
}
