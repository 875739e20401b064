//! Events and the interception slot: `tool.executing` after every gate, short-circuit and
//! veto, `tool.executed` / `tool.failed` after audit.

mod support;

use std::sync::{Arc, Mutex};

use milpa::audit::AuditOutcome;
use milpa::events::{Dispatcher, Event};
use milpa::{ErrorCode, ToolContext, ToolDefinition, ToolError, ToolRegistry, ToolResult};
use serde_json::json;
use support::{Runs, audited, echo_args, echoing, only_record};

type Log = Arc<Mutex<Vec<String>>>;

fn recorder(dispatcher: &Dispatcher) -> Log {
    let log: Log = Arc::default();
    let sink = log.clone();
    dispatcher.subscribe("tool.*", -100, move |event: &Event<'_>| {
        let line = match event {
            Event::ToolExecuted(e) => format!("executed:{}:cache={}", e.tool, e.cache_served),
            Event::ToolFailed(e) => format!("failed:{}:{}:{}", e.tool, e.code, e.error),
            other => other.name().to_owned(),
        };
        sink.lock().unwrap().push(line);
    });
    log
}

fn wired(
    runs: &Runs,
) -> (
    ToolRegistry,
    Arc<Dispatcher>,
    Arc<milpa::audit::MemoryAuditSink>,
) {
    let dispatcher = Arc::new(Dispatcher::new());
    let (mut registry, sink) = audited(ToolRegistry::builder().dispatcher(dispatcher.clone()));
    registry.register(echoing(echo_args("echo"), runs)).unwrap();
    registry
        .register(echoing(echo_args("secret").scopes(["admin"]), runs))
        .unwrap();
    registry
        .register(
            ToolDefinition::builder("broken").sync(|_, _| -> Result<ToolResult, ToolError> {
                Err(ToolError::with_code(ErrorCode::NotFound, "no such note"))
            }),
        )
        .unwrap();
    (registry, dispatcher, sink)
}

#[tokio::test]
async fn a_live_call_emits_executing_then_executed() {
    let runs = Runs::default();
    let (registry, dispatcher, _) = wired(&runs);
    let log = recorder(&dispatcher);
    assert!(registry.has_dispatcher());
    registry
        .call("echo", json!({"x": 1}), &ToolContext::cli())
        .await;
    assert_eq!(
        *log.lock().unwrap(),
        ["tool.executing", "executed:echo:cache=false"]
    );
}

#[tokio::test]
async fn a_tool_error_emits_failed_with_its_code() {
    let runs = Runs::default();
    let (registry, dispatcher, sink) = wired(&runs);
    let log = recorder(&dispatcher);
    let result = registry
        .call("broken", json!({}), &ToolContext::cli())
        .await;
    assert_eq!(result.code(), Some(&ErrorCode::NotFound));
    assert_eq!(result.error.as_deref(), Some("no such note"));
    assert_eq!(
        *log.lock().unwrap(),
        ["tool.executing", "failed:broken:NOT_FOUND:no such note"]
    );
    assert_eq!(only_record(&sink).outcome, AuditOutcome::Failed);
}

#[tokio::test]
async fn a_short_circuit_answers_for_the_tool_and_is_audited_as_cache_served() {
    let runs = Runs::default();
    let (registry, dispatcher, sink) = wired(&runs);
    dispatcher.subscribe("tool.executing", 10, |event: &Event<'_>| {
        if let Event::ToolExecuting(e) = event {
            e.slot.short_circuit(json!({"cached": e.args["x"]}));
        }
    });
    let later = Arc::new(Mutex::new(0));
    let counter = later.clone();
    dispatcher.subscribe("tool.executing", 0, move |_: &Event<'_>| {
        *counter.lock().unwrap() += 1
    });
    let log = recorder(&dispatcher);
    let result = registry
        .call("echo", json!({"x": 7}), &ToolContext::cli())
        .await;
    assert_eq!(result.data, json!({"cached": 7}));
    assert_eq!(result.meta.runtime().unwrap().tool(), "echo");
    assert_eq!(runs.count(), 0);
    assert_eq!(
        *later.lock().unwrap(),
        0,
        "listeners after a short-circuit do not run"
    );
    assert_eq!(*log.lock().unwrap(), ["executed:echo:cache=true"]);
    assert_eq!(only_record(&sink).outcome, AuditOutcome::CacheServed);
}

#[tokio::test]
async fn a_stop_vetoes_the_call_with_a_blocked_result() {
    let runs = Runs::default();
    let (registry, dispatcher, sink) = wired(&runs);
    dispatcher.subscribe("tool.executing", 0, |event: &Event<'_>| {
        if let Some(slot) = event.slot() {
            slot.stop();
        }
    });
    let log = recorder(&dispatcher);
    let result = registry.call("echo", json!({}), &ToolContext::cli()).await;
    assert!(!result.success);
    assert!(result.is_blocked());
    assert_eq!(
        result.error.as_deref(),
        Some("Tool execution vetoed by an event listener")
    );
    assert_eq!(result.code(), None);
    assert_eq!(runs.count(), 0);
    assert!(log.lock().unwrap().is_empty());
    assert_eq!(only_record(&sink).outcome, AuditOutcome::Vetoed);
}

#[tokio::test]
async fn stop_after_short_circuit_keeps_the_answer_and_a_later_short_circuit_overwrites() {
    let runs = Runs::default();
    let (registry, dispatcher, _) = wired(&runs);
    dispatcher.subscribe("tool.executing", 0, |event: &Event<'_>| {
        let slot = event.slot().unwrap();
        slot.short_circuit(json!(1));
        slot.short_circuit(ToolResult::success(json!(2)).with_message("from cache"));
        slot.stop();
    });
    let result = registry.call("echo", json!({}), &ToolContext::cli()).await;
    assert_eq!(result.data, json!(2));
    assert_eq!(result.message.as_deref(), Some("from cache"));
}

#[tokio::test]
async fn a_failing_listener_is_logged_and_the_call_goes_on() {
    let runs = Runs::default();
    let (registry, dispatcher, _) = wired(&runs);
    dispatcher.subscribe("tool.executing", 5, |_: &Event<'_>| -> Result<(), String> {
        Err("listener broke".into())
    });
    dispatcher.subscribe("tool.executed", 5, |_: &Event<'_>| -> () {
        panic!("listener panicked")
    });
    let log = recorder(&dispatcher);
    let result = registry
        .call("echo", json!({"x": 1}), &ToolContext::cli())
        .await;
    assert!(result.success);
    assert_eq!(runs.count(), 1);
    assert_eq!(log.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn a_cache_never_answers_a_denied_call() {
    let runs = Runs::default();
    let (registry, dispatcher, _) = wired(&runs);
    let invoked = Arc::new(Mutex::new(0));
    let counter = invoked.clone();
    dispatcher.subscribe("tool.executing", 0, move |event: &Event<'_>| {
        *counter.lock().unwrap() += 1;
        event.slot().unwrap().short_circuit(json!("cached secret"));
    });
    let ctx = ToolContext::mcp("r", Some("guest".into()), ["read"]);
    let result = registry.call("secret", json!({}), &ctx).await;
    assert_eq!(result.code(), Some(&ErrorCode::Forbidden));
    assert_eq!(*invoked.lock().unwrap(), 0);
}
