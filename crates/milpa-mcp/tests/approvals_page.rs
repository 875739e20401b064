//! The approvals page over plain HTTP: login by token, the session cookie, the queue, grant
//! and reject through the page (and what the parked call's replay then does), CSRF,
//! scopes, self-approval, escaping of hostile arguments, the Origin check, logout.

mod common;
mod page_client;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::SystemTime;

use common::{http, http_initialize, start_http};
use milpa::audit::{AuditOutcome, MemoryAuditSink};
use milpa::confirm::unix_millis;
use milpa::{ErrorCode, ToolContext, ToolDefinition, ToolRegistry, ToolResult};
use milpa_mcp::HttpServer;
use milpa_mcp::auth::StaticTokens;
use page_client::{PageClient, csrf, decisions_section, pending_section, set_cookies};
use serde_json::{Value, json};

/// The agent whose calls get parked (it holds every scope, approvals:grant included).
const AGENT: &str = "agent-token";
const ALICE: &str = "alice-token";
const BOB: &str = "bob-token";
/// A principal that may look but not decide.
const CAROL: &str = "carol-token";

struct Page {
    addr: std::net::SocketAddr,
    registry: Arc<ToolRegistry>,
    audit: Arc<MemoryAuditSink>,
    runs: Arc<AtomicUsize>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

fn tokens() -> StaticTokens {
    let mut tokens = StaticTokens::new();
    tokens.insert_token(AGENT, "agent-7", ["*"]);
    tokens.insert_token(ALICE, "alice", ["approvals:grant"]);
    tokens.insert_token(BOB, "bob", ["approvals:grant", "ops:read"]);
    tokens.insert_token(CAROL, "carol", ["ops:read"]);
    tokens
}

async fn start_with(configure: impl FnOnce(HttpServer) -> HttpServer) -> Page {
    let audit = Arc::new(MemoryAuditSink::new());
    let runs = Arc::new(AtomicUsize::new(0));
    let mut registry = ToolRegistry::builder().audit_sink(audit.clone()).build();
    let counter = runs.clone();
    registry
        .register(
            ToolDefinition::builder("deploy")
                .description("Deploys a service")
                .input_schema(json!({
                    "type": "object",
                    "properties": {"env": {"type": "string"}, "note": {"type": "string"}},
                    "required": ["env"]
                }))
                .mutating(true)
                .requires_human_approval(true)
                .sync(move |args, _| {
                    counter.fetch_add(1, Ordering::SeqCst);
                    json!({"deployed": args["env"]})
                }),
        )
        .unwrap();
    let registry = Arc::new(registry);
    let (addr, stop) = start_http(configure(HttpServer::new(registry.clone()))).await;
    Page {
        addr,
        registry,
        audit,
        runs,
        _stop: stop,
    }
}

async fn start() -> Page {
    start_with(|server| server.authenticator(tokens())).await
}

fn agent() -> ToolContext {
    ToolContext::mcp("r1", Some("agent-7".into()), ["*"])
}

/// Parks a `deploy` call by the agent; returns the approval id.
async fn park(page: &Page, args: Value) -> String {
    let parked = page.registry.call("deploy", args, &agent()).await;
    assert_eq!(
        parked.code(),
        Some(&ErrorCode::ApprovalPending),
        "{parked:?}"
    );
    parked.data["approval_id"].as_str().unwrap().to_owned()
}

async fn replay(page: &Page, id: &str) -> ToolResult {
    page.registry
        .call("deploy", json!({"confirm_token": id}), &agent())
        .await
}

async fn state(page: &Page, id: &str) -> String {
    let approval = page.registry.approvals().get(id).await.unwrap().unwrap();
    approval
        .state(unix_millis(SystemTime::now()))
        .as_str()
        .to_owned()
}

fn card(id: &str) -> String {
    format!("data-approval-id=\"{id}\"")
}

fn decisions_recorded(page: &Page) -> usize {
    page.audit
        .records()
        .iter()
        .filter(|r| {
            matches!(
                r.outcome,
                AuditOutcome::ApprovalGranted | AuditOutcome::ApprovalRejected
            )
        })
        .count()
}

/// One `tools/call` over the MCP endpoint with a bearer token; the call's result.
async fn mcp_call(addr: std::net::SocketAddr, token: &str, name: &str, args: Value) -> Value {
    let auth = format!("Bearer {token}");
    let session = http_initialize(addr, &[("Authorization", &auth)]).await;
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
        ("Authorization", auth.as_str()),
    ];
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": name, "arguments": args}});
    let response = http(addr, "POST", &headers, body.to_string().as_bytes()).await;
    assert_eq!(response.status, 200, "{response:?}");
    let messages = if response
        .header("content-type")
        .is_some_and(|t| t.contains("json"))
    {
        vec![response.json()]
    } else {
        response.sse_messages()
    };
    messages
        .into_iter()
        .find(|m| m["id"] == json!(7))
        .expect("the call's response")["result"]
        .clone()
}

#[tokio::test]
async fn login_sets_a_strict_http_only_session_cookie_and_a_wrong_token_gets_401() {
    let page = start().await;
    let mut browser = PageClient::new(page.addr);

    let form = browser.get("/approvals").await;
    assert_eq!(form.status, 200);
    assert!(form.body.contains("name=\"token\""), "{}", form.body);
    assert!(form.body.contains("action=\"/approvals/login\""));
    assert!(form.body.contains("method=\"post\""));
    assert!(
        form.body
            .contains("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">")
    );
    assert_eq!(
        form.header("content-security-policy"),
        Some(
            "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
        )
    );
    assert_eq!(form.header("x-frame-options"), Some("DENY"));
    assert_eq!(form.header("cache-control"), Some("no-store"));
    assert_eq!(form.header("referrer-policy"), Some("same-origin"));
    assert!(
        form.header("content-type")
            .unwrap()
            .starts_with("text/html")
    );

    // A wrong token: 401, the form again with a message, no session, the token not echoed.
    let wrong = "not-a-token-4d9f";
    let csrf_token = csrf(&form.body);
    let refused = browser
        .post_form(
            "/approvals/login",
            &[
                ("csrf", &csrf_token),
                ("next", "/approvals"),
                ("token", wrong),
            ],
        )
        .await;
    assert_eq!(refused.status, 401);
    assert!(
        refused.body.contains("does not know that token"),
        "{}",
        refused.body
    );
    assert!(!refused.body.contains(wrong));
    assert!(
        set_cookies(&refused)
            .iter()
            .all(|c| !c.starts_with("milpa_approvals_session"))
    );
    assert!(browser.cookie("milpa_approvals_session").is_none());

    // Without the login form's CSRF token: 403, not even the right token gets in.
    let mut stranger = PageClient::new(page.addr);
    let forged = stranger
        .post_form(
            "/approvals/login",
            &[("token", ALICE), ("next", "/approvals")],
        )
        .await;
    assert_eq!(forged.status, 403);
    assert!(stranger.cookie("milpa_approvals_session").is_none());

    let login = browser.login(ALICE).await;
    assert_eq!(login.status, 303, "{login:?}");
    assert_eq!(login.header("location"), Some("/approvals"));
    let session = set_cookies(&login)
        .into_iter()
        .find(|c| c.starts_with("milpa_approvals_session="))
        .expect("a session cookie");
    assert!(session.contains("; HttpOnly"), "{session}");
    assert!(session.contains("; SameSite=Strict"), "{session}");
    assert!(session.contains("; Path=/approvals"), "{session}");
    assert!(!session.contains("Secure"), "loopback http: {session}");
    assert_eq!(browser.cookie("milpa_approvals_session").unwrap().len(), 32);
    assert!(!login.header("location").unwrap().contains(ALICE));

    let queue = browser.get("/approvals").await;
    assert_eq!(queue.status, 200);
    assert!(
        queue.body.contains("<b id=\"principal\">alice</b>"),
        "{}",
        queue.body
    );
    assert!(queue.body.contains("Nothing is waiting for a decision."));
    assert!(!queue.body.contains("name=\"token\""));

    // Behind a proxy that says https, the cookie is Secure.
    let mut proxied = PageClient::new(page.addr);
    let form = proxied
        .request("GET", "/approvals", &[("X-Forwarded-Proto", "https")], b"")
        .await;
    let login = proxied
        .post_form_with(
            "/approvals/login",
            &[("csrf", &csrf(&form.body)), ("token", BOB)],
            &[("X-Forwarded-Proto", "https")],
        )
        .await;
    assert_eq!(login.status, 303);
    assert!(
        set_cookies(&login)
            .iter()
            .any(|c| c.starts_with("milpa_approvals_session=")
                && c.split(';').any(|attribute| attribute.trim() == "Secure"))
    );
}

#[tokio::test]
async fn a_grant_on_the_page_lets_the_parked_call_run_once() {
    let page = start().await;
    // The agent's call, over MCP, is parked.
    let parked = mcp_call(
        page.addr,
        AGENT,
        "deploy",
        json!({"env": "prod", "note": "weekly release"}),
    )
    .await;
    assert_eq!(parked["isError"], json!(true), "{parked}");
    assert_eq!(parked["_meta"]["milpa"]["code"], json!("APPROVAL_PENDING"));
    let id = parked["structuredContent"]["approval_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(page.runs.load(Ordering::SeqCst), 0);

    let mut alice = PageClient::new(page.addr);
    let queue = alice.logged_in(ALICE).await;
    let pending = pending_section(&queue.body);
    assert!(pending.contains(&card(&id)), "{}", queue.body);
    assert!(
        pending.contains("deploy(<wbr>env=prod, note=weekly release)"),
        "{pending}"
    );
    assert!(
        pending.contains("<dt>Asked by</dt><dd>agent-7</dd>"),
        "{pending}"
    );
    assert!(
        pending.contains("Tool call · <span class=\"tool\">deploy</span>"),
        "{pending}"
    );
    assert!(pending.contains("<dt>Channel</dt><dd>mcp</dd>"));
    assert!(pending.contains("just now") || pending.contains("s ago"));
    assert!(pending.contains("<dt>Expires</dt>"), "{pending}");
    assert!(
        pending.contains(">in 59 min</time>") || pending.contains(">in 1 h</time>"),
        "{pending}"
    );
    assert!(
        pending.contains("&quot;weekly release&quot;"),
        "the arguments: {pending}"
    );
    assert!(pending.contains("name=\"decision\" value=\"grant\""));
    assert!(pending.contains("name=\"decision\" value=\"reject\""));
    assert!(pending.contains("name=\"reason\""));
    assert!(pending.contains(&format!("action=\"/approvals/{id}\"")));
    assert!(
        queue
            .body
            .contains("<span class=\"count\" id=\"pending-count\">1</span>")
    );

    let granted = alice
        .decide(&queue, &id, "grant", "release window is open")
        .await;
    assert_eq!(granted.status, 303, "{granted:?}");
    assert_eq!(granted.header("location"), Some("/approvals"));

    let after = alice.get("/approvals").await;
    assert!(
        after.body.contains("class=\"notice done\""),
        "{}",
        after.body
    );
    assert!(after.body.contains("Granted deploy("));
    assert!(!pending_section(&after.body).contains(&card(&id)));
    let decisions = decisions_section(&after.body);
    assert!(
        decisions.contains(&format!("data-decided-id=\"{id}\"")),
        "{decisions}"
    );
    assert!(decisions.contains("Granted, not run yet"));
    assert!(decisions.contains("by <b>alice</b>"));
    assert!(decisions.contains("release window is open"));
    // The notice is shown once.
    let again = alice.get("/approvals").await;
    assert!(!again.body.contains("class=\"notice done\""));

    // The decision is audited under the approver, on the web channel.
    let records = page.audit.records();
    let decision = records
        .iter()
        .find(|r| r.outcome == AuditOutcome::ApprovalGranted)
        .expect("an approval_granted record");
    assert_eq!(decision.principal.as_deref(), Some("alice"));
    assert_eq!(decision.channel, "web");
    assert_eq!(decision.tool, "deploy");
    assert_eq!(decision.args["approval_id"], json!(id));
    assert_eq!(decision.args["reason"], json!("release window is open"));

    // The agent's replay runs the first call's arguments, once.
    let ran = mcp_call(page.addr, AGENT, "deploy", json!({"confirm_token": id})).await;
    assert_eq!(ran["isError"], json!(false), "{ran}");
    assert_eq!(ran["structuredContent"], json!({"deployed": "prod"}));
    assert_eq!(page.runs.load(Ordering::SeqCst), 1);
    let twice = mcp_call(page.addr, AGENT, "deploy", json!({"confirm_token": id})).await;
    assert_eq!(twice["isError"], json!(true));
    assert_eq!(page.runs.load(Ordering::SeqCst), 1);

    let later = alice.get("/approvals").await;
    assert!(decisions_section(&later.body).contains("Granted, ran"));
}

#[tokio::test]
async fn a_rejection_with_a_reason_forbids_the_replay_naming_who_and_why() {
    let page = start().await;
    let id = park(&page, json!({"env": "prod"})).await;
    let mut bob = PageClient::new(page.addr);
    let queue = bob.logged_in(BOB).await;
    let rejected = bob.decide(&queue, &id, "reject", "not on a Friday").await;
    assert_eq!(rejected.status, 303, "{rejected:?}");
    let after = bob.get("/approvals").await;
    assert!(after.body.contains("Rejected deploy("), "{}", after.body);
    assert!(
        decisions_section(&after.body).contains("<span class=\"badge rejected\">Rejected</span>")
    );

    let replayed = replay(&page, &id).await;
    assert_eq!(replayed.code(), Some(&ErrorCode::Forbidden), "{replayed:?}");
    let message = replayed.error.clone().unwrap_or_default();
    assert!(message.contains("bob"), "{message}");
    assert!(message.contains("not on a Friday"), "{message}");
    assert_eq!(page.runs.load(Ordering::SeqCst), 0);
    let record = page
        .audit
        .records()
        .into_iter()
        .find(|r| r.outcome == AuditOutcome::ApprovalRejected)
        .expect("an approval_rejected record");
    assert_eq!(record.principal.as_deref(), Some("bob"));
}

#[tokio::test]
async fn a_missing_or_wrong_csrf_token_is_refused_and_nothing_changes() {
    let page = start().await;
    let id = park(&page, json!({"env": "prod"})).await;
    let mut alice = PageClient::new(page.addr);
    let queue = alice.logged_in(ALICE).await;
    let path = format!("/approvals/{id}");

    let without = alice.post_form(&path, &[("decision", "grant")]).await;
    assert_eq!(without.status, 403, "{without:?}");
    assert!(
        without.body.contains("CSRF token is missing or wrong"),
        "{}",
        without.body
    );
    let wrong = alice
        .post_form(
            &path,
            &[
                ("csrf", "0123456789abcdef0123456789abcdef"),
                ("decision", "grant"),
            ],
        )
        .await;
    assert_eq!(wrong.status, 403);
    // Another session's token is no good either.
    let mut bob = PageClient::new(page.addr);
    let bobs = bob.logged_in(BOB).await;
    let crossed = alice
        .post_form(&path, &[("csrf", &csrf(&bobs.body)), ("decision", "grant")])
        .await;
    assert_eq!(crossed.status, 403);

    assert_eq!(state(&page, &id).await, "pending");
    assert_eq!(decisions_recorded(&page), 0);
    assert!(pending_section(&alice.get("/approvals").await.body).contains(&card(&id)));
    // The right one still works afterwards.
    let granted = alice.decide(&queue, &id, "grant", "").await;
    assert_eq!(granted.status, 303);
    assert_eq!(state(&page, &id).await, "granted");
}

#[tokio::test]
async fn a_principal_without_the_grant_scope_cannot_sign_in_or_see_the_queue() {
    let page = start().await;
    let id = park(
        &page,
        json!({"env": "prod", "note": "carol must not see this"}),
    )
    .await;
    let mut carol = PageClient::new(page.addr);
    let refused = carol.login(CAROL).await;
    assert_eq!(refused.status, 403, "{refused:?}");
    assert!(
        refused
            .body
            .contains("does not carry the scope approvals:grant"),
        "{}",
        refused.body
    );
    assert!(carol.cookie("milpa_approvals_session").is_none());
    for path in ["/approvals".to_owned(), format!("/approvals/{id}")] {
        let shown = carol.get(&path).await;
        assert!(
            shown.body.contains("name=\"token\""),
            "{path}: {}",
            shown.body
        );
        assert!(!shown.body.contains(&card(&id)), "{path}");
        assert!(!shown.body.contains("carol must not see this"), "{path}");
    }

    // Posting a decision without a session decides nothing.
    let posted = carol
        .post_form(
            &format!("/approvals/{id}"),
            &[("csrf", &csrf(&refused.body)), ("decision", "grant")],
        )
        .await;
    assert_eq!(posted.status, 401, "{posted:?}");
    assert_eq!(state(&page, &id).await, "pending");
    assert_eq!(decisions_recorded(&page), 0);
}

#[tokio::test]
async fn the_sign_in_form_token_must_be_signed_by_this_server() {
    let page = start().await;
    let other = start().await;
    // A value of the client's own choosing, in the cookie and the form alike (what a page
    // on another loopback port could plant: cookies do not separate ports).
    let planted = "0123456789abcdef0123456789abcdef";
    let mut browser = PageClient::new(page.addr);
    browser.set_cookie("milpa_approvals_login", Some(planted));
    let forged = browser
        .post_form("/approvals/login", &[("csrf", planted), ("token", ALICE)])
        .await;
    assert_eq!(forged.status, 403, "{forged:?}");
    assert!(browser.cookie("milpa_approvals_session").is_none());

    // A form token another server signed is no good here either.
    let mut elsewhere = PageClient::new(other.addr);
    let form = elsewhere.get("/approvals").await;
    let foreign = csrf(&form.body);
    assert!(foreign.len() > 32, "a signed token: {foreign}");
    browser.set_cookie("milpa_approvals_login", Some(&foreign));
    let crossed = browser
        .post_form("/approvals/login", &[("csrf", &foreign), ("token", ALICE)])
        .await;
    assert_eq!(crossed.status, 403, "{crossed:?}");
    assert!(browser.cookie("milpa_approvals_session").is_none());

    // This server's own form signs in.
    assert_eq!(browser.login(ALICE).await.status, 303);
}

#[tokio::test]
async fn another_port_on_this_machine_is_another_origin() {
    let page = start().await;
    let id = park(&page, json!({"env": "prod"})).await;
    let other_port = format!(
        "http://127.0.0.1:{}",
        page.addr.port().wrapping_add(1).max(1)
    );
    let mut browser = PageClient::new(page.addr);
    let form = browser.get("/approvals").await;
    let login = browser
        .post_form_with(
            "/approvals/login",
            &[("csrf", &csrf(&form.body)), ("token", ALICE)],
            &[("Origin", &other_port)],
        )
        .await;
    assert_eq!(login.status, 403, "{login:?}");
    assert!(login.body.contains("another port"), "{}", login.body);
    assert!(browser.cookie("milpa_approvals_session").is_none());

    let queue = browser.logged_in(ALICE).await;
    let fields = [
        ("csrf", csrf(&queue.body)),
        ("decision", "grant".to_owned()),
    ];
    let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    for origin in [
        other_port.clone(),
        format!("https://{}", page.addr),
        format!("http://localhost:{}", page.addr.port()),
    ] {
        let posted = browser
            .post_form_with(&format!("/approvals/{id}"), &fields, &[("Origin", &origin)])
            .await;
        assert_eq!(posted.status, 403, "{origin}: {posted:?}");
    }
    assert_eq!(state(&page, &id).await, "pending");
    let own = browser
        .post_form(&format!("/approvals/{id}"), &fields)
        .await;
    assert_eq!(own.status, 303, "{own:?}");
}

#[tokio::test]
async fn the_caller_of_a_parked_call_sees_it_but_cannot_decide_it() {
    let page = start().await;
    let id = park(&page, json!({"env": "prod"})).await;
    let mut agent = PageClient::new(page.addr);
    let queue = agent.logged_in(AGENT).await;
    let pending = pending_section(&queue.body);
    assert!(pending.contains(&card(&id)));
    assert!(pending.contains("You asked for this; another person must decide."));
    assert!(!pending.contains("name=\"decision\""), "{pending}");

    for decision in ["grant", "reject"] {
        let posted = agent.decide(&queue, &id, decision, "").await;
        assert_eq!(posted.status, 403, "{posted:?}");
        assert!(posted.body.contains("cannot decide it"), "{}", posted.body);
    }
    assert_eq!(state(&page, &id).await, "pending");
    assert_eq!(page.runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn hostile_arguments_are_escaped() {
    let page = start().await;
    let hostile = "<script>alert(\"pwned\")</script><img src=x onerror=alert(1)>";
    let id = park(&page, json!({"env": hostile, "note": "'><b>bold</b>"})).await;
    let mut alice = PageClient::new(page.addr);
    let queue = alice.logged_in(ALICE).await;
    let item = alice.get(&format!("/approvals/{id}")).await;
    for body in [&queue.body, &item.body] {
        assert!(body.contains(&card(&id)));
        assert!(!body.contains("<script>"), "{body}");
        assert!(!body.contains("<img"));
        assert!(!body.contains("<b>bold"));
        assert!(body.contains("&lt;script&gt;alert("), "{body}");
        assert!(body.contains("&#39;&gt;&lt;b&gt;bold"));
    }
}

#[tokio::test]
async fn foreign_origins_and_hosts_are_refused() {
    let page = start().await;
    let id = park(&page, json!({"env": "prod"})).await;
    let mut alice = PageClient::new(page.addr);
    let queue = alice.logged_in(ALICE).await;
    let fields = [
        ("csrf", csrf(&queue.body)),
        ("decision", "grant".to_owned()),
    ];
    let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let path = format!("/approvals/{id}");
    for origin in [
        "http://evil.example",
        "null",
        "https://127.0.0.1.evil.example",
    ] {
        let posted = alice
            .post_form_with(&path, &fields, &[("Origin", origin)])
            .await;
        assert_eq!(posted.status, 403, "{origin}: {posted:?}");
    }
    let login = alice
        .post_form_with(
            "/approvals/login",
            &[("token", BOB)],
            &[("Origin", "http://evil.example")],
        )
        .await;
    assert_eq!(login.status, 403);
    // DNS rebinding: a page served under another name cannot read the queue.
    let rebound = alice
        .request("GET", "/approvals", &[("Host", "evil.example")], b"")
        .await;
    assert_eq!(rebound.status, 403);
    assert!(!rebound.body.contains(&card(&id)));
    assert_eq!(state(&page, &id).await, "pending");
    // Without an Origin (a non-browser client) the CSRF token is what counts.
    let plain = alice.post_form_with(&path, &fields, &[]).await;
    assert_eq!(plain.status, 303);
}

#[tokio::test]
async fn logout_ends_the_session() {
    let page = start().await;
    let id = park(&page, json!({"env": "prod"})).await;
    let mut alice = PageClient::new(page.addr);
    let queue = alice.logged_in(ALICE).await;
    let old_cookie = alice.cookie("milpa_approvals_session").unwrap().to_owned();
    let token = csrf(&queue.body);

    // Logout needs the session's CSRF token too.
    let forged = alice.post_form("/approvals/logout", &[]).await;
    assert_eq!(forged.status, 403);
    assert!(
        alice
            .get("/approvals")
            .await
            .body
            .contains("id=\"principal\"")
    );

    let out = alice
        .post_form("/approvals/logout", &[("csrf", &token)])
        .await;
    assert_eq!(out.status, 303);
    assert!(
        set_cookies(&out)
            .iter()
            .any(|c| c.starts_with("milpa_approvals_session=;") && c.contains("Max-Age=0"))
    );
    assert!(
        alice
            .get("/approvals")
            .await
            .body
            .contains("name=\"token\"")
    );

    // The old cookie is dead on the server, not only forgotten by the browser.
    alice.set_cookie("milpa_approvals_session", Some(&old_cookie));
    let page_again = alice.get("/approvals").await;
    assert!(page_again.body.contains("name=\"token\""));
    let posted = alice
        .post_form(
            &format!("/approvals/{id}"),
            &[("csrf", &token), ("decision", "grant")],
        )
        .await;
    assert_eq!(posted.status, 401, "{posted:?}");
    assert!(posted.body.contains("name=\"token\""));
    assert_eq!(state(&page, &id).await, "pending");
}

#[tokio::test]
async fn one_item_has_its_own_page_and_refusals_say_which() {
    let page = start().await;
    let id = park(&page, json!({"env": "staging"})).await;
    let mut alice = PageClient::new(page.addr);

    // Signed out, the item's page asks to sign in and comes back to the item.
    let form = alice.get(&format!("/approvals/{id}")).await;
    assert_eq!(form.status, 200);
    assert!(
        form.body
            .contains(&format!("name=\"next\" value=\"/approvals/{id}\""))
    );
    let login = alice
        .post_form(
            "/approvals/login",
            &[
                ("csrf", &csrf(&form.body)),
                ("next", &format!("/approvals/{id}")),
                ("token", ALICE),
            ],
        )
        .await;
    assert_eq!(
        login.header("location"),
        Some(format!("/approvals/{id}").as_str())
    );

    let item = alice.get(&format!("/approvals/{id}")).await;
    assert_eq!(item.status, 200);
    assert!(item.body.contains(&card(&id)));
    assert!(item.body.contains("name=\"decision\" value=\"grant\""));

    let unknown = alice.get("/approvals/no-such-approval").await;
    assert_eq!(unknown.status, 404);
    assert!(unknown.body.contains("No approval has the id"));
    let unknown_post = alice.decide(&item, "no-such-approval", "grant", "").await;
    assert_eq!(unknown_post.status, 404);

    let no_choice = alice.decide(&item, &id, "maybe", "").await;
    assert_eq!(no_choice.status, 400);
    let long = "x".repeat(501);
    let too_long = alice.decide(&item, &id, "grant", &long).await;
    assert_eq!(too_long.status, 400);
    assert!(too_long.body.contains("limited to 500 characters"));
    let huge = "y".repeat(20 * 1024);
    let too_large = alice.decide(&item, &id, "grant", &huge).await;
    assert_eq!(too_large.status, 413);
    assert_eq!(state(&page, &id).await, "pending");

    let granted = alice.decide(&item, &id, "grant", "ok").await;
    assert_eq!(granted.status, 303);
    let decided = alice.get(&format!("/approvals/{id}")).await;
    assert_eq!(decided.status, 200);
    assert!(
        decided
            .body
            .contains("Already decided: granted, not run yet by alice"),
        "{}",
        decided.body
    );
    assert!(!decided.body.contains(&card(&id)));
    assert!(!decided.body.contains("name=\"decision\""));

    let mut bob = PageClient::new(page.addr);
    let bobs = bob.logged_in(BOB).await;
    let late = bob.decide(&bobs, &id, "reject", "").await;
    assert_eq!(late.status, 409, "{late:?}");
    assert!(late.body.contains("already decided"), "{}", late.body);
    assert_eq!(state(&page, &id).await, "granted");
}

#[tokio::test]
async fn without_an_authenticator_the_page_says_nobody_can_sign_in() {
    let page = start_with(|server| server).await;
    let mut browser = PageClient::new(page.addr);
    let form = browser.get("/approvals").await;
    assert_eq!(form.status, 200);
    assert!(form.body.contains("no tokens configured"), "{}", form.body);
    assert!(!form.body.contains("name=\"token\""));
    let tried = browser
        .post_form(
            "/approvals/login",
            &[("csrf", &cookie_csrf(&browser)), ("token", ALICE)],
        )
        .await;
    assert_eq!(tried.status, 401);
    assert!(tried.body.contains("no tokens configured"));
}

fn cookie_csrf(browser: &PageClient) -> String {
    browser.cookie("milpa_approvals_login").unwrap().to_owned()
}

#[tokio::test]
async fn the_page_can_be_turned_off() {
    let page = start_with(|server| server.authenticator(tokens()).approvals_page(false)).await;
    let mut browser = PageClient::new(page.addr);
    assert_eq!(browser.get("/approvals").await.status, 404);
    let login = browser
        .post_form("/approvals/login", &[("token", ALICE)])
        .await;
    assert!(login.status >= 400, "{login:?}");
    assert!(browser.cookie("milpa_approvals_session").is_none());
}

#[tokio::test]
async fn a_long_queue_shows_the_oldest_hundred_and_says_there_are_more() {
    let page = start().await;
    let mut ids = Vec::new();
    for n in 0..101 {
        ids.push(park(&page, json!({"env": format!("env-{n}")})).await);
    }
    let mut alice = PageClient::new(page.addr);
    let queue = alice.logged_in(ALICE).await;
    assert!(
        queue.body.contains("id=\"pending-count\">100+</span>"),
        "{}",
        &queue.body[..2000]
    );
    assert!(
        queue
            .body
            .contains("Showing the 100 oldest; more are waiting.")
    );
    assert_eq!(
        pending_section(&queue.body)
            .matches("data-approval-id=")
            .count(),
        100
    );
    // Deciding one makes room: all the rest fit.
    let granted = alice.decide(&queue, &ids[0], "grant", "").await;
    assert_eq!(granted.status, 303);
    let queue = alice.get("/approvals").await;
    assert!(queue.body.contains("id=\"pending-count\">100</span>"));
    assert!(!queue.body.contains("more are waiting"));
}

#[tokio::test]
async fn an_id_with_path_characters_stays_in_its_segment() {
    use milpa::verification::VerificationRequest;
    let page = start().await;
    let id = "a/../../mcp?x=1#y";
    page.registry
        .approvals()
        .verifier()
        .request(
            VerificationRequest::new("rotate the signing key")
                .id(id)
                .requested_by("agent-7"),
        )
        .await
        .unwrap();
    let mut alice = PageClient::new(page.addr);
    let queue = alice.logged_in(ALICE).await;
    let encoded = "a%2F..%2F..%2Fmcp%3Fx%3D1%23y";
    assert!(
        queue
            .body
            .contains(&format!("action=\"/approvals/{encoded}\"")),
        "{}",
        pending_section(&queue.body)
    );
    assert!(queue.body.contains("Verification request"));
    let item = alice.get(&format!("/approvals/{encoded}")).await;
    assert_eq!(item.status, 200);
    let granted = alice.decide(&queue, encoded, "grant", "").await;
    assert_eq!(granted.status, 303, "{granted:?}");
    assert_eq!(state(&page, id).await, "granted");
}

#[tokio::test]
async fn failed_sign_ins_are_throttled_per_address() {
    let page = start().await;
    let mut guesser = PageClient::new(page.addr);
    for n in 0..5 {
        let form = guesser.get("/approvals").await;
        let guess = format!("guess-{n}");
        let refused = guesser
            .post_form(
                "/approvals/login",
                &[("csrf", &csrf(&form.body)), ("token", &guess)],
            )
            .await;
        assert_eq!(refused.status, 401, "guess {n}: {refused:?}");
    }
    // Now even the right token is refused from this address, with when to come back.
    let form = guesser.get("/approvals").await;
    let throttled = guesser
        .post_form(
            "/approvals/login",
            &[("csrf", &csrf(&form.body)), ("token", ALICE)],
        )
        .await;
    assert_eq!(throttled.status, 429, "{throttled:?}");
    let retry: u64 = throttled
        .header("retry-after")
        .expect("a Retry-After")
        .parse()
        .unwrap();
    assert!((1..=300).contains(&retry), "{retry}");
    assert!(
        throttled.body.contains("Too many failed sign-ins"),
        "{}",
        throttled.body
    );
    assert!(guesser.cookie("milpa_approvals_session").is_none());
}

#[tokio::test]
async fn a_bearer_token_alone_decides_nothing_on_the_page() {
    let page = start().await;
    let id = park(&page, json!({"env": "prod"})).await;
    let mut client = PageClient::new(page.addr);
    let auth = format!("Bearer {ALICE}");
    for path in [
        format!("/approvals/{id}"),
        format!("/approvals/{id}/challenge"),
    ] {
        let posted = client
            .request(
                "POST",
                &path,
                &[
                    ("Authorization", &auth),
                    ("Content-Type", "application/x-www-form-urlencoded"),
                ],
                b"decision=grant",
            )
            .await;
        assert_eq!(posted.status, 401, "{path}: {posted:?}");
    }
    assert_eq!(state(&page, &id).await, "pending");
    assert_eq!(decisions_recorded(&page), 0);
}

#[tokio::test]
async fn an_enrolment_link_serves_only_the_actor_it_names_and_only_while_live() {
    use milpa::approval::passkeys::{InMemoryPasskeyStore, PasskeyStore, enrolment_token_hash};
    use milpa_mcp::approvals::PasskeyOptions;

    let store = Arc::new(InMemoryPasskeyStore::new());
    let passkeys = PasskeyOptions::new(store.clone());
    let page =
        start_with(move |server| server.authenticator(tokens()).approval_passkeys(passkeys)).await;
    let token = "0f1e2d3c4b5a69788796a5b4c3d2e1f0";
    let now = unix_millis(SystemTime::now());
    store
        .create_enrolment(&enrolment_token_hash(token), "alice", now + 600_000)
        .await
        .unwrap();
    let link = format!("/approvals/enroll/{token}");

    // Signed out: the sign-in form, coming back to the link.
    let mut bob = PageClient::new(page.addr);
    let form = bob.get(&link).await;
    assert!(
        form.body
            .contains(&format!("name=\"next\" value=\"{link}\"")),
        "{}",
        form.body
    );
    // Another approver cannot use it.
    bob.logged_in(BOB).await;
    let refused = bob.get(&link).await;
    assert_eq!(refused.status, 403, "{refused:?}");
    assert!(
        refused.body.contains("enrols a passkey for alice"),
        "{}",
        refused.body
    );

    // Alice, on 127.0.0.1: told to open it as localhost, no button.
    let mut alice = PageClient::new(page.addr);
    alice.logged_in(ALICE).await;
    let shown = alice.get(&link).await;
    assert_eq!(shown.status, 200);
    assert!(shown.body.contains("id=\"passkey-host\""), "{}", shown.body);
    assert!(
        shown
            .body
            .contains(&format!("http://localhost:{}/approvals", page.addr.port()))
    );
    assert!(!shown.body.contains("id=\"passkey-enroll\""));
    // Under the RP id: the button, the script and its policy.
    let host = format!("localhost:{}", page.addr.port());
    let origin = format!("http://{host}");
    let mut local = PageClient::new(page.addr);
    let form = local
        .request("GET", "/approvals", &[("Host", &host)], b"")
        .await;
    let login = local
        .post_form_with(
            "/approvals/login",
            &[("csrf", &csrf(&form.body)), ("token", ALICE)],
            &[("Host", &host), ("Origin", &origin)],
        )
        .await;
    assert_eq!(login.status, 303, "{login:?}");
    let shown = local.request("GET", &link, &[("Host", &host)], b"").await;
    assert!(
        shown.body.contains("id=\"passkey-enroll\""),
        "{}",
        shown.body
    );
    assert!(
        shown
            .body
            .contains("<script src=\"/approvals/passkeys.js\" defer></script>")
    );
    assert!(
        shown
            .header("content-security-policy")
            .unwrap()
            .contains("script-src 'self'")
    );
    let script = local
        .request("GET", "/approvals/passkeys.js", &[("Host", &host)], b"")
        .await;
    assert_eq!(script.status, 200);
    assert!(
        script
            .header("content-type")
            .unwrap()
            .starts_with("text/javascript")
    );
    assert!(script.body.contains("navigator.credentials.get"));

    // An unknown (or used, or expired) link.
    let unknown = alice
        .get("/approvals/enroll/ffffffffffffffffffffffffffffffff")
        .await;
    assert_eq!(unknown.status, 404);
    assert!(
        unknown.body.contains("used already, expired"),
        "{}",
        unknown.body
    );
}

#[tokio::test]
async fn the_page_shows_this_servers_queue_when_servers_share_a_store() {
    use milpa::approval::ApprovalQueue;
    use milpa::verification::{HumanVerifier, InMemoryVerificationStore, VerificationStore};
    let store: Arc<dyn VerificationStore> = Arc::new(InMemoryVerificationStore::new());
    let build = |server: &str| {
        let queue = ApprovalQueue::new(HumanVerifier::new(Arc::clone(&store))).with_server(server);
        let mut registry = ToolRegistry::builder().approvals(Arc::new(queue)).build();
        registry
            .register(
                ToolDefinition::builder("deploy")
                    .mutating(true)
                    .requires_human_approval(true)
                    .sync(|_, _| json!("deployed")),
            )
            .unwrap();
        Arc::new(registry)
    };
    let (here, there) = (build("here"), build("there"));
    let park_on = |registry: Arc<ToolRegistry>| async move {
        let parked = registry.call("deploy", json!({}), &agent()).await;
        parked.data["approval_id"].as_str().unwrap().to_owned()
    };
    let mine = park_on(here.clone()).await;
    let theirs = park_on(there).await;
    let (addr, _stop) = start_http(HttpServer::new(here).authenticator(tokens())).await;
    let mut alice = PageClient::new(addr);
    let queue = alice.logged_in(ALICE).await;
    let pending = pending_section(&queue.body);
    assert!(pending.contains(&card(&mine)), "{pending}");
    assert!(!pending.contains(&card(&theirs)), "{pending}");
}

/// A registry whose queue is the server `ops-east`'s, with `deploy` (mutating, a local
/// tool) and `files__read` (read-only, forwarded to the upstream `files`), both waiting
/// for a person.
fn described_registry() -> Arc<ToolRegistry> {
    use milpa::approval::ApprovalQueue;
    use milpa::verification::{HumanVerifier, InMemoryVerificationStore};
    let queue = ApprovalQueue::new(HumanVerifier::new(Arc::new(
        InMemoryVerificationStore::new(),
    )))
    .with_server("ops-east");
    let mut registry = ToolRegistry::builder().approvals(Arc::new(queue)).build();
    registry
        .register(
            ToolDefinition::builder("deploy")
                .description("Deploys a <service> to production & restarts it")
                .input_schema(json!({"type": "object", "properties": {"env": {"type": "string"}}}))
                .mutating(true)
                .requires_human_approval(true)
                .sync(|_, _| json!("deployed")),
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::builder("files__read")
                .description("Reads a file")
                .input_schema(json!({"type": "object", "properties": {"path": {"type": "string"}}}))
                .upstream("files")
                .requires_human_approval(true)
                .sync(|_, _| json!("contents")),
        )
        .unwrap();
    Arc::new(registry)
}

/// The card of approval `id` in a queue page.
fn card_html<'a>(html: &'a str, id: &str) -> &'a str {
    let start = html.find(&card(id)).expect("the card");
    let end = html[start..].find("</article>").unwrap() + start;
    &html[start..end]
}

#[tokio::test]
async fn a_card_says_what_the_tool_does_where_it_goes_and_which_client_asked() {
    let (addr, _stop) =
        start_http(HttpServer::new(described_registry()).authenticator(tokens())).await;
    let auth = format!("Bearer {AGENT}");

    // A 2025-11-25 session: the client named itself at initialize.
    let mut headers = common::JSON_HEADERS.to_vec();
    headers.push(("Authorization", &auth));
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "claude <desktop>", "version": "1"}}});
    let response = http(addr, "POST", &headers, init.to_string().as_bytes()).await;
    assert_eq!(response.status, 200, "{response:?}");
    let session = response.header("mcp-session-id").unwrap().to_owned();
    let mut call_headers = headers.clone();
    call_headers.push(("Mcp-Session-Id", &session));
    call_headers.push(("MCP-Protocol-Version", "2025-11-25"));
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "deploy", "arguments": {"env": "prod"}}});
    let response = http(addr, "POST", &call_headers, call.to_string().as_bytes()).await;
    let deploy = approval_id(&response);

    // A 2026-07-28 request: the client names itself in the request's _meta.
    let mut modern = headers.clone();
    modern.extend([
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "files__read"),
    ]);
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "files__read", "arguments": {"path": "/etc/hosts"},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "cursor-2026", "version": "2"}}}});
    let response = http(addr, "POST", &modern, call.to_string().as_bytes()).await;
    let read = approval_id(&response);

    let mut alice = PageClient::new(addr);
    let queue = alice.logged_in(ALICE).await;
    let deploy_card = card_html(&queue.body, &deploy);
    for fragment in [
        "<p class=\"badges\"><span class=\"badge mutating\"",
        ">Mutating</span></p>",
        "<p class=\"description\">Deploys a &lt;service&gt; to production &amp; restarts \
         it</p>",
        "<dt>Asked by</dt><dd>agent-7</dd><dt>Client</dt><dd class=\"client\">claude \
         &lt;desktop&gt;</dd><dt>Server</dt><dd class=\"server\">ops-east</dd>\
         <dt>Channel</dt><dd>mcp</dd>",
        "<p class=\"effect\">Grant runs nothing now: the caller&#39;s retry runs this call \
         once",
    ] {
        assert!(
            deploy_card.contains(fragment),
            "{fragment}\n\n{deploy_card}"
        );
    }
    assert!(!deploy_card.contains("badge upstream"), "{deploy_card}");
    let read_card = card_html(&queue.body, &read);
    for fragment in [
        ">Read-only</span><span class=\"badge upstream\"",
        ">Upstream <b>files</b></span></p><p class=\"description\">Reads a file</p>",
        "<dt>Client</dt><dd class=\"client\">cursor-2026</dd>",
        "<dt>Server</dt><dd class=\"server\">ops-east</dd>",
    ] {
        assert!(read_card.contains(fragment), "{fragment}\n\n{read_card}");
    }
    // Its own page says the same.
    let item = alice.get(&format!("/approvals/{read}")).await;
    assert_eq!(item.status, 200);
    assert!(
        item.body.contains(">Upstream <b>files</b></span>"),
        "{}",
        item.body
    );
    assert!(item.body.contains("<dd class=\"client\">cursor-2026</dd>"));
}

/// The approval id of a parked call's answer (JSON or an SSE stream).
fn approval_id(response: &common::HttpResponse) -> String {
    assert_eq!(response.status, 200, "{response:?}");
    let message = if response
        .header("content-type")
        .is_some_and(|t| t.contains("json"))
    {
        response.json()
    } else {
        response.sse_messages().pop().expect("a message")
    };
    let result = &message["result"];
    assert_eq!(
        result["_meta"]["milpa"]["code"], "APPROVAL_PENDING",
        "{message}"
    );
    result["structuredContent"]["approval_id"]
        .as_str()
        .unwrap_or_else(|| panic!("an approval id in {message}"))
        .to_owned()
}

#[tokio::test]
async fn a_call_parked_before_the_facts_were_kept_still_shows_and_is_decided() {
    use milpa::verification::VerificationRecord;
    let page = start().await;
    let now = unix_millis(SystemTime::now());
    // The payload a parked call had before the page showed descriptions, badges, clients
    // and servers: the binding, the arguments, the expiry.
    let record: VerificationRecord = serde_json::from_value(json!({
        "id": "old-1", "subject": "deploy(env=prod)", "policy": "single",
        "required_grants": 1, "requested_by": "agent-7",
        "payload": {"parked_call": {
            "binding": {"tool": "deploy", "principal": "agent-7", "channel": "mcp"},
            "args": {"env": "prod"}, "expires_at_ms": now + 600_000, "executed_at_ms": null}},
        "status": "pending", "grants": [], "rejection": null,
        "created_at_ms": now - 1_000, "resolved_at_ms": null, "revision": 0
    }))
    .unwrap();
    page.registry
        .approvals()
        .verifier()
        .store()
        .create(record)
        .await
        .unwrap();

    let mut alice = PageClient::new(page.addr);
    let queue = alice.logged_in(ALICE).await;
    assert_eq!(queue.status, 200);
    let old = card_html(&queue.body, "old-1");
    assert!(
        old.contains(
            "<p class=\"kind\">Tool call · <span class=\"tool\">deploy</span></p>\
             <p class=\"summary mono\">deploy(<wbr>env=prod)</p><dl class=\"facts\">\
             <dt>Asked by</dt><dd>agent-7</dd><dt>Channel</dt><dd>mcp</dd><dt>Opened</dt>"
        ),
        "{old}"
    );
    for absent in ["badge", "description", "<dt>Client</dt>", "<dt>Server</dt>"] {
        assert!(!old.contains(absent), "{absent}: {old}");
    }
    assert!(
        old.contains("<p class=\"effect\">Grant runs nothing now"),
        "{old}"
    );
    let item = alice.get("/approvals/old-1").await;
    assert_eq!(item.status, 200, "{}", item.body);

    // It is decided as any other, and its replay runs.
    let granted = alice.decide(&queue, "old-1", "grant", "").await;
    assert_eq!(granted.status, 303, "{granted:?}");
    let ran = replay(&page, "old-1").await;
    assert!(ran.success, "{ran:?}");
    assert_eq!(page.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn the_list_refreshes_from_a_route_of_its_own_that_leaves_the_notice() {
    let page = start().await;
    let mut alice = PageClient::new(page.addr);
    // Signed out, the list is not shown.
    let signed_out = alice.get("/approvals/live").await;
    assert_eq!(signed_out.status, 401);
    assert!(!signed_out.body.contains("data-approval-id"));

    let first = park(&page, json!({"env": "prod"})).await;
    let queue = alice.logged_in(ALICE).await;
    assert!(
        queue
            .body
            .contains("<script src=\"/approvals/refresh.js\" defer></script>"),
        "{}",
        queue.body
    );
    assert!(queue.body.contains(
        "<div id=\"live\" data-refresh-ms=\"15000\" data-refresh-url=\"/approvals/live\">"
    ));
    assert!(
        queue
            .body
            .contains("<p class=\"refresh-status\" id=\"refresh-status\" role=\"status\" hidden>")
    );
    assert_eq!(
        queue.header("content-security-policy"),
        Some(
            "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
        )
    );
    let script = alice.get("/approvals/refresh.js").await;
    assert_eq!(script.status, 200);
    assert!(
        script
            .header("content-type")
            .unwrap()
            .starts_with("text/javascript")
    );
    assert!(script.body.contains("DOMParser"), "{}", script.body);

    // A decision leaves a notice for the next page; the list fetched meanwhile has the new
    // call and leaves the notice where it is.
    let granted = alice.decide(&queue, &first, "grant", "").await;
    assert_eq!(granted.status, 303);
    let second = park(&page, json!({"env": "staging"})).await;
    let live = alice.get("/approvals/live").await;
    assert_eq!(live.status, 200);
    assert!(
        live.header("content-type")
            .unwrap()
            .starts_with("text/html")
    );
    // The fragment carries the page's headers: never cached, never framed, and as a
    // document of its own it would run nothing.
    assert_eq!(live.header("cache-control"), Some("no-store"));
    assert_eq!(live.header("x-frame-options"), Some("DENY"));
    assert_eq!(
        live.header("content-security-policy"),
        Some(
            "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
        )
    );
    assert!(live.body.starts_with("<div id=\"live\""), "{}", live.body);
    assert!(live.body.ends_with("</div>"), "{}", live.body);
    assert!(!live.body.contains("<html"), "{}", live.body);
    assert!(pending_section(&live.body).contains(&card(&second)));
    assert!(!pending_section(&live.body).contains(&card(&first)));
    assert!(decisions_section(&live.body).contains(&format!("data-decided-id=\"{first}\"")));
    assert!(!live.body.contains("notice done"), "{}", live.body);
    let next = alice.get("/approvals").await;
    assert!(next.body.contains("class=\"notice done\""), "{}", next.body);
}

#[tokio::test]
async fn with_the_refresh_off_the_queue_loads_no_script() {
    let page = start_with(|server| {
        server
            .authenticator(tokens())
            .approvals_refresh(std::time::Duration::ZERO)
    })
    .await;
    park(&page, json!({"env": "prod"})).await;
    let mut alice = PageClient::new(page.addr);
    let queue = alice.logged_in(ALICE).await;
    assert!(!queue.body.contains("<script"), "{}", queue.body);
    assert!(!queue.body.contains("data-refresh-ms"), "{}", queue.body);
    // (The stylesheet names the status line's class; the element itself is absent.)
    assert!(
        !queue.body.contains("id=\"refresh-status\""),
        "{}",
        queue.body
    );
    assert_eq!(
        queue.header("content-security-policy"),
        Some(
            "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
        )
    );
}
