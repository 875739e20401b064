//! Concurrency and cancellation: calls run concurrently, `notifications/cancelled` cancels
//! the running call (no response, audited as cancelled), a client that goes away cancels its
//! calls, panicking or hanging tools become error results. Also the call handle's progress,
//! log filtering and client requests.

mod common;

use std::time::{Duration, Instant};

use common::{StdioClient, fixture, wait_for_cancelled};
use milpa::audit::AuditOutcome;
use milpa_mcp::ServerOptions;
use serde_json::json;

#[tokio::test]
async fn a_slow_call_does_not_block_others() {
    let mut client = StdioClient::start(fixture().registry, ServerOptions::default());
    client.initialize(json!({})).await;
    client
        .send(
            json!({"jsonrpc": "2.0", "id": "slow", "method": "tools/call",
            "params": {"name": "sleep", "arguments": {"ms": 2000}}}),
        )
        .await;
    let started = Instant::now();
    for i in 0..20 {
        let r = client.call("echo", json!({"text": format!("n{i}")})).await;
        assert_eq!(r["content"][0]["text"], format!("n{i}"));
    }
    assert!(
        started.elapsed() < Duration::from_millis(1900),
        "echo calls waited for the slow one"
    );
}

#[tokio::test]
async fn cancelled_calls_get_no_response_and_are_audited() {
    let f = fixture();
    let mut client = StdioClient::start(f.registry, ServerOptions::default());
    client.initialize(json!({})).await;
    client
        .send(json!({"jsonrpc": "2.0", "id": 77, "method": "tools/call",
            "params": {"name": "sleep", "arguments": {"ms": 5000}}}))
        .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    client
        .send(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 77, "reason": "changed my mind"}}),
        )
        .await;
    // The next response is the ping's, not the cancelled call's.
    let ping = client.request("ping", json!({})).await;
    assert_eq!(ping["result"], json!({}));
    assert!(
        wait_for_cancelled(&f.audit, Some("sleep")).await,
        "audited as cancelled"
    );
    // Nothing else arrives for id 77.
    client
        .send(json!({"jsonrpc": "2.0", "id": 78, "method": "ping"}))
        .await;
    let next = client.wait_for(|m| m.get("id").is_some()).await;
    assert_eq!(next["id"], 78);
    // Cancelling an unknown or finished request is ignored.
    client
        .send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 12345}}))
        .await;
    assert_eq!(client.request("ping", json!({})).await["result"], json!({}));
}

#[tokio::test]
async fn a_client_that_goes_away_cancels_its_calls() {
    let f = fixture();
    let options = ServerOptions::default();
    let mut client = StdioClient::start(f.registry, options);
    client.initialize(json!({})).await;
    client
        .send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "sleep", "arguments": {"ms": 10000}}}))
        .await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    client.close().await;
    let ended = tokio::time::timeout(Duration::from_secs(5), &mut client.server)
        .await
        .expect("the server ends promptly");
    assert!(ended.unwrap().is_ok());
    let records = f.audit.records();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].outcome, AuditOutcome::Cancelled);
}

#[tokio::test]
async fn running_calls_may_finish_after_end_of_input() {
    let f = fixture();
    let mut client = StdioClient::start(f.registry, ServerOptions::default());
    client.initialize(json!({})).await;
    client
        .send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "sleep", "arguments": {"ms": 100}}}))
        .await;
    client.close().await;
    let reply = client.response(&json!(1)).await;
    assert_eq!(
        reply["result"]["structuredContent"],
        json!({"slept_ms": 100})
    );
}

#[tokio::test]
async fn panicking_and_hanging_tools_become_error_results() {
    let mut client = StdioClient::start(fixture().registry, ServerOptions::default());
    client.initialize(json!({})).await;
    client
        .send(json!({"jsonrpc": "2.0", "id": "h", "method": "tools/call",
            "params": {"name": "hangs", "arguments": {}}}))
        .await;
    let r = client.call("panics", json!({})).await;
    assert_eq!(r["isError"], true);
    assert_eq!(r["_meta"]["milpa"]["code"], "INTERNAL_ERROR");
    let r = client.call("echo", json!({"text": "fine"})).await;
    assert_eq!(r["content"][0]["text"], "fine");
    let hung = client.response(&json!("h")).await;
    assert_eq!(hung["result"]["isError"], true);
    assert_eq!(hung["result"]["_meta"]["milpa"]["code"], "TIMEOUT");
}

#[tokio::test]
async fn progress_uses_the_request_token_and_logs_follow_the_level() {
    let mut client = StdioClient::start(fixture().registry, ServerOptions::default());
    client.initialize(json!({})).await;
    client
        .send(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
            "params": {"name": "sleep", "arguments": {"ms": 10}, "_meta": {"progressToken": "tok"}}}))
        .await;
    let reply = client.response(&json!(5)).await;
    assert_eq!(reply["result"]["isError"], false);
    let progress: Vec<_> = client
        .backlog
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .cloned()
        .collect();
    assert_eq!(progress.len(), 2);
    assert_eq!(progress[0]["params"]["progressToken"], "tok");
    assert_eq!(progress[0]["params"]["message"], "starting");
    assert_eq!(progress[1]["params"]["progress"], 10.0);
    let logs: Vec<_> = client
        .backlog
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .cloned()
        .collect();
    // Default level is info: the debug message is filtered.
    assert_eq!(logs.len(), 1);
    assert_eq!(
        logs[0]["params"],
        json!({"level": "info", "data": "sleeping"})
    );
    client.backlog.clear();

    // Without a progress token, no progress; at level debug, both logs.
    let set = client
        .request("logging/setLevel", json!({"level": "debug"}))
        .await;
    assert_eq!(set["result"], json!({}));
    client.call("sleep", json!({"ms": 1})).await;
    assert!(
        client
            .backlog
            .iter()
            .all(|m| m["method"] != "notifications/progress")
    );
    assert_eq!(
        client
            .backlog
            .iter()
            .filter(|m| m["method"] == "notifications/message")
            .count(),
        2
    );
    client.backlog.clear();
    client
        .request("logging/setLevel", json!({"level": "error"}))
        .await;
    client.call("sleep", json!({"ms": 1})).await;
    assert!(client.backlog.is_empty());
}

#[tokio::test]
async fn tools_can_ask_the_client_mid_call() {
    let mut client = StdioClient::start(fixture().registry, ServerOptions::default());
    client.initialize(json!({"sampling": {}})).await;
    client
        .send(json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
            "params": {"name": "ask", "arguments": {}}}))
        .await;
    let request = client
        .wait_for(|m| m["method"] == "sampling/createMessage")
        .await;
    assert_eq!(request["params"]["maxTokens"], 5);
    // Other requests are answered while the tool waits.
    assert_eq!(client.request("ping", json!({})).await["result"], json!({}));
    client
        .send(json!({"jsonrpc": "2.0", "id": request["id"], "result":
            {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}}))
        .await;
    let reply = client.response(&json!(9)).await;
    assert_eq!(
        reply["result"]["structuredContent"]["sampled"]["content"]["text"],
        "hi"
    );

    // A client error answer becomes the tool's error.
    client
        .send(json!({"jsonrpc": "2.0", "id": 10, "method": "tools/call",
            "params": {"name": "ask", "arguments": {}}}))
        .await;
    let request = client
        .wait_for(|m| m["method"] == "sampling/createMessage")
        .await;
    client
        .send(json!({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -1, "message": "user said no"}}))
        .await;
    let reply = client.response(&json!(10)).await;
    assert_eq!(reply["result"]["isError"], true);
    assert_eq!(reply["result"]["content"][0]["text"], "user said no");
}

#[tokio::test]
async fn requests_need_the_client_capability() {
    let mut client = StdioClient::start(fixture().registry, ServerOptions::default());
    client.initialize(json!({})).await;
    let r = client.call("ask", json!({})).await;
    assert_eq!(r["isError"], true);
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("sampling capability")
    );
}

#[tokio::test]
async fn cancelling_a_call_that_waits_on_the_client_withdraws_the_request() {
    let f = fixture();
    let mut client = StdioClient::start(f.registry, ServerOptions::default());
    client.initialize(json!({"sampling": {}})).await;
    client
        .send(json!({"jsonrpc": "2.0", "id": 11, "method": "tools/call",
            "params": {"name": "ask", "arguments": {}}}))
        .await;
    let request = client
        .wait_for(|m| m["method"] == "sampling/createMessage")
        .await;
    client
        .send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 11}}))
        .await;
    let withdrawn = client
        .wait_for(|m| m["method"] == "notifications/cancelled")
        .await;
    assert_eq!(withdrawn["params"]["requestId"], request["id"]);
    assert_eq!(client.request("ping", json!({})).await["result"], json!({}));
    assert!(wait_for_cancelled(&f.audit, Some("ask")).await);
    assert_eq!(f.audit.records()[0].outcome, AuditOutcome::Cancelled);
}

#[tokio::test]
async fn with_a_grace_period_tools_see_the_cancellation() {
    use milpa::{ToolContext, ToolDefinition, ToolRegistry};
    use std::sync::{Arc, Mutex};
    let seen = Arc::new(Mutex::new(false));
    let flag = seen.clone();
    let mut registry = ToolRegistry::builder()
        .channel_policy("mcp", milpa::policy::ChannelPolicy::CLI)
        .build();
    registry
        .register(ToolDefinition::builder("patient").asynchronous(
            move |_: serde_json::Value, ctx: ToolContext| {
                let flag = flag.clone();
                async move {
                    ctx.call_handle().cancelled().await;
                    *flag.lock().unwrap() = true;
                    json!("noticed")
                }
            },
        ))
        .unwrap();
    let mut options = ServerOptions::default();
    options.cancel_grace = Duration::from_secs(2);
    let mut client = StdioClient::start(Arc::new(registry), options);
    client.initialize(json!({})).await;
    client
        .send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "patient"}}))
        .await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    client
        .send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}))
        .await;
    for _ in 0..250 {
        if *seen.lock().unwrap() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(*seen.lock().unwrap(), "the tool saw the cancellation");
    // Still no response for the cancelled request.
    client
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
        .await;
    let next = client.wait_for(|m| m.get("id").is_some()).await;
    assert_eq!(next["id"], 2);
}

#[tokio::test]
async fn at_the_in_flight_limit_waiting_calls_still_reach_the_client() {
    let mut options = ServerOptions::default();
    options.max_in_flight = 2;
    let mut client = StdioClient::start(fixture().registry, options);
    client.initialize(json!({"sampling": {}})).await;
    for id in 1..=3 {
        client
            .send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "ask", "arguments": {}}}))
            .await;
    }
    for _ in 0..3 {
        let request = client
            .wait_for(|m| m["method"] == "sampling/createMessage")
            .await;
        client
            .send(json!({"jsonrpc": "2.0", "id": request["id"], "result":
                {"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "m"}}))
            .await;
    }
    for id in 1..=3 {
        let reply = client.response(&json!(id)).await;
        assert_eq!(reply["result"]["isError"], false);
    }
}
