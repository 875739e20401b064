//! A real `milpa serve --http` child and a minimal HTTP/1.1 client for it (one request per
//! connection), so the tests see exactly the bytes a client would.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use super::Sandbox;

/// Kills the server when the test ends, however it ends.
pub struct Server(pub Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn milpa_command(sb: &Sandbox) -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("milpa"));
    cmd.current_dir(sb.path())
        .env("NO_COLOR", "1")
        .env(super::HOME_ENV, sb.path())
        .env_remove(super::STORE_ENV)
        .env_remove("RUST_LOG");
    cmd
}

/// Starts `milpa ARGS…` (a `serve --http 127.0.0.1:0` command line); returns the server
/// and the address it says it listens on.
pub fn spawn_http(sb: &Sandbox, args: &[&str]) -> (Server, SocketAddr) {
    spawn_http_command(milpa_command(sb), args)
}

/// [`spawn_http`] with a prepared command (extra environment, …).
pub fn spawn_http_command(mut command: Command, args: &[&str]) -> (Server, SocketAddr) {
    let mut child = command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let server = Server(child);
    let mut lines = BufReader::new(stderr).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("the server said where it listens")
            .unwrap();
        if let Some(rest) = line.strip_prefix("milpa: serving MCP on http://") {
            break rest.trim_end_matches("/mcp").parse().unwrap();
        }
    };
    // Keep draining stderr so the server never blocks on it.
    std::thread::spawn(move || for _ in lines {});
    (server, addr)
}

pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC message: the body itself, or the last `data:` of an SSE stream.
    pub fn message(&self) -> Value {
        let is_sse = self
            .header("content-type")
            .is_some_and(|c| c.starts_with("text/event-stream"));
        if is_sse {
            let last = self
                .body
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .rfind(|d| !d.trim().is_empty())
                .unwrap_or_else(|| {
                    panic!("an SSE data line in {:?} {:?}", self.headers, self.body)
                });
            serde_json::from_str(last.trim()).unwrap()
        } else {
            serde_json::from_str(&self.body)
                .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
        }
    }
}

/// One GET of `path` on a fresh connection (HTTP/1.1, `Connection: close`).
pub fn get(addr: SocketAddr, path: &str) -> Response {
    get_with(addr, path, &[])
}

/// [`get`] with extra `headers` (`Authorization`, …).
pub fn get_with(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Response {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut head = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    parse(&raw)
}

/// One POST /mcp on a fresh connection (HTTP/1.1, `Connection: close`).
pub fn post(addr: SocketAddr, headers: &[(&str, &str)], body: &Value) -> Response {
    let body = body.to_string();
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    parse(&raw)
}

pub fn parse(raw: &[u8]) -> Response {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a header end");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    if chunked {
        let mut out = Vec::new();
        let mut data = &body[..];
        while let Some(end) = data.windows(2).position(|w| w == b"\r\n") {
            let size = usize::from_str_radix(String::from_utf8_lossy(&data[..end]).trim(), 16)
                .unwrap_or(0);
            if size == 0 {
                break;
            }
            let start = end + 2;
            out.extend_from_slice(&data[start..(start + size).min(data.len())]);
            data = &data[(start + size + 2).min(data.len())..];
        }
        body = out;
    }
    Response {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// The sessionless revision.
pub const V2026: &str = "2026-07-28";

/// One 2026-07-28 request (no session) with `auth` headers: the version and the client's
/// capabilities (form and URL elicitation) in `params._meta`, the method and (when
/// `params.name` is set) the tool in headers too.
pub fn post_2026(
    addr: SocketAddr,
    auth: &[(&str, &str)],
    method: &str,
    mut params: Value,
) -> Response {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": V2026,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}, "url": {}}},
    });
    let name = params["name"].as_str().map(str::to_owned);
    let mut headers = auth.to_vec();
    headers.extend([("MCP-Protocol-Version", V2026), ("Mcp-Method", method)]);
    if let Some(name) = &name {
        headers.push(("Mcp-Name", name));
    }
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    post(addr, &headers, &body)
}

/// [`post_2026`], which must succeed without opening a session; returns its `result`.
pub fn call_2026(addr: SocketAddr, auth: &[(&str, &str)], method: &str, params: Value) -> Value {
    let response = post_2026(addr, auth, method, params);
    assert_eq!(response.status, 200, "{method}: {}", response.body);
    assert!(response.header("mcp-session-id").is_none(), "no sessions");
    response.message()["result"].clone()
}

/// `initialize` (with `auth` headers); returns the session id.
pub fn initialize(addr: SocketAddr, auth: &[(&str, &str)]) -> String {
    initialize_expecting(addr, auth, None)
}

/// `initialize`, checking `serverInfo.name` when `name` is given.
pub fn initialize_expecting(addr: SocketAddr, auth: &[(&str, &str)], name: Option<&str>) -> String {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "milpa-cli-test", "version": "1"}
    }});
    let r = post(addr, auth, &body);
    assert_eq!(r.status, 200, "{}", r.body);
    if let Some(name) = name {
        assert_eq!(r.message()["result"]["serverInfo"]["name"], name);
    }
    let session = r.header("mcp-session-id").expect("a session").to_owned();
    let mut headers = auth.to_vec();
    headers.push(("Mcp-Session-Id", &session));
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post(addr, &headers, &note).status, 202);
    session
}

/// `tools/call` in `session`; returns the JSON-RPC result.
pub fn call(
    addr: SocketAddr,
    session: &str,
    auth: &[(&str, &str)],
    tool: &str,
    args: Value,
) -> Value {
    let mut headers = auth.to_vec();
    headers.push(("Mcp-Session-Id", session));
    headers.push(("MCP-Protocol-Version", "2025-11-25"));
    // Ids are unique among the requests in flight, as JSON-RPC asks (tests call from
    // several threads at once).
    static NEXT_ID: AtomicU64 = AtomicU64::new(2);
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": args}});
    let r = post(addr, &headers, &body);
    assert_eq!(r.status, 200, "{}", r.body);
    r.message()["result"].clone()
}
