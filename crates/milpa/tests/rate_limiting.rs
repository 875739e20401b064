//! `rate_limit`: GCRA budgets per `channel:principal:tool`, charged before plan and confirm.

mod support;

use std::sync::Arc;
use std::time::Duration;

use milpa::audit::AuditOutcome;
use milpa::rate_limit::{InMemoryRateLimiter, Quota};
use milpa::{ErrorCode, ToolContext, ToolRegistry};
use serde_json::json;
use support::{Runs, audited, echo_args, echoing};

fn limited(quota: Quota, runs: &Runs) -> (ToolRegistry, Arc<milpa::audit::MemoryAuditSink>) {
    let (mut registry, sink) = audited(
        ToolRegistry::builder()
            .rate_limiter(Arc::new(InMemoryRateLimiter::new()))
            .default_quota(quota)
            .tool_quota("special", Quota::new(1, Duration::from_secs(60))),
    );
    registry.register(echoing(echo_args("read"), runs)).unwrap();
    registry
        .register(echoing(echo_args("write").mutating(true), runs))
        .unwrap();
    registry
        .register(echoing(echo_args("special"), runs))
        .unwrap();
    registry
        .register(echoing(
            echo_args("confirmed").requires_confirmation(true),
            runs,
        ))
        .unwrap();
    (registry, sink)
}

#[tokio::test]
async fn a_spent_budget_is_rate_limited_with_the_key_and_a_retry_hint() {
    let runs = Runs::default();
    let (registry, sink) = limited(Quota::new(3, Duration::from_secs(60)), &runs);
    let ctx = ToolContext::web("ann", Vec::<String>::new());
    for _ in 0..3 {
        assert!(registry.call("read", json!({}), &ctx).await.success);
    }
    let refused = registry.call("read", json!({}), &ctx).await;
    assert_eq!(refused.code(), Some(&ErrorCode::RateLimited));
    assert_eq!(
        refused.error.as_deref(),
        Some("Rate limit exceeded for 'web:ann:read': max 3 tokens per 60s.")
    );
    assert_eq!(refused.meta.get("retry_after_seconds"), Some(&json!(20)));
    assert_eq!(runs.count(), 3);
    assert_eq!(
        sink.take().last().unwrap().outcome,
        AuditOutcome::RateLimited
    );
    // Another principal, channel or tool has its own budget.
    assert!(
        registry
            .call(
                "read",
                json!({}),
                &ToolContext::web("bob", Vec::<String>::new())
            )
            .await
            .success
    );
    assert!(registry.call("special", json!({}), &ctx).await.success);
}

#[tokio::test]
async fn mutating_tools_cost_five_tokens() {
    let runs = Runs::default();
    let (registry, _) = limited(Quota::new(10, Duration::from_secs(60)), &runs);
    let ctx = ToolContext::cli();
    assert!(registry.call("write", json!({}), &ctx).await.success);
    assert!(registry.call("write", json!({}), &ctx).await.success);
    let third = registry.call("write", json!({}), &ctx).await;
    assert_eq!(
        third.error.as_deref(),
        Some("Rate limit exceeded for 'cli:local-shell:write': max 10 tokens per 60s.")
    );
}

#[tokio::test]
async fn per_tool_quotas_override_the_default() {
    let runs = Runs::default();
    let (registry, _) = limited(Quota::DEFAULT, &runs);
    assert_eq!(
        registry.quota_for("special"),
        Some(Quota::new(1, Duration::from_secs(60)))
    );
    assert_eq!(registry.quota_for("read"), Some(Quota::DEFAULT));
    let ctx = ToolContext::cli();
    assert!(registry.call("special", json!({}), &ctx).await.success);
    assert_eq!(
        registry.call("special", json!({}), &ctx).await.code(),
        Some(&ErrorCode::RateLimited)
    );
}

#[tokio::test]
async fn plan_mode_and_confirmation_requests_are_charged_and_the_limit_comes_first() {
    let runs = Runs::default();
    let (registry, _) = limited(Quota::new(2, Duration::from_secs(60)), &runs);
    let ctx = ToolContext::cli();
    assert!(
        registry
            .call("confirmed", json!({}), &ctx.as_plan())
            .await
            .success
    );
    let token = registry.call("confirmed", json!({}), &ctx).await;
    assert!(token.requires_confirmation());
    // The budget is spent: the replay is refused by the limiter, not redeemed.
    let replay = registry
        .call(
            "confirmed",
            json!({"confirm_token": token.confirm_token().unwrap()}),
            &ctx,
        )
        .await;
    assert_eq!(replay.code(), Some(&ErrorCode::RateLimited));
    assert_eq!(runs.count(), 0);
}

#[tokio::test]
async fn an_anonymous_principal_is_an_empty_key_part() {
    let runs = Runs::default();
    let (registry, _) = limited(Quota::new(1, Duration::from_secs(60)), &runs);
    let ctx = ToolContext::telegram(5, None);
    assert!(registry.call("read", json!({}), &ctx).await.success);
    let refused = registry.call("read", json!({}), &ctx).await;
    assert_eq!(
        refused.error.as_deref(),
        Some("Rate limit exceeded for 'telegram:chat:5:read': max 1 tokens per 60s.")
    );
    let anonymous = ToolContext::builder("telegram").build();
    assert!(registry.call("read", json!({}), &anonymous).await.success);
    let refused = registry.call("read", json!({}), &anonymous).await;
    assert_eq!(
        refused.error.as_deref(),
        Some("Rate limit exceeded for 'telegram::read': max 1 tokens per 60s.")
    );
}

/// A registry with a 30-token caller budget (and no per-tool limiter) and one tool.
fn budgeted(runs: &Runs) -> (ToolRegistry, Arc<milpa::audit::MemoryAuditSink>) {
    let (mut registry, sink) =
        audited(ToolRegistry::builder().caller_budget(Quota::new(30, Duration::from_secs(60))));
    registry.register(echoing(echo_args("echo"), runs)).unwrap();
    (registry, sink)
}

fn anonymous_at(ip: &str) -> ToolContext {
    ToolContext::builder("cli").ip(ip).build()
}

#[tokio::test]
async fn the_caller_budget_refuses_the_31st_call_whatever_the_tool() {
    let runs = Runs::default();
    let (registry, sink) = budgeted(&runs);
    let alice = ToolContext::builder("cli").principal("alice").build();
    for n in 0..30 {
        let name = if n % 2 == 0 { "echo" } else { "no_such_tool" };
        let result = registry.call(name, json!({}), &alice).await;
        assert_ne!(result.code(), Some(&ErrorCode::RateLimited), "call {n}");
    }
    assert_eq!(runs.count(), 15);
    for name in ["no_such_tool", "echo"] {
        let refused = registry.call(name, json!({}), &alice).await;
        assert_eq!(refused.code(), Some(&ErrorCode::RateLimited), "{name}");
        assert_eq!(
            refused.error.as_deref(),
            Some("Rate limit exceeded for 'cli:alice': max 30 tokens per 60s.")
        );
    }
    assert_eq!(runs.count(), 15);
    let outcomes: Vec<AuditOutcome> = sink.take().into_iter().map(|r| r.outcome).collect();
    assert_eq!(outcomes.len(), 32);
    assert_eq!(
        outcomes[30..],
        [AuditOutcome::RateLimited, AuditOutcome::RateLimited]
    );

    // Other callers have budgets of their own: another principal, anonymous callers by
    // address.
    let bob = ToolContext::builder("cli").principal("bob").build();
    assert!(registry.call("echo", json!({}), &bob).await.success);
    for _ in 0..30 {
        registry
            .call("nope", json!({}), &anonymous_at("192.0.2.1"))
            .await;
    }
    let anon = registry
        .call("nope", json!({}), &anonymous_at("192.0.2.1"))
        .await;
    assert_eq!(
        anon.error.as_deref(),
        Some("Rate limit exceeded for 'cli:anonymous@192.0.2.1': max 30 tokens per 60s.")
    );
    let other = registry
        .call("echo", json!({}), &anonymous_at("192.0.2.2"))
        .await;
    assert!(other.success, "{other:?}");
}

#[test]
fn inspect_describes_the_caller_budget_as_part_of_resolve() {
    let runs = Runs::default();
    let (registry, _sink) = budgeted(&runs);
    let plan =
        milpa::inspect::InvocationPlan::build(&registry, "echo", &ToolContext::cli()).unwrap();
    assert_eq!(plan.steps.len(), 11);
    let source = &plan.step(milpa::StepKind::Resolve).source;
    assert!(
        source.starts_with("caller budget first: every call of this caller"),
        "{source}"
    );
    assert!(source.contains("1 of 30 tokens per 60s"), "{source}");
}
