//! The cost of a `#[tool]`-declared tool next to the same tool registered by hand: a
//! two-integer `add` called through `ToolRegistry::call` on a prebuilt CLI context.
//!
//! Run with `cargo bench -p milpa --bench macro_tool`.
//!
//! Before the criterion benchmarks it prints a paired comparison: batches of calls to the
//! two tools, interleaved, and the median time per call of each. On a shared machine the
//! load changes between criterion's two benchmarks (run one after the other) far more than
//! the two tools differ; interleaving exposes both to the same load.

use std::hint::black_box;
use std::time::Instant;

use criterion::{BatchSize, Criterion};
use futures_util::FutureExt;
use milpa::{ToolContext, ToolDefinition, ToolRegistry, tool};
use serde_json::{Value, json};

/// Adds two integers.
#[tool]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

fn registries() -> (ToolRegistry, ToolRegistry) {
    let mut by_macro = ToolRegistry::new();
    by_macro.register(add_tool()).expect("registers");
    let schema = by_macro
        .get("add")
        .map(|d| d.input_schema().clone())
        .unwrap_or(Value::Null);
    let mut by_hand = ToolRegistry::new();
    by_hand
        .register(
            ToolDefinition::builder("add")
                .description("Adds two integers.")
                .input_schema(schema)
                .sync(|args, _| json!(args["a"].as_i64().unwrap() + args["b"].as_i64().unwrap())),
        )
        .expect("registers");
    (by_macro, by_hand)
}

fn bench(c: &mut Criterion) {
    let (by_macro, by_hand) = registries();
    let ctx = ToolContext::cli();
    let args = || json!({"a": 20, "b": 22});
    for (registry, label) in [(&by_macro, "macro"), (&by_hand, "hand")] {
        let result = registry.call("add", args(), &ctx).now_or_never();
        assert_eq!(result.map(|r| r.data), Some(json!(42)), "{label}");
    }

    let mut group = c.benchmark_group("add_two_ints");
    group.bench_function("hand_registered", |b| {
        b.iter_batched(
            args,
            |args| black_box(by_hand.call("add", args, &ctx).now_or_never()),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("macro_declared", |b| {
        b.iter_batched(
            args,
            |args| black_box(by_macro.call("add", args, &ctx).now_or_never()),
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

/// Prints the median per-call time of each tool over interleaved batches.
fn paired_comparison() {
    const BATCH: usize = 1_000;
    const ROUNDS: usize = 200;
    let (by_macro, by_hand) = registries();
    let ctx = ToolContext::cli();
    let registries = [&by_hand, &by_macro];
    let mut per_call: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for round in 0..ROUNDS {
        // Alternate which tool goes first, so neither always follows the other.
        for which in [round % 2, 1 - round % 2] {
            let batch: Vec<Value> = (0..BATCH).map(|i| json!({"a": i, "b": 22})).collect();
            let started = Instant::now();
            for args in batch {
                black_box(registries[which].call("add", args, &ctx).now_or_never());
            }
            per_call[which].push(started.elapsed().as_nanos() as f64 / BATCH as f64);
        }
    }
    let [hand, by_macro] = per_call.map(|mut times| {
        times.sort_by(f64::total_cmp);
        times[times.len() / 2]
    });
    println!(
        "paired medians: hand_registered {hand:.0} ns, macro_declared {by_macro:.0} ns ({:+.1}%)",
        (by_macro / hand - 1.0) * 100.0
    );
}

mod group {
    // `criterion_group!` generates an undocumented public function.
    #![allow(missing_docs)]
    criterion::criterion_group!(benches, super::bench);
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` only smoke-tests criterion's.
    if std::env::args().any(|arg| arg == "--bench") {
        paired_comparison();
    }
    group::benches();
    Criterion::default().configure_from_args().final_summary();
}
