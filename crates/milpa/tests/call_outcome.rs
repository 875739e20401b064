//! The typed call outcome: `invoke` hands back a ticket for a confirmation or an approval,
//! `redeem` replays it, and the legacy `call` renders the same JSON it always did.

mod support;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use milpa::approval::Verdict;
use milpa::audit::{AuditOutcome, MemoryAuditSink};
use milpa::{
    CallOutcome, ConfirmationRefusal, ErrorCode, SentToken, ToolContext, ToolRegistry, ToolResult,
    split_confirm_token,
};
use serde_json::{Value, json};
use support::{Runs, audited, echo_args, echoing};

const INVALID: &str = "Invalid or expired confirmation token";

fn strict() -> Value {
    json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
        "additionalProperties": false
    })
}

fn registry(runs: &Runs) -> (ToolRegistry, Arc<MemoryAuditSink>) {
    let (mut registry, sink) = audited(ToolRegistry::builder());
    registry
        .register(echoing(
            echo_args("transfer")
                .input_schema(strict())
                .mutating(true)
                .requires_confirmation(true),
            runs,
        ))
        .unwrap();
    registry
        .register(echoing(echo_args("plain").input_schema(strict()), runs))
        .unwrap();
    registry
        .register(echoing(
            echo_args("deploy")
                .mutating(true)
                .requires_human_approval(true),
            runs,
        ))
        .unwrap();
    (registry, sink)
}

fn agent() -> ToolContext {
    ToolContext::mcp("r1", Some("agent".into()), ["*"])
}

/// `value` as JSON text with every occurrence of `secret` replaced, so two results that
/// differ only by their token (or approval id) compare equal.
/// `result` as JSON with `secret` (a token or id) and the time the call took masked: two
/// calls compared field by field differ in those only.
fn masked(result: &ToolResult, secret: &str) -> String {
    let text = serde_json::to_string(result).unwrap();
    let text = match text.split_once("\"took_ms\":") {
        Some((before, after)) => {
            let digits = after.bytes().take_while(u8::is_ascii_digit).count();
            format!("{before}\"took_ms\":0{}", &after[digits..])
        }
        None => text,
    };
    text.replace(secret, "<T>")
}

#[tokio::test]
async fn invoke_of_a_confirmed_tool_hands_back_a_ticket_and_runs_nothing() {
    let runs = Runs::default();
    let (registry, sink) = registry(&runs);
    let ctx = agent();
    let before = SystemTime::now();
    let outcome = registry
        .invoke("transfer", json!({"a": 1, "b": 2}), &ctx)
        .await;
    let CallOutcome::NeedsConfirmation(ticket) = outcome else {
        panic!("a confirmation ticket, got {outcome:?}");
    };
    assert_eq!(ticket.tool(), "transfer");
    assert_eq!(ticket.summary(), "transfer(a=1, b=2)");
    assert_eq!(ticket.token().len(), 32);
    assert!(ticket.token().bytes().all(|b| b.is_ascii_hexdigit()));
    let ttl = registry.confirmation_ttl();
    assert!(ticket.expires_at() >= before + ttl - Duration::from_secs(1));
    assert!(ticket.expires_at() <= SystemTime::now() + ttl);
    let runtime = ticket.runtime().expect("the audited call's runtime meta");
    assert_eq!(runtime.tool(), "transfer");
    assert_eq!(runtime.request_id(), "r1");
    assert_eq!(runs.count(), 0);
    let records = sink.take();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].outcome, AuditOutcome::ConfirmationRequested);
}

#[tokio::test]
async fn the_rendered_confirmation_is_the_json_the_legacy_call_returns() {
    let runs = Runs::default();
    let (registry, _sink) = registry(&runs);
    let ctx = agent();
    let legacy = registry
        .call("transfer", json!({"a": 1, "b": 2}), &ctx)
        .await;
    let legacy_token = legacy.confirm_token().unwrap().to_owned();
    let CallOutcome::NeedsConfirmation(ticket) = registry
        .invoke("transfer", json!({"a": 1, "b": 2}), &ctx)
        .await
    else {
        panic!("a confirmation ticket");
    };
    let rendered = ticket.to_result();
    assert_eq!(rendered.confirm_token(), Some(ticket.token()));
    // The data in the original's key order, the summary as message, the meta after the
    // runtime's fields.
    let data = serde_json::to_string(&rendered.data).unwrap();
    assert_eq!(
        data,
        format!(
            r#"{{"requires_confirmation":true,"confirm_token":"{}","action_summary":"transfer(a=1, b=2)","expires_at":"{}"}}"#,
            ticket.token(),
            ticket.expires_at_text()
        )
    );
    let mut legacy_json = masked(&legacy, &legacy_token);
    let mut typed_json = masked(&rendered, ticket.token());
    // The two calls may straddle a second: the expiry is compared on its own.
    let legacy_expiry = legacy.data["expires_at"].as_str().unwrap().to_owned();
    legacy_json = legacy_json.replace(&legacy_expiry, "<E>");
    typed_json = typed_json.replace(&ticket.expires_at_text(), "<E>");
    assert_eq!(typed_json, legacy_json);
    assert_eq!(
        CallOutcome::NeedsConfirmation(ticket.clone()).into_result(),
        rendered
    );
}

#[tokio::test]
async fn redeem_runs_the_parked_arguments_once() {
    let runs = Runs::default();
    let (registry, sink) = registry(&runs);
    let ctx = agent();
    let CallOutcome::NeedsConfirmation(ticket) = registry
        .invoke("transfer", json!({"a": 1, "b": 2}), &ctx)
        .await
    else {
        panic!("a confirmation ticket");
    };
    sink.take();
    let ran = registry.redeem("transfer", ticket.token(), &ctx).await;
    let ran = ran.done().expect("a finished call").clone();
    assert!(ran.success);
    assert_eq!(ran.data, json!({"a": 1, "b": 2}));
    assert_eq!(ran.message, None, "nothing was ignored");
    assert_eq!(runs.count(), 1);
    assert_eq!(sink.take()[0].outcome, AuditOutcome::Executed);

    let again = registry
        .redeem("transfer", ticket.token(), &ctx)
        .await
        .into_result();
    assert_eq!(again.code(), Some(&ErrorCode::ValidationError));
    assert_eq!(again.error.as_deref(), Some(INVALID));
    assert_eq!(runs.count(), 1);
    assert_eq!(sink.take()[0].outcome, AuditOutcome::InvalidConfirmation);
}

#[tokio::test]
async fn redeem_refuses_unknown_and_foreign_tokens_as_the_legacy_replay_does() {
    let runs = Runs::default();
    let (registry, _sink) = registry(&runs);
    let ctx = agent();
    let unknown = registry
        .redeem("transfer", "nope", &ctx)
        .await
        .into_result();
    assert_eq!(unknown.error.as_deref(), Some(INVALID));
    let CallOutcome::NeedsConfirmation(ticket) = registry
        .invoke("transfer", json!({"a": 1, "b": 2}), &ctx)
        .await
    else {
        panic!("a confirmation ticket");
    };
    let someone_else = ToolContext::mcp("r2", Some("mallory".into()), ["*"]);
    let foreign = registry
        .redeem("transfer", ticket.token(), &someone_else)
        .await
        .into_result();
    assert_eq!(foreign.error.as_deref(), Some(INVALID));
    // A tool that confirms nothing ignores a token, as a legacy replay did.
    let plain = registry
        .redeem("plain", ticket.token(), &ctx)
        .await
        .into_result();
    assert_eq!(plain.code(), Some(&ErrorCode::ValidationError));
    assert_eq!(
        plain.error.as_deref(),
        Some("Missing required field: a; Missing required field: b")
    );
    assert_eq!(runs.count(), 0);
    // The ticket was not spent by the foreign attempt.
    let ran = registry
        .redeem("transfer", ticket.token(), &ctx)
        .await
        .into_result();
    assert!(ran.success);
}

#[tokio::test]
async fn invoke_treats_confirm_token_as_an_argument_and_call_takes_it_off() {
    let runs = Runs::default();
    let (registry, _sink) = registry(&runs);
    let ctx = agent();
    let args = json!({"a": 1, "b": 2, "confirm_token": "x"});
    let typed = registry.invoke("plain", args.clone(), &ctx).await;
    let typed = typed.done().expect("a finished call");
    assert_eq!(typed.code(), Some(&ErrorCode::ValidationError), "{typed:?}");
    assert_eq!(runs.count(), 0);
    let legacy = registry.call("plain", args, &ctx).await;
    assert!(legacy.success);
    assert_eq!(legacy.data, json!({"a": 1, "b": 2}));
}

#[tokio::test]
async fn invoke_sent_replays_like_the_legacy_call_with_other_arguments() {
    let runs = Runs::default();
    let (registry, _sink) = registry(&runs);
    let ctx = agent();
    let CallOutcome::NeedsConfirmation(ticket) = registry
        .invoke("transfer", json!({"a": 1, "b": 2}), &ctx)
        .await
    else {
        panic!("a confirmation ticket");
    };
    let sent = SentToken::Token(ticket.token().to_owned());
    let ran = registry
        .invoke_sent("transfer", json!({"a": 5, "b": 6}), sent, &ctx)
        .await
        .into_result();
    assert_eq!(ran.data, json!({"a": 1, "b": 2}));
    assert_eq!(
        ran.message.as_deref(),
        Some("Ran the confirmed arguments; the arguments sent with the token were ignored.")
    );
    let malformed = registry
        .invoke_sent("transfer", json!({}), SentToken::Malformed, &ctx)
        .await
        .into_result();
    assert_eq!(malformed.error.as_deref(), Some(INVALID));
    assert_eq!(runs.count(), 1);
}

#[test]
fn split_confirm_token_takes_the_token_off_object_arguments_only() {
    let mut args = json!({"a": 1, "confirm_token": "t"});
    assert_eq!(split_confirm_token(&mut args), SentToken::Token("t".into()));
    assert_eq!(args, json!({"a": 1}));
    let mut null = json!({"confirm_token": null});
    assert_eq!(split_confirm_token(&mut null), SentToken::None);
    assert_eq!(null, json!({}));
    let mut number = json!({"confirm_token": 7, "b": 2});
    assert_eq!(split_confirm_token(&mut number), SentToken::Malformed);
    assert_eq!(number, json!({"b": 2}));
    let mut none = json!({"a": 1});
    assert_eq!(split_confirm_token(&mut none), SentToken::None);
    assert_eq!(none, json!({"a": 1}));
    let mut list = json!(["confirm_token"]);
    assert_eq!(split_confirm_token(&mut list), SentToken::None);
    assert_eq!(list, json!(["confirm_token"]));
}

#[tokio::test]
async fn a_declined_ticket_is_revoked() {
    let runs = Runs::default();
    let (registry, _sink) = registry(&runs);
    let ctx = agent();
    let CallOutcome::NeedsConfirmation(ticket) = registry
        .invoke("transfer", json!({"a": 1, "b": 2}), &ctx)
        .await
    else {
        panic!("a confirmation ticket");
    };
    let declined = registry
        .decline_ticket(&ticket, ConfirmationRefusal::Declined, &ctx)
        .await;
    assert_eq!(declined.code(), Some(&ErrorCode::ConfirmationDeclined));
    assert_eq!(
        declined.error.as_deref(),
        Some("Not done: confirmation of transfer(a=1, b=2) was declined.")
    );
    let replay = registry
        .redeem("transfer", ticket.token(), &ctx)
        .await
        .into_result();
    assert_eq!(replay.error.as_deref(), Some(INVALID));
    assert_eq!(runs.count(), 0);
}

#[tokio::test]
async fn an_approval_ticket_carries_its_fields_and_renders_the_pending_result() {
    let runs = Runs::default();
    let (registry, sink) = registry(&runs);
    let ctx = agent();
    let legacy = registry.call("deploy", json!({"env": "prod"}), &ctx).await;
    let legacy_id = legacy.data["approval_id"].as_str().unwrap().to_owned();
    let CallOutcome::AwaitingApproval(ticket) = registry
        .invoke("deploy", json!({"env": "prod"}), &ctx)
        .await
    else {
        panic!("an approval ticket");
    };
    assert_eq!(ticket.tool(), "deploy");
    assert_eq!(ticket.summary(), "deploy(env=prod)");
    assert_ne!(ticket.id(), legacy_id);
    assert!(ticket.url().is_none());
    let expires = ticket.expires_at().expect("the queue's TTL");
    assert!(expires > SystemTime::now());
    assert_eq!(sink.take()[1].outcome, AuditOutcome::ApprovalPending);

    let rendered = ticket.to_result();
    assert_eq!(rendered.code(), Some(&ErrorCode::ApprovalPending));
    let mut legacy_json = masked(&legacy, &legacy_id);
    let mut typed_json = masked(&rendered, ticket.id());
    let legacy_expiry = legacy.data["expires_at"].as_str().unwrap().to_owned();
    legacy_json = legacy_json.replace(&legacy_expiry, "<E>");
    typed_json = typed_json.replace(&ticket.expires_at_text(), "<E>");
    assert_eq!(typed_json, legacy_json);

    // A page linked by the transport comes last in the data.
    let linked = ticket.clone().with_url("https://h/approvals/x");
    assert_eq!(linked.url(), Some("https://h/approvals/x"));
    let data = serde_json::to_string(&linked.to_result().data).unwrap();
    assert!(
        data.ends_with(r#","approve_url":"https://h/approvals/x"}"#),
        "{data}"
    );
}

#[tokio::test]
async fn redeeming_an_approval_waits_runs_once_after_a_grant_and_is_forbidden_after_a_reject() {
    let runs = Runs::default();
    let (registry, _sink) = registry(&runs);
    let ctx = agent();
    let alice = ToolContext::web("alice", ["approvals:grant"]);
    let CallOutcome::AwaitingApproval(ticket) = registry
        .invoke("deploy", json!({"env": "prod"}), &ctx)
        .await
    else {
        panic!("an approval ticket");
    };
    let CallOutcome::AwaitingApproval(still) = registry.redeem("deploy", ticket.id(), &ctx).await
    else {
        panic!("still waiting");
    };
    assert_eq!(still.id(), ticket.id());
    assert_eq!(runs.count(), 0);
    registry
        .decide_approval(ticket.id(), Verdict::Grant, None, &alice)
        .await
        .unwrap();
    let ran = registry
        .redeem("deploy", ticket.id(), &ctx)
        .await
        .into_result();
    assert_eq!(ran.data, json!({"env": "prod"}));
    assert_eq!(runs.count(), 1);
    let again = registry
        .redeem("deploy", ticket.id(), &ctx)
        .await
        .into_result();
    assert_eq!(again.error.as_deref(), Some(INVALID));

    let CallOutcome::AwaitingApproval(rejected) =
        registry.invoke("deploy", json!({"env": "dev"}), &ctx).await
    else {
        panic!("an approval ticket");
    };
    registry
        .decide_approval(rejected.id(), Verdict::Reject, Some("freeze"), &alice)
        .await
        .unwrap();
    let forbidden = registry
        .redeem("deploy", rejected.id(), &ctx)
        .await
        .into_result();
    assert_eq!(forbidden.code(), Some(&ErrorCode::Forbidden));
    assert_eq!(runs.count(), 1);
}
