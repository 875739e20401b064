//! A rate-limited, audited trivial call through `ToolRegistry::call`: memory stores vs
//! SQLite (rate limiter + audit sink) in the same run, with one caller and with 32 callers
//! in flight. Reported per call.
//!
//! `cargo bench -p milpa-sqlite --bench store -- --warm-up-time 1 --measurement-time 3`

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use futures_util::future::join_all;
use milpa::audit::{AuditSink, MemoryAuditSink};
use milpa::rate_limit::{InMemoryRateLimiter, Quota, RateLimiter};
use milpa::{ToolContext, ToolDefinition, ToolRegistry};
use milpa_sqlite::SqliteStore;
use serde_json::{Value, json};

/// A budget no benchmark reaches, so every call is charged and allowed.
fn quota() -> Quota {
    Quota::new(u32::MAX, Duration::from_secs(1))
}

fn registry(limiter: Arc<dyn RateLimiter>, sink: Arc<dyn AuditSink>) -> ToolRegistry {
    let mut registry = ToolRegistry::builder()
        .rate_limiter(limiter)
        .default_quota(quota())
        .audit_sink(sink)
        .build();
    registry
        .register(
            ToolDefinition::builder("echo")
                .description("Echoes its arguments")
                .sync(|args: &Value, _ctx: &ToolContext| args.clone()),
        )
        .unwrap();
    registry
}

/// `iters` calls by `callers` concurrent callers (each its own principal), then the
/// sink's flush, timed together: queued audit records are part of the cost.
async fn run(
    registry: &ToolRegistry,
    sink: &dyn AuditSink,
    contexts: &[ToolContext],
    iters: u64,
) -> Duration {
    let callers = contexts.len() as u64;
    let start = Instant::now();
    join_all(contexts.iter().enumerate().map(|(i, ctx)| async move {
        let share = iters / callers + u64::from((i as u64) < iters % callers);
        for _ in 0..share {
            let result = registry.call("echo", json!({"text": "hi"}), ctx).await;
            debug_assert!(result.success);
            black_box(result);
        }
    }))
    .await;
    sink.flush();
    start.elapsed()
}

fn stores(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("bench.db")).unwrap();
    let memory_sink = Arc::new(MemoryAuditSink::new());
    let sqlite_sink = store.audit_sink();
    let setups: [(&str, ToolRegistry, Arc<dyn AuditSink>); 2] = [
        (
            "memory",
            registry(Arc::new(InMemoryRateLimiter::new()), memory_sink.clone()),
            memory_sink.clone(),
        ),
        (
            "sqlite",
            registry(store.rate_limiter(), sqlite_sink.clone()),
            sqlite_sink,
        ),
    ];
    for callers in [1usize, 32] {
        let contexts: Vec<ToolContext> = (0..callers)
            .map(|i| {
                ToolContext::builder("mcp")
                    .principal(format!("caller-{i}"))
                    .request_id(format!("req-{i}"))
                    .build()
            })
            .collect();
        let mut group = c.benchmark_group(format!("rate_limited_audited_call/{callers}_in_flight"));
        for (name, registry, sink) in &setups {
            let probe =
                runtime.block_on(registry.call("echo", json!({"text": "hi"}), &contexts[0]));
            assert!(probe.success, "{name}: {probe:?}");
            group.bench_function(*name, |b| {
                b.iter_custom(|iters| {
                    let took = runtime.block_on(run(registry, sink.as_ref(), &contexts, iters));
                    // The memory sink keeps every record: empty it outside the timing.
                    memory_sink.take();
                    took
                })
            });
        }
        group.finish();
    }
}

criterion_group!(benches, stores);
criterion_main!(benches);
