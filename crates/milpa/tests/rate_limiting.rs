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
