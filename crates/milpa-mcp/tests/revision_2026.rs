//! The 2026-07-28 revision on the HTTP endpoint that also serves the older ones:
//! `server/discover`, per-request `_meta`, no session, `resultType`, caching hints, the new
//! error codes with their HTTP statuses, routing-header checks, progress on the request's
//! own stream, and a dropped connection cancelling the call.

mod common;

use std::net::SocketAddr;

use common::{
    JSON_HEADERS, StdioClient, fixture, fixture_with, http, http_initialize, start_http,
    wait_for_cancelled,
};
use milpa_mcp::{HttpServer, ServerOptions};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const V: &str = "2026-07-28";

type Headers<'a> = Vec<(&'a str, &'a str)>;

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}
    })
}

fn body(id: i64, method: &str, params: Value) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        .to_string()
        .into_bytes()
}

/// The headers a 2026-07-28 client sends for `method` (and `Mcp-Name` when given).
fn headers<'a>(method: &'a str, name: Option<&'a str>) -> Vec<(&'a str, &'a str)> {
    let mut headers = JSON_HEADERS.to_vec();
    headers.push(("MCP-Protocol-Version", V));
    headers.push(("Mcp-Method", method));
    if let Some(name) = name {
        headers.push(("Mcp-Name", name));
    }
    headers
}

async fn server() -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
    start_http(HttpServer::new(fixture_with(true, |b| b).registry)).await
}

#[tokio::test]
async fn discover_answers_without_initialize_or_session() {
    let (addr, _stop) = server().await;
    let r = http(
        addr,
        "POST",
        &headers("server/discover", None),
        &body(1, "server/discover", json!({"_meta": meta()})),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("mcp-session-id"), None);
    let result = &r.json()["result"];
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["supportedVersions"][0], V);
    assert!(
        result["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("2025-11-25"))
    );
    assert_eq!(
        result["capabilities"]["tools"],
        json!({"listChanged": true})
    );
    assert_eq!(result["ttlMs"], 300_000);
    assert_eq!(result["cacheScope"], "public");
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "milpa"
    );
}

#[tokio::test]
async fn lists_and_calls_carry_result_type_and_caching_hints() {
    let (addr, _stop) = server().await;
    let r = http(
        addr,
        "POST",
        &headers("tools/list", None),
        &body(2, "tools/list", json!({"_meta": meta()})),
    )
    .await;
    assert_eq!(r.status, 200);
    let result = &r.json()["result"];
    assert_eq!(result["resultType"], "complete");
    // Listed for this caller (what it could use), so not for a shared cache; with
    // `list_all` it is "public" (tests/resources_prompts.rs).
    assert_eq!(result["cacheScope"], "private");
    assert_eq!(result["ttlMs"], 300_000);
    assert!(result["tools"].as_array().unwrap().len() > 3);

    let r = http(
        addr,
        "POST",
        &headers("tools/call", Some("add")),
        &body(
            3,
            "tools/call",
            json!({"name": "add", "arguments": {"a": 2, "b": 3}, "_meta": meta()}),
        ),
    )
    .await;
    assert_eq!(r.status, 200);
    // Nothing was sent before the response: plain JSON, not a stream.
    assert_eq!(r.header("content-type"), Some("application/json"));
    let answer = r.json();
    assert_eq!(answer["id"], 3);
    assert_eq!(answer["result"]["resultType"], "complete");
    assert_eq!(answer["result"]["structuredContent"], json!({"result": 5}));

    // The older revisions' results stay as they were: no resultType.
    let session = http_initialize(addr, &[]).await;
    let mut legacy = JSON_HEADERS.to_vec();
    legacy.push(("Mcp-Session-Id", &session));
    legacy.push(("MCP-Protocol-Version", "2025-11-25"));
    let r = http(
        addr,
        "POST",
        &legacy,
        &body(
            4,
            "tools/call",
            json!({"name": "add", "arguments": {"a": 2, "b": 3}}),
        ),
    )
    .await;
    let answer = r.sse_messages().pop().unwrap();
    assert_eq!(answer["result"]["structuredContent"], json!({"result": 5}));
    assert!(answer["result"].get("resultType").is_none(), "{answer}");
}

#[tokio::test]
async fn bad_meta_versions_and_headers_get_their_codes_and_400() {
    let (addr, _stop) = server().await;
    let cases: Vec<(Headers, Value, i64)> = vec![
        // No _meta: invalid params.
        (headers("server/discover", None), json!({}), -32602),
        // _meta without client capabilities.
        (
            headers("server/discover", None),
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": V}}),
            -32602,
        ),
        // The header names another version than _meta: header mismatch.
        (
            {
                let mut h = headers("server/discover", None);
                h[2] = ("MCP-Protocol-Version", "2099-01-01");
                h
            },
            json!({"_meta": meta()}),
            -32020,
        ),
        // Mcp-Method does not match the body.
        (
            headers("tools/list", None),
            json!({"_meta": meta()}),
            -32020,
        ),
    ];
    for (i, (headers, params, code)) in cases.into_iter().enumerate() {
        let id = 10 + i as i64;
        let r = http(addr, "POST", &headers, &body(id, "server/discover", params)).await;
        assert_eq!(r.status, 400, "case {i}: {}", r.body);
        let answer = r.json();
        assert_eq!(answer["id"], id, "case {i}");
        assert_eq!(answer["error"]["code"], code, "case {i}: {answer}");
    }

    // A version no revision knows: -32022 with what we speak and what was asked.
    let mut unknown = meta();
    unknown["io.modelcontextprotocol/protocolVersion"] = json!("v999");
    let mut h = headers("server/discover", None);
    h[2] = ("MCP-Protocol-Version", "v999");
    let r = http(
        addr,
        "POST",
        &h,
        &body(20, "server/discover", json!({"_meta": unknown})),
    )
    .await;
    assert_eq!(r.status, 400);
    let error = &r.json()["error"];
    assert_eq!(error["code"], -32022);
    assert_eq!(error["data"]["requested"], "v999");
    assert_eq!(error["data"]["supported"][0], V);

    // Mcp-Name: required for tools/call, compared without surrounding whitespace.
    let call = |id| {
        body(
            id,
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "hi"}, "_meta": meta()}),
        )
    };
    let r = http(addr, "POST", &headers("tools/call", None), &call(21)).await;
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (400, json!(-32020))
    );
    let r = http(addr, "POST", &headers("tools/call", Some("add")), &call(22)).await;
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (400, json!(-32020))
    );
    let r = http(
        addr,
        "POST",
        &headers("tools/call", Some("  echo ")),
        &call(23),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["result"]["structuredContent"]["result"], "hi");
}

#[tokio::test]
async fn removed_and_unknown_methods_get_404_with_the_request_id() {
    let (addr, _stop) = server().await;
    for (i, method) in ["ping", "initialize", "logging/setLevel", "unknown/method"]
        .into_iter()
        .enumerate()
    {
        let id = 30 + i as i64;
        let r = http(
            addr,
            "POST",
            &headers(method, None),
            &body(id, method, json!({"_meta": meta()})),
        )
        .await;
        assert_eq!(r.status, 404, "{method}");
        let answer = r.json();
        assert_eq!(answer["id"], id);
        assert_eq!(answer["error"]["code"], -32601, "{method}");
    }
    // A notification: 202, nothing else.
    let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 1, "_meta": meta()}});
    let r = http(
        addr,
        "POST",
        &headers("notifications/cancelled", None),
        note.to_string().as_bytes(),
    )
    .await;
    assert_eq!(r.status, 202);
    assert!(r.body.is_empty());
}

#[tokio::test]
async fn a_capability_the_request_did_not_declare_gets_32021_and_400() {
    let (addr, _stop) = server().await;
    // `ask` needs sampling.
    let r = http(
        addr,
        "POST",
        &headers("tools/call", Some("ask")),
        &body(
            40,
            "tools/call",
            json!({"name": "ask", "arguments": {}, "_meta": meta()}),
        ),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.body);
    let answer = r.json();
    assert_eq!(answer["id"], 40);
    assert_eq!(answer["error"]["code"], -32021);
    assert_eq!(
        answer["error"]["data"]["requiredCapabilities"],
        json!({"sampling": {}})
    );
}

#[tokio::test]
async fn progress_and_requested_logs_arrive_on_the_calls_own_stream() {
    let (addr, _stop) = server().await;
    let mut with_logs = meta();
    with_logs["io.modelcontextprotocol/logLevel"] = json!("info");
    with_logs["progressToken"] = json!("p1");
    let r = http(
        addr,
        "POST",
        &headers("tools/call", Some("sleep")),
        &body(
            50,
            "tools/call",
            json!({"name": "sleep", "arguments": {"ms": 20}, "_meta": with_logs}),
        ),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let messages = r.sse_messages();
    let methods: Vec<&str> = messages
        .iter()
        .filter_map(|m| m["method"].as_str())
        .collect();
    assert_eq!(
        methods,
        [
            "notifications/progress",
            "notifications/message",
            "notifications/progress"
        ]
    );
    assert_eq!(messages[0]["params"]["progressToken"], "p1");
    // The info log came; the debug one stayed below the requested level.
    assert_eq!(messages[1]["params"]["data"], "sleeping");
    let last = messages.last().unwrap();
    assert_eq!(last["id"], 50);
    assert_eq!(last["result"]["resultType"], "complete");

    // Without a log level in _meta: no log message at all.
    let mut quiet = meta();
    quiet["progressToken"] = json!("p2");
    let r = http(
        addr,
        "POST",
        &headers("tools/call", Some("sleep")),
        &body(
            51,
            "tools/call",
            json!({"name": "sleep", "arguments": {"ms": 20}, "_meta": quiet}),
        ),
    )
    .await;
    let messages = r.sse_messages();
    assert!(
        messages
            .iter()
            .all(|m| m["method"] != "notifications/message"),
        "{messages:?}"
    );
    assert_eq!(messages.last().unwrap()["result"]["resultType"], "complete");
}

/// A call that ends at once still has what it sent go first: its messages on an SSE stream
/// before its response, or plain JSON when it sent none.
#[tokio::test]
async fn a_call_that_ends_at_once_still_streams_what_it_sent() {
    let f = fixture_with(true, |b| b);
    f.registry
        .replace_tools(
            "extra",
            vec![
                milpa::ToolDefinition::builder("tick")
                    .input_schema(json!({"type": "object"}))
                    .sync(|_, ctx| {
                        ctx.call_handle().progress(1.0, Some(1.0), Some("done"));
                        json!("ticked")
                    }),
            ],
        )
        .unwrap();
    let (addr, _stop) = start_http(HttpServer::new(f.registry.clone())).await;
    let mut with_progress = meta();
    with_progress["progressToken"] = json!("t1");
    let r = http(
        addr,
        "POST",
        &headers("tools/call", Some("tick")),
        &body(
            60,
            "tools/call",
            json!({"name": "tick", "arguments": {}, "_meta": with_progress}),
        ),
    )
    .await;
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let messages = r.sse_messages();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(messages[0]["method"], "notifications/progress");
    assert_eq!(messages[0]["params"]["progressToken"], "t1");
    assert_eq!(messages[1]["id"], 60);
    assert_eq!(
        messages[1]["result"]["structuredContent"]["result"],
        "ticked"
    );

    // No progress token: nothing to send first, so JSON.
    let r = http(
        addr,
        "POST",
        &headers("tools/call", Some("tick")),
        &body(
            61,
            "tools/call",
            json!({"name": "tick", "arguments": {}, "_meta": meta()}),
        ),
    )
    .await;
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.json()["result"]["resultType"], "complete");
}

#[tokio::test]
async fn a_client_that_goes_away_cancels_its_call() {
    let f = fixture_with(true, |b| b);
    let (addr, _stop) = start_http(HttpServer::new(f.registry.clone())).await;
    let mut progress = meta();
    progress["progressToken"] = json!("p");
    let payload = body(
        60,
        "tools/call",
        json!({"name": "sleep", "arguments": {"ms": 10_000}, "_meta": progress}),
    );
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: {V}\r\nMcp-Method: tools/call\r\nMcp-Name: sleep\r\nContent-Length: {}\r\n\r\n",
        payload.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&payload).await.unwrap();
    let mut buf = [0u8; 1024];
    let n = stream.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).contains("200"));
    drop(stream);
    assert!(
        wait_for_cancelled(&f.audit, Some("sleep")).await,
        "the call was cancelled and audited"
    );
}

#[tokio::test]
async fn a_refused_call_is_a_complete_result_with_is_error() {
    let f = fixture();
    let (addr, _stop) = start_http(HttpServer::new(f.registry.clone())).await;
    // Anonymous callers are refused by the registry (require_auth): a result, not an error.
    let r = http(
        addr,
        "POST",
        &headers("tools/call", Some("echo")),
        &body(
            70,
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "x"}, "_meta": meta()}),
        ),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["result"]["isError"], true);
    assert_eq!(r.json()["result"]["resultType"], "complete");
}

#[tokio::test]
async fn stdio_answers_2026_requests_without_initialize_beside_a_legacy_session() {
    let f = fixture();
    let mut client = StdioClient::start(f.registry.clone(), ServerOptions::default());
    let discover = client
        .request("server/discover", json!({"_meta": meta()}))
        .await;
    assert_eq!(discover["result"]["resultType"], "complete");
    assert_eq!(discover["result"]["supportedVersions"][0], V);

    let mut with_progress = meta();
    with_progress["progressToken"] = json!(7);
    let id = client.next_id();
    client
        .send(
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "sleep", "arguments": {"ms": 10}, "_meta": with_progress}}),
        )
        .await;
    let progress = client.recv().await;
    assert_eq!(progress["method"], "notifications/progress");
    assert_eq!(progress["params"]["progressToken"], 7);
    let answer = client.response(&id).await;
    assert_eq!(answer["result"]["resultType"], "complete");
    assert_eq!(
        answer["result"]["structuredContent"],
        json!({"slept_ms": 10})
    );

    // Removed methods are unknown in this revision; a bad _meta is invalid params.
    let ping = client.request("ping", json!({"_meta": meta()})).await;
    assert_eq!(ping["error"]["code"], -32601);
    let bad = client
        .request(
            "tools/list",
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": V}}),
        )
        .await;
    assert_eq!(bad["error"]["code"], -32602);

    // A legacy client on the same connection still needs initialize, and gets no resultType.
    let list = client.request("tools/list", json!({})).await;
    assert_eq!(list["error"]["code"], -32601);
    client.initialize(json!({})).await;
    let answer = client.call("add", json!({"a": 1, "b": 2})).await;
    assert_eq!(answer["structuredContent"], json!({"result": 3}));
    assert!(answer.get("resultType").is_none(), "{answer}");
}

#[tokio::test]
async fn stdio_listen_tells_of_tool_list_changes_until_cancelled() {
    let f = fixture();
    let mut client = StdioClient::start(f.registry.clone(), ServerOptions::default());
    let add_tool = |name: &str| {
        f.registry
            .replace_tools(
                "extra",
                vec![
                    milpa::ToolDefinition::builder(name)
                        .input_schema(json!({"type": "object"}))
                        .sync(|_, _| json!("here")),
                ],
            )
            .unwrap();
    };
    client
        .send(
            json!({"jsonrpc": "2.0", "id": 90, "method": "subscriptions/listen", "params": {
            "notifications": {"toolsListChanged": true}, "_meta": meta()}}),
        )
        .await;
    let ack = client.recv().await;
    assert_eq!(
        ack,
        json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
            "params": {"notifications": {"toolsListChanged": true},
                "_meta": {"io.modelcontextprotocol/subscriptionId": 90}}})
    );
    add_tool("late");
    let note = client.recv().await;
    assert_eq!(
        note,
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
            "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": 90}}})
    );

    // Cancelled (a round trip makes sure the server read it): later changes are not sent.
    client
        .send(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 90}}),
        )
        .await;
    client
        .request("server/discover", json!({"_meta": meta()}))
        .await;
    add_tool("later");
    let listed = client.request("tools/list", json!({"_meta": meta()})).await;
    assert!(
        listed["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "later")
    );
    assert!(client.backlog.is_empty(), "{:?}", client.backlog);

    // A request without a filter is refused.
    let refused = client
        .request("subscriptions/listen", json!({"_meta": meta()}))
        .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
}

#[tokio::test]
async fn a_listen_stream_is_acknowledged_then_told_of_tool_list_changes() {
    let f = fixture_with(true, |b| b);
    let (addr, _stop) = start_http(HttpServer::new(f.registry.clone())).await;
    let payload = body(
        80,
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true, "promptsListChanged": true,
            "resourceSubscriptions": ["docs://a"]}, "_meta": meta()}),
    );
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: {V}\r\nMcp-Method: subscriptions/listen\r\nContent-Length: {}\r\n\r\n",
        payload.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&payload).await.unwrap();
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    // Reads until `count` SSE data lines arrived.
    async fn read_events(
        stream: &mut tokio::net::TcpStream,
        seen: &mut String,
        buf: &mut [u8],
        count: usize,
    ) -> Vec<Value> {
        loop {
            let events: Vec<Value> = seen
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str(d.trim()).ok())
                .collect();
            if events.len() >= count {
                return events;
            }
            let n = tokio::time::timeout(common::WAIT, stream.read(buf))
                .await
                .expect("no event in time")
                .unwrap();
            assert!(n > 0, "the stream ended: {seen}");
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    }
    let events = read_events(&mut stream, &mut seen, &mut buf, 1).await;
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
    assert_eq!(
        events[0]["method"],
        "notifications/subscriptions/acknowledged"
    );
    // Only what the server delivers is acknowledged; tagged with the request's id.
    assert_eq!(
        events[0]["params"],
        json!({"notifications": {"toolsListChanged": true, "promptsListChanged": true},
            "_meta": {"io.modelcontextprotocol/subscriptionId": 80}})
    );
    f.registry
        .replace_tools(
            "extra",
            vec![
                milpa::ToolDefinition::builder("late")
                    .input_schema(json!({"type": "object"}))
                    .sync(|_, _| json!("here")),
            ],
        )
        .unwrap();
    let events = read_events(&mut stream, &mut seen, &mut buf, 2).await;
    assert_eq!(
        events[1],
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
            "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": 80}}})
    );
    // The new tool is listed.
    let r = http(
        addr,
        "POST",
        &headers("tools/list", None),
        &body(81, "tools/list", json!({"_meta": meta()})),
    )
    .await;
    assert!(
        r.json()["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "late")
    );
}

#[tokio::test]
async fn mcp_param_headers_must_match_the_arguments_they_mirror() {
    let mut registry = common::anonymous_registry();
    registry
        .register(
            milpa::ToolDefinition::builder("route")
                .input_schema(json!({"type": "object",
                    "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}))
                .sync(|args, _| args["region"].clone()),
        )
        .unwrap();
    let (addr, _stop) = start_http(HttpServer::new(std::sync::Arc::new(registry))).await;
    let payload = body(
        90,
        "tools/call",
        json!({"name": "route", "arguments": {"region": "Hello"}, "_meta": meta()}),
    );
    // (header value, accepted): literal, Base64, bad padding, bad alphabet, other value.
    let cases = [
        (Some("Hello"), true),
        (Some("=?base64?SGVsbG8=?="), true),
        (Some("=?base64?SGVsbG8?="), false),
        (Some("=?base64?SGVs!!!bG8=?="), false),
        (Some("Goodbye"), false),
        (None, false),
    ];
    for (value, accepted) in cases {
        let mut h = headers("tools/call", Some("route"));
        if let Some(value) = value {
            h.push(("Mcp-Param-Region", value));
        }
        let r = http(addr, "POST", &h, &payload).await;
        let answer = r.json();
        if accepted {
            assert_eq!(r.status, 200, "{value:?}: {answer}");
            assert_eq!(answer["result"]["structuredContent"]["result"], "Hello");
        } else {
            assert_eq!(r.status, 400, "{value:?}: {answer}");
            assert_eq!(answer["error"]["code"], -32020, "{value:?}");
            assert_eq!(answer["id"], 90);
        }
    }
}

/// A routing header sent twice is refused whichever copy matches the body: only one would
/// be checked, and an intermediary may route on the other.
#[tokio::test]
async fn repeated_routing_headers_are_refused_naming_the_header() {
    let mut registry = common::anonymous_registry();
    registry
        .register(
            milpa::ToolDefinition::builder("route")
                .input_schema(json!({"type": "object",
                    "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}))
                .sync(|args, _| args["region"].clone()),
        )
        .unwrap();
    let (addr, _stop) = start_http(HttpServer::new(std::sync::Arc::new(registry))).await;
    let payload = body(
        95,
        "tools/call",
        json!({"name": "route", "arguments": {"region": "eu"}, "_meta": meta()}),
    );
    let single = || {
        let mut h = headers("tools/call", Some("route"));
        h.push(("Mcp-Param-Region", "eu"));
        h
    };
    let r = http(addr, "POST", &single(), &payload).await;
    assert_eq!(r.status, 200, "{}", r.body);

    // (the repeated header, its second value, the name the message gives)
    let cases = [
        ("Mcp-Name", "other", "Mcp-Name"),
        ("mcp-name", "route", "Mcp-Name"),
        ("Mcp-Method", "tools/list", "Mcp-Method"),
        ("MCP-Protocol-Version", V, "MCP-Protocol-Version"),
        ("Mcp-Param-Region", "us", "Mcp-Param-region"),
    ];
    for (header, second, shown) in cases {
        let mut h = single();
        h.push((header, second));
        let r = http(addr, "POST", &h, &payload).await;
        assert_eq!(r.status, 400, "{header}: {}", r.body);
        let answer = r.json();
        assert_eq!(answer["id"], 95, "{header}");
        assert_eq!(answer["error"]["code"], -32020, "{header}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(shown) && message.contains("more than once"),
            "{header}: {message}"
        );
    }
}
