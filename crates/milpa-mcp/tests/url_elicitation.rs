//! Human approvals over MCP (DESIGN §5, §6): a call parked for a person's approval carries
//! `approve_url` when the server serves the approvals page; a client that declared URL-mode
//! elicitation is sent there (`elicitation/create`, `mode: "url"`) and its call completes
//! when a person decides (or the approval expires), or ends when the call is cancelled;
//! other clients, and stdio, get `APPROVAL_PENDING` and replay. Every assertion is on the
//! messages on the wire (SSE over Streamable HTTP).

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{StdioClient, WAIT};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper_util::rt::TokioIo;
use milpa::approval::{ApprovalQueue, ApprovalState, Verdict};
use milpa::audit::{AuditOutcome, MemoryAuditSink};
use milpa::{ToolContext, ToolDefinition, ToolRegistry};
use milpa_mcp::auth::StaticTokens;
use milpa_mcp::{HttpServer, ServerOptions};
use serde_json::{Value, json};

const AGENT_TOKEN: &str = "agent-secret";
const URL_CLIENT: &str = r#"{"elicitation": {"url": {}}}"#;

/// A server with a human-gated `deploy` tool that counts its runs.
struct Server {
    addr: SocketAddr,
    registry: Arc<ToolRegistry>,
    audit: Arc<MemoryAuditSink>,
    runs: Arc<AtomicUsize>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Server {
    async fn start() -> Server {
        Self::start_with(Duration::from_secs(3600), true, ServerOptions::default()).await
    }

    /// `ttl`: how long approvals wait; `page`: whether the server serves an approvals page.
    async fn start_with(ttl: Duration, page: bool, options: ServerOptions) -> Server {
        let audit = Arc::new(MemoryAuditSink::new());
        let runs = Arc::new(AtomicUsize::new(0));
        let mut registry = ToolRegistry::builder()
            .audit_sink(audit.clone())
            .approvals(Arc::new(ApprovalQueue::in_memory().with_ttl(ttl)))
            .build();
        let counter = runs.clone();
        registry
            .register(
                ToolDefinition::builder("deploy")
                    .description("Deploys")
                    .input_schema(json!({
                        "type": "object",
                        "properties": {"env": {"type": "string"}},
                        "required": ["env"]
                    }))
                    .mutating(true)
                    .requires_human_approval(true)
                    .sync(move |args, _| {
                        counter.fetch_add(1, Ordering::SeqCst);
                        json!(format!("deployed {}", args["env"].as_str().unwrap_or("?")))
                    }),
            )
            .unwrap();
        let registry = Arc::new(registry);
        let mut tokens = StaticTokens::new();
        tokens.insert_token(AGENT_TOKEN, "agent", ["*"]);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut server = HttpServer::new(registry.clone())
            .authenticator(tokens)
            .options(options);
        server = if page {
            server.approval_page_url(format!("http://{addr}/approvals"))
        } else {
            server.approvals_page(false)
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(server.serve_listener(listener, async {
            let _ = stopped.await;
        }));
        Server {
            addr,
            registry,
            audit,
            runs,
            _stop: stop,
        }
    }

    fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }

    async fn decide(&self, id: &str, verdict: Verdict, reason: &str) {
        let alice = ToolContext::web("alice", ["approvals:grant"]);
        self.registry
            .decide_approval(id, verdict, Some(reason), &alice)
            .await
            .unwrap();
    }

    async fn state(&self, id: &str) -> ApprovalState {
        let approval = self.registry.approvals().get(id).await.unwrap().unwrap();
        approval.state(now_ms())
    }

    fn outcomes(&self) -> Vec<AuditOutcome> {
        self.audit.records().iter().map(|r| r.outcome).collect()
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A raw MCP client over Streamable HTTP: one connection per POST, SSE read as it arrives.
struct Client {
    addr: SocketAddr,
    session: String,
}

impl Client {
    async fn connect(addr: SocketAddr, version: &str, capabilities: &str) -> Client {
        let capabilities: Value = serde_json::from_str(capabilities).unwrap();
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": capabilities,
            "clientInfo": {"name": "url-elicitation-test", "version": "1"}}});
        let response = post(addr, None, &init).await;
        assert_eq!(response.status(), 200);
        let session = response.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned();
        let client = Client { addr, session };
        client
            .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        client
    }

    /// Posts a notification or a response; the server accepts it with `202`.
    async fn send(&self, message: &Value) {
        let response = post(self.addr, Some(&self.session), message).await;
        assert_eq!(response.status(), 202, "{message}");
    }

    /// Starts `tools/call` of `deploy` with `arguments`; its SSE stream.
    async fn call(&self, id: i64, arguments: Value, progress: Option<&str>) -> Sse {
        let mut params = json!({"name": "deploy", "arguments": arguments});
        if let Some(token) = progress {
            params["_meta"] = json!({"progressToken": token});
        }
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        let response = post(self.addr, Some(&self.session), &request).await;
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Sse {
            body: response.into_body(),
            buffer: String::new(),
        }
    }

    /// Answers the server's request `request` with `result`.
    async fn answer(&self, request: &Value, result: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": result}))
            .await;
    }

    /// One whole call answered on its stream: every message, the response last.
    async fn call_to_end(&self, id: i64, arguments: Value) -> Vec<Value> {
        self.call(id, arguments, None).await.rest().await
    }
}

async fn post(addr: SocketAddr, session: Option<&str>, body: &Value) -> hyper::Response<Incoming> {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut send, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    let mut request = hyper::Request::post("/mcp")
        .header("host", addr.to_string())
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", format!("Bearer {AGENT_TOKEN}"))
        .header("mcp-protocol-version", "2025-11-25");
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    let request = request
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    tokio::time::timeout(WAIT, send.send_request(request))
        .await
        .expect("the server answers")
        .unwrap()
}

/// A call's SSE stream, read one message at a time as the server sends them.
struct Sse {
    body: Incoming,
    buffer: String,
}

impl Sse {
    /// The next message, or `None` when the stream ended.
    async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let event: String = self.buffer.drain(..end + 2).collect();
                let data: String = event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                if data.is_empty() {
                    continue; // a keep-alive comment
                }
                return Some(serde_json::from_str(&data).unwrap());
            }
            let frame = tokio::time::timeout(WAIT, self.body.frame())
                .await
                .expect("the server sends more or ends the stream");
            match frame {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buffer.push_str(&String::from_utf8_lossy(&data));
                    }
                }
                Some(Err(error)) => panic!("the stream broke: {error}"),
                None => return None,
            }
        }
    }

    /// Every message until the stream ends.
    async fn rest(mut self) -> Vec<Value> {
        let mut messages = Vec::new();
        while let Some(message) = self.next().await {
            messages.push(message);
        }
        messages
    }
}

/// The `elicitation/create` a URL client is sent first, checked against the approval it
/// opened for `deploy(env=<env>)`; the approval id.
async fn url_elicitation(server: &Server, stream: &mut Sse, env: &str) -> (String, Value) {
    let request = stream.next().await.expect("an elicitation request");
    assert_eq!(request["method"], "elicitation/create", "{request}");
    let pending = server.registry.approvals().pending(10).await.unwrap();
    assert_eq!(pending.len(), 1);
    let id = pending[0].id().to_owned();
    assert_eq!(
        request["params"],
        json!({
            "mode": "url",
            "elicitationId": id,
            "url": format!("http://{}/approvals/{id}", server.addr),
            "message": format!("A person other than you must approve deploy(env={env}): open the approvals page."),
        })
    );
    (id, request)
}

#[tokio::test]
async fn a_grant_completes_the_elicitation_and_answers_with_the_tools_result() {
    let server = Server::start().await;
    let client = Client::connect(server.addr, "2025-11-25", URL_CLIENT).await;
    let mut stream = client.call(1, json!({"env": "prod"}), None).await;
    let (id, request) = url_elicitation(&server, &mut stream, "prod").await;
    client.answer(&request, json!({"action": "accept"})).await;
    // The client's accept decides nothing: the call waits for a person.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(server.state(&id).await, ApprovalState::Pending);
    assert_eq!(server.runs(), 0);

    server.decide(&id, Verdict::Grant, "looks right").await;
    let complete = stream.next().await.expect("the completion");
    assert_eq!(
        complete,
        json!({"jsonrpc": "2.0", "method": "notifications/elicitation/complete",
            "params": {"elicitationId": id}})
    );
    let response = stream.next().await.expect("the response");
    assert_eq!(response["id"], 1);
    let result = &response["result"];
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(
        result["structuredContent"],
        json!({"result": "deployed prod"})
    );
    assert_eq!(result["content"][0]["text"], "deployed prod");
    assert_eq!(stream.next().await, None, "the response ends the stream");
    assert_eq!(server.runs(), 1);
    assert_eq!(server.state(&id).await, ApprovalState::Executed);

    // It ran once: the caller's own replay is refused.
    let replay = client.call_to_end(2, json!({"confirm_token": id})).await;
    let result = &replay.last().unwrap()["result"];
    assert_eq!(result["_meta"]["milpa"]["code"], "VALIDATION_ERROR");
    assert_eq!(
        result["content"][0]["text"],
        "Invalid or expired confirmation token"
    );
    assert_eq!(server.runs(), 1);
    assert_eq!(
        server.outcomes(),
        [
            AuditOutcome::ApprovalPending,
            AuditOutcome::ApprovalGranted,
            AuditOutcome::Executed,
            AuditOutcome::InvalidConfirmation
        ]
    );
}

#[tokio::test]
async fn a_reject_answers_forbidden_naming_the_rejecter() {
    let server = Server::start().await;
    let client = Client::connect(server.addr, "2025-11-25", URL_CLIENT).await;
    let mut stream = client.call(1, json!({"env": "prod"}), None).await;
    let (id, request) = url_elicitation(&server, &mut stream, "prod").await;
    client.answer(&request, json!({"action": "accept"})).await;
    server.decide(&id, Verdict::Reject, "not on a Friday").await;
    let messages = stream.rest().await;
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(messages[0]["method"], "notifications/elicitation/complete");
    assert_eq!(messages[0]["params"]["elicitationId"], id.as_str());
    let result = &messages[1]["result"];
    assert_eq!(result["isError"], true);
    assert_eq!(result["_meta"]["milpa"]["code"], "FORBIDDEN");
    assert_eq!(
        result["content"][0]["text"],
        format!("Rejected by alice: not on a Friday (approval {id}); nothing ran.")
    );
    assert_eq!(server.runs(), 0);
}

#[tokio::test]
async fn an_expired_approval_ends_the_wait_with_the_invalid_token_refusal() {
    let server =
        Server::start_with(Duration::from_millis(800), true, ServerOptions::default()).await;
    let client = Client::connect(server.addr, "2025-11-25", URL_CLIENT).await;
    let mut stream = client.call(1, json!({"env": "prod"}), None).await;
    let (id, request) = url_elicitation(&server, &mut stream, "prod").await;
    client.answer(&request, json!({"action": "accept"})).await;
    // Nobody decides.
    let messages = stream.rest().await;
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(messages[0]["method"], "notifications/elicitation/complete");
    assert_eq!(messages[0]["params"]["elicitationId"], id.as_str());
    let result = &messages[1]["result"];
    assert_eq!(result["_meta"]["milpa"]["code"], "VALIDATION_ERROR");
    assert_eq!(
        result["content"][0]["text"],
        "Invalid or expired confirmation token"
    );
    assert_eq!(server.state(&id).await, ApprovalState::Expired);
    assert_eq!(server.runs(), 0);
}

/// The pending result a client gets back: `approve_url` in `structuredContent` and in the
/// text; the approval id.
fn assert_pending_with_url(server: &Server, response: &Value) -> String {
    let result = &response["result"];
    assert_eq!(result["isError"], true, "{response}");
    assert_eq!(result["_meta"]["milpa"]["code"], "APPROVAL_PENDING");
    let id = result["structuredContent"]["approval_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let url = format!("http://{}/approvals/{id}", server.addr);
    assert_eq!(result["structuredContent"]["approve_url"], url.as_str());
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("Waiting for a person to approve deploy(env=prod)"));
    assert!(
        text.ends_with(&format!("\nA person can approve it at {url}")),
        "{text}"
    );
    id
}

#[tokio::test]
async fn decline_cancel_or_an_error_leave_the_approval_pending_for_a_replay() {
    let server = Server::start().await;
    let client = Client::connect(server.addr, "2025-11-25", URL_CLIENT).await;
    let answers = [
        json!({"result": {"action": "decline"}}),
        json!({"result": {"action": "cancel"}}),
        json!({"error": {"code": -32603, "message": "no browser here"}}),
    ];
    for (n, answer) in answers.into_iter().enumerate() {
        let call_id = n as i64 + 1;
        let env = format!("e{n}");
        let mut stream = client.call(call_id, json!({"env": env}), None).await;
        let request = stream.next().await.unwrap();
        assert_eq!(request["params"]["mode"], "url");
        let mut reply = json!({"jsonrpc": "2.0", "id": request["id"]});
        reply
            .as_object_mut()
            .unwrap()
            .extend(answer.as_object().unwrap().clone());
        client.send(&reply).await;
        let messages = stream.rest().await;
        assert_eq!(messages.len(), 1, "only the response: {messages:?}");
        let result = &messages[0]["result"];
        assert_eq!(result["_meta"]["milpa"]["code"], "APPROVAL_PENDING");
        let id = result["structuredContent"]["approval_id"].as_str().unwrap();
        assert_eq!(
            result["structuredContent"]["approve_url"],
            format!("http://{}/approvals/{id}", server.addr)
        );
        assert_eq!(
            result["structuredContent"]["action_summary"],
            format!("deploy(env={env})")
        );
        assert_eq!(server.state(id).await, ApprovalState::Pending);
    }
    assert_eq!(
        server.registry.approvals().pending(10).await.unwrap().len(),
        3
    );
    assert_eq!(server.runs(), 0);
}

/// Cancels a call waiting for a person in three ways; each time the wait ends at once,
/// even while the call's cancellation grace runs (a grant then does not run the tool behind
/// the caller's back), the approval stays as it was, and the caller's replay after the
/// grant runs the parked call once.
#[tokio::test]
async fn a_cancelled_wait_leaves_the_approval_to_the_caller() {
    #[derive(Debug, Clone, Copy)]
    enum Cancel {
        Notification,
        DroppedStream,
        DeletedSession,
    }
    let mut options = ServerOptions::default();
    options.cancel_grace = Duration::from_secs(2);
    let server = Server::start_with(Duration::from_secs(3600), true, options).await;
    let mut expected_runs = 0;
    for (n, how) in [
        Cancel::Notification,
        Cancel::DroppedStream,
        Cancel::DeletedSession,
    ]
    .into_iter()
    .enumerate()
    {
        let client = Client::connect(server.addr, "2025-11-25", URL_CLIENT).await;
        let call_id = 10 + n as i64;
        let mut stream = client.call(call_id, json!({"env": "prod"}), None).await;
        let request = stream.next().await.unwrap();
        let id = request["params"]["elicitationId"]
            .as_str()
            .unwrap()
            .to_owned();
        client.answer(&request, json!({"action": "accept"})).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let unanswered = match how {
            Cancel::Notification => {
                client
                    .send(
                        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": call_id, "reason": "changed my mind"}}),
                    )
                    .await;
                Some(stream)
            }
            Cancel::DroppedStream => {
                drop(stream);
                None
            }
            Cancel::DeletedSession => {
                assert_eq!(hyper_delete(server.addr, &client.session).await, 200);
                Some(stream)
            }
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(server.state(&id).await, ApprovalState::Pending, "{how:?}");
        // Within the grace: had the wait gone on, this grant would run the tool now.
        server.decide(&id, Verdict::Grant, "fine").await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(server.runs(), expected_runs, "{how:?}");
        assert_eq!(server.state(&id).await, ApprovalState::Granted, "{how:?}");
        if let Some(stream) = unanswered {
            // No completion, no response: the stream just ends (after the grace).
            assert_eq!(stream.rest().await, Vec::<Value>::new(), "{how:?}");
        }
        // The caller replays (on a new session: the last one was deleted).
        let client = Client::connect(server.addr, "2025-11-25", "{}").await;
        let replay = client.call_to_end(99, json!({"confirm_token": id})).await;
        assert_eq!(replay.len(), 1);
        assert_eq!(
            replay[0]["result"]["structuredContent"],
            json!({"result": "deployed prod"}),
            "{how:?}"
        );
        expected_runs += 1;
        assert_eq!(server.runs(), expected_runs, "{how:?}");
    }
}

async fn hyper_delete(addr: SocketAddr, session: &str) -> u16 {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut send, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    let request = hyper::Request::delete("/mcp")
        .header("host", addr.to_string())
        .header("authorization", format!("Bearer {AGENT_TOKEN}"))
        .header("mcp-session-id", session)
        .body(Full::new(Bytes::new()))
        .unwrap();
    send.send_request(request).await.unwrap().status().as_u16()
}

/// Clients that cannot take a URL elicitation (form only, none, or a protocol version
/// before URL mode) are never sent one: they get `APPROVAL_PENDING` with the page's URL,
/// and so does their replay while nobody decided.
#[tokio::test]
async fn other_clients_get_approval_pending_with_the_url_and_no_elicitation() {
    let server = Server::start().await;
    for (version, capabilities) in [
        ("2025-11-25", r#"{"elicitation": {"form": {}}}"#),
        ("2025-11-25", r#"{"elicitation": {}}"#),
        ("2025-11-25", "{}"),
        ("2025-06-18", URL_CLIENT),
    ] {
        let client = Client::connect(server.addr, version, capabilities).await;
        let messages = client.call_to_end(1, json!({"env": "prod"})).await;
        assert_eq!(messages.len(), 1, "{capabilities}: {messages:?}");
        let id = assert_pending_with_url(&server, &messages[0]);
        let replay = client.call_to_end(2, json!({"confirm_token": id})).await;
        assert_eq!(replay.len(), 1, "{capabilities}: {replay:?}");
        assert_eq!(assert_pending_with_url(&server, &replay[0]), id);
    }
    assert_eq!(server.runs(), 0);
}

#[tokio::test]
async fn without_an_approvals_page_there_is_no_url_to_send() {
    let server =
        Server::start_with(Duration::from_secs(3600), false, ServerOptions::default()).await;
    let client = Client::connect(server.addr, "2025-11-25", URL_CLIENT).await;
    let messages = client.call_to_end(1, json!({"env": "prod"})).await;
    assert_eq!(messages.len(), 1, "{messages:?}");
    let result = &messages[0]["result"];
    assert_eq!(result["_meta"]["milpa"]["code"], "APPROVAL_PENDING");
    assert!(result["structuredContent"].get("approve_url").is_none());
    assert!(
        !result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("approve it at")
    );
}

#[tokio::test]
async fn stdio_answers_approval_pending_without_a_url() {
    let mut registry = ToolRegistry::new();
    registry
        .register(
            ToolDefinition::builder("deploy")
                .input_schema(json!({"type": "object", "properties": {"env": {"type": "string"}}}))
                .mutating(true)
                .requires_human_approval(true)
                .sync(|_, _| json!("deployed")),
        )
        .unwrap();
    let mut client = StdioClient::start(Arc::new(registry), ServerOptions::default());
    client.initialize(json!({"elicitation": {"url": {}}})).await;
    let result = client.call("deploy", json!({"env": "prod"})).await;
    assert_eq!(result["_meta"]["milpa"]["code"], "APPROVAL_PENDING");
    let data = &result["structuredContent"];
    assert!(data["approval_id"].is_string());
    assert!(data.get("approve_url").is_none(), "{data}");
    assert!(
        client
            .backlog
            .iter()
            .all(|m| m["method"] != "elicitation/create")
    );
}
