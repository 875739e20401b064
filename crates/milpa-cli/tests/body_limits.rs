//! What anonymous callers can make a real `milpa serve --http` buffer: with a manifest whose
//! `mcp` channel requires authentication, 200 anonymous 4 MiB bodies at once are all
//! refused with `413` before they are read (a small one gets `401`: a token is required),
//! and the server's peak memory stays bounded.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Sandbox;
use common::http::{parse, spawn_http};
use milpa_mcp::auth::sha256_hex;
use serde_json::json;

const CONCURRENT: usize = 200;
/// Just under the default message limit (4 MiB), so only the anonymous limit refuses it.
const BODY_BYTES: usize = 4 * 1024 * 1024 - 1024;
/// The bound on the server's peak resident memory (VmHWM) after the flood.
const PEAK_BOUND_KB: u64 = 100 * 1024;

fn manifest() -> String {
    format!(
        r#"
[channels.mcp]
require_auth = true

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

/// A `/proc/<pid>/status` field, in kB.
fn status_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in {status}"))
}

/// An `initialize` padded with trailing whitespace (still valid JSON) to `size` bytes.
fn padded_initialize(size: usize) -> Vec<u8> {
    let mut body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "flood", "version": "1"}
    }})
    .to_string()
    .into_bytes();
    body.resize(size, b' ');
    body
}

/// Sends the whole `body` as an anonymous POST, as a client that does not wait for an
/// answer would, while reading the answer's status line; the status (0: none came).
fn flood_one(addr: SocketAddr, body: Arc<Vec<u8>>) -> u16 {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    let mut writer = stream.try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        for chunk in body.chunks(64 * 1024) {
            if writer.write_all(chunk).is_err() {
                return;
            }
        }
    });
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    while !raw.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
        }
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
    let _ = sender.join();
    if raw.windows(4).any(|w| w == b"\r\n\r\n") {
        parse(&raw).status
    } else {
        0
    }
}

#[test]
fn two_hundred_anonymous_4_mib_bodies_are_refused_unread_and_memory_stays_bounded() {
    let sb = Sandbox::new();
    sb.write("m.toml", &manifest());
    let (server, addr) = spawn_http(
        &sb,
        &["--manifest", "m.toml", "serve", "--http", "127.0.0.1:0"],
    );
    let pid = server.0.id();
    // Answered once, so the peak before counts a server at work. The manifest has tokens
    // and the channel requires a principal, so a small anonymous request is refused (401).
    let small = Arc::new(padded_initialize(1024));
    assert_eq!(flood_one(addr, small), 401);
    let before = status_kb(pid, "VmHWM:");

    let body = Arc::new(padded_initialize(BODY_BYTES));
    let started = Instant::now();
    let clients: Vec<_> = (0..CONCURRENT)
        .map(|_| {
            let body = body.clone();
            std::thread::spawn(move || flood_one(addr, body))
        })
        .collect();
    let statuses: Vec<u16> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    let took = started.elapsed();
    std::thread::sleep(Duration::from_millis(500));
    let peak = status_kb(pid, "VmHWM:");
    let resident = status_kb(pid, "VmRSS:");
    eprintln!(
        "VmHWM before {before} kB, after {peak} kB; VmRSS after {resident} kB; {CONCURRENT} bodies answered in {} ms",
        took.as_millis()
    );

    // The declared length is over the anonymous limit, which is checked first.
    let refused = statuses.iter().filter(|s| **s == 413).count();
    assert_eq!(refused, CONCURRENT, "statuses: {statuses:?}");
    assert!(took < Duration::from_secs(20), "took {took:?}");
    assert!(
        peak < PEAK_BOUND_KB,
        "peak {peak} kB (before {before} kB) over {PEAK_BOUND_KB} kB"
    );

    // The server still answers, and a principal's call runs.
    let auth = [("Authorization", "Bearer alice-token")];
    let session = common::http::initialize(addr, &auth);
    let result = common::http::call(addr, &session, &auth, "status", json!({}));
    assert_eq!(result["isError"], false, "{result}");
}
