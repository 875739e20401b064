//! Runs one trivial call in a loop, for profilers (`valgrind --tool=callgrind`, `perf`).
//!
//! `cargo run --release -p milpa --example hotloop -- 1000000 [ping|add|read_notes]`
//!
//! `ping` and `add` are called from the CLI; `read_notes` declares a scope and is called as
//! an authenticated MCP caller holding `notes:*` (the `scoped_mcp` case of the `pipeline`
//! bench).
//!
//! Instructions per call, without the setup (schema compilation, clock calibration):
//! `valgrind --tool=callgrind --collect-atstart=no --toggle-collect=hotloop::calls
//! target/release/examples/hotloop 200000 ping`, then divide by the call count.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use milpa::{ToolContext, ToolDefinition, ToolRegistry};
use serde_json::{Value, json};

fn main() {
    let mut registry = ToolRegistry::new();
    registry
        .register(ToolDefinition::builder("ping").sync(|_, _| Value::Null))
        .expect("a valid tool");
    registry
        .register(
            ToolDefinition::builder("add")
                .input_schema(json!({
                    "type": "object",
                    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                    "required": ["a", "b"]
                }))
                .sync(|args, _| {
                    json!(args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0))
                }),
        )
        .expect("a valid tool");
    registry
        .register(
            ToolDefinition::builder("read_notes")
                .scopes(["notes:read"])
                .sync(|_, _| Value::Null),
        )
        .expect("a valid tool");
    let tool = std::env::args().nth(2).unwrap_or_else(|| "ping".to_owned());
    let args = if tool == "add" {
        json!({"a": 2, "b": 3})
    } else {
        Value::Null
    };
    let ctx = if tool == "read_notes" {
        ToolContext::mcp("req-1", Some("agent".into()), ["notes:*"])
    } else {
        ToolContext::cli()
    };
    let n: u32 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let started = std::time::Instant::now();
    calls(&registry, &tool, &args, &ctx, n);
    println!("{} ns/call", started.elapsed().as_nanos() / u128::from(n));
}

/// The measured loop, kept out of line so a profiler can count it alone
/// (`valgrind --tool=callgrind --collect-atstart=no --toggle-collect=hotloop::calls`).
#[inline(never)]
fn calls(registry: &ToolRegistry, tool: &str, args: &Value, ctx: &ToolContext, n: u32) {
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..n {
        let call = pin!(registry.call(tool, args.clone(), ctx));
        match call.poll(&mut cx) {
            Poll::Ready(result) => {
                std::hint::black_box(result);
            }
            Poll::Pending => unreachable!("a sync tool completes in one poll"),
        }
    }
}
