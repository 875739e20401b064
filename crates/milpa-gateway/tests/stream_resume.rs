//! An HTTP upstream of 2025-11-25 may close a call's answer stream while the call runs on
//! (SEP-1699): the gateway takes it up again with `Last-Event-ID` and the call answers.
//! The upstream is the `catalog_server` example over Streamable HTTP.

mod common;

use common::{Client, Via};
use milpa_gateway::ProtocolChoice;
use serde_json::json;

#[tokio::test]
async fn a_stream_the_upstream_closes_mid_call_is_taken_up_again() {
    // 2026-07-28 has no resumption: the session revision it was made for.
    let upstream = common::start_example_speaking(
        "catalog_server",
        "cat",
        Via::Http,
        ProtocolChoice::Sessions,
    )
    .await;
    let mut client = Client::connect_to(upstream, json!({})).await;
    for id in 2..5 {
        client.call(id, "cat__close_stream", json!({})).await;
        let response = client.recv().await;
        assert_eq!(response["id"], id, "{response}");
        assert_ne!(response["result"]["isError"], true, "{response}");
        // The upstream did close its stream: the answer came on the resumed one.
        assert_eq!(
            response["result"]["structuredContent"],
            json!({"closed": true}),
            "{response}"
        );
    }
}
