//! Redis going away and coming back: every store call fails with `Unavailable` within the
//! timeouts (never hangs, never allows), and the same `RedisStore` works again once a new
//! redis-server listens on the same port.

mod support;

use std::time::{Duration, Instant, SystemTime};

use milpa::confirm::{ConfirmationBinding, PendingConfirmation, unix_millis};
use milpa::rate_limit::{Quota, RateKey};
use milpa::verification::{
    ApprovalPolicy, VerificationRecord, VerificationStatus, VerificationStoreError,
};
use milpa::{StoreError, StoreErrorKind};
use milpa_redis::{RedisOptions, RedisStore};
use serde_json::json;
use support::{RedisServer, runtime, unique_prefix};

/// The test options' connect + response timeouts, plus scheduling slack.
const BOUND: Duration = Duration::from_millis(1_000 + 750);

const KEY: RateKey<'static> = RateKey {
    channel: "mcp",
    principal: "alice",
    tool: "echo",
};

fn binding() -> ConfirmationBinding {
    ConfirmationBinding {
        tool: "echo".to_owned(),
        principal: Some("alice".to_owned()),
        channel: "mcp".to_owned(),
    }
}

fn pending() -> PendingConfirmation {
    PendingConfirmation {
        binding: binding(),
        args: json!({"text": "hi"}),
        action_summary: "echo(text=hi)".to_owned(),
        expires_at_ms: unix_millis(SystemTime::now()) + 60_000,
    }
}

fn record(id: &str) -> VerificationRecord {
    VerificationRecord {
        id: id.to_owned(),
        subject: "deploy".to_owned(),
        policy: ApprovalPolicy::Single,
        required_grants: 1,
        requested_by: None,
        payload: json!({}),
        status: VerificationStatus::Pending,
        grants: Vec::new(),
        rejection: None,
        created_at_ms: 0,
        resolved_at_ms: None,
        revision: 0,
    }
}

fn unavailable(error: StoreError, what: &str) {
    assert_eq!(error.kind(), StoreErrorKind::Unavailable, "{what}: {error}");
}

fn verification_unavailable(error: VerificationStoreError, what: &str) {
    match error {
        VerificationStoreError::Backend(error) => unavailable(error, what),
        other => panic!("{what}: expected a backend error, got {other}"),
    }
}

/// Runs every store method once; each must fail with Unavailable within [`BOUND`].
async fn every_method_is_unavailable(store: &RedisStore) {
    let now = unix_millis(SystemTime::now());
    let quota = Quota::new(10, Duration::from_secs(60));

    let started = Instant::now();
    let result = store.rate_limiter().consume(KEY, 1, quota).await;
    unavailable(result.expect_err("consume while down"), "consume");
    assert!(
        started.elapsed() < BOUND,
        "consume took {:?}",
        started.elapsed()
    );

    let started = Instant::now();
    let result = store.rate_limiter().reset(KEY).await;
    unavailable(result.expect_err("reset while down"), "reset");
    assert!(
        started.elapsed() < BOUND,
        "reset took {:?}",
        started.elapsed()
    );

    let started = Instant::now();
    let result = store
        .confirmations()
        .insert("t-down".to_owned(), pending())
        .await;
    unavailable(result.expect_err("insert while down"), "insert");
    assert!(
        started.elapsed() < BOUND,
        "insert took {:?}",
        started.elapsed()
    );

    let started = Instant::now();
    let result = store
        .confirmations()
        .consume("t-down", &binding(), now)
        .await;
    unavailable(result.expect_err("redeem while down"), "redeem");
    assert!(
        started.elapsed() < BOUND,
        "redeem took {:?}",
        started.elapsed()
    );

    let started = Instant::now();
    let result = store.verifications().create(record("v-down")).await;
    verification_unavailable(result.expect_err("create while down"), "create");
    assert!(
        started.elapsed() < BOUND,
        "create took {:?}",
        started.elapsed()
    );

    let started = Instant::now();
    let result = store.verifications().get("v-down").await;
    verification_unavailable(result.expect_err("get while down"), "get");
    assert!(
        started.elapsed() < BOUND,
        "get took {:?}",
        started.elapsed()
    );

    let started = Instant::now();
    let result = store
        .verifications()
        .compare_and_set(0, record("v-down"))
        .await;
    verification_unavailable(result.expect_err("cas while down"), "compare_and_set");
    assert!(
        started.elapsed() < BOUND,
        "cas took {:?}",
        started.elapsed()
    );

    let started = Instant::now();
    let result = store.verifications().list_pending(10).await;
    verification_unavailable(result.expect_err("list_pending while down"), "list_pending");
    assert!(
        started.elapsed() < BOUND,
        "list_pending took {:?}",
        started.elapsed()
    );

    let started = Instant::now();
    let result = store.verifications().list_resolved(10).await;
    verification_unavailable(
        result.expect_err("list_resolved while down"),
        "list_resolved",
    );
    assert!(
        started.elapsed() < BOUND,
        "list_resolved took {:?}",
        started.elapsed()
    );
}

/// Every store method works (and the scripts are loaded again on a fresh server).
async fn every_method_works(store: &RedisStore, round: &str) {
    let now = unix_millis(SystemTime::now());
    let quota = Quota::new(10, Duration::from_secs(60));
    store.rate_limiter().reset(KEY).await.unwrap();
    store
        .rate_limiter()
        .consume(KEY, 1, quota)
        .await
        .unwrap_or_else(|error| panic!("{round}: consume: {error}"));
    let token = format!("t-{round}");
    store
        .confirmations()
        .insert(token.clone(), pending())
        .await
        .unwrap();
    assert!(
        store
            .confirmations()
            .consume(&token, &binding(), now)
            .await
            .unwrap()
            .is_some()
    );
    let id = format!("v-{round}");
    store.verifications().create(record(&id)).await.unwrap();
    assert!(store.verifications().get(&id).await.unwrap().is_some());
    assert!(
        store
            .verifications()
            .compare_and_set(0, record(&id))
            .await
            .unwrap()
    );
}

#[test]
fn a_killed_redis_fails_every_call_fast_and_a_new_one_is_used_without_rebuilding() {
    let mut server = RedisServer::start();
    let rt = runtime();
    let store = rt.block_on(server.store(&unique_prefix("outage")));
    rt.block_on(every_method_works(&store, "before"));

    server.kill();
    rt.block_on(every_method_is_unavailable(&store));
    // Still down: refused connections fail at once, no call waits out the deadline behind
    // a reconnection backoff, so all seven calls together take well under one deadline.
    let started = Instant::now();
    rt.block_on(every_method_is_unavailable(&store));
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "seven calls against a dead Redis took {:?}",
        started.elapsed()
    );

    server.restart();
    rt.block_on(async {
        // The connection comes back by itself: at most a call or two see the old failure.
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut failed = 0;
        while store.verifications().get("probe").await.is_err() {
            failed += 1;
            assert!(Instant::now() < deadline, "Redis back, store still failing");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(failed <= 2, "{failed} calls failed after Redis came back");
        every_method_works(&store, "after").await;
    });
}

#[test]
fn a_frozen_redis_times_out_instead_of_holding_calls() {
    let server = RedisServer::start();
    let rt = runtime();
    let store = rt.block_on(server.store(&unique_prefix("stall")));
    server.pause();
    rt.block_on(async {
        let started = Instant::now();
        let result = store
            .rate_limiter()
            .consume(KEY, 1, Quota::new(10, Duration::from_secs(60)))
            .await;
        unavailable(result.expect_err("consume while stalled"), "consume");
        assert!(started.elapsed() < BOUND, "took {:?}", started.elapsed());
    });
    server.resume();
    // Thawed, it answers again on the same store.
    rt.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(5);
        while store.verifications().get("probe").await.is_err() {
            assert!(
                Instant::now() < deadline,
                "Redis thawed, store still failing"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
}

#[test]
fn connecting_where_no_redis_listens_fails_clearly() {
    let server = RedisServer::start();
    let port = server.port();
    drop(server);
    runtime().block_on(async {
        let options = RedisOptions::default()
            .with_connect_timeout(Duration::from_millis(300))
            .with_response_timeout(Duration::from_millis(300));
        let started = Instant::now();
        let error = RedisStore::connect(&format!("redis://:s3cret@127.0.0.1:{port}"), options)
            .await
            .expect_err("nothing listens there");
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(error.kind(), StoreErrorKind::Unavailable);
        let message = error.to_string();
        assert!(
            message.contains(&format!("could not connect to Redis at 127.0.0.1:{port}")),
            "{message}"
        );
        assert!(
            !message.contains("s3cret"),
            "the password leaked: {message}"
        );

        let error = RedisStore::connect("http://example.com", RedisOptions::default())
            .await
            .expect_err("not a Redis URL");
        assert_eq!(error.kind(), StoreErrorKind::Backend);
        assert!(error.to_string().contains("invalid Redis URL"), "{error}");
    });
}
