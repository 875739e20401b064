//! The cost of one call through the whole pipeline, in process.
//!
//! Each benchmark pins the call future in place and polls it once: sync tools and in-memory
//! collaborators complete without yielding, so what is measured is the pipeline itself, not
//! an executor. Arguments are built outside the timed section (`iter_batched`), since a call
//! consumes them. Audit is on (the default tracing sink, with no subscriber installed).
//!
//! `trivial_cli_otel` (run last, see the end of `pipeline`) is the same call with tracing
//! on: a subscriber with the OpenTelemetry layer, whose tracer builds every `execute_tool`
//! span and hands it to an exporter that discards it (what a call costs to trace, without
//! the network).

// criterion's macros generate functions without doc comments.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use milpa::audit::JsonLinesAuditSink;
use milpa::events::{Dispatcher, Event};
use milpa::rate_limit::{InMemoryRateLimiter, Quota};
use milpa::{ToolContext, ToolDefinition, ToolRegistry, ToolResult};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use serde_json::{Value, json};
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt;

fn trivial() -> ToolDefinition {
    ToolDefinition::builder("ping")
        .description("Answers pong")
        .sync(|_, _| Value::Null)
}

fn add() -> ToolDefinition {
    ToolDefinition::builder("add")
        .description("Adds two integers")
        .input_schema(json!({
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"]
        }))
        .sync(|args, _| json!(args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)))
}

/// Polls a call once, as an executor would after pinning it in place.
fn poll_once(registry: &ToolRegistry, tool: &str, args: Value, ctx: &ToolContext) -> ToolResult {
    let call = pin!(registry.call(tool, args, ctx));
    match call.poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(result) => result,
        Poll::Pending => panic!("benchmarked tools complete in one poll"),
    }
}

fn bench_call(
    c: &mut Criterion,
    id: &str,
    registry: &ToolRegistry,
    tool: &str,
    args: Value,
    ctx: &ToolContext,
) {
    // Sanity: the benchmarked call must succeed, or we would be timing a refusal.
    let probe = poll_once(registry, tool, args.clone(), ctx);
    assert!(probe.success, "{id}: {probe:?}");
    c.bench_function(id, |b| {
        b.iter_batched(
            || args.clone(),
            |args| black_box(poll_once(registry, tool, args, ctx)),
            BatchSize::SmallInput,
        )
    });
}

fn pipeline(c: &mut Criterion) {
    let mut registry = ToolRegistry::new();
    registry.register(trivial()).unwrap();
    registry.register(add()).unwrap();
    registry
        .register(
            ToolDefinition::builder("read_notes")
                .description("Reads notes")
                .scopes(["notes:read"])
                .sync(|_, _| Value::Null),
        )
        .unwrap();
    let cli = ToolContext::cli();
    bench_call(c, "trivial_cli", &registry, "ping", Value::Null, &cli);
    bench_call(
        c,
        "two_int_cli",
        &registry,
        "add",
        json!({"a": 2, "b": 3}),
        &cli,
    );
    let mcp = ToolContext::mcp("req-1", Some("agent".into()), ["notes:*"]);
    bench_call(c, "scoped_mcp", &registry, "read_notes", Value::Null, &mcp);

    let dispatcher = Arc::new(Dispatcher::new());
    dispatcher.subscribe("tool.*", 0, |event: &Event<'_>| {
        black_box(event.name());
    });
    let mut with_dispatcher = ToolRegistry::builder().dispatcher(dispatcher).build();
    with_dispatcher.register(trivial()).unwrap();
    bench_call(
        c,
        "trivial_cli_dispatcher",
        &with_dispatcher,
        "ping",
        Value::Null,
        &cli,
    );

    let mut limited = ToolRegistry::builder()
        .rate_limiter(Arc::new(InMemoryRateLimiter::new()))
        .default_quota(Quota::new(u32::MAX, Duration::from_secs(1)))
        .build();
    limited.register(trivial()).unwrap();
    bench_call(
        c,
        "trivial_cli_rate_limited",
        &limited,
        "ping",
        Value::Null,
        &cli,
    );

    // Redaction on the hot path: every record is written, args and all, to a JSON-lines
    // sink (into `io::sink()`), so each argument key and string value is checked.
    let mut written = ToolRegistry::builder()
        .audit_sink(Arc::new(JsonLinesAuditSink::new(std::io::sink())))
        .build();
    written.register(echo()).unwrap();
    bench_call(
        c,
        "echo_cli_audited_json",
        &written,
        "echo",
        json!({"user": "ann", "password": "hunter2", "note": "see https://example.com/a?page=2", "count": 3}),
        &cli,
    );

    // Last: installing a subscriber that wants the call span leaves the span's callsite
    // interest cached as "sometimes", so every call benchmarked after it in this process
    // would build its span (the `otel.name` string, a dispatch) though no subscriber is
    // installed any more. Run earlier, it made `scoped_mcp` and the cases after it
    // measure a traced call.
    traced(c, &registry, &cli);
}

/// Exports nothing: the traced case measures building and ending spans, not a network.
#[derive(Debug)]
struct DiscardingExporter;

impl SpanExporter for DiscardingExporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        black_box(batch);
        Ok(())
    }
}

/// The trivial call with a subscriber whose OpenTelemetry layer wants every call span.
fn traced(c: &mut Criterion, registry: &ToolRegistry, cli: &ToolContext) {
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(DiscardingExporter)
        .build();
    // As the `milpa` command installs it: spans only (audit records stay logs).
    let layer = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("milpa-bench"))
        .with_filter(tracing_subscriber::filter::filter_fn(|meta| meta.is_span()));
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, || {
        bench_call(c, "trivial_cli_otel", registry, "ping", Value::Null, cli);
    });
    let _ = provider.shutdown();
}

/// Returns its arguments.
fn echo() -> ToolDefinition {
    ToolDefinition::builder("echo")
        .description("Echoes its arguments")
        .sync(|args: &Value, _ctx: &ToolContext| args.clone())
}

criterion_group!(benches, pipeline);
criterion_main!(benches);
