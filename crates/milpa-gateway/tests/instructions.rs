//! An upstream's `instructions` reach the clients, under the upstream's name, in the
//! gateway server's own `initialize` answer.

mod common;

use common::{Client, Via};
use serde_json::json;

#[tokio::test]
async fn the_upstreams_instructions_come_under_its_name() {
    for via in [Via::Stdio, Via::Http] {
        let client = Client::connect(via, json!({})).await;
        assert_eq!(
            client.initialized["result"]["instructions"],
            "## as\nEach tool asks its caller something.",
            "{via:?}"
        );
    }
}
