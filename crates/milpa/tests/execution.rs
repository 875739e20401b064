//! `execute` and `contain_exception`: panics, errors, hard and soft timeouts, cancellation,
//! async tools and concurrency.

mod support;

use std::sync::Arc;
use std::time::Duration;

use milpa::audit::AuditOutcome;
use milpa::{ErrorCode, ToolContext, ToolDefinition, ToolError, ToolRegistry};
use serde_json::{Value, json};
use support::{Runs, add_tool, audited, only_record};

#[tokio::test]
async fn a_panicking_tool_is_an_internal_error_and_the_registry_keeps_serving() {
    let (mut registry, sink) = audited(ToolRegistry::builder());
    registry
        .register(
            ToolDefinition::builder("boom").sync(|_, _| -> Value { panic!("division by zero") }),
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::builder("async_boom").asynchronous(|_, _| async move {
                tokio::task::yield_now().await;
                if true {
                    panic!("async {}", "kaboom");
                }
                json!(null)
            }),
        )
        .unwrap();
    registry.register(add_tool(&Runs::default())).unwrap();
    let result = registry.call("boom", json!({}), &ToolContext::cli()).await;
    assert_eq!(result.code(), Some(&ErrorCode::InternalError));
    assert_eq!(result.error.as_deref(), Some("division by zero"));
    assert_eq!(only_record(&sink).outcome, AuditOutcome::Failed);
    let result = registry
        .call("async_boom", json!({}), &ToolContext::cli())
        .await;
    assert_eq!(result.error.as_deref(), Some("async kaboom"));
    let after = registry
        .call("add", json!({"a": 1, "b": 1}), &ToolContext::cli())
        .await;
    assert_eq!(after.data, json!(2));
}

#[tokio::test]
async fn a_tool_error_keeps_its_code_and_message() {
    let mut registry = ToolRegistry::new();
    registry
        .register(
            ToolDefinition::builder("parse").sync(|_, _| -> Result<Value, ToolError> {
                let n: i32 = "x".parse()?;
                Ok(json!(n))
            }),
        )
        .unwrap();
    let result = registry.call("parse", json!({}), &ToolContext::cli()).await;
    assert_eq!(result.code(), Some(&ErrorCode::InternalError));
    assert_eq!(
        result.error.as_deref(),
        Some("invalid digit found in string")
    );
}

#[tokio::test]
async fn a_tool_may_return_its_own_failure_without_it_being_a_tool_failure() {
    let (mut registry, sink) = audited(ToolRegistry::builder());
    registry
        .register(
            ToolDefinition::builder("refuse")
                .sync(|_, _| milpa::ToolResult::blocked("closed", Some("try tomorrow".into()))),
        )
        .unwrap();
    let result = registry
        .call("refuse", json!({}), &ToolContext::cli())
        .await;
    assert!(!result.success && result.is_blocked());
    let record = only_record(&sink);
    assert_eq!(record.outcome, AuditOutcome::Executed);
    assert!(!record.success);
}

#[tokio::test]
async fn a_hanging_async_tool_is_cancelled_at_its_hard_timeout() {
    let (mut registry, sink) = audited(ToolRegistry::builder());
    registry
        .register(
            ToolDefinition::builder("hang")
                .hard_timeout(Duration::from_millis(50))
                .asynchronous(|_, _| async move {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    json!("never")
                }),
        )
        .unwrap();
    let started = std::time::Instant::now();
    let result = registry.call("hang", json!({}), &ToolContext::cli()).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(result.code(), Some(&ErrorCode::Timeout));
    assert_eq!(
        result.error.as_deref(),
        Some("Tool 'hang' timed out after 0.05s (hard timeout)")
    );
    let record = only_record(&sink);
    assert_eq!(record.outcome, AuditOutcome::TimedOut);
    // Past the hard timeout is past the soft one too.
    assert!(record.timeout_exceeded, "{record:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_blocking_tool_is_abandoned_at_its_hard_timeout() {
    let mut registry = ToolRegistry::new();
    registry
        .register(
            ToolDefinition::builder("spin")
                .hard_timeout(Duration::from_millis(50))
                .sync(|_, _| {
                    std::thread::sleep(Duration::from_millis(400));
                    json!("late")
                }),
        )
        .unwrap();
    let result = registry.call("spin", json!({}), &ToolContext::cli()).await;
    assert_eq!(result.code(), Some(&ErrorCode::Timeout));
}

#[tokio::test]
async fn a_slow_tool_is_flagged_by_its_soft_timeout_but_returns() {
    let mut registry = ToolRegistry::new();
    registry
        .register(
            ToolDefinition::builder("slow")
                .timeout(Duration::ZERO)
                .asynchronous(|_, _| async move {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    json!("done")
                }),
        )
        .unwrap();
    let result = registry.call("slow", json!({}), &ToolContext::cli()).await;
    assert!(result.success);
    assert_eq!(result.data, json!("done"));
    assert_eq!(result.meta.get("timeout_exceeded"), Some(&json!(true)));
    assert_eq!(result.meta.get("timeout_limit"), Some(&json!(0)));
    assert!(result.meta.get("execution_time").unwrap().as_f64().unwrap() >= 0.005);
}

#[tokio::test]
async fn a_dropped_call_is_audited_as_cancelled() {
    let (mut registry, sink) = audited(ToolRegistry::builder());
    registry
        .register(
            ToolDefinition::builder("wait").asynchronous(|_, _| async move {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                json!(null)
            }),
        )
        .unwrap();
    let ctx = ToolContext::cli();
    let call = registry.call("wait", json!({"token": "s3cr3t"}), &ctx);
    assert!(
        tokio::time::timeout(Duration::from_millis(20), call)
            .await
            .is_err()
    );
    let record = only_record(&sink);
    assert_eq!(record.outcome, AuditOutcome::Cancelled);
    assert_eq!(record.code, Some(ErrorCode::Cancelled));
    assert_eq!(record.args, json!({"token": "***REDACTED***"}));
}

#[tokio::test]
async fn tools_receive_the_context_not_a_ctx_argument() {
    let mut registry = ToolRegistry::new();
    registry
        .register(ToolDefinition::builder("whoami").sync(|args, ctx| {
            json!({"principal": ctx.principal(), "channel": ctx.channel(), "args": args})
        }))
        .unwrap();
    let ctx = ToolContext::web("ann", ["x"]);
    let result = registry
        .call("whoami", json!({"_ctx": "spoof"}), &ctx)
        .await;
    assert_eq!(
        result.data,
        json!({"principal": "ann", "channel": "web", "args": {"_ctx": "spoof"}})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_concurrent_calls_each_get_their_own_answer() {
    let mut registry = ToolRegistry::new();
    registry
        .register(
            ToolDefinition::builder("slow_add")
                .input_schema(support::two_ints())
                .asynchronous(|args, ctx| async move {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    json!({"sum": args["a"].as_i64().unwrap() + args["b"].as_i64().unwrap(), "req": ctx.request_id()})
                }),
        )
        .unwrap();
    let registry = Arc::new(registry);
    let started = std::time::Instant::now();
    let handles: Vec<_> = (0..64)
        .map(|i| {
            let registry = registry.clone();
            tokio::spawn(async move {
                let ctx = ToolContext::builder("cli")
                    .principal("p")
                    .request_id(format!("req-{i}"))
                    .build();
                (
                    i,
                    registry
                        .call("slow_add", json!({"a": i, "b": 1000}), &ctx)
                        .await,
                )
            })
        })
        .collect();
    for handle in handles {
        let (i, result) = handle.await.unwrap();
        assert_eq!(
            result.data,
            json!({"sum": i + 1000, "req": format!("req-{i}")})
        );
        assert_eq!(
            result.meta.runtime().unwrap().request_id(),
            format!("req-{i}")
        );
    }
    // 64 sleeps of 20 ms run together, not one after another (1.28 s); generous bound.
    assert!(
        started.elapsed() < Duration::from_millis(1000),
        "{:?}",
        started.elapsed()
    );
}
