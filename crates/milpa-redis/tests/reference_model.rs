//! Random interleavings of mint / redeem (own and foreign binding) / advance time over the
//! Redis confirmation store, and of consume over the Redis rate limiter, compared step by
//! step with the core's reference implementations.
//!
//! Confirmations are compared with `InMemoryConfirmationStore` (both take the time as an
//! argument). The limiter is compared with `Gcra::charge`, the arithmetic the core's
//! in-memory limiter runs, on one injected clock: `InMemoryRateLimiter` reads a private
//! monotonic clock, and the Redis script reads Redis `TIME`, so the test drives the script
//! through `RedisRateLimiter::consume_at`, the same script with `now` given instead of read.
//!
//! Verification requests opened (pending or already resolved), changed by compare-and-set
//! (from the current revision or a stale one) and listed (pending oldest first, resolved
//! newest first, at random limits) are compared with `InMemoryVerificationStore`, record
//! for record. Their times are drawn from a few values around now, so they tie and the
//! lists order by id, and none is older than the retention.
//!
//! The logical clock starts an hour ahead of the real one and only moves forward, so the
//! TTLs Redis enforces on its own clock never remove anything the reference still holds:
//! the scripts' own checks are what is compared.

mod support;

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use milpa::confirm::{
    ConfirmationBinding, ConfirmationStore, InMemoryConfirmationStore, PendingConfirmation,
};
use milpa::rate_limit::{Gcra, GcraState, Quota, RateDecision, RateKey};
use milpa::verification::{
    ApprovalPolicy, InMemoryVerificationStore, VerificationRecord, VerificationStatus,
    VerificationStore,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::json;
use support::{RedisServer, runtime, unique_prefix};

const TOKENS: [&str; 3] = ["t0", "t1", "t2"];

fn bindings() -> [ConfirmationBinding; 4] {
    let binding = |tool: &str, principal: Option<&str>, channel: &str| ConfirmationBinding {
        tool: tool.to_owned(),
        principal: principal.map(str::to_owned),
        channel: channel.to_owned(),
    };
    [
        binding("delete_note", Some("alice"), "mcp"),
        binding("delete_note", Some("bob"), "mcp"),
        binding("delete_note", Some("alice"), "cli"),
        binding("restart", None, "mcp"),
    ]
}

const RATE_KEYS: [RateKey<'static>; 2] = [
    RateKey {
        channel: "mcp",
        principal: "alice",
        tool: "echo",
    },
    RateKey {
        channel: "mcp",
        principal: "",
        tool: "delete_note",
    },
];

/// Quotas whose interval is at least a second: every stored budget then lives at least a
/// second of real time in Redis, far longer than a test case runs (see the module doc).
fn quotas() -> [Quota; 3] {
    [
        Quota::new(3, Duration::from_secs(10)),
        Quota::new(5, Duration::from_secs(5)),
        Quota::new(10, Duration::from_secs(60)),
    ]
}

#[derive(Debug, Clone)]
enum Op {
    Mint {
        token: usize,
        binding: usize,
        ttl_ms: u64,
    },
    Redeem {
        token: usize,
        binding: usize,
    },
    Advance {
        ns: u64,
    },
    Consume {
        key: usize,
        cost: u32,
        quota: usize,
    },
    Open {
        id: u8,
        created: u8,
        status: usize,
        resolved: Option<u8>,
    },
    Change {
        id: u8,
        status: usize,
        resolved: Option<u8>,
        stale: bool,
    },
    List {
        resolved: bool,
        limit: usize,
    },
}

const STATUSES: [VerificationStatus; 4] = [
    VerificationStatus::Pending,
    VerificationStatus::Passed,
    VerificationStatus::Failed,
    VerificationStatus::Waived,
];

/// Request `v<id>`; `created` and `resolved` are seconds after `base_ms`.
fn verification(
    base_ms: u64,
    id: u8,
    created: u8,
    status: usize,
    resolved: Option<u8>,
) -> VerificationRecord {
    VerificationRecord {
        id: format!("v{id}"),
        subject: format!("request {id}"),
        policy: ApprovalPolicy::Single,
        required_grants: 1,
        requested_by: None,
        payload: json!({"created": created}),
        status: STATUSES[status],
        grants: Vec::new(),
        rejection: None,
        created_at_ms: base_ms + 1_000 * u64::from(created),
        resolved_at_ms: resolved.map(|at| base_ms + 1_000 * u64::from(at)),
        revision: 0,
    }
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..TOKENS.len(), 0..4usize, 1..5_000u64).prop_map(|(token, binding, ttl_ms)| {
            Op::Mint {
                token,
                binding,
                ttl_ms,
            }
        }),
        (0..TOKENS.len(), 0..4usize).prop_map(|(token, binding)| Op::Redeem { token, binding }),
        // Up to 4 s, in nanoseconds, so times fall between milliseconds and seconds.
        (0..4_000_000_000u64).prop_map(|ns| Op::Advance { ns }),
        (0..RATE_KEYS.len(), 1..7u32, 0..3usize).prop_map(|(key, cost, quota)| Op::Consume {
            key,
            cost,
            quota
        }),
        (0u8..8, 0u8..3, 0usize..4, prop::option::of(0u8..3)).prop_map(
            |(id, created, status, resolved)| Op::Open {
                id,
                created,
                status,
                resolved
            }
        ),
        (0u8..8, 0usize..4, prop::option::of(0u8..3), any::<bool>()).prop_map(
            |(id, status, resolved, stale)| Op::Change {
                id,
                status,
                resolved,
                stale
            }
        ),
        (any::<bool>(), 0usize..10).prop_map(|(resolved, limit)| Op::List { resolved, limit }),
    ]
}

async fn run_case(server: &RedisServer, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let store = server.store(&unique_prefix("model")).await;
    let redis_confirmations = store.confirmation_store();
    let redis_limiter = store.redis_rate_limiter();
    let reference_confirmations = InMemoryConfirmationStore::new();
    let redis_verifications = store.verification_store();
    let reference_verifications = InMemoryVerificationStore::new();
    let mut reference_budgets: HashMap<usize, GcraState> = HashMap::new();
    let bindings = bindings();
    let quotas = quotas();

    let real_now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let mut now_ns = (real_now + Duration::from_secs(3600)).as_nanos() as u64 + 123_457;
    let base_ms = real_now.as_millis() as u64;

    for (step, op) in ops.into_iter().enumerate() {
        let now_ms = now_ns / 1_000_000;
        match op {
            Op::Mint {
                token,
                binding,
                ttl_ms,
            } => {
                let pending = PendingConfirmation {
                    binding: bindings[binding].clone(),
                    args: json!({"id": step}),
                    action_summary: format!("delete_note(id={step})"),
                    expires_at_ms: now_ms + ttl_ms,
                };
                reference_confirmations
                    .insert(TOKENS[token].to_owned(), pending.clone())
                    .await
                    .unwrap();
                redis_confirmations
                    .insert(TOKENS[token].to_owned(), pending)
                    .await
                    .unwrap();
            }
            Op::Redeem { token, binding } => {
                let expected = reference_confirmations
                    .consume(TOKENS[token], &bindings[binding], now_ms)
                    .await
                    .unwrap();
                let actual = redis_confirmations
                    .consume(TOKENS[token], &bindings[binding], now_ms)
                    .await
                    .unwrap();
                prop_assert_eq!(actual, expected, "step {}: redeem", step);
            }
            Op::Advance { ns } => now_ns += ns,
            Op::Consume { key, cost, quota } => {
                let gcra = Gcra::new(quotas[quota]);
                let state = reference_budgets.get(&key).copied().unwrap_or_default();
                let (expected, next) = gcra.charge(state, now_ns, cost);
                if let Some(next) = next {
                    reference_budgets.insert(key, next);
                }
                let actual = redis_limiter
                    .consume_at(RATE_KEYS[key], cost, quotas[quota], now_ns)
                    .await
                    .unwrap();
                prop_assert_eq!(actual, expected, "step {}: consume", step);
            }
            Op::Open {
                id,
                created,
                status,
                resolved,
            } => {
                let record = verification(base_ms, id, created, status, resolved);
                let expected = reference_verifications.create(record.clone()).await;
                let actual = redis_verifications.create(record).await;
                prop_assert_eq!(
                    format!("{actual:?}"),
                    format!("{expected:?}"),
                    "step {}: open v{}",
                    step,
                    id
                );
            }
            Op::Change {
                id,
                status,
                resolved,
                stale,
            } => {
                let current = reference_verifications
                    .get(&format!("v{id}"))
                    .await
                    .unwrap();
                let (created, revision) = current
                    .map(|r| (((r.created_at_ms - base_ms) / 1_000) as u8, r.revision))
                    .unwrap_or((0, 0));
                let from = if stale { revision + 1 } else { revision };
                let record = verification(base_ms, id, created, status, resolved);
                let expected = reference_verifications
                    .compare_and_set(from, record.clone())
                    .await
                    .unwrap();
                let actual = redis_verifications
                    .compare_and_set(from, record)
                    .await
                    .unwrap();
                prop_assert_eq!(
                    actual,
                    expected,
                    "step {}: change v{} from {}",
                    step,
                    id,
                    from
                );
            }
            Op::List { resolved, limit } => {
                let (expected, actual) = if resolved {
                    (
                        reference_verifications.list_resolved(limit).await.unwrap(),
                        redis_verifications.list_resolved(limit).await.unwrap(),
                    )
                } else {
                    (
                        reference_verifications.list_pending(limit).await.unwrap(),
                        redis_verifications.list_pending(limit).await.unwrap(),
                    )
                };
                prop_assert_eq!(
                    actual,
                    expected,
                    "step {}: list resolved={} limit {}",
                    step,
                    resolved,
                    limit
                );
            }
        }
    }
    Ok(())
}

#[test]
fn redis_stores_agree_with_the_reference_on_random_interleavings() {
    let server = RedisServer::start();
    let rt = runtime();
    let mut runner = TestRunner::new(Config {
        cases: 32,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&proptest::collection::vec(op(), 1..80), |ops| {
            rt.block_on(run_case(&server, ops))
        })
        .unwrap();
}

#[test]
fn a_denial_reports_the_same_retry_after_as_gcra_to_the_nanosecond() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let store = server.store(&unique_prefix("model-retry")).await;
        let limiter = store.redis_rate_limiter();
        let quota = Quota::new(3, Duration::from_secs(10));
        let gcra = Gcra::new(quota);
        let key = RATE_KEYS[0];
        let mut state = GcraState::default();
        let mut now = 1_900_000_000_123_456_789u64;
        for step in 0..12 {
            let (expected, next) = gcra.charge(state, now, 1);
            if let Some(next) = next {
                state = next;
            }
            let actual = limiter.consume_at(key, 1, quota, now).await.unwrap();
            assert_eq!(actual, expected, "step {step}");
            if matches!(expected, RateDecision::Denied { .. }) {
                now += 1_111_111_111;
            }
        }
    });
}
