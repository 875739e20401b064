//! stdio framing and bad input: every malformed message gets an error and the connection
//! keeps serving; end of input ends the server cleanly.

mod common;

use common::{StdioClient, fixture, initialized_client};
use milpa::audit::AuditOutcome;
use milpa_mcp::ServerOptions;
use serde_json::json;

#[tokio::test]
async fn initialize_negotiates_versions() {
    for (asked, answered) in [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", "2024-11-05"),
        ("2023-01-01", "2025-11-25"),
    ] {
        let mut client = StdioClient::start(fixture().registry, ServerOptions::default());
        let reply = client
            .request(
                "initialize",
                json!({"protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
            )
            .await;
        assert_eq!(reply["result"]["protocolVersion"], answered);
        assert_eq!(
            reply["result"]["capabilities"]["tools"]["listChanged"],
            true
        );
        assert!(reply["result"]["capabilities"]["logging"].is_object());
        assert_eq!(reply["result"]["serverInfo"]["name"], "milpa");
    }
}

#[tokio::test]
async fn requests_before_initialize_and_unknown_methods_get_method_not_found() {
    let mut client = StdioClient::start(fixture().registry, ServerOptions::default());
    // Newer clients probe server/discover first: answered at once, not a hang.
    let reply = client.request("server/discover", json!({})).await;
    assert_eq!(reply["error"]["code"], -32601);
    let reply = client.request("tools/list", json!({})).await;
    assert_eq!(reply["error"]["code"], -32601);
    // ping works before initialize.
    let reply = client.request("ping", json!({})).await;
    assert_eq!(reply["result"], json!({}));
    client.initialize(json!({})).await;
    // resources/list is served now; a method no revision knows is not.
    let reply = client.request("resources/list", json!({})).await;
    assert_eq!(reply["result"]["resources"], json!([]));
    let reply = client.request("resources/write", json!({})).await;
    assert_eq!(reply["error"]["code"], -32601);
    let again = client
        .request("initialize", json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}))
        .await;
    assert_eq!(again["error"]["code"], -32600);
}

#[tokio::test]
async fn malformed_json_is_a_parse_error_and_the_connection_stays() {
    let mut client = initialized_client().await;
    client
        .send_raw(b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \n")
        .await;
    let reply = client.recv().await;
    assert_eq!(reply["error"]["code"], -32700);
    assert_eq!(reply["id"], json!(null));
    client.send_raw(b"not json at all\n").await;
    assert_eq!(client.recv().await["error"]["code"], -32700);
    let reply = client.request("ping", json!({})).await;
    assert_eq!(reply["result"], json!({}));
}

#[tokio::test]
async fn valid_json_that_is_not_a_request_is_invalid_request() {
    let mut client = initialized_client().await;
    for bad in [
        json!(42),
        json!("text"),
        json!({"jsonrpc": "2.0"}),
        json!({"jsonrpc": "1.0", "id": 7, "method": "ping"}),
        json!({"jsonrpc": "2.0", "id": null, "method": "ping"}),
        json!({"jsonrpc": "2.0", "id": 8, "method": 12}),
        json!({"jsonrpc": "2.0", "id": 9, "method": "ping", "params": "x"}),
    ] {
        client.send(bad.clone()).await;
        let reply = client.recv().await;
        assert_eq!(reply["error"]["code"], -32600, "for {bad}: {reply}");
    }
    // The id is echoed when it could be read.
    client
        .send(json!({"jsonrpc": "1.0", "id": 7, "method": "ping"}))
        .await;
    assert_eq!(client.recv().await["id"], 7);
    let reply = client.request("ping", json!({})).await;
    assert_eq!(reply["result"], json!({}));
}

#[tokio::test]
async fn bad_params_are_invalid_params() {
    let mut client = initialized_client().await;
    let reply = client.request("tools/call", json!({"arguments": {}})).await;
    assert_eq!(reply["error"]["code"], -32602);
    let reply = client.request("tools/call", json!({"name": 5})).await;
    assert_eq!(reply["error"]["code"], -32602);
    let reply = client
        .request("tools/call", json!({"name": "echo", "arguments": [1]}))
        .await;
    assert_eq!(reply["error"]["code"], -32602);
    let reply = client
        .request("logging/setLevel", json!({"level": "loud"}))
        .await;
    assert_eq!(reply["error"]["code"], -32602);
    let reply = client
        .request("tools/list", json!({"cursor": "bogus"}))
        .await;
    assert_eq!(reply["error"]["code"], -32602);
    let fresh = StdioClient::start(fixture().registry, ServerOptions::default());
    let mut fresh = fresh;
    let reply = fresh
        .request("initialize", json!({"capabilities": {}}))
        .await;
    assert_eq!(reply["error"]["code"], -32602);
}

/// A `tools/call` refused at the protocol level still leaves an audit record (with the
/// name when there was one, the caller, and the reason), and the JSON-RPC error is
/// answered as before.
#[tokio::test]
async fn a_tools_call_refused_at_the_protocol_level_is_audited() {
    let f = fixture();
    let mut client = StdioClient::start(f.registry, ServerOptions::default());
    client.initialize(json!({})).await;
    let reply = client
        .request("tools/call", json!({"name": "echo", "arguments": 5}))
        .await;
    assert_eq!(reply["error"]["code"], -32602);
    let reply = client.request("tools/call", json!({"arguments": {}})).await;
    assert_eq!(reply["error"]["code"], -32602);
    let records = f.audit.records();
    assert_eq!(records.len(), 2, "{records:?}");
    assert!(
        records
            .iter()
            .all(|r| r.outcome == AuditOutcome::InvalidRequest
                && !r.success
                && r.channel == "mcp"
                && r.principal.as_deref() == Some("stdio"))
    );
    assert_eq!(records[0].tool, "echo");
    assert!(
        records[0]
            .error
            .as_deref()
            .unwrap()
            .contains("arguments must be an object")
    );
    assert_eq!(records[1].tool, "");
    assert!(records[1].error.as_deref().unwrap().contains("name"));
}

#[tokio::test]
async fn an_oversized_line_is_refused_and_serving_continues() {
    let mut options = ServerOptions::default();
    options.max_message_bytes = 1024;
    let mut client = StdioClient::start(fixture().registry, options);
    client.initialize(json!({})).await;
    let big = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\",\"arguments\":{{\"text\":\"{}\"}}}}}}\n",
        "x".repeat(100_000)
    );
    client.send_raw(big.as_bytes()).await;
    let reply = client.recv().await;
    assert_eq!(reply["error"]["code"], -32600);
    assert!(reply["error"]["message"].as_str().unwrap().contains("1024"));
    let result = client.call("echo", json!({"text": "small"})).await;
    assert_eq!(result["content"][0]["text"], "small");
}

#[tokio::test]
async fn blank_lines_and_crlf_are_tolerated() {
    let mut client = initialized_client().await;
    client
        .send_raw(b"\n\r\n{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"ping\"}\r\n")
        .await;
    let reply = client.recv().await;
    assert_eq!(reply["id"], "a");
    assert_eq!(reply["result"], json!({}));
}

#[tokio::test]
async fn batches_get_one_array_reply() {
    let mut client = initialized_client().await;
    client
        .send(json!([
            {"jsonrpc": "2.0", "id": 1, "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "b"}}},
            7
        ]))
        .await;
    let reply = client.recv().await;
    let items = reply.as_array().expect("an array");
    assert_eq!(items.len(), 3);
    assert!(items.iter().any(|i| i["id"] == 1));
    assert!(
        items
            .iter()
            .any(|i| i["id"] == 2 && i["result"]["content"][0]["text"] == "b")
    );
    assert!(items.iter().any(|i| i["error"]["code"] == -32600));
}

#[tokio::test]
async fn many_requests_in_one_write_are_all_answered_in_order_even_at_end_of_input() {
    let mut client = initialized_client().await;
    // More lines than one answering round, sent with one write and followed by the end of
    // input: every one still gets its answer, in the order sent.
    let mut input = String::new();
    for i in 0..100 {
        input.push_str(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\",\"arguments\":{{\"text\":\"m{i}\"}}}}}}\n"
        ));
    }
    client.send_raw(input.as_bytes()).await;
    client.close().await;
    for i in 0..100 {
        let reply = client.read_line().await.expect("an answer per request");
        assert_eq!(reply["id"], i);
        assert_eq!(reply["result"]["content"][0]["text"], format!("m{i}"));
    }
    assert!(client.read_line().await.is_none(), "nothing more");
}

#[tokio::test]
async fn end_of_input_ends_the_server_cleanly() {
    let mut client = initialized_client().await;
    client.close().await;
    assert!(client.read_line().await.is_none(), "output closes too");
    let ended = tokio::time::timeout(common::WAIT, &mut client.server)
        .await
        .expect("the server ends")
        .unwrap();
    assert!(ended.is_ok());
}

#[tokio::test]
async fn tool_calls_get_stdio_context() {
    let f = fixture();
    let mut client = StdioClient::start(f.registry, ServerOptions::default());
    client.initialize(json!({})).await;
    let result = client.call("add", json!({"a": 1, "b": 2})).await;
    let meta = &result["_meta"]["milpa"];
    assert_eq!(meta["channel"], "mcp");
    assert_eq!(meta["principal"], "stdio");
    assert_eq!(meta["request_id"].as_str().unwrap().len(), 32);
    let records = f.audit.records();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].principal.as_deref(), Some("stdio"));
}
