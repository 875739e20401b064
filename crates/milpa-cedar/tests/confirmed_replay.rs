//! A confirmed call's replay is judged on the arguments parked by the first call (the ones
//! that run), not on the token the replay sends.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{caller, outcomes, policy};
use milpa::audit::{AuditOutcome, MemoryAuditSink};
use milpa::{ErrorCode, ToolContext, ToolDefinition, ToolRegistry};
use milpa_cedar::DefaultEffect;
use serde_json::json;

const POLICIES: &str = r#"
@id("refunds-under-100")
forbid(principal, action == Action::"call", resource == Tool::"refund")
when { context.args.amount >= 100 };
"#;

/// `refund(amount)`, confirmed by its caller, counting its runs.
fn confirmed_refund(runs: Arc<AtomicUsize>) -> (ToolRegistry, Arc<MemoryAuditSink>) {
    let sink = Arc::new(MemoryAuditSink::new());
    let mut registry = ToolRegistry::builder()
        .call_policy(policy(POLICIES, DefaultEffect::Allow))
        .audit_sink(sink.clone())
        .build();
    registry
        .register(
            ToolDefinition::builder("refund")
                .input_schema(
                    json!({"type": "object", "properties": {"amount": {"type": "integer"}}}),
                )
                .mutating(true)
                .requires_confirmation(true)
                .sync(move |args: &serde_json::Value, _: &ToolContext| {
                    runs.fetch_add(1, Ordering::SeqCst);
                    args.clone()
                }),
        )
        .unwrap();
    (registry, sink)
}

#[tokio::test]
async fn an_allowed_amount_confirmed_and_replayed_runs_once() {
    let runs = Arc::new(AtomicUsize::new(0));
    let (registry, sink) = confirmed_refund(runs.clone());
    let alice = caller("alice", &[]);
    let first = registry.call("refund", json!({"amount": 50}), &alice).await;
    assert!(first.success, "{first:?}");
    let token = first.data["confirm_token"].as_str().unwrap().to_owned();
    let ran = registry
        .call("refund", json!({"confirm_token": token}), &alice)
        .await;
    assert!(ran.success, "{ran:?}");
    assert_eq!(ran.data, json!({"amount": 50}));
    let again = registry
        .call("refund", json!({"confirm_token": token}), &alice)
        .await;
    assert_eq!(again.code(), Some(&ErrorCode::ValidationError));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(
        outcomes(&sink),
        [
            AuditOutcome::ConfirmationRequested,
            AuditOutcome::Executed,
            AuditOutcome::InvalidConfirmation
        ]
    );
}

#[tokio::test]
async fn a_forbidden_amount_is_denied_at_the_first_call() {
    let runs = Arc::new(AtomicUsize::new(0));
    let (registry, sink) = confirmed_refund(runs.clone());
    let alice = caller("alice", &[]);
    let big = registry
        .call("refund", json!({"amount": 500}), &alice)
        .await;
    assert_eq!(big.code(), Some(&ErrorCode::Forbidden), "{big:?}");
    assert_eq!(
        big.error.as_deref(),
        Some(
            "Denied by policy 'refunds-under-100' for tool 'refund' on channel 'mcp' (principal: alice)."
        )
    );
    assert!(big.data.get("confirm_token").is_none());
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert_eq!(outcomes(&sink), [AuditOutcome::Denied]);
}
