//! How definitions and results appear on the wire (DESIGN §6): tools/list entries and
//! pagination, tools/call content, structuredContent, isError and _meta.milpa.

mod common;

use common::{StdioClient, initialized_client};
use milpa::{ToolDefinition, ToolRegistry};
use milpa_mcp::ServerOptions;
use serde_json::{Value, json};
use std::sync::Arc;

#[tokio::test]
async fn tools_list_entries_follow_the_mapping() {
    let mut client = initialized_client().await;
    let reply = client.request("tools/list", json!({})).await;
    let tools = reply["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        &names[..3],
        ["echo", "add", "delete_note"],
        "registration order"
    );
    assert!(reply["result"].get("nextCursor").is_none());
    let add = &tools[1];
    assert_eq!(add["description"], "Adds");
    assert_eq!(add["inputSchema"]["required"], json!(["a", "b"]));
    assert_eq!(add["outputSchema"]["type"], "object");
    assert_eq!(
        add["annotations"],
        json!({"readOnlyHint": true, "destructiveHint": false})
    );
    let delete = &tools[2];
    assert_eq!(
        delete["annotations"],
        json!({"readOnlyHint": false, "destructiveHint": true})
    );
    assert!(delete.get("outputSchema").is_none());
}

#[tokio::test]
async fn pagination_uses_opaque_cursors_in_a_stable_order() {
    let mut registry = ToolRegistry::new();
    for i in 0..7 {
        registry
            .register(
                ToolDefinition::builder(format!("tool_{i}"))
                    .description("t")
                    .sync(|_, _| json!(null)),
            )
            .unwrap();
    }
    let mut options = ServerOptions::default();
    options.page_size = 3;
    let mut client = StdioClient::start(Arc::new(registry), options);
    client.initialize(json!({})).await;
    let mut seen = Vec::new();
    let mut cursor = Value::Null;
    let mut pages = 0;
    loop {
        let params = if cursor.is_null() {
            json!({})
        } else {
            json!({"cursor": cursor})
        };
        let reply = client.request("tools/list", params).await;
        let result = &reply["result"];
        for tool in result["tools"].as_array().unwrap() {
            seen.push(tool["name"].as_str().unwrap().to_owned());
            // A schema without "type" gets "type": "object".
            assert_eq!(tool["inputSchema"], json!({"type": "object"}));
        }
        pages += 1;
        match result.get("nextCursor") {
            Some(next) => cursor = next.clone(),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    let expected: Vec<String> = (0..7).map(|i| format!("tool_{i}")).collect();
    assert_eq!(seen, expected);
}

#[tokio::test]
async fn success_results_render_text_and_structured_content() {
    let mut client = initialized_client().await;
    let r = client.call("add", json!({"a": 2, "b": 40})).await;
    assert_eq!(r["content"], json!([{"type": "text", "text": "42"}]));
    assert_eq!(r["structuredContent"], json!({"result": 42}));
    assert_eq!(r["isError"], false);
    let meta = &r["_meta"]["milpa"];
    assert_eq!(meta["tool"], "add");
    assert!(meta["took_ms"].is_u64());

    let r = client.call("echo", json!({"text": "plain"})).await;
    assert_eq!(r["content"][0]["text"], "plain");
    assert_eq!(r["structuredContent"], json!({"result": "plain"}));

    let r = client.call("sleep", json!({"ms": 1})).await;
    assert_eq!(r["content"][0]["text"], "{\"slept_ms\":1}");
    assert_eq!(r["structuredContent"], json!({"slept_ms": 1}));
}

#[tokio::test]
async fn refusals_are_results_not_protocol_errors() {
    let mut client = initialized_client().await;
    let r = client.call("nope", json!({})).await;
    assert_eq!(r["isError"], true);
    assert_eq!(r["content"][0]["text"], "Tool not found: nope");
    assert_eq!(r["_meta"]["milpa"]["code"], "TOOL_NOT_FOUND");
    assert!(r.get("structuredContent").is_none());

    let r = client.call("echo", json!({})).await;
    assert_eq!(r["_meta"]["milpa"]["code"], "VALIDATION_ERROR");
    // The original's words, then the schema's.
    assert_eq!(
        r["content"][0]["text"],
        "Missing required field: text\n'text' is required (a string)"
    );

    let r = client.call("fails", json!({})).await;
    assert_eq!(r["isError"], true);
    assert_eq!(r["_meta"]["milpa"]["code"], "INTERNAL_ERROR");
    assert_eq!(r["content"][0]["text"], "it broke");
}

#[tokio::test]
async fn tools_can_return_their_own_content_blocks() {
    let mut client = initialized_client().await;
    let r = client.call("blocks", json!({})).await;
    assert_eq!(
        r["content"],
        json!([{"type": "text", "text": "look"}, {"type": "image", "data": "AAAA", "mimeType": "image/png"}])
    );
    assert_eq!(r["structuredContent"], json!({"n": 1}));
    assert_eq!(r["isError"], false);
}

#[tokio::test]
async fn confirmation_results_say_how_to_confirm() {
    let mut client = initialized_client().await;
    let r = client.call("delete_note", json!({"id": 3})).await;
    assert_eq!(r["isError"], false);
    let token = r["structuredContent"]["confirm_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("delete_note(id=3)"), "{text}");
    assert!(
        text.contains(&format!("confirm_token = \"{token}\"")),
        "{text}"
    );
    assert_eq!(r["_meta"]["milpa"]["requires_confirmation"], true);
    let done = client
        .call("delete_note", json!({"confirm_token": token}))
        .await;
    assert_eq!(done["structuredContent"], json!({"deleted": 3}));
}

/// Finding #12: a large result is not sent twice. `structuredContent` carries it whole; the
/// text block repeats at most `TEXT_COPY_LIMIT` bytes, so a result just under the registry's
/// size cap stays well under twice the cap on the wire (before: two full copies, each NUL
/// escaped as `\u0000` in both). Over the cap the call fails with `RESULT_TOO_LARGE`.
#[tokio::test]
async fn a_large_result_is_sent_once() {
    const CAP: usize = 1 << 20;
    let mut registry = ToolRegistry::builder().max_result_bytes(CAP).build();
    for (name, nuls) in [("nuls", CAP / 6 - 64), ("too_many_nuls", CAP)] {
        registry
            .register(
                ToolDefinition::builder(name)
                    .description("NULs on stdout")
                    .sync(move |_, _| json!("\0".repeat(nuls))),
            )
            .unwrap();
    }
    registry
        .register(
            ToolDefinition::builder("nul_object")
                .description("NULs in an object")
                .sync(|_, _| json!({"stdout": "\0".repeat(CAP / 6 - 64), "exit_code": 0})),
        )
        .unwrap();
    let mut client = StdioClient::start(Arc::new(registry), ServerOptions::default());
    client.initialize(json!({})).await;
    let overhead = 8 * 1024;
    // The text copy: its NULs escaped twice over (`\\u0000` in the JSON-RPC line).
    let text_copy = 7 * milpa_mcp::mapping::TEXT_COPY_LIMIT;
    for (id, name) in [(1, "nuls"), (2, "nul_object")] {
        client
            .send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": name, "arguments": {}}}))
            .await;
        let line = client.read_raw_line().await.expect("an answer");
        assert!(
            line.len() < CAP + text_copy + overhead,
            "{name}: {} bytes",
            line.len()
        );
        assert!(line.len() < 2 * CAP, "{name}");
        let reply: Value = serde_json::from_str(&line).unwrap();
        let result = &reply["result"];
        assert_eq!(result["isError"], false, "{name}");
        let text = result["content"][0]["text"].as_str().unwrap();
        assert!(
            text.ends_with("[cut at 65536 bytes: structuredContent has the whole result]"),
            "{name}"
        );
        let whole = match name {
            "nuls" => &result["structuredContent"]["result"],
            _ => &result["structuredContent"]["stdout"],
        };
        assert_eq!(whole.as_str().unwrap().len(), CAP / 6 - 64, "{name}");
    }
    let result = client.call("too_many_nuls", json!({})).await;
    assert_eq!(result["isError"], true);
    assert_eq!(result["_meta"]["milpa"]["code"], "RESULT_TOO_LARGE");
}
