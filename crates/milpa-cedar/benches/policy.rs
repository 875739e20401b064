//! The in-process cost of a trivial call through `ToolRegistry::call` with no call policy
//! against the same call under a 20-policy Cedar set (forbids with conditions on the
//! arguments, scoped to different tools, a few unscoped), in the same run.
//!
//! `cargo bench -p milpa-cedar --bench policy -- --warm-up-time 1 --measurement-time 3`

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::fmt::Write as _;
use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use milpa::{ToolContext, ToolDefinition, ToolRegistry, ToolRegistryBuilder};
use milpa_cedar::{CedarPolicy, DefaultEffect};
use serde_json::{Value, json};

/// Twenty policies: sixteen forbids on arguments of sixteen other tools, two on this tool
/// (not matching the benchmark's call), two unscoped ones on the caller and the channel.
fn twenty_policies() -> String {
    let mut text = String::new();
    for i in 0..16 {
        let _ = writeln!(
            text,
            "@id(\"limit-{i}\") forbid(principal, action, resource == Tool::\"tool_{i}\") when {{ context.args has amount && context.args.amount >= {} }};",
            100 + i
        );
    }
    text.push_str(
        r#"@id("echo-etc") forbid(principal, action, resource == Tool::"echo") when { context.args has path && context.args.path like "/etc/*" };
@id("echo-long") forbid(principal, action, resource == Tool::"echo") when { context.args has text && context.args.text like "*DROP TABLE*" };
@id("no-anonymous") forbid(principal, action, resource) unless { context.authenticated };
@id("no-http-writes") forbid(principal, action, resource) when { context.channel == "http" && resource.mutating && !principal.scopes.contains("admin") };
"#,
    );
    text
}

fn registry(builder: ToolRegistryBuilder) -> ToolRegistry {
    let mut registry = builder.build();
    registry
        .register(
            ToolDefinition::builder("echo")
                .description("Echoes its arguments")
                .mutating(false)
                .sync(|args: &Value, _ctx: &ToolContext| args.clone()),
        )
        .unwrap();
    registry
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let ctx = ToolContext::mcp("b", Some("agent".into()), ["tools:echo"]);
    let policy = CedarPolicy::from_str("bench.cedar", twenty_policies(), DefaultEffect::Allow)
        .expect("the bench policies are valid");
    assert_eq!(policy.len(), 20);
    let bare = registry(ToolRegistry::builder());
    let cedar = registry(ToolRegistry::builder().call_policy(Arc::new(policy)));

    let mut group = c.benchmark_group("call");
    for (name, registry) in [("no call policy", &bare), ("cedar, 20 policies", &cedar)] {
        group.bench_function(name, |b| {
            b.iter(|| {
                let result = runtime.block_on(registry.call(
                    "echo",
                    json!({"text": "hi", "path": "/srv/a"}),
                    &ctx,
                ));
                assert!(result.success, "{result:?}");
                black_box(result)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
