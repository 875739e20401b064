//! `ToolRegistry::decline_confirmation`: a person's "no" to a parked call is a terminal path
//! of the core: the token is revoked, the call audited, and the result carries a real code.

mod support;

use std::sync::Arc;

use milpa::audit::{AuditOutcome, MemoryAuditSink};
use milpa::events::Dispatcher;
use milpa::{ConfirmationRefusal, ErrorCode, ToolContext, ToolRegistry};
use serde_json::json;
use support::{Runs, audited, echo_args, echoing, two_ints};

fn registry(runs: &Runs, dispatcher: Arc<Dispatcher>) -> (ToolRegistry, Arc<MemoryAuditSink>) {
    let (mut registry, sink) = audited(ToolRegistry::builder().dispatcher(dispatcher));
    registry
        .register(echoing(
            echo_args("transfer")
                .input_schema(two_ints())
                .requires_confirmation(true),
            runs,
        ))
        .unwrap();
    (registry, sink)
}

async fn park(registry: &ToolRegistry, ctx: &ToolContext) -> String {
    let first = registry
        .call("transfer", json!({"a": 1, "b": 2}), ctx)
        .await;
    first.confirm_token().expect("a token").to_owned()
}

#[tokio::test]
async fn a_declined_confirmation_is_revoked_and_answered_with_its_code() {
    let runs = Runs::default();
    let (registry, sink) = registry(&runs, Arc::new(Dispatcher::new()));
    let ctx = ToolContext::mcp("r1", Some("alice".into()), ["*"]);
    let token = park(&registry, &ctx).await;
    sink.take();

    let result = registry
        .decline_confirmation("transfer", &token, ConfirmationRefusal::Declined, &ctx)
        .await;
    assert!(!result.success);
    assert_eq!(result.code(), Some(&ErrorCode::ConfirmationDeclined));
    assert_eq!(
        result.error.as_deref(),
        Some("Not done: confirmation of transfer(a=1, b=2) was declined.")
    );
    assert_eq!(result.meta.get("confirmation"), Some(&json!("declined")));
    let runtime = result.meta.runtime().expect("runtime meta is stamped");
    assert_eq!(runtime.tool(), "transfer");
    assert_eq!(runtime.request_id(), "r1");
    let wire = serde_json::to_value(&result).unwrap();
    assert_eq!(wire["meta"]["code"], "CONFIRMATION_DECLINED");

    // The token is gone: its replay is refused and nothing runs.
    let replay = registry
        .call("transfer", json!({"confirm_token": token}), &ctx)
        .await;
    assert_eq!(replay.code(), Some(&ErrorCode::ValidationError));
    assert_eq!(runs.count(), 0);
}

#[tokio::test]
async fn a_cancelled_confirmation_says_so() {
    let runs = Runs::default();
    let (registry, _sink) = registry(&runs, Arc::new(Dispatcher::new()));
    let ctx = ToolContext::cli();
    let token = park(&registry, &ctx).await;
    let result = registry
        .decline_confirmation("transfer", &token, ConfirmationRefusal::Cancelled, &ctx)
        .await;
    assert_eq!(result.code(), Some(&ErrorCode::ConfirmationDeclined));
    assert_eq!(
        result.error.as_deref(),
        Some("Not done: confirmation of transfer(a=1, b=2) was cancelled.")
    );
    assert_eq!(result.meta.get("confirmation"), Some(&json!("cancelled")));
}

#[tokio::test]
async fn someone_elses_token_is_not_revoked_and_the_summary_falls_back_to_the_tool() {
    let runs = Runs::default();
    let (registry, _sink) = registry(&runs, Arc::new(Dispatcher::new()));
    let alice = ToolContext::mcp("r1", Some("alice".into()), ["*"]);
    let mallory = ToolContext::mcp("r2", Some("mallory".into()), ["*"]);
    let token = park(&registry, &alice).await;

    let result = registry
        .decline_confirmation("transfer", &token, ConfirmationRefusal::Declined, &mallory)
        .await;
    assert_eq!(
        result.error.as_deref(),
        Some("Not done: confirmation of transfer was declined.")
    );
    // Alice's token still works.
    let replay = registry
        .call("transfer", json!({"confirm_token": token}), &alice)
        .await;
    assert!(replay.success, "{replay:?}");
    assert_eq!(runs.count(), 1);
}

#[tokio::test]
async fn a_refusal_emits_no_tool_failed() {
    let runs = Runs::default();
    let dispatcher = Arc::new(Dispatcher::new());
    let failed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = failed.clone();
    dispatcher.subscribe("tool.failed", 0, move |_: &milpa::Event<'_>| {
        seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    });
    let (registry, sink) = registry(&runs, dispatcher);
    let ctx = ToolContext::cli();
    let token = park(&registry, &ctx).await;
    registry
        .decline_confirmation("transfer", &token, ConfirmationRefusal::Declined, &ctx)
        .await;
    assert_eq!(failed.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert_eq!(
        sink.records().last().unwrap().outcome,
        AuditOutcome::ConfirmationDeclined
    );
}
