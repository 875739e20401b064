//! A rate-limited, audited trivial call through `ToolRegistry::call`: the in-memory limiter
//! against the Redis limiter (a real `redis-server` on loopback, started by the bench), with
//! one caller and with 32 callers in flight. Throughput is calls per second over all
//! callers.
//!
//! `cargo bench -p milpa-redis --bench store -- --warm-up-time 1 --measurement-time 3`

// criterion's macros generate functions without doc comments.
#![allow(missing_docs)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use milpa::audit::JsonLinesAuditSink;
use milpa::rate_limit::{InMemoryRateLimiter, Quota, RateLimiter};
use milpa::{ToolContext, ToolDefinition, ToolRegistry};
use serde_json::Value;
use support::{RedisServer, runtime};

fn registry(limiter: Arc<dyn RateLimiter>) -> Arc<ToolRegistry> {
    let mut registry = ToolRegistry::builder()
        .rate_limiter(limiter)
        // Never denies during a run: each call spends a nanosecond of a one-second window.
        .default_quota(Quota::new(u32::MAX, Duration::from_secs(1)))
        .audit_sink(Arc::new(JsonLinesAuditSink::new(std::io::sink())))
        .build();
    registry
        .register(
            ToolDefinition::builder("ping")
                .description("Answers pong")
                .sync(|_, _| Value::Null),
        )
        .unwrap();
    Arc::new(registry)
}

/// Runs at least `iters` calls with `in_flight` callers (one task each, each with its own
/// principal, so its own budget) and returns the time `iters` of them took.
fn run(
    rt: &tokio::runtime::Runtime,
    registry: &Arc<ToolRegistry>,
    in_flight: usize,
    iters: u64,
) -> Duration {
    let per_caller = iters.div_ceil(in_flight as u64).max(1);
    let total = per_caller * in_flight as u64;
    let elapsed = rt.block_on(async {
        let started = Instant::now();
        let callers: Vec<_> = (0..in_flight)
            .map(|n| {
                let registry = Arc::clone(registry);
                tokio::spawn(async move {
                    let ctx = ToolContext::mcp("bench", Some(format!("caller-{n}")), ["*"]);
                    for _ in 0..per_caller {
                        let result = registry.call("ping", Value::Null, &ctx).await;
                        assert!(result.success, "{result:?}");
                    }
                })
            })
            .collect();
        for caller in callers {
            caller.await.unwrap();
        }
        started.elapsed()
    });
    elapsed.mul_f64(iters as f64 / total as f64)
}

fn store(c: &mut Criterion) {
    let server = RedisServer::start();
    let rt = runtime();
    let redis = rt.block_on(server.store("bench:"));
    let backends = [
        ("memory", registry(Arc::new(InMemoryRateLimiter::new()))),
        ("redis", registry(redis.rate_limiter())),
    ];
    let mut group = c.benchmark_group("rate_limited_audited_call");
    group.throughput(Throughput::Elements(1));
    for in_flight in [1, 32] {
        for (name, registry) in &backends {
            group.bench_function(format!("{name}/{in_flight}_in_flight"), |b| {
                b.iter_custom(|iters| run(&rt, registry, in_flight, iters))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, store);
criterion_main!(benches);
