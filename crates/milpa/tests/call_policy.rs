//! A call policy judges the whole call, arguments included, last in the authorize stage.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use milpa::audit::AuditOutcome;
use milpa::inspect::InvocationPlan;
use milpa::policy::{
    CallPolicy, PolicyDecision, PolicyInput, PolicyRule, RuleEffect, StaticRule, StaticRuleProvider,
};
use milpa::{Clamp, Deferred, ErrorCode, StepKind, ToolContext, ToolDefinition, ToolRegistry};
use serde_json::json;
use support::{Runs, audited, echo_args, echoing};

/// Refunds of 100 or more are denied; counts what it was asked.
#[derive(Default)]
struct RefundLimit {
    asked: AtomicUsize,
}

impl CallPolicy for RefundLimit {
    fn evaluate<'a>(&'a self, input: PolicyInput<'a>) -> Deferred<'a, PolicyDecision> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let amount = input.args["amount"].as_i64().unwrap_or(0);
        Deferred::ready(if input.tool.name() == "refund" && amount >= 100 {
            PolicyDecision::Deny(format!(
                "Denied by policy 'refund-limit' for tool 'refund' on channel '{}': amount {amount} is not under 100.",
                input.ctx.channel()
            ))
        } else {
            PolicyDecision::Continue
        })
    }

    fn describe(&self, tool: &ToolDefinition) -> String {
        format!("refund-limit (may apply: {})", tool.name() == "refund")
    }
}

fn registry(
    policy: Arc<RefundLimit>,
    runs: &Runs,
) -> (ToolRegistry, Arc<milpa::audit::MemoryAuditSink>) {
    let rules = StaticRuleProvider::new(vec![StaticRule::new(
        "refund",
        PolicyRule::new(RuleEffect::Allow).with_id(7),
    )]);
    let (mut registry, sink) = audited(
        ToolRegistry::builder()
            .rule_provider(Arc::new(rules))
            .call_policy(policy),
    );
    registry
        .register(echoing(
            echo_args("refund")
                .input_schema(
                    json!({"type": "object", "properties": {"amount": {"type": "integer"}}}),
                )
                .scopes(["billing:refund"])
                .clamp("amount", Clamp::range(0, 150)),
            runs,
        ))
        .unwrap();
    (registry, sink)
}

fn caller() -> ToolContext {
    ToolContext::mcp("r1", Some("agent".into()), ["billing:refund"])
}

#[tokio::test]
async fn a_denial_on_the_arguments_is_forbidden_and_audited() {
    let runs = Runs::default();
    let policy = Arc::new(RefundLimit::default());
    let (registry, sink) = registry(policy.clone(), &runs);
    let small = registry
        .call("refund", json!({"amount": 40}), &caller())
        .await;
    assert!(small.success, "{small:?}");
    let big = registry
        .call("refund", json!({"amount": 120}), &caller())
        .await;
    assert_eq!(big.code(), Some(&ErrorCode::Forbidden));
    assert_eq!(
        big.error.as_deref(),
        Some(
            "Denied by policy 'refund-limit' for tool 'refund' on channel 'mcp': amount 120 is not under 100."
        )
    );
    assert_eq!(runs.count(), 1);
    let outcomes: Vec<AuditOutcome> = sink.take().into_iter().map(|r| r.outcome).collect();
    assert_eq!(outcomes, [AuditOutcome::Executed, AuditOutcome::Denied]);
}

#[tokio::test]
async fn it_sees_the_clamped_arguments_and_wins_over_a_rule_that_allows() {
    let runs = Runs::default();
    let policy = Arc::new(RefundLimit::default());
    let (registry, _sink) = registry(policy.clone(), &runs);
    // Clamped from 10 000 to 150 before the policy looks: still denied, and the message
    // names what would have run.
    let result = registry
        .call("refund", json!({"amount": 10000}), &caller())
        .await;
    assert!(
        result.error.as_deref().unwrap().contains("amount 150"),
        "{result:?}"
    );
    assert_eq!(runs.count(), 0);
}

#[tokio::test]
async fn it_is_asked_only_about_calls_the_rest_of_the_gate_allowed() {
    let runs = Runs::default();
    let policy = Arc::new(RefundLimit::default());
    let (registry, _sink) = registry(policy.clone(), &runs);
    let unscoped = ToolContext::mcp("r2", Some("intern".into()), ["billing:read"]);
    let refused = registry
        .call("refund", json!({"amount": 5}), &unscoped)
        .await;
    assert_eq!(refused.code(), Some(&ErrorCode::Forbidden));
    let missing = registry.call("nope", json!({}), &caller()).await;
    assert_eq!(missing.code(), Some(&ErrorCode::ToolNotFound));
    assert_eq!(policy.asked.load(Ordering::SeqCst), 0);
    registry
        .call("refund", json!({"amount": 5}), &caller())
        .await;
    assert_eq!(policy.asked.load(Ordering::SeqCst), 1);
}

#[test]
fn inspect_names_the_call_policy() {
    let runs = Runs::default();
    let (registry, _sink) = registry(Arc::new(RefundLimit::default()), &runs);
    let plan = InvocationPlan::build(&registry, "refund", &caller()).unwrap();
    let source = &plan.step(StepKind::Authorize).source;
    assert!(
        source.contains("call policy (checked last, sees the arguments, can only deny): refund-limit (may apply: true)"),
        "{source}"
    );
    let mut bare = ToolRegistry::new();
    bare.register(ToolDefinition::builder("x").sync(|_, _| json!(1)))
        .unwrap();
    let plan = InvocationPlan::build(&bare, "x", &ToolContext::cli()).unwrap();
    assert!(
        plan.step(StepKind::Authorize)
            .source
            .contains("call policy: none")
    );
}

/// Denies `amount` at or over a limit that a test can move, and keeps every argument
/// object it was asked about.
struct MovingLimit {
    limit: std::sync::atomic::AtomicI64,
    seen: std::sync::Mutex<Vec<serde_json::Value>>,
}

impl MovingLimit {
    fn new(limit: i64) -> Arc<Self> {
        Arc::new(MovingLimit {
            limit: std::sync::atomic::AtomicI64::new(limit),
            seen: std::sync::Mutex::new(Vec::new()),
        })
    }

    fn seen(&self) -> Vec<serde_json::Value> {
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

impl CallPolicy for MovingLimit {
    fn evaluate<'a>(&'a self, input: PolicyInput<'a>) -> Deferred<'a, PolicyDecision> {
        self.seen.lock().unwrap().push(input.args.clone());
        let amount = input.args["amount"].as_i64().unwrap_or(0);
        Deferred::ready(if amount >= self.limit.load(Ordering::SeqCst) {
            PolicyDecision::Deny(format!("amount {amount} is over the limit"))
        } else {
            PolicyDecision::Continue
        })
    }

    fn describe(&self, _tool: &ToolDefinition) -> String {
        "moving-limit".to_owned()
    }
}

fn gated(
    policy: Arc<MovingLimit>,
    runs: &Runs,
) -> (ToolRegistry, Arc<milpa::audit::MemoryAuditSink>) {
    let (mut registry, sink) = audited(ToolRegistry::builder().call_policy(policy));
    let schema = json!({"type": "object", "properties": {"amount": {"type": "integer"}}});
    registry
        .register(echoing(
            echo_args("refund")
                .input_schema(schema.clone())
                .requires_confirmation(true),
            runs,
        ))
        .unwrap();
    registry
        .register(echoing(
            echo_args("payout")
                .input_schema(schema)
                .mutating(true)
                .requires_human_approval(true),
            runs,
        ))
        .unwrap();
    (registry, sink)
}

#[tokio::test]
async fn a_confirmation_replay_is_judged_on_the_parked_arguments() {
    let runs = Runs::default();
    let policy = MovingLimit::new(100);
    let (registry, sink) = gated(policy.clone(), &runs);
    let first = registry
        .call("refund", json!({"amount": 50}), &caller())
        .await;
    let token = first.data["confirm_token"].as_str().unwrap().to_owned();
    assert_eq!(policy.seen(), [json!({"amount": 50})]);

    // The policy now forbids what was parked: the replay is denied on those arguments, and
    // the token is not spent by the denied call.
    policy.limit.store(10, Ordering::SeqCst);
    let denied = registry
        .call("refund", json!({"confirm_token": token}), &caller())
        .await;
    assert_eq!(denied.code(), Some(&ErrorCode::Forbidden), "{denied:?}");
    assert_eq!(denied.error.as_deref(), Some("amount 50 is over the limit"));
    assert_eq!(policy.seen(), [json!({"amount": 50})]);
    assert_eq!(runs.count(), 0);

    policy.limit.store(100, Ordering::SeqCst);
    let ran = registry
        .call("refund", json!({"confirm_token": token}), &caller())
        .await;
    assert!(ran.success, "{ran:?}");
    assert_eq!(ran.data, json!({"amount": 50}));
    assert_eq!(policy.seen(), [json!({"amount": 50})]);
    assert_eq!(runs.count(), 1);
    let again = registry
        .call("refund", json!({"confirm_token": token}), &caller())
        .await;
    assert_eq!(again.code(), Some(&ErrorCode::ValidationError));
    assert_eq!(runs.count(), 1);
    let outcomes: Vec<AuditOutcome> = sink.take().into_iter().map(|r| r.outcome).collect();
    assert_eq!(
        outcomes,
        [
            AuditOutcome::ConfirmationRequested,
            AuditOutcome::Denied,
            AuditOutcome::Executed,
            AuditOutcome::InvalidConfirmation
        ]
    );
}

#[tokio::test]
async fn an_approval_replay_is_judged_on_the_parked_arguments() {
    let runs = Runs::default();
    let policy = MovingLimit::new(100);
    let (registry, _sink) = gated(policy.clone(), &runs);
    let agent = caller();
    let parked = registry.call("payout", json!({"amount": 60}), &agent).await;
    assert_eq!(
        parked.code(),
        Some(&ErrorCode::ApprovalPending),
        "{parked:?}"
    );
    let id = parked.data["approval_id"].as_str().unwrap().to_owned();
    let alice = ToolContext::web("alice", ["approvals:grant"]);
    registry
        .decide_approval(&id, milpa::approval::Verdict::Grant, None, &alice)
        .await
        .unwrap();
    assert_eq!(policy.seen(), [json!({"amount": 60})]);

    policy.limit.store(10, Ordering::SeqCst);
    let denied = registry
        .call("payout", json!({"confirm_token": id}), &agent)
        .await;
    assert_eq!(denied.code(), Some(&ErrorCode::Forbidden), "{denied:?}");
    assert_eq!(policy.seen(), [json!({"amount": 60})]);

    policy.limit.store(100, Ordering::SeqCst);
    let ran = registry
        .call("payout", json!({"confirm_token": id}), &agent)
        .await;
    assert!(ran.success, "{ran:?}");
    assert_eq!(ran.data, json!({"amount": 60}));
    assert_eq!(policy.seen(), [json!({"amount": 60})]);
    assert_eq!(runs.count(), 1);
}
