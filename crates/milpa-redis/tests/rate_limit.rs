//! The Redis rate limiter against a real redis-server: atomic under concurrency, the core's
//! GCRA decisions, a TTL on every budget.

mod support;

use std::sync::Arc;
use std::time::Duration;

use milpa::rate_limit::{Quota, RateDecision, RateKey};
use support::{RedisServer, runtime, unique_prefix};

const KEY: RateKey<'static> = RateKey {
    channel: "mcp",
    principal: "alice",
    tool: "echo",
};

#[test]
fn two_hundred_concurrent_consumes_with_a_budget_of_twenty_allow_exactly_twenty() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let store = server.store(&unique_prefix("rl-race")).await;
        let limiter = store.rate_limiter();
        // A refill far slower than the test: nothing comes back while it runs.
        let quota = Quota::new(20, Duration::from_secs(3600));
        let tasks: Vec<_> = (0..200)
            .map(|_| {
                let limiter = Arc::clone(&limiter);
                tokio::spawn(async move { limiter.consume(KEY, 1, quota).await })
            })
            .collect();
        let mut allowed = 0;
        let mut denied = 0;
        for task in tasks {
            match task.await.expect("task").expect("consume") {
                RateDecision::Allowed { .. } => allowed += 1,
                RateDecision::Denied { retry_after } => {
                    assert!(retry_after > Duration::ZERO);
                    denied += 1;
                }
                other => panic!("unexpected decision {other:?}"),
            }
        }
        assert_eq!((allowed, denied), (20, 180));
    });
}

#[test]
fn decisions_follow_gcra_on_redis_time_and_the_budget_has_a_ttl() {
    let server = RedisServer::start();
    let prefix = unique_prefix("rl-gcra");
    runtime().block_on(async {
        let store = server.store(&prefix).await;
        let limiter = store.rate_limiter();
        let quota = Quota::new(3, Duration::from_secs(30));
        for remaining in [2, 1, 0] {
            assert_eq!(
                limiter.consume(KEY, 1, quota).await.unwrap(),
                RateDecision::Allowed { remaining }
            );
        }
        match limiter.consume(KEY, 1, quota).await.unwrap() {
            // One token every 10 s; a little of it has passed already.
            RateDecision::Denied { retry_after } => {
                assert!(retry_after <= Duration::from_secs(10), "{retry_after:?}");
                assert!(retry_after > Duration::from_secs(9), "{retry_after:?}");
            }
            other => panic!("expected a denial, got {other:?}"),
        }
        // The state is the TAT in nanoseconds, forgotten once the budget is full again (30 s).
        let key = format!("{prefix}rate:mcp:alice:echo");
        let ttl: i64 = server
            .command(&format!("PTTL {key}"))
            .trim()
            .trim_start_matches(':')
            .parse()
            .unwrap();
        assert!((29_000..=30_000).contains(&ttl), "PTTL {ttl}");
        // A mutating call (cost 5) can never fit a budget of 3.
        let other = RateKey {
            tool: "delete",
            ..KEY
        };
        assert!(matches!(
            limiter.consume(other, 5, quota).await.unwrap(),
            RateDecision::Denied { .. }
        ));
        // Reset forgets the spent budget.
        limiter.reset(KEY).await.unwrap();
        assert_eq!(server.command(&format!("EXISTS {key}")), ":0\r\n");
        assert_eq!(
            limiter.consume(KEY, 1, quota).await.unwrap(),
            RateDecision::Allowed { remaining: 2 }
        );
    });
}

#[test]
fn keys_are_separate_per_channel_principal_and_tool() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let store = server.store(&unique_prefix("rl-keys")).await;
        let limiter = store.rate_limiter();
        let quota = Quota::new(1, Duration::from_secs(3600));
        let keys = [
            KEY,
            RateKey {
                channel: "cli",
                ..KEY
            },
            RateKey {
                principal: "bob",
                ..KEY
            },
            RateKey { tool: "add", ..KEY },
        ];
        for key in keys {
            assert_eq!(
                limiter.consume(key, 1, quota).await.unwrap(),
                RateDecision::Allowed { remaining: 0 },
                "{key}"
            );
        }
        for key in keys {
            assert!(matches!(
                limiter.consume(key, 1, quota).await.unwrap(),
                RateDecision::Denied { .. }
            ));
        }
    });
}

#[test]
fn a_window_beyond_what_the_script_computes_exactly_is_refused_not_allowed() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let store = server.store(&unique_prefix("rl-window")).await;
        let quota = Quota::new(10, Duration::from_secs(200 * 86_400));
        let error = store
            .rate_limiter()
            .consume(KEY, 1, quota)
            .await
            .expect_err("a 200-day window is refused");
        assert!(error.to_string().contains("104 days"), "{error}");
    });
}
