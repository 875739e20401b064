//! A client that does not read its stream while a tool floods it with progress: the
//! server holds at most its cap of unread notifications (the rest are dropped), and the
//! call's response still arrives, last.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{http_initialize, parse_response, start_http};
use milpa::{ToolContext, ToolDefinition};
use milpa_mcp::HttpServer;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Progress notifications the tool sends: about 25 MB of them, three times the cap.
const FLOOD: u64 = 200_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_does_not_read_costs_the_server_its_cap_not_the_flood() {
    let done = Arc::new(AtomicBool::new(false));
    let finished = Arc::clone(&done);
    // Anonymous HTTP callers may call (the test sends no token).
    let mut registry = common::anonymous_registry();
    registry
        .register(
            ToolDefinition::builder("flood")
                .description("Reports progress a great many times")
                .asynchronous(move |_: Value, ctx: ToolContext| {
                    let finished = Arc::clone(&finished);
                    async move {
                        let handle = ctx.call_handle();
                        for step in 1..=FLOOD {
                            handle.progress(step as f64, Some(FLOOD as f64), Some("flooding"));
                        }
                        finished.store(true, Ordering::SeqCst);
                        json!("flooded")
                    }
                }),
        )
        .unwrap();
    let (addr, _stop) = start_http(HttpServer::new(Arc::new(registry))).await;
    let session = http_initialize(addr, &[]).await;

    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "flood", "arguments": {}, "_meta": {"progressToken": "p"}}})
    .to_string();
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMcp-Session-Id: {session}\r\n\
         MCP-Protocol-Version: 2025-06-18\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body.as_bytes()).await.unwrap();
    // Not a byte read until the tool is done flooding.
    tokio::time::timeout(Duration::from_secs(60), async {
        while !done.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the tool finishes");
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(60), stream.read_to_end(&mut raw))
        .await
        .expect("the stream ends")
        .unwrap();
    let messages = parse_response(&raw).sse_messages();
    let (last, progress) = messages.split_last().expect("a response");
    assert_eq!(last["id"], 2, "the response comes last");
    assert_eq!(
        last["result"]["structuredContent"],
        json!({"result": "flooded"})
    );
    assert!(
        progress
            .iter()
            .all(|m| m["method"] == "notifications/progress"),
        "only progress before it"
    );
    // The cap (8 MiB of about 130-byte notifications) and what the socket held: far
    // fewer than the flood.
    assert!(
        (progress.len() as u64) < FLOOD / 2,
        "{} of {FLOOD} progress notifications were held for a client that did not read",
        progress.len()
    );
    // What did arrive is in order.
    let steps: Vec<f64> = progress
        .iter()
        .map(|m| m["params"]["progress"].as_f64().unwrap())
        .collect();
    assert!(steps.windows(2).all(|w| w[0] < w[1]));
}
