//! The network: no socket of any kind; outgoing HTTP only to `allow_hosts`, checked on the
//! request the host sends.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use milpa_wasm::Sandbox;
use serde_json::json;

#[tokio::test]
async fn sockets_are_never_granted() {
    let Some(tool) = common::load_with_world("socket", "socket", Sandbox::new()).await else {
        return;
    };
    for kind in ["tcp", "udp"] {
        let result = common::call(&tool, json!({"do": kind})).await;
        assert_eq!(common::code(&result), "TOOL_FAILED", "{kind}: {result:?}");
        assert_eq!(
            result.error.as_deref(),
            Some(format!("{kind} socket: access-denied").as_str())
        );
    }
    // Granting a host for HTTP opens no socket either.
    let Some(tool) =
        common::load_with_world("socket", "socket", Sandbox::new().allow_host("127.0.0.1")).await
    else {
        return;
    };
    let result = common::call(&tool, json!({"do": "tcp"})).await;
    assert_eq!(result.error.as_deref(), Some("tcp socket: access-denied"));
}

/// A one-route HTTP server on loopback answering `hello from the host` to every request,
/// counting the requests; it serves `requests` requests, then stops.
fn http_server(requests: usize) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = Arc::new(AtomicUsize::new(0));
    let count = served.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(requests) {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                if line == "\r\n" {
                    break;
                }
                line.clear();
            }
            count.fetch_add(1, Ordering::SeqCst);
            let body = "hello from the host";
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (port, served)
}

#[tokio::test]
async fn an_allowed_host_answers() {
    let (port, served) = http_server(1);
    let sandbox = Sandbox::new().allow_host(format!("127.0.0.1:{port}"));
    let Some(tool) = common::load_with_world("fetch", "fetch", sandbox).await else {
        return;
    };
    let authority = format!("127.0.0.1:{port}");
    let result = common::call(&tool, json!({"authority": authority, "path": "/hi"})).await;
    assert!(result.success, "{result:?}");
    assert_eq!(result.data["status"], 200);
    assert_eq!(result.data["body"], "hello from the host");
    assert_eq!(served.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_host_not_allowed_is_refused_before_any_connection() {
    let (port, served) = http_server(1);
    // Granted: another port on the same address, and another name.
    let sandbox = Sandbox::new()
        .allow_host(format!("127.0.0.1:{}", port.wrapping_add(1)))
        .allow_host("example.com");
    let Some(tool) = common::load_with_world("fetch", "fetch", sandbox).await else {
        return;
    };
    for authority in [format!("127.0.0.1:{port}"), format!("localhost:{port}")] {
        let result = common::call(&tool, json!({"authority": authority, "path": "/"})).await;
        assert_eq!(
            common::code(&result),
            "TOOL_FAILED",
            "{authority}: {result:?}"
        );
        assert_eq!(
            result.error.as_deref(),
            Some("http: error-code 15 (HTTP-request-denied)")
        );
    }
    assert_eq!(
        served.load(Ordering::SeqCst),
        0,
        "no request reached the server"
    );
    // And the tool still answers.
    let result = common::call(&tool, json!({"authority": "", "path": "/"})).await;
    assert!(!result.success);
}
