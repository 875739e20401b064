//! Which revision the gateway speaks to an upstream: `server/discover` first, 2026-07-28
//! with a server that lists it (the examples do, being milpa's), `initialize` when the
//! configuration says sessions. Both carry the same calls (see `relay.rs` and
//! `catalog.rs`, which run in each).

mod common;

use common::{Client, Via};
use milpa_gateway::ProtocolChoice;
use serde_json::json;

async fn speaks(via: Via, protocol: ProtocolChoice, expected: &str) {
    let upstream = common::start_example_speaking("asking_server", "as", via, protocol).await;
    assert_eq!(upstream.0.protocol().as_deref(), Some(expected), "{via:?}");
    // And a call goes through in it.
    let mut client = Client::connect_to(upstream, json!({"roots": {}})).await;
    client.call(2, "as__list_roots", json!({})).await;
    let asked = client.recv().await;
    assert_eq!(asked["method"], "roots/list", "{via:?} {expected}: {asked}");
    let roots = json!({"roots": []});
    client
        .send(json!({"jsonrpc": "2.0", "id": asked["id"], "result": roots}))
        .await;
    let response = client.recv().await;
    assert_eq!(response["result"]["structuredContent"], roots, "{response}");
}

#[tokio::test]
async fn a_server_that_lists_2026_07_28_is_spoken_to_in_it() {
    speaks(Via::Stdio, ProtocolChoice::Discover, "2026-07-28").await;
    speaks(Via::Http, ProtocolChoice::Discover, "2026-07-28").await;
    speaks(Via::Stdio, ProtocolChoice::Stateless, "2026-07-28").await;
}

#[tokio::test]
async fn sessions_when_the_configuration_says_so() {
    speaks(Via::Stdio, ProtocolChoice::Sessions, "2025-11-25").await;
    speaks(Via::Http, ProtocolChoice::Sessions, "2025-11-25").await;
}

/// A server still silent when `server/discover` has waited 5 s (here: one that sleeps 6 s
/// before it starts, as `npx -y` does while it downloads) is sent `initialize` too; it
/// reads its input in order, answers `server/discover` first, and is spoken to in
/// 2026-07-28.
#[tokio::test]
async fn a_server_slow_to_start_is_still_asked_what_it_speaks() {
    let server = common::example("asking_server");
    let config = milpa_gateway::UpstreamConfig::stdio(
        "slow",
        vec![
            "sh".into(),
            "-c".into(),
            format!("sleep 6; exec '{}'", server.display()),
        ],
    );
    let upstream = milpa_gateway::Upstream::start(config)
        .await
        .expect("it starts");
    assert_eq!(upstream.protocol().as_deref(), Some("2026-07-28"));
    assert!(!upstream.tools().is_empty());
}
