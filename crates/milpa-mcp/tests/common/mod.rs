//! Test helpers: a registry of test tools, an in-process stdio client over duplex streams,
//! and a minimal HTTP/1.1 client for loopback tests.

#![allow(dead_code, missing_docs)]

pub mod oauth;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use milpa::audit::{AuditOutcome, MemoryAuditSink};
use milpa::policy::ChannelPolicy;
use milpa::{LogLevel, ToolContext, ToolDefinition, ToolError, ToolRegistry, ToolRegistryBuilder};
use milpa_mcp::ServerOptions;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::task::JoinHandle;

pub const WAIT: Duration = Duration::from_secs(10);

/// Tools used across the tests.
pub fn tools() -> Vec<ToolDefinition> {
    vec![
        ToolDefinition::builder("echo")
            .description("Echoes the text")
            .input_schema(json!({
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"]
            }))
            .sync(|args, _| args["text"].clone()),
        ToolDefinition::builder("add")
            .description("Adds")
            .input_schema(json!({
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"]
            }))
            .output_schema(json!({"type": "object", "properties": {"result": {"type": "integer"}}}))
            .sync(|args, _| {
                json!(args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0))
            }),
        ToolDefinition::builder("delete_note")
            .description("Deletes a note")
            .input_schema(json!({
                "type": "object",
                "properties": {"id": {"type": "integer"}},
                "required": ["id"]
            }))
            .mutating(true)
            .requires_confirmation(true)
            .sync(|args, _| json!({"deleted": args["id"]})),
        ToolDefinition::builder("sleep")
            .description("Sleeps, reporting progress; answers early when cancelled")
            .input_schema(json!({"type": "object", "properties": {"ms": {"type": "integer"}}}))
            .asynchronous(|args: Value, ctx: ToolContext| async move {
                let ms = args["ms"].as_u64().unwrap_or(100);
                let handle = ctx.call_handle();
                handle.progress(0.0, Some(ms as f64), Some("starting"));
                handle.log(LogLevel::Info, json!("sleeping"));
                handle.log(LogLevel::Debug, json!("debug detail"));
                tokio::time::sleep(Duration::from_millis(ms)).await;
                handle.progress(ms as f64, Some(ms as f64), None);
                json!({"slept_ms": ms})
            }),
        ToolDefinition::builder("panics")
            .description("Panics")
            .input_schema(json!({"type": "object"}))
            .asynchronous(|_: Value, _: ToolContext| async move {
                if true {
                    panic!("boom");
                }
                json!(null)
            }),
        ToolDefinition::builder("hangs")
            .description("Never returns; its hard timeout stops it")
            .input_schema(json!({"type": "object"}))
            .hard_timeout(Duration::from_millis(200))
            .asynchronous(|_: Value, _: ToolContext| async move {
                std::future::pending::<()>().await;
                json!(null)
            }),
        ToolDefinition::builder("ask")
            .description("Asks the client's model, then the user")
            .input_schema(json!({"type": "object"}))
            .asynchronous(|_: Value, ctx: ToolContext| async move {
                let handle = ctx.call_handle();
                let sampled = handle
                    .create_message(json!({"messages": [], "maxTokens": 5}))
                    .await
                    .map_err(|e| ToolError::new(e.to_string()))?;
                Ok::<_, ToolError>(json!({"sampled": sampled}))
            }),
        ToolDefinition::builder("fails")
            .description("Fails")
            .input_schema(json!({"type": "object"}))
            .sync(|_, _| -> Result<Value, ToolError> { Err(ToolError::new("it broke")) }),
        ToolDefinition::builder("blocks")
            .description("Returns its own content blocks")
            .input_schema(json!({"type": "object"}))
            .sync(|_, _| {
                milpa_mcp::content::result_with_structured(
                    [
                        milpa_mcp::content::text("look"),
                        milpa_mcp::content::image("AAAA", "image/png"),
                    ],
                    json!({"n": 1}),
                )
            }),
    ]
}

pub struct Fixture {
    pub registry: Arc<ToolRegistry>,
    pub audit: Arc<MemoryAuditSink>,
}

/// A registry with the test tools; `anonymous_ok` lifts the `mcp` channel's require_auth.
/// `builder` with anonymous MCP callers allowed to call (the tests send no token).
pub fn anonymous_callers_allowed(builder: ToolRegistryBuilder) -> ToolRegistryBuilder {
    builder.channel_policy("mcp", ChannelPolicy::AUTHENTICATED.with_require_auth(false))
}

/// A registry without tools that anonymous MCP callers may call.
pub fn anonymous_registry() -> ToolRegistry {
    anonymous_callers_allowed(ToolRegistry::builder()).build()
}

pub fn fixture_with(
    anonymous_ok: bool,
    configure: impl FnOnce(ToolRegistryBuilder) -> ToolRegistryBuilder,
) -> Fixture {
    let audit = Arc::new(MemoryAuditSink::new());
    let mut builder = ToolRegistry::builder().audit_sink(audit.clone());
    if anonymous_ok {
        builder = anonymous_callers_allowed(builder);
    }
    let mut registry = configure(builder).build();
    for tool in tools() {
        registry.register(tool).unwrap();
    }
    Fixture {
        registry: Arc::new(registry),
        audit,
    }
}

pub fn fixture() -> Fixture {
    fixture_with(false, |b| b)
}

/// A stdio client on a fresh [`fixture`], initialized with no capabilities.
pub async fn initialized_client() -> StdioClient {
    let mut client = StdioClient::start(fixture().registry, ServerOptions::default());
    client.initialize(json!({})).await;
    client
}

/// Waits (up to 5 s) until `audit` holds a cancelled call (of `tool`, when given).
pub async fn wait_for_cancelled(audit: &MemoryAuditSink, tool: Option<&str>) -> bool {
    for _ in 0..250 {
        if audit
            .records()
            .iter()
            .any(|r| r.outcome == AuditOutcome::Cancelled && tool.is_none_or(|t| r.tool == t))
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// A client talking to `serve_io` over in-process duplex streams.
pub struct StdioClient {
    writer: DuplexStream,
    reader: BufReader<DuplexStream>,
    pub server: JoinHandle<std::io::Result<()>>,
    /// Messages read while waiting for something else.
    pub backlog: VecDeque<Value>,
    next_id: i64,
}

impl StdioClient {
    pub fn start(registry: Arc<ToolRegistry>, options: ServerOptions) -> StdioClient {
        let (client_out, server_in) = tokio::io::duplex(1 << 20);
        let (server_out, client_in) = tokio::io::duplex(1 << 20);
        let server = tokio::spawn(milpa_mcp::serve_io(
            registry, options, server_in, server_out,
        ));
        StdioClient {
            writer: client_out,
            reader: BufReader::new(client_in),
            server,
            backlog: VecDeque::new(),
            next_id: 1000,
        }
    }

    pub async fn send_raw(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).await.unwrap();
        self.writer.flush().await.unwrap();
    }

    pub async fn send(&mut self, message: Value) {
        let mut line = serde_json::to_vec(&message).unwrap();
        line.push(b'\n');
        self.send_raw(&line).await;
    }

    /// The next message from the server (backlog first).
    pub async fn recv(&mut self) -> Value {
        if let Some(v) = self.backlog.pop_front() {
            return v;
        }
        self.read_line()
            .await
            .expect("the server closed its output")
    }

    pub async fn read_line(&mut self) -> Option<Value> {
        let line = self.read_raw_line().await?;
        Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad line {line:?}: {e}")))
    }

    /// The next line from the server as it was sent (`None` at end of output).
    pub async fn read_raw_line(&mut self) -> Option<String> {
        let mut line = String::new();
        let n = tokio::time::timeout(WAIT, self.reader.read_line(&mut line))
            .await
            .expect("timed out waiting for the server")
            .unwrap();
        if n == 0 {
            return None;
        }
        Some(line)
    }

    /// Waits for the response with `id`, keeping other messages in the backlog.
    pub async fn response(&mut self, id: &Value) -> Value {
        self.wait_for(|m| m.get("id") == Some(id) && m.get("method").is_none())
            .await
    }

    /// Waits for a message matching `pred`, keeping others in the backlog.
    pub async fn wait_for(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(pos) = self.backlog.iter().position(&pred) {
            return self.backlog.remove(pos).unwrap();
        }
        loop {
            let message = self
                .read_line()
                .await
                .expect("the server closed its output");
            if pred(&message) {
                return message;
            }
            self.backlog.push_back(message);
        }
    }

    pub fn next_id(&mut self) -> Value {
        self.next_id += 1;
        json!(self.next_id)
    }

    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id();
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        self.response(&id).await
    }

    pub async fn initialize(&mut self, capabilities: Value) -> Value {
        let reply = self
            .request(
                "initialize",
                json!({
                    "protocolVersion": "2025-11-25",
                    "capabilities": capabilities,
                    "clientInfo": {"name": "test", "version": "1"}
                }),
            )
            .await;
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        reply
    }

    pub async fn call(&mut self, name: &str, arguments: Value) -> Value {
        let reply = self
            .request("tools/call", json!({"name": name, "arguments": arguments}))
            .await;
        reply["result"].clone()
    }

    /// Closes the client's output (end of input for the server).
    pub async fn close(&mut self) {
        self.writer.shutdown().await.unwrap();
    }
}

/// A minimal HTTP/1.1 response.
#[derive(Debug)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl HttpResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }

    /// The JSON messages of an SSE body.
    pub fn sse_messages(&self) -> Vec<Value> {
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter(|d| !d.trim().is_empty()) // a priming event (2025-11-25)
            .map(|d| serde_json::from_str(d.trim()).unwrap())
            .collect()
    }
}

/// Sends one request on a fresh connection and reads the whole response.
pub async fn http(
    addr: std::net::SocketAddr,
    method: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> HttpResponse {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut head = format!(
        "{method} /mcp HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(WAIT, stream.read_to_end(&mut raw))
        .await
        .expect("timed out reading the response")
        .unwrap();
    parse_response(&raw)
}

pub fn parse_response(raw: &[u8]) -> HttpResponse {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("no header end");
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
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
        body = dechunk(&body);
    }
    HttpResponse {
        status,
        headers,
        body: String::from_utf8_lossy(&body).to_string(),
    }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(end) = data.windows(2).position(|w| w == b"\r\n") {
        let size =
            usize::from_str_radix(String::from_utf8_lossy(&data[..end]).trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        let start = end + 2;
        out.extend_from_slice(&data[start..(start + size).min(data.len())]);
        data = &data[(start + size + 2).min(data.len())..];
    }
    out
}

/// Starts an HTTP server on a free loopback port.
pub async fn start_http(
    server: milpa_mcp::HttpServer,
) -> (std::net::SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.serve_listener(listener, async {
        let _ = stopped.await;
    }));
    (addr, stop)
}

pub const JSON_HEADERS: [(&str, &str); 2] = [
    ("Content-Type", "application/json"),
    ("Accept", "application/json, text/event-stream"),
];

/// initialize over HTTP; returns the session id.
pub async fn http_initialize(addr: std::net::SocketAddr, extra: &[(&str, &str)]) -> String {
    let mut headers = JSON_HEADERS.to_vec();
    headers.extend_from_slice(extra);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}
    }});
    let response = http(addr, "POST", &headers, body.to_string().as_bytes()).await;
    assert_eq!(response.status, 200, "{response:?}");
    response
        .header("mcp-session-id")
        .expect("a session id")
        .to_owned()
}
