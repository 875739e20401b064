//! What the tests against the `asking_server` example share: the upstream over stdio or
//! Streamable HTTP, milpa-mcp serving its tools, and a client speaking JSON-RPC to it.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use milpa::ToolRegistry;
use milpa::audit::{AuditRecord, AuditSink};
use milpa_gateway::{ProtocolChoice, Upstream, UpstreamConfig};
use milpa_mcp::ServerOptions;
use serde_json::{Value, json};
use tokio::io::{
    AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, ReadHalf, WriteHalf,
};

/// An example server of this crate, built by `cargo test` next to this test's binary.
pub fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let debug = exe.parent().unwrap().parent().unwrap();
    let server = debug.join("examples").join(name);
    assert!(
        server.exists(),
        "{} is built by cargo test",
        server.display()
    );
    server
}

/// How the upstream is reached.
#[derive(Clone, Copy, Debug)]
pub enum Via {
    Stdio,
    Http,
}

/// The `asking_server` upstream over `via` (and, for HTTP, its process, killed on drop).
pub async fn start_upstream(via: Via) -> (Upstream, Option<tokio::process::Child>) {
    start_example("asking_server", "as", via).await
}

/// The example server `example` as the upstream `name` over `via` (and, for HTTP, its
/// process, killed on drop), spoken to as by default (2026-07-28, which the examples
/// offer).
pub async fn start_example(
    example: &str,
    name: &str,
    via: Via,
) -> (Upstream, Option<tokio::process::Child>) {
    start_example_speaking(example, name, via, ProtocolChoice::Discover).await
}

/// [`start_example`], speaking the revisions `protocol` says.
pub async fn start_example_speaking(
    example: &str,
    name: &str,
    via: Via,
    protocol: ProtocolChoice,
) -> (Upstream, Option<tokio::process::Child>) {
    let server = self::example(example).display().to_string();
    match via {
        Via::Stdio => {
            let mut config = UpstreamConfig::stdio(name, vec![server]);
            config.protocol = protocol;
            (Upstream::start(config).await.expect("it starts"), None)
        }
        Via::Http => {
            let mut child = tokio::process::Command::new(server)
                .args(["--http", "127.0.0.1:0"])
                .stdout(Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .unwrap();
            let stdout = child.stdout.take().unwrap();
            let url = BufReader::new(stdout)
                .lines()
                .next_line()
                .await
                .unwrap()
                .expect("it prints its URL");
            let mut config = UpstreamConfig::http(name, url, None);
            config.protocol = protocol;
            (
                Upstream::start(config).await.expect("it starts"),
                Some(child),
            )
        }
    }
}

/// Our MCP client, talking to milpa-mcp serving the upstream's tools.
pub struct Client {
    pub audit: Arc<Recorded>,
    /// The server's answer to the client's `initialize`.
    pub initialized: Value,
    lines: Lines<BufReader<ReadHalf<DuplexStream>>>,
    writer: WriteHalf<DuplexStream>,
    _upstream: (Upstream, Option<tokio::process::Child>),
}

impl Client {
    /// Serves the `asking_server` upstream's tools and initializes a session declaring
    /// `capabilities`.
    pub async fn connect(via: Via, capabilities: Value) -> Client {
        Client::connect_to(start_upstream(via).await, capabilities).await
    }

    /// Serves `upstream`'s tools and initializes a session declaring `capabilities`.
    pub async fn connect_to(
        upstream: (Upstream, Option<tokio::process::Child>),
        capabilities: Value,
    ) -> Client {
        Client::connect_speaking(upstream, capabilities, "2025-06-18").await
    }

    /// [`connect_to`](Self::connect_to), asking for the protocol revision `version`.
    pub async fn connect_speaking(
        upstream: (Upstream, Option<tokio::process::Child>),
        capabilities: Value,
        version: &str,
    ) -> Client {
        let audit = Arc::new(Recorded::default());
        let registry = ToolRegistry::builder().audit_sink(audit.clone()).build();
        assert!(milpa_gateway::register(&registry, &upstream.0).is_empty());
        let registry = Arc::new(registry);
        upstream.0.follow_tool_list(&registry);
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let (server_in, server_out) = tokio::io::split(theirs);
        tokio::spawn(milpa_mcp::serve_io(
            registry,
            ServerOptions::default(),
            server_in,
            server_out,
        ));
        let (reader, writer) = tokio::io::split(ours);
        let mut client = Client {
            audit,
            initialized: Value::Null,
            lines: BufReader::new(reader).lines(),
            writer,
            _upstream: upstream,
        };
        client
            .send(
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": version,
                    "capabilities": capabilities,
                    "clientInfo": {"name": "relay-test", "version": "1"}
                }}),
            )
            .await;
        let init = client.recv().await;
        assert!(init["result"]["protocolVersion"].is_string(), "{init}");
        client.initialized = init;
        client
            .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        client
    }

    pub async fn send(&mut self, message: Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.writer.write_all(line.as_bytes()).await.unwrap();
    }

    pub async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(20), self.lines.next_line())
            .await
            .expect("a message within 20 s")
            .unwrap()
            .expect("the server is still there");
        serde_json::from_str(&line).unwrap()
    }

    pub async fn call(&mut self, id: u64, tool: &str, arguments: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}))
            .await;
    }
}

/// The tools and outcomes of the audited calls.
#[derive(Default)]
pub struct Recorded(Mutex<Vec<(String, bool)>>);

impl Recorded {
    pub fn calls(&self) -> Vec<(String, bool)> {
        self.0.lock().unwrap().clone()
    }
}

impl AuditSink for Recorded {
    fn record(&self, record: &AuditRecord<'_>) {
        self.0
            .lock()
            .unwrap()
            .push((record.tool.to_owned(), record.success));
    }
}
