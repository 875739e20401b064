//! Sampling, elicitation and roots an upstream asks for during a forwarded call: relayed to the
//! MCP client that made the call when it declared the capability, declined otherwise. The
//! upstream is the `asking_server` example (over stdio and over Streamable HTTP, spoken to
//! in 2026-07-28, where it asks through `input_required` results, and in 2025-11-25, where
//! it sends requests), our server is milpa-mcp's, and the client is this test speaking
//! JSON-RPC to it.
//!
//! The revisions differ in one thing a user sees: in 2025-11-25 a refusal (the client's
//! error, a capability it did not declare) is the answer to the upstream's request, which
//! its tool can handle; 2026-07-28 has no way to answer an input with an error, so the
//! forwarded call fails with it.

mod common;

use common::{Client, Via};
use milpa_gateway::ProtocolChoice;
use serde_json::{Value, json};

/// The `asking_server` upstream over `via`, speaking `protocol`, and a client of ours that
/// declared `capabilities`.
async fn connect(via: Via, protocol: ProtocolChoice, capabilities: Value) -> Client {
    let upstream = common::start_example_speaking("asking_server", "as", via, protocol).await;
    Client::connect_to(upstream, capabilities).await
}

/// What the client reads when the upstream's `method` was refused with `message` and
/// `code`: the upstream tool's own error (sessions), or the forwarded call's (2026-07-28).
fn refused(protocol: ProtocolChoice, method: &str, message: &str, code: i64) -> String {
    match protocol {
        ProtocolChoice::Sessions => format!("{method} failed: {message} (code {code})"),
        _ => format!("Upstream `as` refused the call: {message}"),
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

async fn sampling_is_relayed_both_ways(via: Via, protocol: ProtocolChoice) {
    let mut client = connect(via, protocol, json!({"sampling": {}})).await;
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
        refused(protocol, "sampling", "the user rejected sampling", -1),
        "{via:?}"
    );
}

async fn elicitation_is_relayed_both_ways(via: Via, protocol: ProtocolChoice) {
    let mut client = connect(via, protocol, json!({"elicitation": {}})).await;
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
async fn a_client_without_the_capability_is_not_asked(via: Via, protocol: ProtocolChoice) {
    let mut client = connect(via, protocol, json!({})).await;
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
        refused(
            protocol,
            "sampling",
            "the client did not declare sampling",
            -32601
        ),
        "{via:?}"
    );

    // Sampling only: an elicitation is still declined.
    let mut client = connect(via, protocol, json!({"sampling": {}})).await;
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
    sampling_is_relayed_both_ways(Via::Stdio, ProtocolChoice::Discover).await;
}

#[tokio::test]
async fn stdio_sampling_is_relayed_to_the_client_and_its_answer_back_over_sessions() {
    sampling_is_relayed_both_ways(Via::Stdio, ProtocolChoice::Sessions).await;
}

#[tokio::test]
async fn http_sampling_is_relayed_to_the_client_and_its_answer_back() {
    sampling_is_relayed_both_ways(Via::Http, ProtocolChoice::Discover).await;
}

#[tokio::test]
async fn http_sampling_is_relayed_to_the_client_and_its_answer_back_over_sessions() {
    sampling_is_relayed_both_ways(Via::Http, ProtocolChoice::Sessions).await;
}

#[tokio::test]
async fn stdio_elicitation_is_relayed_to_the_client_and_its_answer_back() {
    elicitation_is_relayed_both_ways(Via::Stdio, ProtocolChoice::Discover).await;
}

#[tokio::test]
async fn stdio_elicitation_is_relayed_to_the_client_and_its_answer_back_over_sessions() {
    elicitation_is_relayed_both_ways(Via::Stdio, ProtocolChoice::Sessions).await;
}

#[tokio::test]
async fn http_elicitation_is_relayed_to_the_client_and_its_answer_back() {
    elicitation_is_relayed_both_ways(Via::Http, ProtocolChoice::Discover).await;
}

#[tokio::test]
async fn http_elicitation_is_relayed_to_the_client_and_its_answer_back_over_sessions() {
    elicitation_is_relayed_both_ways(Via::Http, ProtocolChoice::Sessions).await;
}

#[tokio::test]
async fn stdio_requests_a_client_did_not_declare_are_declined() {
    a_client_without_the_capability_is_not_asked(Via::Stdio, ProtocolChoice::Discover).await;
}

#[tokio::test]
async fn stdio_requests_a_client_did_not_declare_are_declined_over_sessions() {
    a_client_without_the_capability_is_not_asked(Via::Stdio, ProtocolChoice::Sessions).await;
}

#[tokio::test]
async fn http_requests_a_client_did_not_declare_are_declined() {
    a_client_without_the_capability_is_not_asked(Via::Http, ProtocolChoice::Discover).await;
}

#[tokio::test]
async fn http_requests_a_client_did_not_declare_are_declined_over_sessions() {
    a_client_without_the_capability_is_not_asked(Via::Http, ProtocolChoice::Sessions).await;
}

async fn roots_are_relayed_to_the_caller_that_has_them(via: Via, protocol: ProtocolChoice) {
    let mut client = connect(via, protocol, json!({"roots": {}})).await;
    client.call(2, "as__list_roots", json!({})).await;
    let asked = client.recv().await;
    assert_eq!(asked["method"], "roots/list", "{via:?}: {asked}");
    let roots = json!({"roots": [{"uri": "file:///home/ann/project", "name": "project"}]});
    client
        .send(json!({"jsonrpc": "2.0", "id": asked["id"], "result": roots}))
        .await;
    let response = client.recv().await;
    assert_eq!(response["id"], 2);
    assert_eq!(structured(&response), &roots, "{via:?}");

    // A client without roots is not asked; the upstream hears why.
    let mut client = connect(via, protocol, json!({})).await;
    client.call(2, "as__list_roots", json!({})).await;
    let response = client.recv().await;
    assert_eq!(
        response["id"], 2,
        "{via:?}: no request reached the client: {response}"
    );
    assert_eq!(
        error_text(&response),
        refused(
            protocol,
            "roots",
            "the client did not declare roots",
            -32601
        ),
        "{via:?}"
    );
}

#[tokio::test]
async fn roots_over_stdio() {
    roots_are_relayed_to_the_caller_that_has_them(Via::Stdio, ProtocolChoice::Discover).await;
}

#[tokio::test]
async fn roots_over_stdio_over_sessions() {
    roots_are_relayed_to_the_caller_that_has_them(Via::Stdio, ProtocolChoice::Sessions).await;
}

#[tokio::test]
async fn roots_over_http() {
    roots_are_relayed_to_the_caller_that_has_them(Via::Http, ProtocolChoice::Discover).await;
}

#[tokio::test]
async fn roots_over_http_over_sessions() {
    roots_are_relayed_to_the_caller_that_has_them(Via::Http, ProtocolChoice::Sessions).await;
}

/// A stdio upstream's URL-mode elicitation (2025-11-25 and later) reaches
/// a client that declared it (and its answer goes back); a client that declared only form
/// mode is not asked, and the upstream's tool hears a decline.
#[tokio::test]
async fn url_elicitation_from_a_stdio_upstream_is_relayed() {
    let upstream = common::start_example("catalog_server", "cat", Via::Stdio).await;
    let mut client =
        Client::connect_speaking(upstream, json!({"elicitation": {"url": {}}}), "2025-11-25").await;
    client
        .call(
            2,
            "cat__open_page",
            json!({"url": "https://id.example.com/login"}),
        )
        .await;
    let asked = client.recv().await;
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    assert_eq!(asked["params"]["mode"], "url", "{asked}");
    assert_eq!(
        asked["params"]["url"], "https://id.example.com/login",
        "{asked}"
    );
    client
        .send(json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept"}}))
        .await;
    let response = client.recv().await;
    assert_eq!(structured(&response), &json!({"action": "accept"}));

    let upstream = common::start_example("catalog_server", "cat", Via::Stdio).await;
    let mut client =
        Client::connect_speaking(upstream, json!({"elicitation": {"form": {}}}), "2025-11-25")
            .await;
    client
        .call(
            2,
            "cat__open_page",
            json!({"url": "https://id.example.com/login"}),
        )
        .await;
    let response = client.recv().await;
    assert_eq!(
        response["id"], 2,
        "no request reached the client: {response}"
    );
    assert_eq!(structured(&response), &json!({"action": "decline"}));
}
