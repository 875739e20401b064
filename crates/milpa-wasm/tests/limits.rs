//! Limits: memory, wall time, stack and output each stop the guest inside the sandbox with
//! a code and a message naming the limit; the host keeps serving.

mod common;

use std::time::{Duration, Instant};

use milpa_wasm::{Sandbox, WasmTool};
use serde_json::json;

async fn still_answers(tool: &WasmTool) {
    let result = common::call(tool, json!({"do": "echo"})).await;
    assert!(result.success, "the next call must answer: {result:?}");
    assert_eq!(result.data["calls"], 1);
}

#[tokio::test]
async fn memory_past_the_cap_is_a_sandbox_limit() {
    let Some(tool) = common::load(
        "probe",
        Sandbox::new()
            .with_memory_mib(16)
            .with_timeout(Duration::from_secs(5)),
    )
    .await
    else {
        return;
    };
    let result = common::call(&tool, json!({"do": "memory"})).await;
    assert_eq!(common::code(&result), "SANDBOX_LIMIT", "{result:?}");
    assert_eq!(result.meta.get("sandbox_limit"), Some(&json!("memory")));
    let message = result.error.clone().unwrap();
    assert!(message.contains("memory limit of 16 MiB"), "{message}");
    assert!(!message.contains('\n'), "{message}");
    still_answers(&tool).await;
}

#[tokio::test]
async fn a_cap_below_the_initial_memory_stops_instantiation() {
    let Some(tool) = common::load("probe", Sandbox::new().with_memory_mib(0)).await else {
        return;
    };
    let result = common::call(&tool, json!({"do": "echo"})).await;
    assert_eq!(common::code(&result), "SANDBOX_LIMIT", "{result:?}");
    assert_eq!(result.meta.get("sandbox_limit"), Some(&json!("memory")));
}

#[tokio::test]
async fn a_tight_loop_is_stopped_at_its_timeout() {
    let sandbox = Sandbox::new().with_timeout(Duration::from_millis(500));
    let Some(tool) = common::load("probe", sandbox).await else {
        return;
    };
    let started = Instant::now();
    let result = common::call(&tool, json!({"do": "loop"})).await;
    let took = started.elapsed();
    assert_eq!(common::code(&result), "TIMEOUT", "{result:?}");
    assert_eq!(result.meta.get("sandbox_limit"), Some(&json!("time")));
    assert!(took >= Duration::from_millis(500), "{took:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    still_answers(&tool).await;
}

#[tokio::test]
async fn loops_share_the_thread_with_other_calls() {
    // A current-thread runtime: if a looping guest did not give the thread back at each
    // tick, the echo below could not answer before the loop's timeout.
    let sandbox = Sandbox::new().with_timeout(Duration::from_secs(2));
    let Some(tool) = common::load("probe", sandbox).await else {
        return;
    };
    let looping = {
        let tool = tool.clone();
        tokio::spawn(async move { common::call(&tool, json!({"do": "loop"})).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let started = Instant::now();
    still_answers(&tool).await;
    assert!(started.elapsed() < Duration::from_millis(1500));
    assert_eq!(common::code(&looping.await.unwrap()), "TIMEOUT");
}

#[tokio::test]
async fn deep_recursion_is_a_stack_limit() {
    let Some(tool) = common::load("probe", Sandbox::new()).await else {
        return;
    };
    let result = common::call(&tool, json!({"do": "stack"})).await;
    assert_eq!(common::code(&result), "SANDBOX_LIMIT", "{result:?}");
    assert_eq!(result.meta.get("sandbox_limit"), Some(&json!("stack")));
    assert!(result.error.unwrap().contains("stack limit of 512 KiB"));
    still_answers(&tool).await;
}

#[tokio::test]
async fn printing_100_mb_is_an_output_limit() {
    let Some(tool) = common::load("probe", Sandbox::new()).await else {
        return;
    };
    let result = common::call(&tool, json!({"do": "print", "mb": 100})).await;
    assert_eq!(common::code(&result), "SANDBOX_LIMIT", "{result:?}");
    assert_eq!(result.meta.get("sandbox_limit"), Some(&json!("output")));
    let message = result.error.unwrap();
    assert!(
        message.contains("more than 1048576 bytes to stdout"),
        "{message}"
    );
    still_answers(&tool).await;
}

#[tokio::test]
async fn output_under_the_cap_is_fine() {
    let Some(tool) = common::load("probe", Sandbox::new()).await else {
        return;
    };
    let result = common::call(&tool, json!({"do": "print", "mb": 0})).await;
    assert!(result.success, "{result:?}");
}

#[tokio::test]
async fn other_traps_are_sandbox_traps_without_a_backtrace() {
    let Some(tool) = common::load("probe", Sandbox::new()).await else {
        return;
    };
    let result = common::call(&tool, json!({"do": "trap"})).await;
    assert_eq!(common::code(&result), "SANDBOX_TRAP", "{result:?}");
    let message = result.error.unwrap();
    assert!(message.starts_with("The component trapped: "), "{message}");
    assert!(message.contains("unreachable"), "{message}");
    assert!(
        !message.contains('\n') && !message.contains("backtrace"),
        "{message}"
    );
    still_answers(&tool).await;
}
