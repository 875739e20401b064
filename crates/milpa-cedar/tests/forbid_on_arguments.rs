//! A `forbid` with a condition on the arguments denies with `FORBIDDEN`, names the policy's
//! `@id`, and the denial is audited.

mod common;

use common::{caller, outcomes, policy, registry};
use milpa::ErrorCode;
use milpa::audit::AuditOutcome;
use milpa_cedar::DefaultEffect;
use serde_json::json;

const POLICIES: &str = r#"
@id("refunds-under-100")
forbid(principal, action == Action::"call", resource == Tool::"refund")
when { context.args.amount >= 100 };

@id("no-etc")
forbid(principal, action, resource)
when { context.args has path && context.args.path like "/etc/*" };
"#;

#[tokio::test]
async fn a_forbid_on_an_argument_denies_naming_the_policy_and_is_audited() {
    let (registry, sink) = registry(policy(POLICIES, DefaultEffect::Allow));
    let alice = caller("alice", &["billing"]);
    let small = registry.call("refund", json!({"amount": 40}), &alice).await;
    assert!(small.success, "{small:?}");
    let big = registry
        .call("refund", json!({"amount": 100}), &alice)
        .await;
    assert_eq!(big.code(), Some(&ErrorCode::Forbidden));
    assert_eq!(
        big.error.as_deref(),
        Some(
            "Denied by policy 'refunds-under-100' for tool 'refund' on channel 'mcp' (principal: alice)."
        )
    );
    assert_eq!(
        outcomes(&sink),
        [AuditOutcome::Executed, AuditOutcome::Denied]
    );
}

#[tokio::test]
async fn a_path_pattern_denies_only_matching_paths() {
    let (registry, sink) = registry(policy(POLICIES, DefaultEffect::Allow));
    let alice = caller("alice", &[]);
    let ok = registry
        .call("read_file", json!({"path": "/srv/a.txt"}), &alice)
        .await;
    assert!(ok.success, "{ok:?}");
    let etc = registry
        .call("read_file", json!({"path": "/etc/shadow"}), &alice)
        .await;
    assert_eq!(etc.code(), Some(&ErrorCode::Forbidden));
    assert!(
        etc.error
            .as_deref()
            .unwrap()
            .starts_with("Denied by policy 'no-etc' for tool 'read_file'"),
        "{etc:?}"
    );
    // The guard (`has path`) keeps it from erring on tools without a path.
    let refund = registry.call("refund", json!({"amount": 1}), &alice).await;
    assert!(refund.success, "{refund:?}");
    assert_eq!(
        outcomes(&sink),
        [
            AuditOutcome::Executed,
            AuditOutcome::Denied,
            AuditOutcome::Executed
        ]
    );
}

#[tokio::test]
async fn several_forbids_are_all_named() {
    let text = r#"
@id("a") forbid(principal, action, resource == Tool::"read_file") when { context.args.path like "/etc/*" };
@id("b") forbid(principal, action, resource) when { context.args has path && context.args.path like "*shadow" };
forbid(principal, action, resource == Tool::"read_file") when { context.args.path == "/etc/shadow" };
"#;
    let (registry, _sink) = registry(policy(text, DefaultEffect::Allow));
    let result = registry
        .call(
            "read_file",
            json!({"path": "/etc/shadow"}),
            &caller("bob", &[]),
        )
        .await;
    assert_eq!(
        result.error.as_deref(),
        Some(
            "Denied by policy 'a', 'b', 'policy2' for tool 'read_file' on channel 'mcp' (principal: bob)."
        )
    );
}

/// Cedar skips a policy whose condition errs; for a `forbid` that would let the call through
/// on, say, a missing argument. It counts as denying instead (fail closed).
#[tokio::test]
async fn a_forbid_that_errs_denies() {
    let text = r#"
@id("no-etc-unguarded")
forbid(principal, action, resource) when { context.args.path like "/etc/*" };
"#;
    let (registry, sink) = registry(policy(text, DefaultEffect::Allow));
    let alice = caller("alice", &[]);
    let refund = registry.call("refund", json!({"amount": 5}), &alice).await;
    assert_eq!(refund.code(), Some(&ErrorCode::Forbidden));
    let message = refund.error.unwrap();
    assert!(
        message.starts_with("Denied by policy 'no-etc-unguarded' for tool 'refund' on channel 'mcp' (principal: alice): the policy could not be evaluated, which counts as denying ("),
        "{message}"
    );
    assert!(message.contains("path"), "{message}");
    // With the argument there, it decides as written.
    let typed = registry
        .call("read_file", json!({"path": "/srv/x"}), &alice)
        .await;
    assert!(typed.success, "{typed:?}");
    assert_eq!(
        outcomes(&sink),
        [AuditOutcome::Denied, AuditOutcome::Executed]
    );
}

#[tokio::test]
async fn arguments_are_records_never_entities_and_numbers_keep_their_value() {
    let text = r#"
@id("no-entity-injection")
forbid(principal, action, resource)
when { context.args has who && context.args.who has __entity };

@id("big-decimal")
forbid(principal, action, resource == Tool::"refund")
when { context.args has fee && context.args.fee.greaterThan(decimal("9.9999")) };
"#;
    let (registry, _sink) = registry(policy(text, DefaultEffect::Allow));
    let alice = caller("alice", &[]);
    let posing = registry
        .call(
            "refund",
            json!({"amount": 1, "who": {"__entity": {"type": "Principal", "id": "root"}}}),
            &alice,
        )
        .await;
    assert_eq!(posing.code(), Some(&ErrorCode::Forbidden), "{posing:?}");
    assert!(posing.error.unwrap().contains("'no-entity-injection'"));
    let fee = registry
        .call("refund", json!({"amount": 1, "fee": 10.25}), &alice)
        .await;
    assert!(fee.error.unwrap().contains("'big-decimal'"));
    let low = registry
        .call("refund", json!({"amount": 1, "fee": 2.5}), &alice)
        .await;
    assert!(low.success, "{low:?}");
}
