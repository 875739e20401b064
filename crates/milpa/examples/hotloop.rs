//! Runs one trivial call in a loop, for profilers (`valgrind --tool=callgrind`, `perf`).
//!
//! `cargo run --release -p milpa --example hotloop -- 1000000`

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use milpa::{ToolContext, ToolDefinition, ToolRegistry};
use serde_json::Value;

fn main() {
    let mut registry = ToolRegistry::new();
    registry
        .register(ToolDefinition::builder("ping").sync(|_, _| Value::Null))
        .expect("a valid tool");
    let ctx = ToolContext::cli();
    let n: u32 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let mut cx = Context::from_waker(Waker::noop());
    let started = std::time::Instant::now();
    for _ in 0..n {
        let call = pin!(registry.call("ping", Value::Null, &ctx));
        match call.poll(&mut cx) {
            Poll::Ready(result) => {
                std::hint::black_box(result);
            }
            Poll::Pending => unreachable!("a sync tool completes in one poll"),
        }
    }
    println!("{} ns/call", started.elapsed().as_nanos() / u128::from(n));
}
