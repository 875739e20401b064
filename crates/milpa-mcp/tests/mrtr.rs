//! 2026-07-28 confirmation and human approval through `input_required` results: a form
//! elicitation for the caller's confirmation, a URL elicitation for a person's approval,
//! a sealed `requestState` bound to principal, tool and arguments, used once.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{JSON_HEADERS, http};
use milpa::approval::{ApprovalQueue, Verdict};
use milpa::{ToolContext, ToolDefinition, ToolRegistry};
use milpa_mcp::HttpServer;
use milpa_mcp::auth::StaticTokens;
use serde_json::{Value, json};

const V: &str = "2026-07-28";

struct Server {
    addr: SocketAddr,
    registry: Arc<ToolRegistry>,
    runs: Arc<AtomicUsize>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

async fn server() -> Server {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut registry = ToolRegistry::builder()
        .approvals(Arc::new(ApprovalQueue::in_memory()))
        .build();
    let counter = runs.clone();
    registry
        .register(
            ToolDefinition::builder("delete_note")
                .input_schema(json!({"type": "object", "properties": {"id": {"type": "integer"}}}))
                .mutating(true)
                .requires_confirmation(true)
                .sync(move |args, _| {
                    counter.fetch_add(1, Ordering::SeqCst);
                    json!({"deleted": args["id"]})
                }),
        )
        .unwrap();
    let counter = runs.clone();
    registry
        .register(
            ToolDefinition::builder("deploy")
                .input_schema(json!({"type": "object", "properties": {"env": {"type": "string"}}}))
                .mutating(true)
                .requires_human_approval(true)
                .sync(move |args, _| {
                    counter.fetch_add(1, Ordering::SeqCst);
                    json!(format!("deployed {}", args["env"].as_str().unwrap_or("?")))
                }),
        )
        .unwrap();
    // Asks a name, then (in a second round) an age, through its call handle.
    registry
        .register(
            ToolDefinition::builder("survey")
                .input_schema(json!({"type": "object"}))
                .asynchronous(|_, ctx: ToolContext| async move {
                    let handle = ctx.call_handle();
                    let key = milpa_mcp::protocol::INPUT_KEY_META;
                    let name = handle
                        .elicit(
                            json!({"message": "Name?", "requestedSchema": {"type": "object"},
                            "_meta": {key: "name"}}),
                        )
                        .await
                        .map_err(|e| milpa::ToolError::new(e.to_string()))?;
                    let age = handle
                        .elicit(json!({"message": "Age?", "requestedSchema": {"type": "object"}}))
                        .await
                        .map_err(|e| milpa::ToolError::new(e.to_string()))?;
                    Ok::<_, milpa::ToolError>(json!(format!(
                        "{} is {}",
                        name["content"]["name"].as_str().unwrap_or("?"),
                        age["content"]["age"]
                    )))
                }),
        )
        .unwrap();
    let registry = Arc::new(registry);
    let mut tokens = StaticTokens::new();
    tokens.insert_token("agent-secret", "agent", ["*"]);
    tokens.insert_token("other-secret", "other", ["*"]);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(
        HttpServer::new(registry.clone())
            .authenticator(tokens)
            .serve_listener(listener, async {
                let _ = stopped.await;
            }),
    );
    Server {
        addr,
        registry,
        runs,
        _stop: stop,
    }
}

/// A 2026-07-28 `tools/call` as `token`'s principal, declaring `capabilities`.
async fn call(
    addr: SocketAddr,
    token: &str,
    tool: &str,
    arguments: Value,
    capabilities: Value,
    retry: Option<(&Value, Value)>,
) -> (u16, Value) {
    let mut params = json!({"name": tool, "arguments": arguments, "_meta": {
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }});
    if let Some((state, responses)) = retry {
        params["requestState"] = state.clone();
        params["inputResponses"] = responses;
    }
    let auth = format!("Bearer {token}");
    let mut headers = JSON_HEADERS.to_vec();
    headers.extend([
        ("MCP-Protocol-Version", V),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", tool),
        ("Authorization", auth.as_str()),
    ]);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
    let r = http(addr, "POST", &headers, body.to_string().as_bytes()).await;
    (r.status, r.json())
}

fn accept(confirm: bool) -> Value {
    json!({"confirm": {"action": "accept", "content": {"confirm": confirm}}})
}

#[tokio::test]
async fn a_confirmation_is_asked_with_a_form_and_settled_once() {
    let s = server().await;
    let form = json!({"elicitation": {}});
    let (status, first) = call(
        s.addr,
        "agent-secret",
        "delete_note",
        json!({"id": 1}),
        form.clone(),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    let ask = &result["inputRequests"]["confirm"];
    assert_eq!(ask["method"], "elicitation/create");
    assert_eq!(ask["params"]["mode"], "form");
    assert_eq!(
        ask["params"]["requestedSchema"]["properties"]["confirm"]["type"],
        "boolean"
    );
    let state = &result["requestState"];
    assert!(state.is_string());
    assert_eq!(s.runs.load(Ordering::SeqCst), 0);

    // Tampered, or for other arguments, another tool, another principal: -32602, nothing runs.
    let tampered = json!(format!("{}x", state.as_str().unwrap()));
    let refusals = [
        ("agent-secret", "delete_note", json!({"id": 1}), &tampered),
        ("agent-secret", "delete_note", json!({"id": 2}), state),
        ("agent-secret", "deploy", json!({"id": 1}), state),
        ("other-secret", "delete_note", json!({"id": 1}), state),
    ];
    for (token, tool, arguments, state) in refusals {
        let (status, answer) = call(
            s.addr,
            token,
            tool,
            arguments.clone(),
            form.clone(),
            Some((state, accept(true))),
        )
        .await;
        assert_eq!(status, 400, "{tool} {arguments}: {answer}");
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("requestState")
        );
    }
    assert_eq!(s.runs.load(Ordering::SeqCst), 0);

    // The confirmed retry runs the call once.
    let (status, done) = call(
        s.addr,
        "agent-secret",
        "delete_note",
        json!({"id": 1}),
        form.clone(),
        Some((state, accept(true))),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(done["result"]["resultType"], "complete");
    assert_eq!(done["result"]["structuredContent"], json!({"deleted": 1}));
    assert_eq!(s.runs.load(Ordering::SeqCst), 1);

    // The same state again: the core's token was consumed; nothing runs a second time.
    let (_, again) = call(
        s.addr,
        "agent-secret",
        "delete_note",
        json!({"id": 1}),
        form,
        Some((state, accept(true))),
    )
    .await;
    assert_eq!(again["result"]["isError"], true, "{again}");
    assert_eq!(s.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_declined_confirmation_runs_nothing_and_a_client_without_forms_gets_the_token() {
    let s = server().await;
    let form = json!({"elicitation": {}});
    let (_, first) = call(
        s.addr,
        "agent-secret",
        "delete_note",
        json!({"id": 3}),
        form.clone(),
        None,
    )
    .await;
    let state = first["result"]["requestState"].clone();
    let (_, declined) = call(
        s.addr,
        "agent-secret",
        "delete_note",
        json!({"id": 3}),
        form,
        Some((&state, accept(false))),
    )
    .await;
    assert_eq!(declined["result"]["resultType"], "complete");
    assert_eq!(declined["result"]["isError"], true);
    assert_eq!(s.runs.load(Ordering::SeqCst), 0);

    // No elicitation declared: the confirmation result with its token, as before.
    let (_, plain) = call(
        s.addr,
        "agent-secret",
        "delete_note",
        json!({"id": 4}),
        json!({}),
        None,
    )
    .await;
    assert_eq!(plain["result"]["resultType"], "complete");
    assert!(
        plain["result"]["structuredContent"]["confirm_token"].is_string(),
        "{plain}"
    );
}

#[tokio::test]
async fn a_human_approval_is_a_url_elicitation_until_a_person_decides() {
    let s = server().await;
    let url_client = json!({"elicitation": {"url": {}}});
    let (_, first) = call(
        s.addr,
        "agent-secret",
        "deploy",
        json!({"env": "prod"}),
        url_client.clone(),
        None,
    )
    .await;
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    let ask = &result["inputRequests"]["approval"]["params"];
    assert_eq!(ask["mode"], "url");
    let id = ask["elicitationId"].as_str().unwrap().to_owned();
    assert!(
        ask["url"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/approvals/{id}"))
    );
    let state = result["requestState"].clone();
    let opened = json!({"approval": {"action": "accept"}});

    // Nobody decided yet: asked again.
    let (_, waiting) = call(
        s.addr,
        "agent-secret",
        "deploy",
        json!({"env": "prod"}),
        url_client.clone(),
        Some((&state, opened.clone())),
    )
    .await;
    assert_eq!(
        waiting["result"]["resultType"], "input_required",
        "{waiting}"
    );
    assert_eq!(s.runs.load(Ordering::SeqCst), 0);

    let alice = ToolContext::web("alice", ["approvals:grant"]);
    s.registry
        .decide_approval(&id, Verdict::Grant, None, &alice)
        .await
        .unwrap();
    let (_, done) = call(
        s.addr,
        "agent-secret",
        "deploy",
        json!({"env": "prod"}),
        url_client,
        Some((&state, opened)),
    )
    .await;
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(
        done["result"]["structuredContent"]["result"],
        "deployed prod"
    );
    assert_eq!(s.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_tools_own_questions_become_input_rounds_that_carry_earlier_answers() {
    let s = server().await;
    let caps = json!({"elicitation": {}});
    let (_, first) = call(
        s.addr,
        "agent-secret",
        "survey",
        json!({}),
        caps.clone(),
        None,
    )
    .await;
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    // The tool's key, and the milpa key taken out of what the client sees.
    assert_eq!(
        result["inputRequests"],
        json!({"name": {"method": "elicitation/create",
            "params": {"message": "Name?", "requestedSchema": {"type": "object"}}}})
    );
    let state = result["requestState"].clone();
    let name = json!({"name": {"action": "accept", "content": {"name": "Ada"}}});
    let (_, second) = call(
        s.addr,
        "agent-secret",
        "survey",
        json!({}),
        caps.clone(),
        Some((&state, name)),
    )
    .await;
    let result = &second["result"];
    assert_eq!(result["resultType"], "input_required", "{second}");
    // A question without a key is keyed by method and asking order.
    let asked: Vec<&String> = result["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(asked, ["elicitation/create#2"]);
    // The second state carries the first answer: only the new one is sent back.
    let state = result["requestState"].clone();
    let age = json!({"elicitation/create#2": {"action": "accept", "content": {"age": 36}}});
    let (_, done) = call(
        s.addr,
        "agent-secret",
        "survey",
        json!({}),
        caps.clone(),
        Some((&state, age.clone())),
    )
    .await;
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(done["result"]["structuredContent"]["result"], "Ada is 36");

    // The state is bound to its caller.
    let (status, other) = call(
        s.addr,
        "other-secret",
        "survey",
        json!({}),
        caps.clone(),
        Some((&state, age)),
    )
    .await;
    assert_eq!(
        (status, other["error"]["code"].clone()),
        (400, json!(-32602))
    );

    // A request that did not declare elicitation: -32021, not a question.
    let (status, refused) =
        call(s.addr, "agent-secret", "survey", json!({}), json!({}), None).await;
    assert_eq!(status, 400);
    assert_eq!(refused["error"]["code"], -32021);
    assert_eq!(
        refused["error"]["data"]["requiredCapabilities"],
        json!({"elicitation": {}})
    );
}
