//! The cost of a `#[tool]`-declared tool next to the same tool registered by hand: a
//! two-integer `add` called through `ToolRegistry::call` on a prebuilt CLI context.
//!
//! Run with `cargo bench -p milpa --bench macro_tool`.

use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_main};
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

mod group {
    // `criterion_group!` generates an undocumented public function.
    #![allow(missing_docs)]
    criterion::criterion_group!(benches, super::bench);
}

criterion_main!(group::benches);
