//! An HTTP upstream is held to its `max_message_bytes` too: a hostile server (written here on
//! a bare socket) that answers `tools/call` with an event stream whose one event never
//! ends fails that call with `UPSTREAM_UNAVAILABLE` naming the limit, instead of being
//! buffered without bound; its other tools keep answering.

use std::sync::Arc;

use milpa::{ErrorCode, ToolContext, ToolRegistry};
use milpa_gateway::{Upstream, UpstreamConfig};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// Serves one connection: reads each request (head and `Content-Length` body) and
/// answers it.
async fn serve(stream: TcpStream) {
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    loop {
        let mut method = String::new();
        let mut length = 0usize;
        let mut first = true;
        loop {
            let mut line = String::new();
            if read.read_line(&mut line).await.unwrap_or(0) == 0 {
                return;
            }
            if first {
                method = line.split(' ').next().unwrap_or("").to_owned();
                first = false;
            }
            let lower = line.to_ascii_lowercase();
            if let Some(value) = lower.strip_prefix("content-length:") {
                length = value.trim().parse().unwrap_or(0);
            }
            if line == "\r\n" {
                break;
            }
        }
        let mut body = vec![0u8; length];
        if read.read_exact(&mut body).await.is_err() {
            return;
        }
        if method != "POST" {
            let _ = write
                .write_all(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n")
                .await;
            continue;
        }
        let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let id = message["id"].clone();
        let answer =
            |result: Value| json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
        let json_answer = match message["method"].as_str().unwrap_or("") {
            "initialize" => Some(answer(json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "1"}
            }))),
            "tools/list" => Some(answer(json!({"tools": [
                {"name": "huge", "inputSchema": {"type": "object"},
                 "annotations": {"readOnlyHint": true}},
                {"name": "fine", "inputSchema": {"type": "object"},
                 "annotations": {"readOnlyHint": true}}
            ]}))),
            "tools/call" if message["params"]["name"] == "fine" => Some(answer(
                json!({"content": [{"type": "text", "text": "fine"}], "isError": false}),
            )),
            "tools/call" => {
                // One event that never ends: 1 MiB of data, no blank line.
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                            transfer-encoding: chunked\r\n\r\n";
                if write.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let mut chunk = b"data: ".to_vec();
                chunk.extend(std::iter::repeat_n(b'a', 64 * 1024));
                for _ in 0..16 {
                    let framed = [
                        format!("{:x}\r\n", chunk.len()).into_bytes(),
                        chunk.clone(),
                        b"\r\n".to_vec(),
                    ]
                    .concat();
                    if write.write_all(&framed).await.is_err() {
                        return;
                    }
                    chunk = vec![b'a'; 64 * 1024];
                }
                // Held open: the client gives up on its own.
                std::future::pending::<()>().await;
                return;
            }
            _ => None,
        };
        let response = match json_answer {
            Some(body) => format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            ),
            None => "HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_owned(),
        };
        if write.write_all(response.as_bytes()).await.is_err() {
            return;
        }
    }
}

#[tokio::test]
async fn an_event_over_the_limit_fails_its_call_and_the_rest_keeps_answering() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(stream));
        }
    });
    let mut config = UpstreamConfig::http("hostile", format!("http://{addr}/mcp"), None);
    config.max_message_bytes = 256 * 1024;
    let upstream = Upstream::start(config).await.expect("it starts");
    let registry = Arc::new(ToolRegistry::new());
    upstream.follow_tool_list(&registry);
    let ctx = ToolContext::cli();

    let huge = registry.call("hostile__huge", json!({}), &ctx).await;
    assert!(!huge.success, "{huge:?}");
    assert_eq!(
        huge.code(),
        Some(&ErrorCode::UpstreamUnavailable),
        "{huge:?}"
    );
    let error = huge.error.clone().unwrap_or_default();
    assert!(
        error.contains("it sent a message over 262144 bytes (max_message_bytes)"),
        "{error}"
    );
    let fine = registry.call("hostile__fine", json!({}), &ctx).await;
    assert!(fine.success, "{fine:?}");
    assert_eq!(fine.data["content"][0]["text"], "fine");
}
