//! An upstream's resources and prompts pass through the gateway (the `catalog_server`
//! example, over stdio and over HTTP): listed, read, rendered and completed through the
//! registry's gates and audit; its list changes and its resource updates reach our client;
//! what another upstream serves first stays the first's.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::{Client, Via};
use milpa::{ToolContext, ToolRegistry};
use milpa_gateway::ProtocolChoice;
use serde_json::{Value, json};

/// Sends request `id` and waits for its answer; the notifications that came meanwhile are
/// added to `heard` (their methods, with the URI of an update).
async fn ask(
    client: &mut Client,
    id: u64,
    method: &str,
    params: Value,
    heard: &mut Vec<String>,
) -> Value {
    client
        .send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
        .await;
    loop {
        let message = client.recv().await;
        if message["id"] == id {
            return message;
        }
        heard.push(noted(&message));
    }
}

fn noted(message: &Value) -> String {
    match message["params"]["uri"].as_str() {
        Some(uri) => format!("{} {uri}", message["method"].as_str().unwrap_or("?")),
        None => message["method"].as_str().unwrap_or("?").to_owned(),
    }
}

/// Waits (up to 5 s) until `heard` holds `what`, reading notifications.
async fn hear(client: &mut Client, what: &str, heard: &mut Vec<String>) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !heard.iter().any(|h| h == what) {
        let Ok(message) = tokio::time::timeout_at(deadline, client.recv()).await else {
            return false;
        };
        heard.push(noted(&message));
    }
    true
}

fn uris(listing: &Value, key: &str, field: &str) -> Vec<String> {
    listing["result"][key]
        .as_array()
        .unwrap_or_else(|| panic!("{listing}"))
        .iter()
        .map(|entry| entry[field].as_str().unwrap().to_owned())
        .collect()
}

async fn resources_and_prompts_pass_through(via: Via, protocol: ProtocolChoice) {
    let upstream = common::start_example_speaking("catalog_server", "cat", via, protocol).await;
    let mut client = Client::connect_to(upstream, json!({})).await;
    let capabilities = &client.initialized["result"]["capabilities"];
    assert!(capabilities["resources"].is_object(), "{capabilities}");
    assert!(capabilities["prompts"].is_object(), "{capabilities}");
    let mut heard = Vec::new();

    let listed = ask(&mut client, 2, "resources/list", json!({}), &mut heard).await;
    assert_eq!(
        uris(&listed, "resources", "uri"),
        ["memo://hello", "memo://pixel"]
    );
    let hello = &listed["result"]["resources"][0];
    assert_eq!(
        (&hello["title"], &hello["description"], &hello["mimeType"]),
        (&json!("Hello"), &json!("A greeting"), &json!("text/plain")),
        "{hello}"
    );
    // Its annotations and `_meta` reach the client as the upstream gave them.
    assert_eq!(
        (&hello["annotations"], &hello["_meta"]),
        (
            &json!({"audience": ["user"], "priority": 0.5}),
            &json!({"example.com/origin": "catalog_server"})
        ),
        "{hello}"
    );
    let pixel_entry = &listed["result"]["resources"][1];
    assert!(
        pixel_entry.get("annotations").is_none() && pixel_entry.get("_meta").is_none(),
        "{pixel_entry}"
    );
    let templates = ask(
        &mut client,
        3,
        "resources/templates/list",
        json!({}),
        &mut heard,
    )
    .await;
    assert_eq!(
        uris(&templates, "resourceTemplates", "uriTemplate"),
        ["memo://notes/{id}"]
    );

    let read = ask(
        &mut client,
        4,
        "resources/read",
        json!({"uri": "memo://hello"}),
        &mut heard,
    )
    .await;
    assert_eq!(
        read["result"]["contents"][0]["text"], "hello from upstream",
        "{read}"
    );
    let note = ask(
        &mut client,
        5,
        "resources/read",
        json!({"uri": "memo://notes/7"}),
        &mut heard,
    )
    .await;
    assert_eq!(note["result"]["contents"][0]["text"], "note 7", "{note}");
    let pixel = ask(
        &mut client,
        6,
        "resources/read",
        json!({"uri": "memo://pixel"}),
        &mut heard,
    )
    .await;
    assert_eq!(
        pixel["result"]["contents"][0]["blob"], "iVBORw==",
        "{pixel}"
    );
    assert_eq!(
        pixel["result"]["contents"][0]["mimeType"], "image/png",
        "{pixel}"
    );
    let missing = ask(
        &mut client,
        7,
        "resources/read",
        json!({"uri": "memo://nope"}),
        &mut heard,
    )
    .await;
    assert_eq!(missing["error"]["code"], -32002, "{missing}");

    let prompts = ask(&mut client, 8, "prompts/list", json!({}), &mut heard).await;
    assert_eq!(uris(&prompts, "prompts", "name"), ["cat__greet"]);
    assert_eq!(
        prompts["result"]["prompts"][0]["title"], "Greeting",
        "{prompts}"
    );
    assert_eq!(
        prompts["result"]["prompts"][0]["arguments"][0]["required"], true,
        "{prompts}"
    );
    assert_eq!(
        prompts["result"]["prompts"][0]["_meta"],
        json!({"example.com/origin": "catalog_server"}),
        "{prompts}"
    );
    let greeting = ask(
        &mut client,
        9,
        "prompts/get",
        json!({"name": "cat__greet", "arguments": {"name": "Ana"}}),
        &mut heard,
    )
    .await;
    assert_eq!(
        greeting["result"]["messages"][0],
        json!({"role": "user", "content": {"type": "text", "text": "Say hello to Ana"}}),
        "{greeting}"
    );
    let names = ask(
        &mut client,
        10,
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "cat__greet"},
               "argument": {"name": "name", "value": "An"}}),
        &mut heard,
    )
    .await;
    assert_eq!(
        names["result"]["completion"]["values"],
        json!(["Ana", "Andrés"]),
        "{names}"
    );
    let ids = ask(
        &mut client,
        11,
        "completion/complete",
        json!({"ref": {"type": "ref/resource", "uri": "memo://notes/{id}"},
               "argument": {"name": "id", "value": "1"}}),
        &mut heard,
    )
    .await;
    assert_eq!(
        ids["result"]["completion"]["values"],
        json!(["1", "10"]),
        "{ids}"
    );

    // A subscription is asked of the upstream (2026-07-28: through its
    // `subscriptions/listen`); its update reaches us. The upstream is asked in the
    // background, so the update is announced until it is heard.
    let subscribed = ask(
        &mut client,
        12,
        "resources/subscribe",
        json!({"uri": "memo://hello"}),
        &mut heard,
    )
    .await;
    assert_eq!(subscribed["result"], json!({}), "{subscribed}");
    let mut updated = false;
    for id in 13..23 {
        let touched = ask(
            &mut client,
            id,
            "tools/call",
            json!({"name": "cat__touch_memo", "arguments": {"uri": "memo://hello"}}),
            &mut heard,
        )
        .await;
        assert_ne!(touched["result"]["isError"], true, "{touched}");
        if hear(
            &mut client,
            "notifications/resources/updated memo://hello",
            &mut heard,
        )
        .await
        {
            updated = true;
            break;
        }
    }
    assert!(updated, "no update reached the client: {heard:?}");

    // A resource added upstream is listed here, and the client is told.
    let added = ask(
        &mut client,
        30,
        "tools/call",
        json!({"name": "cat__add_memo", "arguments": {"id": "x1"}}),
        &mut heard,
    )
    .await;
    assert_ne!(added["result"]["isError"], true, "{added}");
    assert!(
        hear(
            &mut client,
            "notifications/resources/list_changed",
            &mut heard
        )
        .await,
        "{heard:?}"
    );
    let relisted = ask(&mut client, 31, "resources/list", json!({}), &mut heard).await;
    assert_eq!(
        uris(&relisted, "resources", "uri"),
        ["memo://hello", "memo://pixel", "memo://x1"]
    );

    // Each read and prompt went through the registry's audit, refusals included.
    let audited = client.audit.calls();
    for expected in [
        ("memo://hello", true),
        ("memo://notes/7", true),
        ("memo://nope", false),
        ("cat__greet", true),
    ] {
        assert!(
            audited
                .iter()
                .any(|(name, ok)| name == expected.0 && *ok == expected.1),
            "{expected:?} not in {audited:?}"
        );
    }
}

#[tokio::test]
async fn resources_and_prompts_pass_through_a_stdio_upstream() {
    resources_and_prompts_pass_through(Via::Stdio, ProtocolChoice::Discover).await;
}

#[tokio::test]
async fn resources_and_prompts_pass_through_an_http_upstream() {
    resources_and_prompts_pass_through(Via::Http, ProtocolChoice::Discover).await;
}

#[tokio::test]
async fn resources_and_prompts_pass_through_a_stdio_upstream_over_sessions() {
    resources_and_prompts_pass_through(Via::Stdio, ProtocolChoice::Sessions).await;
}

#[tokio::test]
async fn resources_and_prompts_pass_through_an_http_upstream_over_sessions() {
    resources_and_prompts_pass_through(Via::Http, ProtocolChoice::Sessions).await;
}

/// Two upstreams serving the same URIs: the first keeps them, the second's are left out;
/// their prompts, prefixed, are both served.
#[tokio::test]
async fn what_the_first_upstream_serves_stays_its_own() {
    let registry = Arc::new(ToolRegistry::new());
    let first = common::start_example("catalog_server", "a", Via::Stdio).await;
    first.0.follow_tool_list(&registry);
    let second = common::start_example("catalog_server", "b", Via::Stdio).await;
    second.0.follow_tool_list(&registry);

    let snapshot = registry.catalog_snapshot();
    let resources: Vec<&str> = snapshot.resources().map(|r| r.uri()).collect();
    assert_eq!(resources, ["memo://hello", "memo://pixel"]);
    assert_eq!(snapshot.templates().count(), 1);
    let prompts: Vec<&str> = snapshot.prompts().map(|p| p.name()).collect();
    assert_eq!(prompts, ["a__greet", "b__greet"]);

    let ctx = ToolContext::cli();
    let read = registry.read_resource("memo://hello", &ctx).await.unwrap();
    assert_eq!(read[0].uri(), "memo://hello");
    let arguments = BTreeMap::from([("name".to_owned(), "Bo".to_owned())]);
    let reply = registry
        .get_prompt("b__greet", &arguments, &ctx)
        .await
        .unwrap();
    assert_eq!(
        reply.messages[0],
        milpa::catalog::PromptMessage::user("Say hello to Bo")
    );
}

/// `hide` and `scopes` by glob: a hidden resource is neither listed nor read, a scoped
/// template and prompt need the scope.
#[tokio::test]
async fn overrides_hide_and_scope_what_the_upstream_offers() {
    use milpa_gateway::{CatalogOverride, Upstream, UpstreamConfig};

    let server = common::example("catalog_server").display().to_string();
    let mut config = UpstreamConfig::stdio("cat", vec![server]);
    let mut hidden = CatalogOverride::default();
    hidden.hide = Some(true);
    let mut scoped = CatalogOverride::default();
    scoped.scopes = Some(vec!["memo:read".into()]);
    config.resource_overrides = vec![
        ("memo://pix*".into(), hidden),
        ("memo://notes/*".into(), scoped.clone()),
    ];
    config.prompt_overrides = vec![("greet".into(), scoped)];
    let upstream = Upstream::start(config).await.expect("it starts");
    let registry = Arc::new(ToolRegistry::new());
    upstream.follow_tool_list(&registry);

    let snapshot = registry.catalog_snapshot();
    let resources: Vec<&str> = snapshot.resources().map(|r| r.uri()).collect();
    assert_eq!(resources, ["memo://hello"]);
    let without = ToolContext::mcp("r1", Some("ana".into()), Vec::<String>::new());
    assert!(
        registry
            .read_resource("memo://pixel", &without)
            .await
            .is_err()
    );
    let refused = registry
        .read_resource("memo://notes/7", &without)
        .await
        .unwrap_err();
    assert!(
        refused.message().contains("memo:read"),
        "{}",
        refused.message()
    );
    let arguments = BTreeMap::from([("name".to_owned(), "Ana".to_owned())]);
    assert!(
        registry
            .get_prompt("cat__greet", &arguments, &without)
            .await
            .is_err()
    );

    let with = ToolContext::mcp("r2", Some("ana".into()), vec!["memo:read".to_owned()]);
    let note = registry
        .read_resource("memo://notes/7", &with)
        .await
        .unwrap();
    assert_eq!(
        note[0],
        milpa::catalog::ResourceContents::text("memo://notes/7", "text/plain", "note 7")
    );
    assert!(
        registry
            .get_prompt("cat__greet", &arguments, &with)
            .await
            .is_ok()
    );
    // Unscoped resources stay open to the same caller.
    assert!(
        registry
            .read_resource("memo://hello", &without)
            .await
            .is_ok()
    );
}

/// `human_approval` on a resource glob (`confirm = "human"` in a manifest): a read of a
/// matching URI waits for a person's grant in the registry's approval queue before it is
/// forwarded; the others are read at once.
#[tokio::test]
async fn a_resource_override_can_make_reads_wait_for_a_person() {
    use milpa::ErrorCode;
    use milpa::approval::Verdict;
    use milpa_gateway::{CatalogOverride, Upstream, UpstreamConfig};

    let server = common::example("catalog_server").display().to_string();
    let mut config = UpstreamConfig::stdio("cat", vec![server]);
    let mut guarded = CatalogOverride::default();
    guarded.human_approval = Some(true);
    config.resource_overrides = vec![("memo://notes/*".into(), guarded)];
    let upstream = Upstream::start(config).await.expect("it starts");
    let registry = Arc::new(ToolRegistry::new());
    upstream.follow_tool_list(&registry);

    let agent = ToolContext::mcp("r1", Some("agent".into()), Vec::<String>::new());
    assert!(registry.read_resource("memo://hello", &agent).await.is_ok());
    let refused = registry
        .read_resource("memo://notes/7", &agent)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), &ErrorCode::ApprovalPending, "{refused}");
    let id = refused.approval_id().unwrap().to_owned();
    let alice = ToolContext::web("alice", ["approvals:grant"]);
    registry
        .approvals()
        .decide(&id, Verdict::Grant, None, &alice)
        .await
        .unwrap();
    let note = registry
        .read_resource("memo://notes/7", &agent)
        .await
        .unwrap();
    assert_eq!(
        note[0],
        milpa::catalog::ResourceContents::text("memo://notes/7", "text/plain", "note 7")
    );
}
