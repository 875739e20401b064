//! OpenTelemetry export from the real binary: with `OTEL_EXPORTER_OTLP_ENDPOINT` set,
//! `milpa serve` posts its call spans to `<endpoint>/v1/traces` as OTLP protobuf, in the
//! caller's trace, by the time it exits.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use common::Sandbox;
use common::http::{Server, milpa_command};
use serde_json::{Value, json};

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_SPAN_ID: &str = "00f067aa0ba902b7";

/// One request the collector received.
struct Received {
    request_line: String,
    content_type: Option<String>,
    body: Vec<u8>,
}

/// A loopback OTLP/HTTP collector: answers every request with an empty (successful)
/// export response and hands what it received to the test.
fn start_collector() -> (String, mpsc::Receiver<Received>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let Some(received) = read_request(stream) else {
                continue;
            };
            if tx.send(received).is_err() {
                return;
            }
        }
    });
    (endpoint, rx)
}

/// Reads one request (headers, then `Content-Length` bytes) and answers 200.
fn read_request(mut stream: TcpStream) -> Option<Received> {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    reader.read_line(&mut request_line).ok()?;
    let mut length = 0;
    let mut content_type = None;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':')?;
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().ok()?,
            "content-type" => content_type = Some(value.trim().to_owned()),
            _ => {}
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    stream
        .write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\n\
              Content-Length: 0\r\nConnection: close\r\n\r\n",
        )
        .ok()?;
    Some(Received {
        request_line: request_line.trim_end().to_owned(),
        content_type,
        body,
    })
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

#[test]
fn serve_exports_call_spans_over_otlp_http() {
    let (endpoint, received) = start_collector();
    let sb = Sandbox::new();
    let mut child = milpa_command(&sb)
        .arg("serve")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_SERVICE_NAME")
        .env_remove("OTEL_RESOURCE_ATTRIBUTES")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let mut server = Server(child);
    let messages = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "add", "arguments": {"a": 2, "b": 3},
            "_meta": {"traceparent": format!("00-{TRACE_ID}-{PARENT_SPAN_ID}-01")}}}),
    ];
    for message in &messages {
        writeln!(stdin, "{message}").unwrap();
    }
    stdin.flush().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let mut answers = Vec::new();
    while answers.len() < 2 {
        let line = lines.next().expect("an answer").unwrap();
        answers.push(serde_json::from_str::<Value>(&line).unwrap());
    }
    assert_eq!(
        answers[1]["result"]["structuredContent"],
        json!({"result": 5}),
        "{}",
        answers[1]
    );

    // End of input ends the server, which flushes its spans before it exits.
    drop(stdin);
    let status = server.0.wait().unwrap();
    let mut errors = String::new();
    stderr.read_to_string(&mut errors).unwrap();
    assert!(status.success(), "{status}: {errors}");

    let export = received
        .recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|_| panic!("nothing reached the collector; stderr: {errors}"));
    assert_eq!(export.request_line, "POST /v1/traces HTTP/1.1");
    assert_eq!(
        export.content_type.as_deref(),
        Some("application/x-protobuf")
    );
    // Protobuf keeps strings and ids as they are: the span's name and attributes, the
    // service, and the caller's trace id and parent span id as raw bytes.
    let body = &export.body;
    for text in [
        "execute_tool add",
        "gen_ai.operation.name",
        "gen_ai.tool.name",
        "mcp.protocol.version",
        "2025-06-18",
        "service.name",
        "milpa",
    ] {
        assert!(contains(body, text.as_bytes()), "{text} not in the export");
    }
    assert!(contains(body, &hex::decode(TRACE_ID).unwrap()), "trace id");
    assert!(
        contains(body, &hex::decode(PARENT_SPAN_ID).unwrap()),
        "parent span id"
    );
}

#[test]
fn an_https_endpoint_is_refused_with_a_clear_message() {
    let sb = Sandbox::new();
    let output = milpa_command(&sb)
        .args(["call", "add", r#"{"a":1,"b":2}"#])
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "https://collector.invalid:4318",
        )
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .output()
        .unwrap();
    let errors = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{errors}");
    assert!(
        errors.contains("https://collector.invalid:4318") && errors.contains("plain http://"),
        "{errors}"
    );
}
