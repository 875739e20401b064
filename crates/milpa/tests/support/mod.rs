//! Shared fixtures for the pipeline's behaviour tests.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use milpa::audit::{MemoryAuditSink, OwnedAuditRecord};
use milpa::{ToolDefinition, ToolRegistry, ToolRegistryBuilder};
use serde_json::{Value, json};

/// Counts how often a tool body ran.
#[derive(Clone, Default)]
pub struct Runs(Arc<AtomicUsize>);

impl Runs {
    pub fn hit(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
    pub fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// `{a: integer, b: integer}`, both required.
pub fn two_ints() -> Value {
    json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"]
    })
}

/// `add(a, b)`, counting runs.
pub fn add_tool(runs: &Runs) -> ToolDefinition {
    let runs = runs.clone();
    ToolDefinition::builder("add")
        .description("Adds two integers")
        .input_schema(two_ints())
        .sync(move |args, _ctx| {
            runs.hit();
            json!(args["a"].as_i64().unwrap() + args["b"].as_i64().unwrap())
        })
}

/// The start of a tool that echoes its arguments; finish it with [`echoing`].
pub fn echo_args(name: &str) -> milpa::ToolDefinitionBuilder {
    ToolDefinition::builder(name).description("Echoes its arguments")
}

/// Finishes an `echo_args` builder.
pub fn echoing(builder: milpa::ToolDefinitionBuilder, runs: &Runs) -> ToolDefinition {
    let runs = runs.clone();
    builder.sync(move |args, _ctx| {
        runs.hit();
        args.clone()
    })
}

/// A registry whose audit records are kept in memory.
pub fn audited(builder: ToolRegistryBuilder) -> (ToolRegistry, Arc<MemoryAuditSink>) {
    let sink = Arc::new(MemoryAuditSink::new());
    (builder.audit_sink(sink.clone()).build(), sink)
}

/// The single audit record, asserting there is exactly one.
pub fn only_record(sink: &MemoryAuditSink) -> OwnedAuditRecord {
    let mut records = sink.take();
    assert_eq!(
        records.len(),
        1,
        "expected one audit record, got {records:?}"
    );
    records.remove(0)
}

/// Registers one tool per terminal path (`add`, `scoped`, `limited`, `confirm`, `cached`,
/// `vetoed`, `boom`) and makes `dispatcher` answer for `cached` and veto `vetoed`.
pub fn register_every_path(
    registry: &mut ToolRegistry,
    dispatcher: &milpa::Dispatcher,
    runs: &Runs,
) {
    registry.register(add_tool(runs)).unwrap();
    registry
        .register(echoing(echo_args("scoped").scopes(["admin"]), runs))
        .unwrap();
    registry
        .register(echoing(echo_args("limited"), runs))
        .unwrap();
    registry
        .register(echoing(
            echo_args("confirm").requires_confirmation(true),
            runs,
        ))
        .unwrap();
    registry
        .register(echoing(echo_args("cached"), runs))
        .unwrap();
    registry
        .register(echoing(echo_args("vetoed"), runs))
        .unwrap();
    registry
        .register(ToolDefinition::builder("boom").sync(|_, _| -> Value { panic!("boom") }))
        .unwrap();
    dispatcher.subscribe("tool.executing", 0, |event: &milpa::Event<'_>| {
        if let milpa::Event::ToolExecuting(e) = event {
            match e.tool {
                "cached" => e.slot.short_circuit(json!("hit")),
                "vetoed" => e.slot.stop(),
                _ => {}
            }
        }
    });
}
