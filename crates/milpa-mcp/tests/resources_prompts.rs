//! Resources, prompts and completion over MCP: listed, read and rendered through the
//! registry's gates on both transports and both eras; refusals are JSON-RPC errors that
//! say why, and leave an audit record of their own kind; subscriptions hear of updates.

mod common;

use std::collections::BTreeMap;

use common::{JSON_HEADERS, StdioClient, fixture_with, http, http_initialize, start_http};
use milpa::audit::AuditOutcome;
use milpa::catalog::{
    CatalogError, Prompt, PromptArgument, PromptMessage, PromptProvider, PromptReply, Resource,
    ResourceContents, ResourceProvider, ResourceTemplate,
};
use milpa::policy::Access;
use milpa::{Deferred, LogLevel, ToolContext, ToolRegistry};
use milpa_mcp::auth::{StaticTokens, sha256_hex};
use milpa_mcp::{HttpServer, ServerOptions};
use serde_json::{Value, json};

struct Docs;

impl ResourceProvider for Docs {
    fn resources(&self) -> Vec<Resource> {
        vec![
            Resource::new("docs://readme", "readme").with_mime_type("text/plain"),
            Resource::new("docs://other", "other").with_mime_type("text/plain"),
        ]
    }
    fn templates(&self) -> Vec<ResourceTemplate> {
        vec![ResourceTemplate::new("docs://notes/{id}", "note").unwrap()]
    }
    fn read<'a>(
        &'a self,
        uri: &'a str,
        ctx: &'a ToolContext,
    ) -> Deferred<'a, Result<Vec<ResourceContents>, CatalogError>> {
        // A provider logs as a tool does, through its call handle.
        let handle = ctx.call_handle();
        handle.log_with_logger(LogLevel::Debug, "docs", json!(format!("looking up {uri}")));
        handle.log_with_logger(LogLevel::Warning, "docs", json!(format!("read {uri}")));
        Deferred::ready(Ok(vec![ResourceContents::text(
            uri,
            "text/plain",
            format!("text of {uri}"),
        )]))
    }
}

struct Greetings;

impl PromptProvider for Greetings {
    fn prompts(&self) -> Vec<Prompt> {
        vec![Prompt::new("greet", "Greets someone").with_argument(PromptArgument::required("name"))]
    }
    fn get<'a>(
        &'a self,
        _name: &'a str,
        arguments: &'a BTreeMap<String, String>,
        _ctx: &'a ToolContext,
    ) -> Deferred<'a, Result<PromptReply, CatalogError>> {
        let text = format!("Say hello to {}", arguments["name"]);
        Deferred::ready(Ok(PromptReply::new(vec![PromptMessage::user(text)])))
    }
    fn complete<'a>(&'a self, _: &'a str, _: &'a str, value: &'a str) -> Deferred<'a, Vec<String>> {
        Deferred::ready(
            ["Ana", "Bo", "Bea"]
                .iter()
                .filter(|n| n.starts_with(value))
                .map(|n| n.to_string())
                .collect(),
        )
    }
}

fn registry(
    anonymous_ok: bool,
) -> (
    std::sync::Arc<ToolRegistry>,
    std::sync::Arc<milpa::audit::MemoryAuditSink>,
) {
    let f = fixture_with(anonymous_ok, |b| b);
    let mut registry =
        std::sync::Arc::try_unwrap(f.registry).unwrap_or_else(|_| panic!("one owner"));
    registry.register_resources(Docs).unwrap();
    registry.register_prompts(Greetings).unwrap();
    (std::sync::Arc::new(registry), f.audit)
}

#[tokio::test]
async fn stdio_lists_reads_renders_and_completes() {
    let (registry, audit) = registry(false);
    let mut client = StdioClient::start(registry, ServerOptions::default());
    let init = client.initialize(json!({})).await;
    assert_eq!(
        init["result"]["capabilities"]["resources"]["subscribe"],
        true
    );
    assert!(init["result"]["capabilities"]["completions"].is_object());

    let list = client.request("resources/list", json!({})).await;
    assert_eq!(
        list["result"]["resources"][0],
        json!({"uri": "docs://readme", "name": "readme", "mimeType": "text/plain"})
    );
    let templates = client.request("resources/templates/list", json!({})).await;
    assert_eq!(
        templates["result"]["resourceTemplates"][0]["uriTemplate"],
        "docs://notes/{id}"
    );
    let read = client
        .request("resources/read", json!({"uri": "docs://notes/4"}))
        .await;
    assert_eq!(
        read["result"]["contents"],
        json!([{"uri": "docs://notes/4", "mimeType": "text/plain", "text": "text of docs://notes/4"}])
    );
    let record = audit.take().pop().unwrap();
    assert_eq!(
        (record.kind, record.outcome, record.tool.as_str()),
        (
            Access::ReadResource,
            AuditOutcome::Executed,
            "docs://notes/4"
        )
    );

    let missing = client
        .request("resources/read", json!({"uri": "docs://nope"}))
        .await;
    assert_eq!(missing["error"]["code"], -32002);
    assert_eq!(
        missing["error"]["message"],
        "Resource not found: docs://nope"
    );
    assert_eq!(
        missing["error"]["data"],
        json!({"code": "NOT_FOUND", "uri": "docs://nope"})
    );
    let malformed = client
        .request("resources/read", json!({"url": "docs://readme"}))
        .await;
    assert_eq!(malformed["error"]["code"], -32602);
    assert_eq!(
        malformed["error"]["message"],
        "Invalid params for resources/read: missing field `uri`"
    );

    let prompts = client.request("prompts/list", json!({})).await;
    assert_eq!(
        prompts["result"]["prompts"],
        json!([{"name": "greet", "description": "Greets someone", "arguments": [{"name": "name", "required": true}]}])
    );
    let got = client
        .request(
            "prompts/get",
            json!({"name": "greet", "arguments": {"name": "Bo"}}),
        )
        .await;
    assert_eq!(
        got["result"]["messages"],
        json!([{"role": "user", "content": {"type": "text", "text": "Say hello to Bo"}}])
    );
    let unnamed = client
        .request("prompts/get", json!({"name": "greet"}))
        .await;
    assert_eq!(unnamed["error"]["code"], -32602);
    assert_eq!(
        unnamed["error"]["message"],
        "Missing required argument(s) for prompt 'greet': name"
    );
    assert_eq!(
        audit.take().last().unwrap().outcome,
        AuditOutcome::InvalidArguments
    );

    let completed = client
        .request(
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "name", "value": "B"}}),
        )
        .await;
    assert_eq!(
        completed["result"]["completion"],
        json!({"values": ["Bo", "Bea"], "total": 2, "hasMore": false})
    );
    // The server still serves tools after all of that.
    assert_eq!(
        client.call("echo", json!({"text": "hi"})).await["isError"],
        false
    );
}

/// What a provider logs reaches the client as `notifications/message`, at the level the
/// client set: nothing below it.
#[tokio::test]
async fn a_providers_log_reaches_the_client_at_its_level() {
    let (registry, _audit) = registry(false);
    let mut client = StdioClient::start(registry, ServerOptions::default());
    client.initialize(json!({})).await;
    let set = client
        .request("logging/setLevel", json!({"level": "warning"}))
        .await;
    assert_eq!(set["result"], json!({}));
    let id = client.next_id();
    client
        .send(json!({"jsonrpc": "2.0", "id": id, "method": "resources/read", "params": {"uri": "docs://readme"}}))
        .await;
    let read = client.response(&id).await;
    assert_eq!(
        read["result"]["contents"][0]["text"],
        "text of docs://readme"
    );
    // The stdio writer may put the reply before the messages sent while it was made.
    let log = client
        .wait_for(|m| m["method"] == "notifications/message")
        .await;
    assert_eq!(
        log["params"],
        json!({"level": "warning", "logger": "docs", "data": "read docs://readme"})
    );
    // The debug message was below the level: never sent.
    assert_eq!(client.request("ping", json!({})).await["result"], json!({}));
    assert!(
        !client
            .backlog
            .iter()
            .any(|m| m["method"] == "notifications/message"),
        "{:?}",
        client.backlog
    );
}

#[tokio::test]
async fn a_subscribed_resource_is_announced_and_an_unsubscribed_one_is_not() {
    let (registry, _audit) = registry(false);
    let notifier = registry.catalog_notifier();
    let mut client = StdioClient::start(registry, ServerOptions::default());
    client.initialize(json!({})).await;
    let unknown = client
        .request("resources/subscribe", json!({"uri": "docs://nope"}))
        .await;
    assert_eq!(unknown["error"]["code"], -32002);
    let ok = client
        .request("resources/subscribe", json!({"uri": "docs://readme"}))
        .await;
    assert_eq!(ok["result"], json!({}));
    notifier.updated("docs://readme");
    let updated = client
        .wait_for(|m| m["method"] == "notifications/resources/updated")
        .await;
    assert_eq!(updated["params"], json!({"uri": "docs://readme"}));

    client
        .request("resources/unsubscribe", json!({"uri": "docs://readme"}))
        .await;
    client
        .request("resources/subscribe", json!({"uri": "docs://other"}))
        .await;
    notifier.updated("docs://readme");
    notifier.updated("docs://other");
    let next = client
        .wait_for(|m| m["method"] == "notifications/resources/updated")
        .await;
    assert_eq!(
        next["params"]["uri"], "docs://other",
        "no word of the unsubscribed one"
    );
}

fn answer(response: &common::HttpResponse) -> Value {
    if response
        .header("content-type")
        .is_some_and(|t| t.starts_with("text/event-stream"))
    {
        response.sse_messages().pop().expect("a message")
    } else {
        response.json()
    }
}

#[tokio::test]
async fn http_refuses_anonymous_reads_with_the_gates_message_and_audits_them() {
    let (registry, audit) = registry(false);
    let (addr, _stop) = start_http(HttpServer::new(registry)).await;
    let session = http_initialize(addr, &[]).await;
    let mut headers = JSON_HEADERS.to_vec();
    headers.push(("Mcp-Session-Id", &session));
    headers.push(("MCP-Protocol-Version", "2025-11-25"));
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"uri": "docs://readme"}});
    let response = http(addr, "POST", &headers, body.to_string().as_bytes()).await;
    let refused = answer(&response);
    assert_eq!(refused["error"]["code"], -32003);
    assert_eq!(
        refused["error"]["message"],
        "channel 'mcp' requires an authenticated principal (require_auth) \u{2014} none provided."
    );
    assert_eq!(refused["error"]["data"]["code"], "FORBIDDEN");
    let record = audit.take().pop().unwrap();
    assert_eq!(
        (record.kind, record.outcome),
        (Access::ReadResource, AuditOutcome::Denied)
    );
    // A listing shows what the caller could use: here, nothing.
    let list = json!({"jsonrpc": "2.0", "id": 3, "method": "prompts/list"});
    let listed = answer(&http(addr, "POST", &headers, list.to_string().as_bytes()).await);
    assert_eq!(listed["result"]["prompts"], json!([]));
}

/// `tools/list`, `resources/list` and `prompts/list` leave out what the caller's scopes
/// do not reach; `list_all` lists everything to everyone; a 2026-07-28 listing made for
/// its caller is cached privately.
#[tokio::test]
async fn listings_show_a_caller_only_what_it_could_use() {
    struct Vault;
    impl ResourceProvider for Vault {
        fn resources(&self) -> Vec<Resource> {
            vec![
                Resource::new("vault://open", "open"),
                Resource::new("vault://secret", "secret").with_scopes(["vault:read"]),
            ]
        }
        fn read<'a>(
            &'a self,
            uri: &'a str,
            _ctx: &'a ToolContext,
        ) -> Deferred<'a, Result<Vec<ResourceContents>, CatalogError>> {
            Deferred::ready(Ok(vec![ResourceContents::text(uri, "text/plain", "x")]))
        }
    }
    let f = fixture_with(false, |b| b);
    let mut registry =
        std::sync::Arc::try_unwrap(f.registry).unwrap_or_else(|_| panic!("one owner"));
    registry.register_resources(Vault).unwrap();
    registry
        .register(
            milpa::ToolDefinition::builder("vault_wipe")
                .scopes(["vault:admin"])
                .sync(|_, _| json!(1)),
        )
        .unwrap();
    let registry = std::sync::Arc::new(registry);
    let tokens = || {
        let mut tokens = StaticTokens::new();
        tokens
            .insert_sha256_hex(&sha256_hex("a"), "alice", ["vault:read", "vault:admin"])
            .unwrap();
        tokens
            .insert_sha256_hex(&sha256_hex("b"), "bob", ["other"])
            .unwrap();
        tokens
    };
    let list = |addr, token: &'static str, method: &'static str, modern: bool| async move {
        let auth = format!("Bearer {token}");
        let mut headers = JSON_HEADERS.to_vec();
        headers.push(("Authorization", &auth));
        let body = if modern {
            headers.extend([
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", method),
            ]);
            json!({"jsonrpc": "2.0", "id": 2, "method": method, "params": {"_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            }}})
        } else {
            json!({"jsonrpc": "2.0", "id": 2, "method": method})
        };
        if !modern {
            let session = http_initialize(addr, &[("Authorization", &auth)]).await;
            let mut with = headers.clone();
            with.push(("Mcp-Session-Id", &session));
            return answer(&http(addr, "POST", &with, body.to_string().as_bytes()).await);
        }
        answer(&http(addr, "POST", &headers, body.to_string().as_bytes()).await)
    };
    let names = |answer: &Value, key: &str, field: &str| -> Vec<String> {
        answer["result"][key]
            .as_array()
            .unwrap_or_else(|| panic!("{answer}"))
            .iter()
            .map(|e| e[field].as_str().unwrap().to_owned())
            .collect()
    };

    let (addr, _stop) = start_http(HttpServer::new(registry.clone()).authenticator(tokens())).await;
    let alice = list(addr, "a", "resources/list", false).await;
    assert_eq!(
        names(&alice, "resources", "uri"),
        ["vault://open", "vault://secret"]
    );
    let bob = list(addr, "b", "resources/list", false).await;
    assert_eq!(names(&bob, "resources", "uri"), ["vault://open"]);
    let alice_tools = names(&list(addr, "a", "tools/list", false).await, "tools", "name");
    let bob_tools = names(&list(addr, "b", "tools/list", false).await, "tools", "name");
    assert!(
        alice_tools.contains(&"vault_wipe".to_owned()),
        "{alice_tools:?}"
    );
    assert!(
        !bob_tools.contains(&"vault_wipe".to_owned()),
        "{bob_tools:?}"
    );
    assert_eq!(alice_tools.len(), bob_tools.len() + 1);
    let modern = list(addr, "b", "tools/list", true).await;
    assert_eq!(modern["result"]["cacheScope"], "private");
    assert_eq!(names(&modern, "tools", "name"), bob_tools);

    let mut options = ServerOptions::default();
    options.list_all = true;
    let (addr, _stop) = start_http(
        HttpServer::new(registry)
            .authenticator(tokens())
            .options(options),
    )
    .await;
    let bob = list(addr, "b", "resources/list", false).await;
    assert_eq!(
        names(&bob, "resources", "uri"),
        ["vault://open", "vault://secret"]
    );
    let modern = list(addr, "b", "tools/list", true).await;
    assert_eq!(modern["result"]["cacheScope"], "public");
    assert_eq!(names(&modern, "tools", "name"), alice_tools);
}

#[tokio::test]
async fn the_2026_revision_reads_with_result_type_and_no_caching() {
    let (registry, _audit) = registry(true);
    let (addr, _stop) = start_http(HttpServer::new(registry)).await;
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let send = |uri: &'static str| {
        let meta = meta.clone();
        async move {
            let mut headers = JSON_HEADERS.to_vec();
            headers.extend([
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "resources/read"),
                ("Mcp-Name", uri),
            ]);
            let body = json!({"jsonrpc": "2.0", "id": 5, "method": "resources/read", "params": {"uri": uri, "_meta": meta}});
            http(addr, "POST", &headers, body.to_string().as_bytes()).await
        }
    };
    let read = send("docs://readme").await;
    let result = answer(&read)["result"].clone();
    assert_eq!(
        (
            result["resultType"].clone(),
            result["ttlMs"].clone(),
            result["cacheScope"].clone()
        ),
        (json!("complete"), json!(0), json!("private"))
    );
    assert_eq!(result["contents"][0]["text"], "text of docs://readme");
    let missing = send("docs://nope").await;
    assert_eq!(missing.status, 400);
    let error = answer(&missing)["error"].clone();
    assert_eq!(
        (error["code"].clone(), error["data"]["uri"].clone()),
        (json!(-32602), json!("docs://nope"))
    );
}

/// `interview(topic)`: asks the client for a detail, then renders with it.
struct Interview;

impl PromptProvider for Interview {
    fn prompts(&self) -> Vec<Prompt> {
        vec![
            Prompt::new("interview", "Asks first").with_argument(PromptArgument::required("topic")),
        ]
    }

    fn get<'a>(
        &'a self,
        _name: &'a str,
        arguments: &'a BTreeMap<String, String>,
        ctx: &'a ToolContext,
    ) -> Deferred<'a, Result<PromptReply, CatalogError>> {
        Deferred::pending(async move {
            let question = json!({
                "message": "Which detail?",
                "requestedSchema": {"type": "object", "properties": {"detail": {"type": "string"}}},
                "_meta": {milpa_mcp::protocol::INPUT_KEY_META: "detail"},
            });
            let answer = ctx
                .call_handle()
                .request("elicitation/create", question)
                .await
                .map_err(|e| CatalogError::failed(e.to_string()))?;
            let text = format!(
                "{} about {}",
                arguments["topic"],
                answer["content"]["detail"].as_str().unwrap_or("?")
            );
            Ok(PromptReply::new(vec![PromptMessage::user(text)]))
        })
    }
}

/// 2026-07-28: a prompt that asks the client answers `input_required`; the retry with the
/// answer and the sealed state renders it; a state replayed with other arguments is refused.
#[tokio::test]
async fn a_prompt_that_asks_the_client_takes_an_input_round() {
    let f = fixture_with(true, |b| b);
    let mut registry =
        std::sync::Arc::try_unwrap(f.registry).unwrap_or_else(|_| panic!("one owner"));
    registry.register_prompts(Interview).unwrap();
    let (addr, _stop) = start_http(HttpServer::new(std::sync::Arc::new(registry))).await;
    let get = |params: Value| async move {
        let mut params = params;
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        });
        let mut headers = JSON_HEADERS.to_vec();
        headers.extend([
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "prompts/get"),
            ("Mcp-Name", "interview"),
        ]);
        let body = json!({"jsonrpc": "2.0", "id": 9, "method": "prompts/get", "params": params});
        answer(&http(addr, "POST", &headers, body.to_string().as_bytes()).await)
    };
    let first = get(json!({"name": "interview", "arguments": {"topic": "rust"}})).await;
    let round = &first["result"];
    assert_eq!(round["resultType"], "input_required", "{first}");
    assert_eq!(
        round["inputRequests"]["detail"]["method"],
        "elicitation/create"
    );
    let state = round["requestState"].as_str().unwrap().to_owned();
    let accepted = json!({"action": "accept", "content": {"detail": "lifetimes"}});

    let done = get(json!({"name": "interview", "arguments": {"topic": "rust"},
        "inputResponses": {"detail": accepted}, "requestState": state}))
    .await;
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(
        done["result"]["messages"][0]["content"]["text"],
        "rust about lifetimes"
    );

    let replayed = get(json!({"name": "interview", "arguments": {"topic": "go"},
        "inputResponses": {"detail": accepted}, "requestState": state}))
    .await;
    assert_eq!(replayed["error"]["code"], -32602, "{replayed}");
    assert!(
        replayed["error"]["message"]
            .as_str()
            .unwrap()
            .contains("requestState"),
        "{replayed}"
    );
}

/// A resource, a template and a prompt that carry what a client reads besides their names:
/// annotations, icons and `_meta`.
struct Annotated;

fn object(value: Value) -> serde_json::Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

fn resource_annotations() -> Value {
    json!({"audience": ["user"], "priority": 0.5, "lastModified": "2025-01-12T15:00:58Z"})
}

fn icon() -> Value {
    json!({"src": "https://example.com/memo.png", "mimeType": "image/png", "sizes": ["48x48"]})
}

impl ResourceProvider for Annotated {
    fn resources(&self) -> Vec<Resource> {
        vec![
            Resource::new("memo://annotated", "annotated")
                .with_annotations(object(resource_annotations()))
                .with_icons(vec![icon()])
                .with_meta(object(json!({"example.com/origin": "test"}))),
            Resource::new("memo://plain", "plain"),
        ]
    }
    fn templates(&self) -> Vec<ResourceTemplate> {
        vec![
            ResourceTemplate::new("memo://notes/{id}", "note")
                .unwrap()
                .with_annotations(object(json!({"audience": ["assistant"], "priority": 1})))
                .with_meta(object(json!({"example.com/kind": "notes"}))),
        ]
    }
    fn read<'a>(
        &'a self,
        uri: &'a str,
        _ctx: &'a ToolContext,
    ) -> Deferred<'a, Result<Vec<ResourceContents>, CatalogError>> {
        Deferred::ready(Ok(vec![ResourceContents::text(uri, "text/plain", "x")]))
    }
}

impl PromptProvider for Annotated {
    fn prompts(&self) -> Vec<Prompt> {
        vec![
            Prompt::new("summarize", "Summarizes")
                .with_icons(vec![icon()])
                .with_meta(object(json!({"example.com/origin": "test", "v": 2}))),
        ]
    }
    fn get<'a>(
        &'a self,
        _name: &'a str,
        _arguments: &'a BTreeMap<String, String>,
        _ctx: &'a ToolContext,
    ) -> Deferred<'a, Result<PromptReply, CatalogError>> {
        Deferred::ready(Ok(PromptReply::new(vec![PromptMessage::user("sum up")])))
    }
}

/// The three listings of one session or revision: `(resources, templates, prompts)`.
type Listings = (Value, Value, Value);

fn assert_listed_as_given(what: &str, (resources, templates, prompts): Listings) {
    assert_eq!(
        resources["result"]["resources"],
        json!([
            {"uri": "memo://annotated", "name": "annotated",
             "annotations": resource_annotations(), "icons": [icon()],
             "_meta": {"example.com/origin": "test"}},
            {"uri": "memo://plain", "name": "plain"}
        ]),
        "{what}: {resources}"
    );
    assert_eq!(
        templates["result"]["resourceTemplates"],
        json!([{"uriTemplate": "memo://notes/{id}", "name": "note",
                "annotations": {"audience": ["assistant"], "priority": 1},
                "_meta": {"example.com/kind": "notes"}}]),
        "{what}: {templates}"
    );
    assert_eq!(
        prompts["result"]["prompts"],
        json!([{"name": "summarize", "description": "Summarizes", "arguments": [],
                "icons": [icon()], "_meta": {"example.com/origin": "test", "v": 2}}]),
        "{what}: {prompts}"
    );
}

/// Annotations, icons and `_meta` are listed as the provider gave them, by every revision
/// on both transports (the same mapping writes every listing).
#[tokio::test]
async fn listings_carry_annotations_icons_and_meta_on_every_revision_and_transport() {
    let f = fixture_with(true, |b| b);
    let mut registry =
        std::sync::Arc::try_unwrap(f.registry).unwrap_or_else(|_| panic!("one owner"));
    registry.register_resources(Annotated).unwrap();
    registry.register_prompts(Annotated).unwrap();
    let registry = std::sync::Arc::new(registry);
    let methods = ["resources/list", "resources/templates/list", "prompts/list"];
    let modern_meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });

    // stdio: a 2026-07-28 request (no initialize), then a 2025-11-25 session.
    let mut client = StdioClient::start(registry.clone(), ServerOptions::default());
    let mut modern = Vec::new();
    for method in methods {
        let listed = client
            .request(method, json!({"_meta": modern_meta.clone()}))
            .await;
        assert_eq!(listed["result"]["resultType"], "complete", "{listed}");
        modern.push(listed);
    }
    let [r, t, p] = <[Value; 3]>::try_from(modern).unwrap();
    assert_listed_as_given("stdio 2026-07-28", (r, t, p));
    client.initialize(json!({})).await;
    let mut legacy = Vec::new();
    for method in methods {
        legacy.push(client.request(method, json!({})).await);
    }
    let [r, t, p] = <[Value; 3]>::try_from(legacy).unwrap();
    assert_listed_as_given("stdio 2025-11-25", (r, t, p));

    // HTTP: a 2025-11-25 session, then 2026-07-28 requests.
    let (addr, _stop) = start_http(HttpServer::new(registry)).await;
    let session = http_initialize(addr, &[]).await;
    let mut answers = Vec::new();
    for method in methods {
        let mut headers = JSON_HEADERS.to_vec();
        headers.push(("Mcp-Session-Id", &session));
        headers.push(("MCP-Protocol-Version", "2025-11-25"));
        let body = json!({"jsonrpc": "2.0", "id": 2, "method": method});
        answers.push(answer(
            &http(addr, "POST", &headers, body.to_string().as_bytes()).await,
        ));
    }
    let [r, t, p] = <[Value; 3]>::try_from(answers).unwrap();
    assert_listed_as_given("HTTP 2025-11-25", (r, t, p));
    let mut answers = Vec::new();
    for method in methods {
        let mut headers = JSON_HEADERS.to_vec();
        headers.extend([
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", method),
        ]);
        let body = json!({"jsonrpc": "2.0", "id": 2, "method": method,
                          "params": {"_meta": modern_meta.clone()}});
        let listed = answer(&http(addr, "POST", &headers, body.to_string().as_bytes()).await);
        assert_eq!(listed["result"]["resultType"], "complete", "{listed}");
        answers.push(listed);
    }
    let [r, t, p] = <[Value; 3]>::try_from(answers).unwrap();
    assert_listed_as_given("HTTP 2026-07-28", (r, t, p));
}

/// A read that waits for a person answers `-32003` with the core's `APPROVAL_PENDING` and
/// the approval's id in `data`; after a grant the same read goes through.
#[tokio::test]
async fn a_read_waiting_for_a_person_names_its_approval() {
    struct Guarded;
    impl ResourceProvider for Guarded {
        fn resources(&self) -> Vec<Resource> {
            vec![Resource::new("vault://key", "key").with_human_approval(true)]
        }
        fn read<'a>(
            &'a self,
            uri: &'a str,
            _ctx: &'a ToolContext,
        ) -> Deferred<'a, Result<Vec<ResourceContents>, CatalogError>> {
            Deferred::ready(Ok(vec![ResourceContents::text(uri, "text/plain", "k")]))
        }
    }
    let mut registry = ToolRegistry::new();
    registry.register_resources(Guarded).unwrap();
    let registry = std::sync::Arc::new(registry);
    let mut client = StdioClient::start(registry.clone(), ServerOptions::default());
    client.initialize(json!({})).await;
    let refused = client
        .request("resources/read", json!({"uri": "vault://key"}))
        .await;
    assert_eq!(refused["error"]["code"], -32003, "{refused}");
    assert_eq!(refused["error"]["data"]["code"], "APPROVAL_PENDING");
    let id = refused["error"]["data"]["approval_id"]
        .as_str()
        .expect("the approval id")
        .to_owned();
    registry
        .approvals()
        .decide(
            &id,
            milpa::approval::Verdict::Grant,
            None,
            &ToolContext::web("alice", ["approvals:grant"]),
        )
        .await
        .unwrap();
    let read = client
        .request("resources/read", json!({"uri": "vault://key"}))
        .await;
    assert_eq!(read["result"]["contents"][0]["text"], "k", "{read}");
}
