//! Confirmation over MCP: clients that declared elicitation are asked through
//! `elicitation/create`; accept runs the stored call, decline or cancel blocks it (and the
//! token is revoked); others get the token round trip; a server option turns elicitation off.

mod common;

use common::{StdioClient, fixture};
use std::sync::Arc;

use milpa::ErrorCode;
use milpa::audit::AuditOutcome;
use milpa::confirm::InMemoryConfirmationStore;
use milpa_mcp::ServerOptions;
use serde_json::{Value, json};

async fn call_and_answer(client: &mut StdioClient, id: i64, answer: Value) -> (Value, Value) {
    client
        .send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "delete_note", "arguments": {"id": id}}}))
        .await;
    let request = client
        .wait_for(|m| m["method"] == "elicitation/create")
        .await;
    client
        .send(json!({"jsonrpc": "2.0", "id": request["id"], "result": answer}))
        .await;
    let reply = client.response(&json!(id)).await;
    (request, reply["result"].clone())
}

#[tokio::test]
async fn accept_runs_the_call() {
    let f = fixture();
    let mut client = StdioClient::start(f.registry, ServerOptions::default());
    client.initialize(json!({"elicitation": {}})).await;
    let (request, result) = call_and_answer(
        &mut client,
        4,
        json!({"action": "accept", "content": {"confirm": true}}),
    )
    .await;
    let params = &request["params"];
    assert!(
        params["message"]
            .as_str()
            .unwrap()
            .contains("delete_note(id=4)")
    );
    assert_eq!(params["mode"], "form");
    assert_eq!(
        params["requestedSchema"]["properties"]["confirm"]["type"],
        "boolean"
    );
    assert_eq!(params["requestedSchema"]["required"], json!(["confirm"]));
    assert_eq!(result["isError"], false);
    assert_eq!(result["structuredContent"], json!({"deleted": 4}));
    let outcomes: Vec<_> = f.audit.records().iter().map(|r| r.outcome).collect();
    assert_eq!(
        outcomes,
        [AuditOutcome::ConfirmationRequested, AuditOutcome::Executed]
    );
}

#[tokio::test]
async fn decline_and_cancel_block_the_call() {
    let f = fixture();
    let mut client = StdioClient::start(f.registry, ServerOptions::default());
    client
        .initialize(json!({"elicitation": {"form": {}}}))
        .await;
    let (_, declined) = call_and_answer(&mut client, 5, json!({"action": "decline"})).await;
    assert_eq!(declined["isError"], true);
    assert_eq!(declined["_meta"]["milpa"]["code"], "CONFIRMATION_DECLINED");
    assert_eq!(declined["_meta"]["milpa"]["confirmation"], "declined");
    assert_eq!(declined["_meta"]["milpa"]["tool"], "delete_note");
    assert!(
        declined["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("declined")
    );

    let (_, cancelled) = call_and_answer(&mut client, 6, json!({"action": "cancel"})).await;
    assert_eq!(cancelled["isError"], true);
    assert_eq!(cancelled["_meta"]["milpa"]["confirmation"], "cancelled");

    let (_, unticked) = call_and_answer(
        &mut client,
        7,
        json!({"action": "accept", "content": {"confirm": false}}),
    )
    .await;
    assert_eq!(unticked["isError"], true);
    assert_eq!(unticked["_meta"]["milpa"]["confirmation"], "declined");

    // Nothing ran; each refusal left exactly one record of its own, after its request,
    // with the real code and the declined call's arguments.
    let records = f.audit.records();
    let trail: Vec<_> = records
        .iter()
        .map(|r| (r.outcome, r.code.clone(), r.args.clone()))
        .collect();
    let requested = |id: i64| (AuditOutcome::ConfirmationRequested, None, json!({"id": id}));
    let declined = |id: i64| {
        (
            AuditOutcome::ConfirmationDeclined,
            Some(ErrorCode::ConfirmationDeclined),
            json!({"id": id}),
        )
    };
    assert_eq!(
        trail,
        [
            requested(5),
            declined(5),
            requested(6),
            declined(6),
            requested(7),
            declined(7)
        ]
    );
    assert!(records.iter().all(|r| r.tool == "delete_note"));
    assert!(records.iter().skip(1).step_by(2).all(|r| !r.success));
    assert!(records[3].error.as_deref().unwrap().contains("cancelled"));
    assert!(records[1].error.as_deref().unwrap().contains("declined"));
}

#[tokio::test]
async fn a_declined_token_is_revoked() {
    let store = Arc::new(InMemoryConfirmationStore::new());
    let f = common::fixture_with(false, |b| b.confirmation_store(store.clone()));
    let mut client = StdioClient::start(f.registry.clone(), ServerOptions::default());
    client.initialize(json!({"elicitation": {}})).await;
    client
        .send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "delete_note", "arguments": {"id": 1}}}))
        .await;
    let request = client
        .wait_for(|m| m["method"] == "elicitation/create")
        .await;
    assert_eq!(
        store.len(),
        1,
        "a token is pending while the client is asked"
    );
    client
        .send(json!({"jsonrpc": "2.0", "id": request["id"], "result": {"action": "decline"}}))
        .await;
    let reply = client.response(&json!(1)).await;
    assert_eq!(reply["result"]["isError"], true);
    assert_eq!(store.len(), 0, "the declined token is gone");
}

#[tokio::test]
async fn clients_without_elicitation_get_the_token_round_trip() {
    let mut client = StdioClient::start(fixture().registry, ServerOptions::default());
    client.initialize(json!({"elicitation": {"url": {}}})).await; // URL mode only: no form.
    let r = client.call("delete_note", json!({"id": 2})).await;
    assert!(
        client
            .backlog
            .iter()
            .all(|m| m["method"] != "elicitation/create")
    );
    let token = r["structuredContent"]["confirm_token"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(r["content"][0]["text"].as_str().unwrap().contains(&token));
    let done = client
        .call("delete_note", json!({"confirm_token": token}))
        .await;
    assert_eq!(done["structuredContent"], json!({"deleted": 2}));
}

#[tokio::test]
async fn the_option_turns_elicitation_confirmation_off() {
    let mut options = ServerOptions::default();
    options.elicitation_confirmation = false;
    let mut client = StdioClient::start(fixture().registry, options);
    client.initialize(json!({"elicitation": {}})).await;
    let r = client.call("delete_note", json!({"id": 2})).await;
    assert!(r["structuredContent"]["confirm_token"].is_string());
    assert!(
        client
            .backlog
            .iter()
            .all(|m| m["method"] != "elicitation/create")
    );
}

#[tokio::test]
async fn an_elicitation_error_falls_back_to_the_token() {
    let mut client = StdioClient::start(fixture().registry, ServerOptions::default());
    client.initialize(json!({"elicitation": {}})).await;
    client
        .send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "delete_note", "arguments": {"id": 3}}}))
        .await;
    let request = client
        .wait_for(|m| m["method"] == "elicitation/create")
        .await;
    client
        .send(json!({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": "no UI"}}))
        .await;
    let reply = client.response(&json!(3)).await;
    assert!(reply["result"]["structuredContent"]["confirm_token"].is_string());
}

#[tokio::test]
async fn the_elicitation_message_never_shows_a_secret_argument() {
    let mut registry = milpa::ToolRegistry::new();
    registry
        .register(
            milpa::ToolDefinition::builder("rotate_password")
                .description("Sets a new password")
                .mutating(true)
                .requires_confirmation(true)
                .sync(|args: &Value, _ctx: &milpa::ToolContext| json!({"user": args["user"]})),
        )
        .unwrap();
    let mut client = StdioClient::start(Arc::new(registry), ServerOptions::default());
    client.initialize(json!({"elicitation": {}})).await;
    client
        .send(json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
            "params": {"name": "rotate_password",
                       "arguments": {"user": "ann", "new_password": "hunter22"}}}))
        .await;
    let request = client
        .wait_for(|m| m["method"] == "elicitation/create")
        .await;
    let message = request["params"]["message"].as_str().unwrap();
    assert!(
        message.contains("rotate_password(user=ann, new_password=[REDACTED])"),
        "{message}"
    );
    assert!(!request.to_string().contains("hunter22"), "{request}");
    client
        .send(json!({"jsonrpc": "2.0", "id": request["id"],
            "result": {"action": "accept", "content": {"confirm": true}}}))
        .await;
    let reply = client.response(&json!(9)).await;
    assert_eq!(reply["result"]["isError"], false, "{reply}");
}
