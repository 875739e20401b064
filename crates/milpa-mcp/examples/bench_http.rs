//! Benchmark: `tools/call` of a trivial tool (`add`, declared with `#[tool]`) over the
//! Streamable HTTP transport, with the full pipeline and audit on (every call's record is
//! serialized as a JSON line into a buffered file, `--audit`, default `/dev/null`, as
//! `bench_stdio`'s server does).
//!
//! ```text
//! cargo build --release -p milpa-mcp --examples
//! target/release/examples/bench_http [--seconds 2] [--rounds 5] [--connections 16]
//!     [--audit FILE] [--url http://127.0.0.1:8000/mcp]
//!     [--revisions 2025-06-18,2025-11-25,2026-07-28] [--token TOKEN]
//! ```
//!
//! Without `--url` it serves in process on `127.0.0.1:0` (its own Tokio runtime;
//! `MILPA_MCP_WORKERS` sets its worker threads), once answering calls over SSE and once
//! with JSON ([`HttpServer::json_response`]). With `--url` it measures that server instead
//! (any MCP server with an `add(a, b)` tool; the answer is read as SSE or JSON by its
//! content type). `--token` (or the environment variable `MILPA_BENCH_TOKEN`) is sent as
//! `Authorization: Bearer …`: the agent token `milpa serve --http` prints at start.
//!
//! The client keeps HTTP/1.1 connections alive (`hyper`) and speaks each of `--revisions`
//! in turn: for a legacy revision it initializes one session (which all connections share),
//! for 2026-07-28 it sends no `initialize` and each call carries the version and the
//! client's capabilities in `_meta` and its method and tool in `Mcp-Method` / `Mcp-Name`.
//! It measures calls one at a time on one connection, and one at a time on each of
//! `--connections` connections at once. Each figure is the median of `--rounds` rounds of
//! `--seconds` each (with the lowest and highest), for calls/s and for the p50 and p99
//! latency of each round, because a shared virtual machine varies a lot between runs.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use milpa::audit::{AuditRecord, AuditSink};
use milpa::policy::ChannelPolicy;
use milpa::{ToolRegistry, tool};
use milpa_mcp::HttpServer;
use serde_json::Value;
use tokio::net::TcpStream;

/// Adds two integers.
#[tool]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

/// Audit records as JSON lines, buffered and written in 64 KiB pieces.
struct BufferedJsonLines {
    buf: Mutex<Vec<u8>>,
    file: Mutex<std::fs::File>,
}

impl AuditSink for BufferedJsonLines {
    fn record(&self, record: &AuditRecord<'_>) {
        let mut buf = self.buf.lock().unwrap();
        record.write_json(&mut buf);
        buf.push(b'\n');
        if buf.len() > 1 << 16 {
            let _ = self.file.lock().unwrap().write_all(&buf);
            buf.clear();
        }
    }
}

fn registry(audit: &str) -> Arc<ToolRegistry> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(audit)
        .unwrap_or_else(|e| panic!("cannot open {audit}: {e}"));
    let mut registry = ToolRegistry::builder()
        .channel_policy("mcp", ChannelPolicy::AUTHENTICATED.with_require_auth(false))
        .audit_sink(Arc::new(BufferedJsonLines {
            buf: Mutex::new(Vec::with_capacity(1 << 17)),
            file: Mutex::new(file),
        }))
        .build();
    registry.register(add_tool()).unwrap();
    Arc::new(registry)
}

/// Serves `server` on its own runtime; returns its address.
fn start_in_process(server: HttpServer) -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut runtime = tokio::runtime::Builder::new_multi_thread();
        if let Some(n) = std::env::var("MILPA_MCP_WORKERS")
            .ok()
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| *n > 0)
        {
            runtime.worker_threads(n);
        }
        let runtime = runtime.enable_all().build().unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            server
                .serve_listener(listener, std::future::pending())
                .await
                .unwrap();
        });
    });
    rx.recv().unwrap()
}

struct Target {
    addr: SocketAddr,
    host: String,
    path: String,
    /// `Authorization: Bearer` value, when the server wants one.
    token: Option<String>,
}

impl Target {
    fn parse(url: &str) -> Target {
        let rest = url
            .strip_prefix("http://")
            .unwrap_or_else(|| panic!("only http:// URLs: {url}"));
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/mcp"),
        };
        let addr = std::net::ToSocketAddrs::to_socket_addrs(authority)
            .unwrap()
            .next()
            .unwrap_or_else(|| panic!("cannot resolve {authority}"));
        Target {
            addr,
            host: authority.to_owned(),
            path: path.to_owned(),
            token: None,
        }
    }
}

/// One keep-alive connection with the session's headers.
struct Conn {
    send: SendRequest<Full<Bytes>>,
    host: String,
    path: String,
    /// The `authorization` header, when the target has a token.
    authorization: Option<String>,
    session: Option<String>,
    version: String,
    /// The next request id (connections sharing a session use disjoint ranges).
    next_id: u64,
    /// Speaking 2026-07-28: no session, `_meta` and method headers on every request.
    modern: bool,
}

impl Conn {
    async fn open(target: &Target) -> Conn {
        let stream = TcpStream::connect(target.addr).await.unwrap();
        stream.set_nodelay(true).unwrap();
        let (send, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(connection);
        Conn {
            send,
            host: target.host.clone(),
            path: target.path.clone(),
            authorization: target.token.as_ref().map(|t| format!("Bearer {t}")),
            session: None,
            version: "2025-06-18".into(),
            next_id: 1,
            modern: false,
        }
    }

    /// POSTs `body`; returns the session header (if any) and the JSON-RPC message that
    /// answered (read from JSON or from the SSE events).
    async fn post(&mut self, body: String) -> (Option<String>, Option<Value>) {
        self.post_with(body, &[]).await
    }

    /// [`post`](Self::post) with extra headers.
    async fn post_with(
        &mut self,
        body: String,
        headers: &[(&str, &str)],
    ) -> (Option<String>, Option<Value>) {
        let mut request = hyper::Request::post(self.path.as_str())
            .header("host", self.host.as_str())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", self.version.as_str());
        if let Some(session) = &self.session {
            request = request.header("mcp-session-id", session.as_str());
        }
        if let Some(authorization) = &self.authorization {
            request = request.header("authorization", authorization.as_str());
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(Full::new(Bytes::from(body))).unwrap();
        self.send.ready().await.unwrap();
        let response = self.send.send_request(request).await.unwrap();
        let status = response.status();
        let session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let sse = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        assert!(
            status.is_success(),
            "{status}: {}",
            String::from_utf8_lossy(&bytes)
        );
        let text = std::str::from_utf8(&bytes).unwrap();
        let message = if sse {
            text.lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
                .find(|m| m.get("id").is_some())
        } else if text.is_empty() {
            None
        } else {
            Some(serde_json::from_str(text).unwrap())
        };
        (session, message)
    }

    /// Starts speaking `revision`: a session for a legacy one, nothing for 2026-07-28.
    async fn initialize(&mut self, revision: &str) {
        self.version = revision.to_owned();
        if revision == MODERN {
            self.modern = true;
            return;
        }
        let (session, reply) = self
            .post(format!(r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{revision}","capabilities":{{}},"clientInfo":{{"name":"bench","version":"1"}}}}}}"#))
            .await;
        let reply = reply.expect("an initialize reply");
        self.session = session;
        if let Some(version) = reply["result"]["protocolVersion"].as_str() {
            self.version = version.to_owned();
        }
        self.post(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.into())
            .await;
    }

    async fn call(&mut self) {
        let id = self.next_id;
        self.next_id += 1;
        let (_, reply) = if self.modern {
            self.post_with(
                format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"add","arguments":{{"a":1,"b":2}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"{MODERN}","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
                ),
                &[("mcp-method", "tools/call"), ("mcp-name", "add")],
            )
            .await
        } else {
            self.post(format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"add","arguments":{{"a":1,"b":2}}}}}}"#
            ))
            .await
        };
        let reply = reply.expect("a tools/call reply");
        assert!(
            reply["result"]["isError"] != true && reply["result"].is_object(),
            "{reply}"
        );
    }
}

/// Calls one at a time on `conn` for `seconds`; returns each call's latency.
async fn run(conn: &mut Conn, seconds: f64) -> Vec<Duration> {
    let started = Instant::now();
    let mut latencies = Vec::with_capacity(1 << 16);
    while started.elapsed().as_secs_f64() < seconds {
        let t = Instant::now();
        conn.call().await;
        latencies.push(t.elapsed());
    }
    latencies
}

struct Round {
    rate: f64,
    p50: Duration,
    p99: Duration,
}

/// One round on `conns` connections at once.
async fn round(conns: Vec<Conn>, seconds: f64) -> (Vec<Conn>, Round) {
    let started = Instant::now();
    let tasks: Vec<_> = conns
        .into_iter()
        .map(|mut conn| {
            tokio::spawn(async move {
                let latencies = run(&mut conn, seconds).await;
                (conn, latencies)
            })
        })
        .collect();
    let mut conns = Vec::new();
    let mut all = Vec::new();
    for task in tasks {
        let (conn, latencies) = task.await.unwrap();
        conns.push(conn);
        all.extend(latencies);
    }
    let elapsed = started.elapsed().as_secs_f64();
    all.sort();
    let at = |q: f64| all[((all.len() as f64 * q) as usize).min(all.len() - 1)];
    let round = Round {
        rate: all.len() as f64 / elapsed,
        p50: at(0.50),
        p99: at(0.99),
    };
    (conns, round)
}

fn median_and_range<T: Copy + PartialOrd>(mut values: Vec<T>) -> (T, T, T) {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (
        values[values.len() / 2],
        values[0],
        values[values.len() - 1],
    )
}

/// The sessionless revision.
const MODERN: &str = "2026-07-28";

async fn measure(
    label: &str,
    target: &Target,
    revision: &str,
    connections: usize,
    seconds: f64,
    rounds: usize,
) {
    let mut first = Conn::open(target).await;
    first.initialize(revision).await;
    let mut conns = vec![first];
    while conns.len() < connections {
        let mut conn = Conn::open(target).await;
        conn.session = conns[0].session.clone();
        conn.version = conns[0].version.clone();
        conn.modern = conns[0].modern;
        conn.next_id = (conns.len() as u64) << 32;
        conns.push(conn);
    }
    // Warm up.
    let (mut conns, _) = round(conns, 0.3).await;
    let mut results = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let (next, r) = round(conns, seconds).await;
        conns = next;
        results.push(r);
    }
    let (rate, rate_lo, rate_hi) = median_and_range(results.iter().map(|r| r.rate).collect());
    let (p50, p50_lo, p50_hi) =
        median_and_range(results.iter().map(|r| r.p50.as_secs_f64() * 1e6).collect());
    let (p99, p99_lo, p99_hi) =
        median_and_range(results.iter().map(|r| r.p99.as_secs_f64() * 1e6).collect());
    println!(
        "{label:<46} {rate:>8.0} calls/s ({rate_lo:.0}..{rate_hi:.0})  p50 {p50:>7.0} us ({p50_lo:.0}..{p50_hi:.0})  p99 {p99:>7.0} us ({p99_lo:.0}..{p99_hi:.0})"
    );
}

// The client: one thread, so it costs the server as little as possible.
#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut seconds = 2.0;
    let mut rounds = 5usize;
    let mut connections = 16usize;
    let mut audit = "/dev/null".to_owned();
    let mut url = None;
    let mut revisions = "2025-06-18,2025-11-25,2026-07-28".to_owned();
    let mut token = std::env::var("MILPA_BENCH_TOKEN").ok();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| panic!("{arg} needs a value"));
        match arg.as_str() {
            "--seconds" => seconds = value().parse().expect("--seconds"),
            "--rounds" => rounds = value().parse::<usize>().expect("--rounds").max(1),
            "--connections" => connections = value().parse::<usize>().expect("--connections"),
            "--audit" => audit = value(),
            "--url" => url = Some(value()),
            "--revisions" => revisions = value(),
            "--token" => token = Some(value()),
            other => panic!("unknown argument {other}"),
        }
    }
    println!(
        "median of {rounds} rounds of {seconds} s (range); latency per call, one call in flight per connection"
    );
    let targets: Vec<(String, Target)> = match url {
        Some(url) => {
            let mut target = Target::parse(&url);
            target.token = token;
            vec![(url.clone(), target)]
        }
        None => [("SSE", false), ("JSON", true)]
            .into_iter()
            .map(|(label, json)| {
                let server = HttpServer::new(registry(&audit)).json_response(json);
                let addr = start_in_process(server);
                (
                    format!("milpa {label}"),
                    Target::parse(&format!("http://{addr}/mcp")),
                )
            })
            .collect(),
    };
    for (label, target) in &targets {
        for revision in revisions.split(',') {
            measure(
                &format!("{label} {revision}, 1 connection:"),
                target,
                revision,
                1,
                seconds,
                rounds,
            )
            .await;
            measure(
                &format!("{label} {revision}, {connections} connections:"),
                target,
                revision,
                connections,
                seconds,
                rounds,
            )
            .await;
        }
    }
}
