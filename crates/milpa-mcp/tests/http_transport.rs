//! Streamable HTTP: sessions, SSE and JSON responses, Host/Origin checks, body limits,
//! bearer tokens, anonymous callers, cancellation when a response stream goes away.

mod common;

use std::time::Duration;

use common::{
    JSON_HEADERS, fixture, fixture_with, http, http_initialize, start_http, wait_for_cancelled,
};
use milpa_mcp::auth::{StaticTokens, sha256_hex};
use milpa_mcp::{HttpServer, ServerOptions};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn call_body(id: i64, name: &str, arguments: Value) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
        .to_string()
        .into_bytes()
}

fn with_session<'a>(session: &'a str, extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut headers = JSON_HEADERS.to_vec();
    headers.push(("Mcp-Session-Id", session));
    headers.push(("MCP-Protocol-Version", "2025-11-25"));
    headers.extend_from_slice(extra);
    headers
}

#[tokio::test]
async fn sessions_start_with_initialize_and_end_with_delete() {
    let (addr, _stop) = start_http(HttpServer::new(fixture_with(true, |b| b).registry)).await;
    let session = http_initialize(addr, &[]).await;
    assert_eq!(session.len(), 32);

    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
    // Without the header: 400. With an unknown one: 404.
    let r = http(addr, "POST", &JSON_HEADERS, list.as_bytes()).await;
    assert_eq!(r.status, 400);
    let r = http(addr, "POST", &with_session("nope", &[]), list.as_bytes()).await;
    assert_eq!(r.status, 404);

    let r = http(addr, "POST", &with_session(&session, &[]), list.as_bytes()).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert!(r.json()["result"]["tools"].as_array().unwrap().len() > 3);

    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let r = http(addr, "POST", &with_session(&session, &[]), note.as_bytes()).await;
    assert_eq!(r.status, 202);
    assert!(r.body.is_empty());

    let r = http(addr, "DELETE", &with_session(&session, &[]), b"").await;
    assert_eq!(r.status, 200);
    let r = http(addr, "POST", &with_session(&session, &[]), list.as_bytes()).await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn unknown_methods_without_a_session_get_method_not_found() {
    let (addr, _stop) = start_http(HttpServer::new(fixture().registry)).await;
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}}).to_string();
    let r = http(addr, "POST", &JSON_HEADERS, body.as_bytes()).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["error"]["code"], -32601);
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}).to_string();
    let r = http(addr, "POST", &JSON_HEADERS, ping.as_bytes()).await;
    assert_eq!(r.json()["result"], json!({}));
}

#[tokio::test]
async fn tool_calls_stream_over_sse_or_answer_with_json() {
    let f = fixture_with(true, |b| b);
    let (addr, _stop) = start_http(HttpServer::new(f.registry.clone())).await;
    let session = http_initialize(addr, &[]).await;
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "sleep", "arguments": {"ms": 20}, "_meta": {"progressToken": 1}}})
    .to_string();
    let r = http(addr, "POST", &with_session(&session, &[]), body.as_bytes()).await;
    assert_eq!(r.status, 200);
    assert!(
        r.header("content-type")
            .unwrap()
            .starts_with("text/event-stream")
    );
    let messages = r.sse_messages();
    let methods: Vec<_> = messages.iter().map(|m| m["method"].clone()).collect();
    assert_eq!(
        methods,
        [
            json!("notifications/progress"),
            json!("notifications/message"),
            json!("notifications/progress"),
            Value::Null
        ]
    );
    assert_eq!(messages[3]["id"], 3);
    assert_eq!(
        messages[3]["result"]["structuredContent"],
        json!({"slept_ms": 20})
    );

    // A client that accepts only JSON gets JSON.
    let headers = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json"),
        ("Mcp-Session-Id", session.as_str()),
    ];
    let r = http(
        addr,
        "POST",
        &headers,
        &call_body(4, "echo", json!({"text": "j"})),
    )
    .await;
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.json()["result"]["content"][0]["text"], "j");
}

/// On a 2025-06-18 stream (not resumable), a call that finished at its first poll is
/// answered with a stream built complete: what the tool sent while it ran (its progress,
/// its log line), then its response, last and once.
#[tokio::test]
async fn a_call_finished_at_once_sends_its_messages_then_its_response_on_a_plain_stream() {
    let mut registry = common::anonymous_registry();
    registry
        .register(
            milpa::ToolDefinition::builder("noisy")
                .description("Reports progress and logs, then answers")
                .input_schema(json!({"type": "object"}))
                .sync(|_, ctx| {
                    let handle = ctx.call_handle();
                    handle.progress(1.0, Some(2.0), Some("half"));
                    handle.log(milpa::LogLevel::Info, json!("working"));
                    json!({"done": true})
                }),
        )
        .unwrap();
    let (addr, _stop) = start_http(HttpServer::new(std::sync::Arc::new(registry))).await;
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}
    }});
    let r = http(
        addr,
        "POST",
        &JSON_HEADERS,
        initialize.to_string().as_bytes(),
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    let session = r.header("mcp-session-id").expect("a session id").to_owned();
    let mut headers = JSON_HEADERS.to_vec();
    headers.push(("Mcp-Session-Id", &session));
    headers.push(("MCP-Protocol-Version", "2025-06-18"));
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "noisy", "arguments": {}, "_meta": {"progressToken": "t"}
    }});
    let r = http(addr, "POST", &headers, call.to_string().as_bytes()).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert!(
        r.header("content-type")
            .is_some_and(|t| t.starts_with("text/event-stream")),
        "{:?}",
        r.header("content-type")
    );
    let messages = r.sse_messages();
    let (last, before) = messages.split_last().expect("a response");
    assert_eq!(last["id"], 7, "{messages:#?}");
    assert_eq!(last["result"]["isError"], false, "{last:#}");
    assert!(
        last["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("done")),
        "{last:#}"
    );
    let methods: Vec<&Value> = before.iter().map(|m| &m["method"]).collect();
    assert_eq!(
        methods,
        [
            &json!("notifications/progress"),
            &json!("notifications/message")
        ],
        "{messages:#?}"
    );
    assert_eq!(before[0]["params"]["progressToken"], "t");
    assert_eq!(before[1]["params"]["data"], "working");
}

/// A call that ends at its first poll (`add`, a sync tool) is answered before its response
/// leaves; one that must wait (`sleep`) runs in a task of its own. Both streams carry the
/// call's messages, then its response once and last, and end.
#[tokio::test]
async fn a_call_answered_at_once_and_one_that_waits_end_their_streams_alike() {
    let f = fixture_with(true, |b| b);
    let (addr, _stop) = start_http(HttpServer::new(f.registry.clone())).await;
    let session = http_initialize(addr, &[]).await;
    let calls = [
        (
            5,
            "add",
            json!({"a": 2, "b": 3}),
            json!({"result": 5}),
            vec![],
        ),
        (
            6,
            "sleep",
            json!({"ms": 5}),
            json!({"slept_ms": 5}),
            // Its info line; progress goes only to a call with a progress token.
            vec![json!("notifications/message")],
        ),
    ];
    for (id, name, arguments, structured, notes) in calls {
        let r = http(
            addr,
            "POST",
            &with_session(&session, &[]),
            &call_body(id, name, arguments),
        )
        .await;
        assert_eq!(r.status, 200, "{name}");
        assert!(
            r.header("content-type")
                .is_some_and(|t| t.starts_with("text/event-stream")),
            "{name}: {:?}",
            r.header("content-type")
        );
        let messages = r.sse_messages();
        let (last, before) = messages.split_last().expect("a response");
        assert_eq!(last["id"], id, "{name}: {messages:#?}");
        assert_eq!(last["result"]["structuredContent"], structured, "{name}");
        let methods: Vec<Value> = before.iter().map(|m| m["method"].clone()).collect();
        assert_eq!(methods, notes, "{name}: {messages:#?}");
    }
}

#[tokio::test]
async fn the_get_stream_carries_messages_of_json_answered_calls() {
    let f = fixture_with(true, |b| b);
    let server = HttpServer::new(f.registry.clone()).json_response(true);
    let (addr, _stop) = start_http(server).await;
    let session = http_initialize(addr, &[]).await;
    // Open the standalone stream and keep it.
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "GET /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {session}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let body = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "sleep", "arguments": {"ms": 5}, "_meta": {"progressToken": "p"}}})
    .to_string();
    let r = http(addr, "POST", &with_session(&session, &[]), body.as_bytes()).await;
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.json()["id"], 5);
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    while !seen.contains("notifications/progress") {
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
            .await
            .expect("an event on the GET stream")
            .unwrap();
        assert!(n > 0);
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert!(seen.contains("text/event-stream"));
}

#[tokio::test]
async fn host_and_origin_are_checked() {
    let (addr, _stop) = start_http(HttpServer::new(fixture().registry)).await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let mut headers = JSON_HEADERS.to_vec();
    headers.push(("Host", "evil.example.com"));
    assert_eq!(
        http(addr, "POST", &headers, body.as_bytes()).await.status,
        403
    );

    let mut headers = JSON_HEADERS.to_vec();
    headers.push(("Origin", "http://evil.example.com"));
    assert_eq!(
        http(addr, "POST", &headers, body.as_bytes()).await.status,
        403
    );

    let origin = format!("http://localhost:{}", addr.port());
    let mut headers = JSON_HEADERS.to_vec();
    headers.push(("Host", "localhost"));
    headers.push(("Origin", origin.as_str()));
    assert_eq!(
        http(addr, "POST", &headers, body.as_bytes()).await.status,
        200
    );

    // Configured names pass.
    let server = HttpServer::new(fixture().registry)
        .allowed_hosts(["mcp.internal"])
        .allowed_origins(["https://app.example.com"]);
    let (addr, _stop2) = start_http(server).await;
    let mut headers = JSON_HEADERS.to_vec();
    headers.push(("Host", "mcp.internal:8443"));
    headers.push(("Origin", "https://app.example.com"));
    assert_eq!(
        http(addr, "POST", &headers, body.as_bytes()).await.status,
        200
    );
}

#[tokio::test]
async fn oversized_and_malformed_bodies_are_refused_and_serving_continues() {
    let mut options = ServerOptions::default();
    options.max_message_bytes = 2048;
    let (addr, _stop) = start_http(HttpServer::new(fixture().registry).options(options)).await;
    let session = http_initialize(addr, &[]).await;
    let big = call_body(1, "echo", json!({"text": "x".repeat(10_000)}));
    let r = http(addr, "POST", &with_session(&session, &[]), &big).await;
    assert_eq!(r.status, 413);
    let r = http(addr, "POST", &with_session(&session, &[]), b"{oops").await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["code"], -32700);
    let r = http(addr, "POST", &with_session(&session, &[]), b"[]").await;
    assert_eq!(r.json()["error"]["code"], -32600);
    let headers = vec![
        ("Content-Type", "text/plain"),
        ("Mcp-Session-Id", session.as_str()),
    ];
    assert_eq!(http(addr, "POST", &headers, b"{}").await.status, 415);
    // An unsupported protocol version is refused, however good the request: only the bad
    // header is sent (the server reads the first one), with a valid ping.
    let ping = json!({"jsonrpc": "2.0", "id": 9, "method": "ping"}).to_string();
    let mut headers = JSON_HEADERS.to_vec();
    headers.push(("Mcp-Session-Id", session.as_str()));
    headers.push(("MCP-Protocol-Version", "1999-01-01"));
    let r = http(addr, "POST", &headers, ping.as_bytes()).await;
    assert_eq!(r.status, 400);
    let error = &r.json()["error"];
    assert_eq!(error["code"], -32600);
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("unsupported MCP-Protocol-Version"),
        "{error}"
    );
    let r = http(addr, "POST", &with_session(&session, &[]), ping.as_bytes()).await;
    assert_eq!(r.json()["result"], json!({}));
    assert_eq!(
        http(addr, "PUT", &with_session(&session, &[]), b"")
            .await
            .status,
        405
    );
}

#[tokio::test]
async fn bearer_tokens_map_to_principals_and_anonymous_calls_are_denied() {
    let f = fixture();
    let mut tokens = StaticTokens::new();
    tokens
        .insert_sha256_hex(&sha256_hex("s3cret"), "alice", ["*"])
        .unwrap();
    tokens
        .insert_sha256_hex(&sha256_hex("b0b"), "bob", ["*"])
        .unwrap();
    let server = HttpServer::new(f.registry.clone())
        .authenticator(tokens)
        .require_token(true);
    let (addr, _stop) = start_http(server).await;

    // Anonymous, where tokens exist and the channel requires a principal: 401 from
    // `initialize` on, with a challenge, rather than a tool error at the first call.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}
    }});
    let r = http(addr, "POST", &JSON_HEADERS, body.to_string().as_bytes()).await;
    assert_eq!(r.status, 401);
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    assert_eq!(
        r.json()["error"]["message"],
        "Unauthorized: this server needs a bearer token (Authorization: Bearer); anonymous callers are served nothing"
    );
    let auth = [("Authorization", "Bearer s3cret")];
    let early = http_initialize(addr, &auth).await;
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
    let r = http(addr, "POST", &with_session(&early, &[]), list.as_bytes()).await;
    assert_eq!(r.status, 401, "every request, not only initialize");

    // An unknown token is refused (401) before the body is read, not taken as anonymous.
    let r = http(
        addr,
        "POST",
        &with_session(&early, &[("Authorization", "Bearer wrong")]),
        &call_body(4, "echo", json!({"text": "x"})),
    )
    .await;
    assert_eq!(r.status, 401);
    assert_eq!(
        r.header("www-authenticate"),
        Some("Bearer error=\"invalid_token\"")
    );
    assert_eq!(
        r.json()["error"]["message"],
        "Unauthorized: unknown bearer token"
    );

    // A known token: the call runs as alice.
    let session = http_initialize(addr, &auth).await;
    let r = http(
        addr,
        "POST",
        &with_session(&session, &auth),
        &call_body(5, "echo", json!({"text": "hi"})),
    )
    .await;
    let result = &r.sse_messages()[0]["result"];
    assert_eq!(result["isError"], false);
    assert_eq!(result["_meta"]["milpa"]["principal"], "alice");

    // The session is bound to alice: another identity cannot use it.
    let bob = [("Authorization", "Bearer b0b")];
    let r = http(addr, "POST", &with_session(&session, &bob), list.as_bytes()).await;
    assert_eq!(r.status, 404);
    let records = f.audit.records();
    assert!(
        records
            .iter()
            .any(|r| r.principal.as_deref() == Some("alice"))
    );
}

#[tokio::test]
async fn a_dropped_response_stream_cancels_the_call() {
    let f = fixture_with(true, |b| b);
    let (addr, _stop) = start_http(HttpServer::new(f.registry.clone())).await;
    let session = http_initialize(addr, &[]).await;
    let stream = start_sse_call(
        addr,
        &session,
        &call_body(6, "sleep", json!({"ms": 10_000})),
    )
    .await;
    drop(stream);
    assert!(
        wait_for_cancelled(&f.audit, None).await,
        "the call was cancelled and audited"
    );
}

/// Opens a raw connection, sends a tools/call and returns once the response headers came
/// (the call is running then).
async fn start_sse_call(
    addr: std::net::SocketAddr,
    session: &str,
    body: &[u8],
) -> tokio::net::TcpStream {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: {session}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    let mut buf = [0u8; 1024];
    let n = stream.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).contains("200"));
    stream
}

#[tokio::test]
async fn deleting_a_session_cancels_its_calls() {
    let f = fixture_with(true, |b| b);
    let (addr, _stop) = start_http(HttpServer::new(f.registry.clone())).await;
    let session = http_initialize(addr, &[]).await;
    let mut stream = start_sse_call(
        addr,
        &session,
        &call_body(7, "sleep", json!({"ms": 10_000})),
    )
    .await;
    assert_eq!(
        http(addr, "DELETE", &with_session(&session, &[]), b"")
            .await
            .status,
        200
    );
    // The stream ends without a response.
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut rest))
        .await
        .expect("the stream ends")
        .unwrap();
    assert!(!String::from_utf8_lossy(&rest).contains("\"result\""));
    assert!(wait_for_cancelled(&f.audit, None).await);
}

#[tokio::test]
async fn serve_refuses_non_loopback_addresses() {
    let error = HttpServer::new(fixture().registry)
        .serve("0.0.0.0:0".parse().unwrap())
        .await
        .unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::PermissionDenied);
}

#[tokio::test]
async fn get_needs_a_session_and_an_event_stream_accept() {
    let (addr, _stop) = start_http(HttpServer::new(fixture().registry)).await;
    let r = http(addr, "GET", &[("Accept", "text/event-stream")], b"").await;
    assert_eq!(r.status, 400);
    let session = http_initialize(addr, &[]).await;
    let r = http(
        addr,
        "GET",
        &[("Accept", "application/json"), ("Mcp-Session-Id", &session)],
        b"",
    )
    .await;
    assert_eq!(r.status, 406);
    let r = http(
        addr,
        "GET",
        &[
            ("Accept", "text/event-stream"),
            ("Mcp-Session-Id", "unknown"),
        ],
        b"",
    )
    .await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn idle_sessions_expire() {
    let server =
        HttpServer::new(fixture().registry).session_idle_timeout(Duration::from_millis(100));
    let (addr, _stop) = start_http(server).await;
    let old = http_initialize(addr, &[]).await;
    tokio::time::sleep(Duration::from_millis(250)).await;
    // A new session sweeps expired ones (a background sweeper also runs).
    let _new = http_initialize(addr, &[]).await;
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let r = http(addr, "POST", &with_session(&old, &[]), ping.as_bytes()).await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn the_session_limit_is_enforced() {
    let (addr, _stop) = start_http(HttpServer::new(fixture().registry).max_sessions(2)).await;
    http_initialize(addr, &[]).await;
    http_initialize(addr, &[]).await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}
    }})
    .to_string();
    let r = http(addr, "POST", &JSON_HEADERS, body.as_bytes()).await;
    assert_eq!(r.status, 503);
}

#[tokio::test]
async fn a_client_that_drops_a_json_answered_call_cancels_it() {
    let f = fixture_with(true, |b| b);
    let (addr, _stop) = start_http(HttpServer::new(f.registry.clone()).json_response(true)).await;
    let session = http_initialize(addr, &[]).await;
    // A GET stream tells us when the call runs (its first progress notification).
    let mut events = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "GET /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {session}\r\n\r\n"
    );
    events.write_all(head.as_bytes()).await.unwrap();
    let mut buf = [0u8; 4096];
    let n = events.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).contains("200"));
    let body = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {
        "name": "sleep", "arguments": {"ms": 10_000}, "_meta": {"progressToken": "p"}}})
    .to_string();
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json\r\nMcp-Session-Id: {session}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body.as_bytes()).await.unwrap();
    let mut seen = String::new();
    while !seen.contains("notifications/progress") {
        let n = tokio::time::timeout(Duration::from_secs(5), events.read(&mut buf))
            .await
            .expect("progress on the GET stream")
            .unwrap();
        assert!(n > 0);
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    drop(stream);
    assert!(
        wait_for_cancelled(&f.audit, None).await,
        "the call was cancelled and audited"
    );
}
