//! The cost of one call of a trivial component tool (fresh store, instantiate, call,
//! drop) through the whole pipeline (`ToolRegistry::call`), beside the same echo as a
//! native `#[tool]` and as a tool that runs `/bin/true` as a process, in the same run, at 1
//! and at 32 calls in flight.
//!
//! Run with `cargo bench -p milpa-wasm --bench per_call`. The guest is built from
//! `tests/guests/echo.c` with clang and wasi-libc; without clang the wasm rows are left out
//! (said on stderr).

#[path = "../tests/common/mod.rs"]
mod common;

use std::process::Stdio;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_main};
use milpa::{ToolContext, ToolDefinition, ToolError, ToolRegistry, tool};
use milpa_wasm::{Sandbox, WasmRuntime, WasmTool};
use serde_json::{Value, json};

/// Answers its text (the native baseline).
#[tool]
fn echo(text: String) -> String {
    text
}

/// Runs `/bin/true` and answers its exit code (the process baseline).
async fn run_true(_args: Value, _ctx: ToolContext) -> Result<Value, ToolError> {
    let status = tokio::process::Command::new("/bin/true")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .status()
        .await?;
    Ok(json!(status.code()))
}

fn registry(runtime: &tokio::runtime::Runtime) -> (Arc<ToolRegistry>, bool) {
    let mut registry = ToolRegistry::new();
    registry.register(echo_tool()).expect("registers");
    registry
        .register(ToolDefinition::builder("process").asynchronous(run_true))
        .expect("registers");
    let mut has_wasm = false;
    if let Some(bytes) = common::guest("echo") {
        let size = bytes.len();
        let started = std::time::Instant::now();
        let tool = runtime.block_on(async {
            let wasm = WasmRuntime::shared().expect("engine");
            WasmTool::from_bytes(&wasm, "echo.wasm", bytes, Sandbox::new())
                .await
                .expect("loads")
        });
        eprintln!(
            "per_call: echo.wasm ({size} bytes) compiled and pre-instantiated in {} ms",
            started.elapsed().as_millis()
        );
        registry
            .register(tool.definition(ToolDefinition::builder("wasm")))
            .expect("registers");
        has_wasm = true;
    } else {
        eprintln!("per_call: no clang, the wasm rows are left out");
    }
    (Arc::new(registry), has_wasm)
}

fn per_call(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (registry, has_wasm) = registry(&runtime);
    let mut tools = vec!["native", "process"];
    if has_wasm {
        tools.push("wasm");
    }
    let ctx = ToolContext::cli();
    let args = json!({"text": "hello"});
    for in_flight in [1usize, 32] {
        let mut group = c.benchmark_group(format!("per_call/{in_flight}_in_flight"));
        group.throughput(Throughput::Elements(in_flight as u64));
        for tool in &tools {
            let name = if *tool == "native" { "echo" } else { *tool };
            group.bench_function(BenchmarkId::from_parameter(tool), |b| {
                b.to_async(&runtime).iter(|| {
                    let registry = registry.clone();
                    let ctx = ctx.clone();
                    let args = args.clone();
                    async move {
                        let calls: Vec<_> = (0..in_flight)
                            .map(|_| {
                                let registry = registry.clone();
                                let ctx = ctx.clone();
                                let args = args.clone();
                                tokio::spawn(async move {
                                    let result = registry.call(name, args, &ctx).await;
                                    assert!(result.success, "{result:?}");
                                })
                            })
                            .collect();
                        for call in calls {
                            call.await.expect("call task");
                        }
                    }
                });
            });
        }
        group.finish();
    }
}

mod group {
    // `criterion_group!` generates an undocumented public function.
    #![allow(missing_docs)]
    criterion::criterion_group!(benches, super::per_call);
}

criterion_main!(group::benches);
