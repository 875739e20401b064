//! A failing store or limiter fails the call closed: `UNAVAILABLE`, the cause in the
//! message, audited, and the tool never runs.

mod support;

use std::sync::Arc;

use milpa::audit::AuditOutcome;
use milpa::confirm::{ConfirmationBinding, ConfirmationStore, PendingConfirmation};
use milpa::rate_limit::{Quota, RateDecision, RateKey, RateLimiter};
use milpa::{Deferred, ErrorCode, StoreError, ToolContext, ToolRegistry};
use serde_json::json;
use support::{Runs, audited, echo_args, echoing, only_record};

fn refused() -> StoreError {
    StoreError::unavailable(std::io::Error::new(
        std::io::ErrorKind::ConnectionRefused,
        "connection refused",
    ))
}

struct DownLimiter;

impl RateLimiter for DownLimiter {
    fn consume<'a>(
        &'a self,
        _key: RateKey<'a>,
        _cost: u32,
        _quota: Quota,
    ) -> Deferred<'a, Result<RateDecision, StoreError>> {
        Deferred::ready(Err(refused()))
    }

    fn reset<'a>(&'a self, _key: RateKey<'a>) -> Deferred<'a, Result<(), StoreError>> {
        Deferred::ready(Err(refused()))
    }
}

struct DownStore;

impl ConfirmationStore for DownStore {
    fn insert<'a>(
        &'a self,
        _token: String,
        _pending: PendingConfirmation,
    ) -> Deferred<'a, Result<(), StoreError>> {
        Deferred::ready(Err(refused()))
    }

    fn consume<'a>(
        &'a self,
        _token: &'a str,
        _binding: &'a ConfirmationBinding,
        _now_ms: u64,
    ) -> Deferred<'a, Result<Option<PendingConfirmation>, StoreError>> {
        Deferred::ready(Err(StoreError::backend("disk I/O error")))
    }

    fn peek<'a>(
        &'a self,
        _token: &'a str,
        _binding: &'a ConfirmationBinding,
        _now_ms: u64,
    ) -> Deferred<'a, Result<Option<PendingConfirmation>, StoreError>> {
        Deferred::ready(Err(StoreError::backend("disk I/O error")))
    }
}

#[tokio::test]
async fn a_limiter_that_fails_refuses_the_call() {
    let runs = Runs::default();
    let (mut registry, sink) = audited(ToolRegistry::builder().rate_limiter(Arc::new(DownLimiter)));
    registry
        .register(echoing(echo_args("echo"), &runs))
        .unwrap();
    let result = registry.call("echo", json!({}), &ToolContext::cli()).await;
    assert!(!result.success);
    assert_eq!(result.code(), Some(&ErrorCode::Unavailable));
    assert_eq!(
        result.error.as_deref(),
        Some("The rate limiter is unavailable: store unreachable: connection refused")
    );
    assert_eq!(runs.count(), 0);
    let record = only_record(&sink);
    assert_eq!(record.outcome, AuditOutcome::Unavailable);
    assert_eq!(record.code, Some(ErrorCode::Unavailable));
    assert_eq!(
        serde_json::to_value(&result).unwrap()["meta"]["code"],
        "UNAVAILABLE"
    );
}

#[tokio::test]
async fn a_confirmation_store_that_fails_refuses_the_call() {
    let runs = Runs::default();
    let (mut registry, sink) =
        audited(ToolRegistry::builder().confirmation_store(Arc::new(DownStore)));
    registry
        .register(echoing(
            echo_args("wipe").requires_confirmation(true),
            &runs,
        ))
        .unwrap();
    let ctx = ToolContext::cli();
    let first = registry.call("wipe", json!({}), &ctx).await;
    assert_eq!(first.code(), Some(&ErrorCode::Unavailable));
    assert_eq!(
        first.error.as_deref(),
        Some("The confirmation store is unavailable: store unreachable: connection refused")
    );
    assert_eq!(only_record(&sink).outcome, AuditOutcome::Unavailable);

    let replay = registry
        .call("wipe", json!({"confirm_token": "t"}), &ctx)
        .await;
    assert_eq!(replay.code(), Some(&ErrorCode::Unavailable));
    assert_eq!(
        replay.error.as_deref(),
        Some("The confirmation store is unavailable: store error: disk I/O error")
    );
    assert_eq!(only_record(&sink).outcome, AuditOutcome::Unavailable);
    assert_eq!(runs.count(), 0);
}
