//! An upstream's log reaches the client: `logging/setLevel` is asked of the upstream, and
//! its `notifications/message` come back with the upstream's name as the logger, at the
//! client's level. Over stdio (relayed to every client) and over Streamable HTTP (on the
//! call's own stream, to its client).

mod common;

use std::time::Duration;

use common::{Client, Via};
use serde_json::{Value, json};

/// Calls `as__say` until the log messages of a call are `wanted` (the level the client set
/// reaches the upstream in the background), and returns them.
async fn said(client: &mut Client, wanted: &[Value]) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let mut id = 10;
    loop {
        id += 1;
        client.call(id, "as__say", json!({"text": "hello"})).await;
        let mut logs = Vec::new();
        loop {
            let message = client.recv().await;
            if message["id"] == id {
                assert_eq!(message["result"]["isError"], false, "{message}");
                break;
            }
            if message["method"] == "notifications/message" {
                logs.push(message["params"].clone());
            }
        }
        if logs == wanted {
            return logs;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the upstream's log never came as wanted: {logs:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn the_upstreams_log_reaches_the_client_at_its_level(via: Via) {
    let mut client = Client::connect(via, json!({})).await;
    // Debug: below the upstream's own default (info), so its debug detail comes only once
    // the level was asked of it.
    client
        .send(
            json!({"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel",
            "params": {"level": "debug"}}),
        )
        .await;
    assert_eq!(client.recv().await["result"], json!({}));
    said(
        &mut client,
        &[
            json!({"level": "debug", "logger": "as", "data": "about to say hello"}),
            json!({"level": "info", "logger": "as", "data": "hello"}),
        ],
    )
    .await;
}

#[tokio::test]
async fn over_stdio() {
    the_upstreams_log_reaches_the_client_at_its_level(Via::Stdio).await;
}

#[tokio::test]
async fn over_http() {
    the_upstreams_log_reaches_the_client_at_its_level(Via::Http).await;
}

/// A client at `warning` gets neither line: what the upstream sends is filtered at the
/// client's level here too, whatever the upstream was asked for.
#[tokio::test]
async fn below_the_clients_level_nothing_is_sent() {
    for via in [Via::Stdio, Via::Http] {
        let mut client = Client::connect(via, json!({})).await;
        client
            .send(
                json!({"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel",
                "params": {"level": "warning"}}),
            )
            .await;
        assert_eq!(client.recv().await["result"], json!({}));
        for id in 3..6 {
            client.call(id, "as__say", json!({"text": "quiet"})).await;
            loop {
                let message = client.recv().await;
                assert_ne!(
                    message["method"], "notifications/message",
                    "{via:?}: {message}"
                );
                if message["id"] == id {
                    break;
                }
            }
        }
    }
}
