//! By default only a `forbid` denies; with `default = deny` a call no `permit` covers is
//! denied too, and the message says so.

mod common;

use common::{caller, outcomes, policy, registry};
use milpa::ErrorCode;
use milpa::audit::AuditOutcome;
use milpa_cedar::DefaultEffect;
use serde_json::json;

const PERMIT_READS: &str = r#"
@id("reads")
permit(principal, action, resource) when { !resource.mutating };
"#;

#[tokio::test]
async fn by_default_a_call_no_policy_matches_goes_on() {
    let (registry, sink) = registry(policy(PERMIT_READS, DefaultEffect::Allow));
    let alice = caller("alice", &[]);
    let read = registry
        .call("read_file", json!({"path": "/a"}), &alice)
        .await;
    assert!(read.success, "{read:?}");
    // Not covered by any permit, and no forbid: it goes on.
    let refund = registry.call("refund", json!({"amount": 3}), &alice).await;
    assert!(refund.success, "{refund:?}");
    assert_eq!(
        outcomes(&sink),
        [AuditOutcome::Executed, AuditOutcome::Executed]
    );
}

#[tokio::test]
async fn with_default_deny_an_uncovered_call_is_denied() {
    let (registry, sink) = registry(policy(PERMIT_READS, DefaultEffect::Deny));
    let alice = caller("alice", &[]);
    let read = registry
        .call("read_file", json!({"path": "/a"}), &alice)
        .await;
    assert!(read.success, "{read:?}");
    let refund = registry.call("refund", json!({"amount": 3}), &alice).await;
    assert_eq!(refund.code(), Some(&ErrorCode::Forbidden));
    assert_eq!(
        refund.error.as_deref(),
        Some(
            "Denied for tool 'refund' on channel 'mcp' (principal: alice): no Cedar policy permits it (default deny)."
        )
    );
    assert_eq!(
        outcomes(&sink),
        [AuditOutcome::Executed, AuditOutcome::Denied]
    );
}

#[tokio::test]
async fn with_default_deny_a_forbid_still_wins_over_a_permit() {
    let text = r#"
@id("all") permit(principal, action, resource);
@id("no-big") forbid(principal, action, resource == Tool::"refund") when { context.args.amount > 10 };
"#;
    let (registry, _sink) = registry(policy(text, DefaultEffect::Deny));
    let alice = caller("alice", &[]);
    assert!(
        registry
            .call("refund", json!({"amount": 3}), &alice)
            .await
            .success
    );
    let big = registry.call("refund", json!({"amount": 30}), &alice).await;
    assert_eq!(
        big.error.as_deref(),
        Some("Denied by policy 'no-big' for tool 'refund' on channel 'mcp' (principal: alice).")
    );
}

#[tokio::test]
async fn an_empty_policy_set_denies_everything_only_with_default_deny() {
    let (open, _) = registry(policy("", DefaultEffect::Allow));
    assert!(
        open.call("refund", json!({"amount": 3}), &caller("a", &[]))
            .await
            .success
    );
    let (closed, _) = registry(policy("// nothing yet\n", DefaultEffect::Deny));
    let denied = closed
        .call("refund", json!({"amount": 3}), &caller("a", &[]))
        .await;
    assert_eq!(denied.code(), Some(&ErrorCode::Forbidden));
}
