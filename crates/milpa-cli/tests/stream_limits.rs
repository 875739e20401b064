//! Anonymous callers cannot lock a principal out of a real `milpa serve --http`: they hold
//! at most their stream budget (16 by default; further streams get `429`) and their share
//! of the connections (the rest get `503` and are closed), so while they hold all they
//! may, an authenticated `tools/call` is still answered at once.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::time::Duration;

use common::Sandbox;
use common::http::{V2026, parse, post_2026, spawn_http};
use milpa_mcp::auth::sha256_hex;
use serde_json::json;

/// The default budget of open streams for all anonymous callers.
const ANONYMOUS_STREAMS: usize = 16;
/// As many `subscriptions/listen` requests as the report that found the lock-out sent.
const FLOOD: usize = 1030;

/// Anonymous callers are served (`require_auth = false`): with it on, and tokens in the
/// manifest, they would get `401` before opening any stream.
fn manifest() -> String {
    format!(
        r#"
[channels.mcp]
require_auth = false

[[auth.tokens]]
sha256 = "{alice}"
principal = "alice"
scopes = ["*"]

[[tools]]
name = "status"
description = "Reads the status"
command = ["echo", "all good"]
"#,
        alice = sha256_hex("alice-token"),
    )
}

/// Sends an anonymous `subscriptions/listen` on a new keep-alive connection and reads the
/// answer's head; the connection (left open, as a client holding it would) and the head
/// (`None`: no answer within 2 s).
fn listen(addr: SocketAddr, id: usize) -> (TcpStream, Option<common::http::Response>) {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": {
        "notifications": {"toolsListChanged": true},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": V2026,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    }})
    .to_string();
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {V2026}\r\n\
         Mcp-Method: subscriptions/listen\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    while !raw.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
        }
    }
    let response = raw
        .windows(4)
        .any(|w| w == b"\r\n\r\n")
        .then(|| parse(&raw));
    (stream, response)
}

/// An authenticated 2026-07-28 `tools/call`, bounded by `within`.
fn authenticated_call(addr: SocketAddr, within: Duration) -> serde_json::Value {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let auth = [("Authorization", "Bearer alice-token")];
        let r = post_2026(
            addr,
            &auth,
            "tools/call",
            json!({"name": "status", "arguments": {}}),
        );
        let _ = tx.send((r.status, r.message()));
    });
    let (status, message) = rx
        .recv_timeout(within)
        .expect("the authenticated call was answered in time");
    assert_eq!(status, 200, "{message}");
    message
}

#[test]
fn anonymous_callers_holding_every_stream_they_may_leave_a_principal_answered() {
    let sb = Sandbox::new();
    sb.write("m.toml", &manifest());
    let (_server, addr) = spawn_http(
        &sb,
        &["--manifest", "m.toml", "serve", "--http", "127.0.0.1:0"],
    );
    // Warm: the call path has run once before the flood.
    authenticated_call(addr, Duration::from_secs(10));

    let mut held = Vec::new();
    let mut statuses = Vec::new();
    for id in 0..FLOOD {
        let (stream, response) = listen(addr, id);
        let Some(response) = response else {
            // Waiting in the backlog: the lock-out itself.
            panic!("anonymous listen {id} was not answered; statuses so far: {statuses:?}");
        };
        if id < ANONYMOUS_STREAMS {
            assert_eq!(response.status, 200, "stream {id}: {}", response.body);
            assert!(
                response
                    .header("content-type")
                    .is_some_and(|c| c.starts_with("text/event-stream")),
                "{:?}",
                response.headers
            );
        } else if id < ANONYMOUS_STREAMS + 4 {
            // Beyond the stream budget: 429 with the request's id.
            assert_eq!(response.status, 429, "stream {id}: {}", response.body);
            assert!(response.header("retry-after").is_some());
            assert_eq!(response.message()["id"], id, "{}", response.body);
        }
        statuses.push(response.status);
        held.push(stream);
    }
    // Everything past the budget was refused: 429 while anonymous connections had room,
    // 503 (and closed) once they held their share.
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        ANONYMOUS_STREAMS
    );
    assert!(
        statuses[ANONYMOUS_STREAMS..]
            .iter()
            .all(|s| *s == 429 || *s == 503),
        "{statuses:?}"
    );
    assert!(statuses.contains(&503), "the connection share was reached");

    // Every anonymous stream and connection is still held: the principal is answered.
    let message = authenticated_call(addr, Duration::from_secs(1));
    assert_eq!(message["result"]["isError"], false, "{message}");
    drop(held);
}
