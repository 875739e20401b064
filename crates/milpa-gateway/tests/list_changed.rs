//! An upstream whose tool list changes at run time (the `asking_server` example's
//! `toggle_extra`): the gateway discovers its tools again, the registry's tools are
//! replaced, and our client is told (`notifications/tools/list_changed`), lists the new
//! tool and calls it through the whole pipeline; a removed tool is not found.

mod common;

use common::{Client, Via};
use serde_json::{Value, json};

/// Waits for the answer to request `id` and for `notifications/tools/list_changed`, in
/// whichever order they come; returns the answer.
async fn answer_and_list_changed(client: &mut Client, id: u64) -> Value {
    let (mut answer, mut told) = (None, false);
    while answer.is_none() || !told {
        let message = client.recv().await;
        if message["method"] == "notifications/tools/list_changed" {
            told = true;
        } else if message["id"] == id {
            answer = Some(message);
        } else {
            panic!("unexpected: {message}");
        }
    }
    answer.unwrap()
}

async fn listed(client: &mut Client, id: u64) -> Vec<String> {
    client
        .send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}))
        .await;
    let page = client.recv().await;
    assert!(page["result"].get("nextCursor").is_none(), "{page}");
    page["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

async fn tools_follow_the_upstreams_list(via: Via) {
    let mut client = Client::connect(via, json!({})).await;
    let before = listed(&mut client, 2).await;
    assert_eq!(
        before,
        [
            "as__toggle_extra",
            "as__ask_model",
            "as__ask_user",
            "as__say"
        ]
    );

    client
        .call(3, "as__toggle_extra", json!({"on": true}))
        .await;
    let toggled = answer_and_list_changed(&mut client, 3).await;
    assert_ne!(toggled["result"]["isError"], true, "{toggled}");
    let after = listed(&mut client, 4).await;
    assert_eq!(
        after,
        [
            "as__toggle_extra",
            "as__ask_model",
            "as__ask_user",
            "as__say",
            "as__extra"
        ],
        "{via:?}"
    );

    client.call(5, "as__extra", json!({"text": "hola"})).await;
    let extra = client.recv().await;
    assert_eq!(
        extra["result"]["content"][0]["text"], "extra: hola",
        "{extra}"
    );
    assert!(
        client.audit.calls().contains(&("as__extra".into(), true)),
        "the call went through the pipeline: {:?}",
        client.audit.calls()
    );
    // Its schema is the upstream's, checked here.
    client.call(6, "as__extra", json!({})).await;
    let refused = client.recv().await;
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert_eq!(
        refused["result"]["_meta"]["milpa"]["code"], "VALIDATION_ERROR",
        "{refused}"
    );

    client
        .call(7, "as__toggle_extra", json!({"on": false}))
        .await;
    answer_and_list_changed(&mut client, 7).await;
    assert_eq!(listed(&mut client, 8).await, before, "{via:?}");
    client.call(9, "as__extra", json!({"text": "hola"})).await;
    let gone = client.recv().await;
    assert_eq!(
        gone["result"]["_meta"]["milpa"]["code"], "TOOL_NOT_FOUND",
        "{gone}"
    );
}

#[tokio::test]
async fn stdio_tools_follow_the_upstreams_list() {
    tools_follow_the_upstreams_list(Via::Stdio).await;
}

#[tokio::test]
async fn http_tools_follow_the_upstreams_list() {
    tools_follow_the_upstreams_list(Via::Http).await;
}
