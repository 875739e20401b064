//! The Redis stores wired into a `ToolRegistry`: with Redis down a rate-limited call is
//! refused with `UNAVAILABLE` (never run, never let through) and audited; once Redis is
//! back the same registry serves again. A confirmation minted through one registry is
//! redeemed through another (two replicas on one Redis).

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use milpa::audit::{AuditOutcome, MemoryAuditSink};
use milpa::rate_limit::Quota;
use milpa::{ErrorCode, ToolContext, ToolDefinition, ToolRegistry};
use milpa_redis::RedisStore;
use serde_json::json;
use support::{RedisServer, runtime, unique_prefix};

fn registry(
    store: &RedisStore,
    audit: Arc<MemoryAuditSink>,
    runs: Arc<AtomicUsize>,
) -> ToolRegistry {
    let mut registry = ToolRegistry::builder()
        .rate_limiter(store.rate_limiter())
        .confirmation_store(store.confirmations())
        .default_quota(Quota::new(1000, Duration::from_secs(60)))
        .audit_sink(audit)
        .build();
    let echo_runs = Arc::clone(&runs);
    registry
        .register(
            ToolDefinition::builder("echo")
                .description("Echoes its text")
                .input_schema(json!({
                    "type": "object",
                    "properties": {"text": {"type": "string"}},
                    "required": ["text"]
                }))
                .sync(move |args, _ctx| {
                    echo_runs.fetch_add(1, Ordering::SeqCst);
                    json!({"echo": args["text"]})
                }),
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::builder("delete_note")
                .description("Deletes a note")
                .input_schema(json!({
                    "type": "object",
                    "properties": {"id": {"type": "integer"}},
                    "required": ["id"]
                }))
                .mutating(true)
                .requires_confirmation(true)
                .sync(move |args, _ctx| {
                    runs.fetch_add(1, Ordering::SeqCst);
                    json!({"deleted": args["id"]})
                }),
        )
        .unwrap();
    registry
}

fn ctx(request: &str) -> ToolContext {
    ToolContext::mcp(request, Some("alice".into()), ["*"])
}

#[test]
fn with_redis_down_a_rate_limited_call_is_refused_unavailable_audited_and_served_again_later() {
    let mut server = RedisServer::start();
    let rt = runtime();
    let store = rt.block_on(server.store(&unique_prefix("registry-down")));
    let audit = Arc::new(MemoryAuditSink::new());
    let runs = Arc::new(AtomicUsize::new(0));
    let registry = registry(&store, Arc::clone(&audit), Arc::clone(&runs));

    rt.block_on(async {
        let ok = registry
            .call("echo", json!({"text": "a"}), &ctx("r1"))
            .await;
        assert!(ok.success, "{ok:?}");
    });
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    server.kill();
    rt.block_on(async {
        let started = Instant::now();
        let refused = registry
            .call("echo", json!({"text": "b"}), &ctx("r2"))
            .await;
        assert!(started.elapsed() < Duration::from_millis(1_750));
        assert!(!refused.success);
        assert_eq!(refused.code(), Some(&ErrorCode::Unavailable));
        let message = refused.error.as_deref().unwrap_or_default();
        assert!(
            message.starts_with("The rate limiter is unavailable: store unreachable"),
            "{message}"
        );
    });
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "nothing ran while Redis was down"
    );
    let records = audit.records();
    let last = records.last().expect("the refusal is audited");
    assert_eq!(last.request_id, "r2");
    assert_eq!(last.outcome, AuditOutcome::Unavailable);
    assert_eq!(last.code, Some(ErrorCode::Unavailable));

    server.restart();
    rt.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let result = registry
                .call("echo", json!({"text": "c"}), &ctx("r3"))
                .await;
            if result.success {
                assert_eq!(result.data, json!({"echo": "c"}));
                break;
            }
            assert_eq!(result.code(), Some(&ErrorCode::Unavailable));
            assert!(
                Instant::now() < deadline,
                "Redis is back, calls still refused"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[test]
fn a_token_minted_on_one_replica_runs_once_when_presented_on_both() {
    let server = RedisServer::start();
    let rt = runtime();
    let prefix = unique_prefix("registry-replicas");
    let runs = Arc::new(AtomicUsize::new(0));
    let (first, second) = rt.block_on(async {
        let first = registry(
            &server.store(&prefix).await,
            Arc::new(MemoryAuditSink::new()),
            Arc::clone(&runs),
        );
        let second = registry(
            &server.store(&prefix).await,
            Arc::new(MemoryAuditSink::new()),
            Arc::clone(&runs),
        );
        (Arc::new(first), Arc::new(second))
    });
    rt.block_on(async {
        let asked = first
            .call("delete_note", json!({"id": 7}), &ctx("mint"))
            .await;
        let token = asked.data["confirm_token"]
            .as_str()
            .unwrap_or_else(|| panic!("a confirmation token: {asked:?}"))
            .to_owned();
        let tasks: Vec<_> = (0..8)
            .map(|n| {
                let registry = Arc::clone(if n % 2 == 0 { &first } else { &second });
                let token = token.clone();
                tokio::spawn(async move {
                    let ctx = ctx(&format!("redeem-{n}"));
                    registry
                        .call(
                            "delete_note",
                            json!({"id": 7, "confirm_token": token}),
                            &ctx,
                        )
                        .await
                })
            })
            .collect();
        let mut succeeded = 0;
        for task in tasks {
            let result = task.await.unwrap();
            if result.success {
                assert_eq!(result.data, json!({"deleted": 7}));
                succeeded += 1;
            } else {
                assert_eq!(
                    result.code(),
                    Some(&ErrorCode::ValidationError),
                    "{result:?}"
                );
            }
        }
        assert_eq!(succeeded, 1);
    });
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}
