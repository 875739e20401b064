//! Lists that change while served: a provider whose resources or prompts change says so
//! (`CatalogNotifier::lists_changed`), the registry reads the lists again, and each
//! client hears of the list that changed: every session up to 2025-11-25, a
//! `subscriptions/listen` that asked for it on 2026-07-28. The next listing shows the new
//! entries, and a read of one goes through as for any other.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::StdioClient;
use milpa::catalog::{
    CatalogError, Prompt, PromptMessage, PromptProvider, PromptReply, Resource, ResourceContents,
    ResourceProvider,
};
use milpa::{Deferred, ToolContext, ToolRegistry};
use milpa_mcp::ServerOptions;
use parking_lot::Mutex;
use serde_json::{Value, json};

/// Notes whose URIs the test changes.
struct Notes(Arc<Mutex<Vec<String>>>);

impl ResourceProvider for Notes {
    fn resources(&self) -> Vec<Resource> {
        let uris = self.0.lock();
        uris.iter()
            .map(|uri| Resource::new(uri.as_str(), "note"))
            .collect()
    }
    fn read<'a>(
        &'a self,
        uri: &'a str,
        _: &'a ToolContext,
    ) -> Deferred<'a, Result<Vec<ResourceContents>, CatalogError>> {
        Deferred::ready(Ok(vec![ResourceContents::text(
            uri,
            "text/plain",
            format!("text of {uri}"),
        )]))
    }
}

/// Prompts whose names the test changes.
struct Templates(Arc<Mutex<Vec<String>>>);

impl PromptProvider for Templates {
    fn prompts(&self) -> Vec<Prompt> {
        let names = self.0.lock();
        names
            .iter()
            .map(|name| Prompt::new(name.as_str(), "a prompt"))
            .collect()
    }
    fn get<'a>(
        &'a self,
        name: &'a str,
        _: &'a BTreeMap<String, String>,
        _: &'a ToolContext,
    ) -> Deferred<'a, Result<PromptReply, CatalogError>> {
        Deferred::ready(Ok(PromptReply::new(vec![PromptMessage::user(
            name.to_owned(),
        )])))
    }
}

struct Served {
    registry: Arc<ToolRegistry>,
    notes: Arc<Mutex<Vec<String>>>,
    prompts: Arc<Mutex<Vec<String>>>,
}

fn served() -> Served {
    let notes = Arc::new(Mutex::new(vec!["notes://1".to_owned()]));
    let prompts = Arc::new(Mutex::new(vec!["first".to_owned()]));
    let mut registry = ToolRegistry::new();
    registry
        .register_resources(Notes(Arc::clone(&notes)))
        .unwrap();
    registry
        .register_prompts(Templates(Arc::clone(&prompts)))
        .unwrap();
    Served {
        registry: Arc::new(registry),
        notes,
        prompts,
    }
}

fn uris(listed: &Value) -> Vec<String> {
    listed["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap().to_owned())
        .collect()
}

fn is_list_change(message: &Value) -> bool {
    message["method"]
        .as_str()
        .is_some_and(|m| m.ends_with("/list_changed"))
}

#[tokio::test]
async fn each_session_hears_which_list_changed_and_lists_it_anew() {
    let served = served();
    let notifier = served.registry.catalog_notifier();
    let mut client = StdioClient::start(served.registry.clone(), ServerOptions::default());
    let init = client.initialize(json!({})).await;
    let capabilities = &init["result"]["capabilities"];
    assert_eq!(capabilities["resources"]["listChanged"], true);
    assert_eq!(capabilities["prompts"]["listChanged"], true);

    served.notes.lock().push("notes://2".to_owned());
    notifier.lists_changed().unwrap();
    let note = client.wait_for(is_list_change).await;
    assert_eq!(note["method"], "notifications/resources/list_changed");
    let listed = client.request("resources/list", json!({})).await;
    assert_eq!(uris(&listed), ["notes://1", "notes://2"]);
    let read = client
        .request("resources/read", json!({"uri": "notes://2"}))
        .await;
    assert_eq!(read["result"]["contents"][0]["text"], "text of notes://2");

    // A removed resource is gone from the listing and from reads.
    served.notes.lock().remove(0);
    notifier.lists_changed().unwrap();
    client.wait_for(is_list_change).await;
    let gone = client
        .request("resources/read", json!({"uri": "notes://1"}))
        .await;
    assert_eq!(gone["error"]["code"], -32002, "{gone}");

    served.prompts.lock().push("second".to_owned());
    notifier.lists_changed().unwrap();
    let note = client.wait_for(is_list_change).await;
    assert_eq!(note["method"], "notifications/prompts/list_changed");
    let listed = client.request("prompts/list", json!({})).await;
    assert_eq!(listed["result"]["prompts"][1]["name"], "second");

    // Asked again with nothing changed: no word.
    notifier.lists_changed().unwrap();
    client.request("ping", json!({})).await;
    assert!(
        !client.backlog.iter().any(is_list_change),
        "{:?}",
        client.backlog
    );
}

#[tokio::test]
async fn a_change_that_would_clash_keeps_the_old_lists_and_tells_no_one() {
    let served = served();
    let mut registry = Arc::into_inner(served.registry).unwrap();
    let other = Arc::new(Mutex::new(vec!["notes://other".to_owned()]));
    registry
        .register_resources(Notes(Arc::clone(&other)))
        .unwrap();
    let registry = Arc::new(registry);
    let mut client = StdioClient::start(registry.clone(), ServerOptions::default());
    client.initialize(json!({})).await;

    served.notes.lock().push("notes://other".to_owned());
    let error = registry.refresh_catalog().unwrap_err();
    assert_eq!(error.to_string(), "already registered: notes://other");
    let listed = client.request("resources/list", json!({})).await;
    assert_eq!(uris(&listed), ["notes://1", "notes://other"]);
    assert!(!client.backlog.iter().any(is_list_change));
}

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}
    })
}

#[tokio::test]
async fn a_2026_listen_hears_only_the_lists_it_asked_for() {
    let served = served();
    let notifier = served.registry.catalog_notifier();
    let mut client = StdioClient::start(served.registry.clone(), ServerOptions::default());
    let discovered = client
        .request("server/discover", json!({"_meta": meta()}))
        .await;
    assert_eq!(
        discovered["result"]["capabilities"]["resources"]["listChanged"],
        true
    );
    client
        .send(
            json!({"jsonrpc": "2.0", "id": 70, "method": "subscriptions/listen", "params": {
            "notifications": {"resourcesListChanged": true}, "_meta": meta()}}),
        )
        .await;
    let ack = client.recv().await;
    assert_eq!(
        ack["params"]["notifications"],
        json!({"resourcesListChanged": true})
    );

    // The prompts change first: not asked for, not told.
    served.prompts.lock().push("second".to_owned());
    notifier.lists_changed().unwrap();
    served.notes.lock().push("notes://2".to_owned());
    notifier.lists_changed().unwrap();
    let note = client.recv().await;
    assert_eq!(
        note,
        json!({"jsonrpc": "2.0", "method": "notifications/resources/list_changed",
            "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": 70}}})
    );
    let listed = client
        .request("resources/list", json!({"_meta": meta()}))
        .await;
    assert_eq!(uris(&listed), ["notes://1", "notes://2"]);
    assert!(
        !client.backlog.iter().any(is_list_change),
        "{:?}",
        client.backlog
    );
}

/// `resourceSubscriptions` takes the place of `resources/subscribe`: the updates of the
/// resources named (and served) reach the subscription, tagged with its id; one not served
/// is left out of the acknowledgement, and another resource's update is not told.
#[tokio::test]
async fn a_2026_listen_hears_the_updates_of_the_resources_it_names() {
    let served = served();
    let notifier = served.registry.catalog_notifier();
    let mut client = StdioClient::start(served.registry.clone(), ServerOptions::default());
    let discovered = client
        .request("server/discover", json!({"_meta": meta()}))
        .await;
    assert_eq!(
        discovered["result"]["capabilities"]["resources"]["subscribe"],
        true
    );
    client
        .send(
            json!({"jsonrpc": "2.0", "id": 71, "method": "subscriptions/listen", "params": {
            "notifications": {"resourceSubscriptions": ["notes://1", "notes://nope"]},
            "_meta": meta()}}),
        )
        .await;
    let ack = client.recv().await;
    assert_eq!(
        ack["params"]["notifications"],
        json!({"resourceSubscriptions": ["notes://1"]})
    );
    notifier.updated("notes://other");
    notifier.updated("notes://1");
    let note = client.recv().await;
    assert_eq!(
        note,
        json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
            "params": {"uri": "notes://1",
                       "_meta": {"io.modelcontextprotocol/subscriptionId": 71}}})
    );

    // A filter that is not a list of URIs is refused.
    let refused = client
        .request(
            "subscriptions/listen",
            json!({"notifications": {"resourceSubscriptions": "notes://1"}, "_meta": meta()}),
        )
        .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
}
