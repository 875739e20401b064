//! Sampling and elicitation an upstream asks for during a forwarded call: relayed to the
//! MCP client that made the call when it declared the capability, declined otherwise. The
//! upstream is the `asking_server` example (over stdio and over Streamable HTTP), our
//! server is milpa-mcp's, and the client is this test speaking JSON-RPC to it.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use milpa::ToolRegistry;
use milpa_gateway::{Upstream, UpstreamConfig};
use milpa_mcp::ServerOptions;
use serde_json::{Value, json};
use tokio::io::{
    AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, ReadHalf, WriteHalf,
};

/// The example server, built by `cargo test` next to this test's binary.
fn asking_server() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let debug = exe.parent().unwrap().parent().unwrap();
    let server = debug.join("examples").join("asking_server");
    assert!(
        server.exists(),
        "{} is built by cargo test",
        server.display()
    );
    server
}

/// How the upstream is reached.
#[derive(Clone, Copy, Debug)]
enum Via {
    Stdio,
    Http,
}

/// The upstream over `via` (and, for HTTP, its process, killed on drop).
async fn start_upstream(via: Via) -> (Upstream, Option<tokio::process::Child>) {
    let server = asking_server().display().to_string();
    match via {
        Via::Stdio => {
            let config = UpstreamConfig::stdio("as", vec![server]);
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
            let config = UpstreamConfig::http("as", url, None);
            (
                Upstream::start(config).await.expect("it starts"),
                Some(child),
            )
        }
    }
}

/// Our MCP client, talking to milpa-mcp serving the upstream's tools.
struct Client {
    lines: Lines<BufReader<ReadHalf<DuplexStream>>>,
    writer: WriteHalf<DuplexStream>,
    _upstream: (Upstream, Option<tokio::process::Child>),
}

impl Client {
    /// Serves the upstream's tools and initializes a session declaring `capabilities`.
    async fn connect(via: Via, capabilities: Value) -> Client {
        let upstream = start_upstream(via).await;
        let mut registry = ToolRegistry::new();
        milpa_gateway::register(&mut registry, &upstream.0).unwrap();
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let (server_in, server_out) = tokio::io::split(theirs);
        tokio::spawn(milpa_mcp::serve_io(
            Arc::new(registry),
            ServerOptions::default(),
            server_in,
            server_out,
        ));
        let (reader, writer) = tokio::io::split(ours);
        let mut client = Client {
            lines: BufReader::new(reader).lines(),
            writer,
            _upstream: upstream,
        };
        client
            .send(
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": capabilities,
                    "clientInfo": {"name": "relay-test", "version": "1"}
                }}),
            )
            .await;
        let init = client.recv().await;
        assert!(init["result"]["protocolVersion"].is_string(), "{init}");
        client
            .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        client
    }

    async fn send(&mut self, message: Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.writer.write_all(line.as_bytes()).await.unwrap();
    }

    async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(20), self.lines.next_line())
            .await
            .expect("a message within 20 s")
            .unwrap()
            .expect("the server is still there");
        serde_json::from_str(&line).unwrap()
    }

    async fn call(&mut self, id: u64, tool: &str, arguments: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}))
            .await;
    }
}

/// The tool's result: what the upstream's tool made of its client's answer.
fn structured(response: &Value) -> &Value {
    let result = &response["result"];
    assert_ne!(result["isError"], true, "{response}");
    &result["structuredContent"]
}

fn error_text(response: &Value) -> &str {
    assert_eq!(response["result"]["isError"], true, "{response}");
    response["result"]["content"][0]["text"].as_str().unwrap()
}

async fn sampling_is_relayed_both_ways(via: Via) {
    let mut client = Client::connect(via, json!({"sampling": {}})).await;
    client
        .call(2, "as__ask_model", json!({"prompt": "two plus two?"}))
        .await;
    let asked = client.recv().await;
    assert_eq!(
        asked["method"], "sampling/createMessage",
        "{via:?}: {asked}"
    );
    assert_eq!(
        asked["params"],
        json!({"messages": [{"role": "user", "content": {"type": "text", "text": "two plus two?"}}],
               "maxTokens": 50}),
        "{via:?}: the upstream's params, unchanged"
    );
    let answer = json!({"role": "assistant", "content": {"type": "text", "text": "four"},
                        "model": "test-model", "stopReason": "endTurn"});
    client
        .send(json!({"jsonrpc": "2.0", "id": asked["id"], "result": answer}))
        .await;
    let response = client.recv().await;
    assert_eq!(response["id"], 2);
    assert_eq!(structured(&response), &answer, "{via:?}");

    // The client's error reaches the upstream with its code.
    client
        .call(3, "as__ask_model", json!({"prompt": "again"}))
        .await;
    let asked = client.recv().await;
    assert_eq!(
        asked["method"], "sampling/createMessage",
        "{via:?}: {asked}"
    );
    client
        .send(json!({"jsonrpc": "2.0", "id": asked["id"],
                     "error": {"code": -1, "message": "the user rejected sampling"}}))
        .await;
    let response = client.recv().await;
    assert_eq!(
        error_text(&response),
        "sampling failed: the user rejected sampling (code -1)",
        "{via:?}"
    );
}

async fn elicitation_is_relayed_both_ways(via: Via) {
    let mut client = Client::connect(via, json!({"elicitation": {}})).await;
    client
        .call(2, "as__ask_user", json!({"message": "Your name?"}))
        .await;
    let asked = client.recv().await;
    assert_eq!(asked["method"], "elicitation/create", "{via:?}: {asked}");
    assert_eq!(asked["params"]["message"], "Your name?");
    assert_eq!(
        asked["params"]["requestedSchema"]["required"],
        json!(["name"])
    );
    let answer = json!({"action": "accept", "content": {"name": "Ada"}});
    client
        .send(json!({"jsonrpc": "2.0", "id": asked["id"], "result": answer}))
        .await;
    let response = client.recv().await;
    assert_eq!(structured(&response), &answer, "{via:?}");
}

/// A client without the capabilities is never asked: elicitation is declined, sampling
/// refused with a reason.
async fn a_client_without_the_capability_is_not_asked(via: Via) {
    let mut client = Client::connect(via, json!({})).await;
    client
        .call(2, "as__ask_user", json!({"message": "Your name?"}))
        .await;
    let response = client.recv().await;
    assert_eq!(
        response["id"], 2,
        "{via:?}: no request reached the client: {response}"
    );
    assert_eq!(
        structured(&response),
        &json!({"action": "decline"}),
        "{via:?}"
    );

    client
        .call(3, "as__ask_model", json!({"prompt": "?"}))
        .await;
    let response = client.recv().await;
    assert_eq!(
        response["id"], 3,
        "{via:?}: no request reached the client: {response}"
    );
    assert_eq!(
        error_text(&response),
        "sampling failed: the client did not declare sampling (code -32601)",
        "{via:?}"
    );

    // Sampling only: an elicitation is still declined.
    let mut client = Client::connect(via, json!({"sampling": {}})).await;
    client
        .call(2, "as__ask_user", json!({"message": "Your name?"}))
        .await;
    let response = client.recv().await;
    assert_eq!(
        structured(&response),
        &json!({"action": "decline"}),
        "{via:?}"
    );
}

#[tokio::test]
async fn stdio_sampling_is_relayed_to_the_client_and_its_answer_back() {
    sampling_is_relayed_both_ways(Via::Stdio).await;
}

#[tokio::test]
async fn http_sampling_is_relayed_to_the_client_and_its_answer_back() {
    sampling_is_relayed_both_ways(Via::Http).await;
}

#[tokio::test]
async fn stdio_elicitation_is_relayed_to_the_client_and_its_answer_back() {
    elicitation_is_relayed_both_ways(Via::Stdio).await;
}

#[tokio::test]
async fn http_elicitation_is_relayed_to_the_client_and_its_answer_back() {
    elicitation_is_relayed_both_ways(Via::Http).await;
}

#[tokio::test]
async fn stdio_requests_a_client_did_not_declare_are_declined() {
    a_client_without_the_capability_is_not_asked(Via::Stdio).await;
}

#[tokio::test]
async fn http_requests_a_client_did_not_declare_are_declined() {
    a_client_without_the_capability_is_not_asked(Via::Http).await;
}
