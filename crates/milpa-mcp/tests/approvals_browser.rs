//! The approvals page in a real browser: headless Chromium driven through chromedriver
//! (WebDriver). Sign in by typing a token, see the pending items, grant one with a reason,
//! see it leave the list for the decisions, and the parked call's replay run; a form
//! posted without its CSRF token is refused; a principal without `approvals:grant` cannot
//! sign in. An approver with a passkey (a WebDriver virtual authenticator, user
//! verification on) enrols it through the enrolment link and grants with it; a grant
//! posted without an assertion, and one with an assertion made for another approval, are
//! refused. Each card shows what the tool does, its Mutating and upstream badges, the
//! client and server that asked and the line saying what a grant does. The queue refreshes
//! itself: a call parked meanwhile appears without a reload while a half-typed reason keeps
//! its text and focus, and a card brought in that way is decided like any other (with the
//! passkey too); with JavaScript off the page decides the same, unrefreshed. Screenshots
//! (phone and desktop size) go to `$CARGO_TARGET_TMPDIR/approvals/`.
//!
//! Needs `chromedriver` and `chromium` (Debian: `chromium-driver`, `chromium`); override
//! their paths with `CHROMEDRIVER` and `CHROMIUM`. Without them the test says why and
//! passes, except under CI (`CI` set), where it fails.

mod common;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::start_http;
use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator};
use futures_util::FutureExt;
use hyper_util::client::legacy::connect::HttpConnector;
use milpa::approval::passkeys::{InMemoryPasskeyStore, PasskeyStore, enrolment_token_hash};
use milpa::approval::{ApprovalQueue, ApprovalState, Verdict};
use milpa::confirm::unix_millis;
use milpa::verification::{HumanVerifier, InMemoryVerificationStore};
use milpa::{ErrorCode, ToolContext, ToolDefinition, ToolRegistry};
use milpa_mcp::HttpServer;
use milpa_mcp::approvals::PasskeyOptions;
use milpa_mcp::auth::StaticTokens;
use serde_json::{Value, json};

const ALICE: &str = "alice-browser-token";
const CAROL: &str = "carol-browser-token";

/// A chromedriver process, killed when dropped.
struct Driver {
    child: Child,
    port: u16,
    /// chromedriver's and Chromium's `TMPDIR` (profiles, `scoped_dir`s): removed with the
    /// driver, so test runs do not pile browser profiles up in `/tmp`.
    _scratch: tempfile::TempDir,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tool_path(variable: &str, default: &str) -> PathBuf {
    std::env::var_os(variable)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(default))
}

/// Starts chromedriver on a free port, or says why it cannot (`Err`).
fn start_driver(chromedriver: &Path) -> Result<Driver, String> {
    if !chromedriver.exists() {
        return Err(format!("{} not found", chromedriver.display()));
    }
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    let scratch = tempfile::tempdir().map_err(|e| format!("no temporary folder: {e}"))?;
    let child = Command::new(chromedriver)
        .arg(format!("--port={port}"))
        .env("TMPDIR", scratch.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("{} did not start: {e}", chromedriver.display()))?;
    let driver = Driver {
        child,
        port,
        _scratch: scratch,
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            return Err("chromedriver did not listen within 20 s".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(driver)
}

/// The screen a browser session renders for.
#[derive(Clone, Copy)]
enum Screen {
    /// A 412 × 915 phone (CSS pixels) at device pixel ratio 2, touch and viewport meta on.
    Phone,
    /// A 1280 px wide desktop window.
    Desktop,
    /// The desktop window with JavaScript turned off.
    NoScript,
}

async fn browser(driver: &Driver, chromium: &Path, screen: Screen) -> Client {
    let mut options = json!({
        "binary": chromium,
        "args": [
            "--headless=new",
            // CI runs as root, where Chromium's sandbox cannot start.
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
            "--lang=en-US",
        ]
    });
    match screen {
        // A headless window is never narrower than 500 px: emulate the phone instead.
        Screen::Phone => {
            options["mobileEmulation"] = json!({
                "deviceMetrics": {"width": 412, "height": 915, "pixelRatio": 2.0, "mobile": true, "touch": true}
            });
        }
        Screen::Desktop | Screen::NoScript => {
            options["args"]
                .as_array_mut()
                .unwrap()
                .push(json!("--window-size=1280,1700"));
        }
    }
    if let Screen::NoScript = screen {
        options["prefs"] = json!({"profile.managed_default_content_settings.javascript": 2});
    }
    let mut capabilities = serde_json::Map::new();
    capabilities.insert("goog:chromeOptions".into(), options);
    ClientBuilder::new(HttpConnector::new())
        .capabilities(capabilities)
        .connect(&format!("http://127.0.0.1:{}", driver.port))
        .await
        .expect("a WebDriver session with headless Chromium")
}

struct Server {
    addr: SocketAddr,
    driver: Driver,
    chromium: PathBuf,
    registry: Arc<ToolRegistry>,
    deploys: Arc<AtomicUsize>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// How often the queue refreshes in the flows that do not test the refresh: seldom, so that
/// no refresh swaps a card between finding an element and clicking it.
const QUIET: Duration = Duration::from_secs(600);

async fn server(driver: Driver, chromium: PathBuf) -> Server {
    server_with(
        driver,
        chromium,
        Arc::new(InMemoryPasskeyStore::new()),
        QUIET,
    )
    .await
}

/// The server the browser opens: `deploy` (mutating, local) and `delete_customer`
/// (mutating, forwarded to the upstream `crm`), both waiting for a person, on the queue of
/// the server `ops-east`, its list refreshed every `refresh`.
async fn server_with(
    driver: Driver,
    chromium: PathBuf,
    passkeys: Arc<InMemoryPasskeyStore>,
    refresh: Duration,
) -> Server {
    let deploys = Arc::new(AtomicUsize::new(0));
    let queue = ApprovalQueue::new(HumanVerifier::new(Arc::new(
        InMemoryVerificationStore::new(),
    )))
    .with_server("ops-east");
    let mut registry = ToolRegistry::builder().approvals(Arc::new(queue)).build();
    let counter = deploys.clone();
    registry
        .register(
            ToolDefinition::builder("deploy")
                .description("Deploys a service version to an environment")
                .input_schema(json!({"type": "object", "properties": {
                    "service": {"type": "string"}, "env": {"type": "string"},
                    "version": {"type": "string"}}}))
                .mutating(true)
                .requires_human_approval(true)
                .sync(move |args, _| {
                    counter.fetch_add(1, Ordering::SeqCst);
                    json!({"deployed": args["version"]})
                }),
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::builder("delete_customer")
                .description("Deletes a customer account")
                .input_schema(json!({"type": "object", "properties": {
                    "customer_id": {"type": "string"}, "reason": {"type": "string"},
                    "api_key": {"type": "string"}}}))
                .upstream("crm")
                .mutating(true)
                .requires_human_approval(true)
                .sync(|args, _| json!({"deleted": args["customer_id"]})),
        )
        .unwrap();
    let registry = Arc::new(registry);
    let mut tokens = StaticTokens::new();
    tokens.insert_token(ALICE, "alice", ["approvals:grant"]);
    tokens.insert_token(CAROL, "carol", ["ops:read"]);
    let (addr, stop) = start_http(
        HttpServer::new(registry.clone())
            .authenticator(tokens)
            .approval_passkeys(PasskeyOptions::new(passkeys))
            .approvals_refresh(refresh),
    )
    .await;
    Server {
        addr,
        driver,
        chromium,
        registry,
        deploys,
        _stop: stop,
    }
}

/// The agent, calling through an MCP client that names itself `claude-desktop`.
fn agent() -> ToolContext {
    ToolContext::mcp("r1", Some("agent-7".into()), ["*"]).with_client("claude-desktop")
}

async fn park(registry: &ToolRegistry, tool: &str, args: Value) -> String {
    let parked = registry.call(tool, args, &agent()).await;
    assert_eq!(
        parked.code(),
        Some(&ErrorCode::ApprovalPending),
        "{parked:?}"
    );
    parked.data["approval_id"].as_str().unwrap().to_owned()
}

async fn state(registry: &ToolRegistry, id: &str) -> ApprovalState {
    let approval = registry.approvals().get(id).await.unwrap().unwrap();
    approval.state(unix_millis(std::time::SystemTime::now()))
}

fn screenshot_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("approvals");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn pending_card(id: &str) -> String {
    format!("[data-approval-id=\"{id}\"]")
}

/// The text of the element `css` inside `scope`.
async fn text_of(scope: &fantoccini::elements::Element, css: &str) -> String {
    scope
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|_| panic!("{css} shown"))
        .text()
        .await
        .unwrap()
}

async fn sign_in(client: &Client, addr: SocketAddr, token: &str) {
    sign_in_at(client, &format!("http://{addr}"), token).await;
}

/// Signs in on the page at `base` (`http://host:port`).
async fn sign_in_at(client: &Client, base: &str, token: &str) {
    client.goto(&format!("{base}/approvals")).await.unwrap();
    let field = client
        .find(Locator::Css("input[name=\"token\"]"))
        .await
        .unwrap();
    field.send_keys(token).await.unwrap();
    client
        .find(Locator::Css(
            "form[action=\"/approvals/login\"] button[type=\"submit\"]",
        ))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    client
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css("#principal"))
        .await
        .expect("signed in");
}

async fn sign_out(client: &Client) {
    client
        .find(Locator::Css("form[action=\"/approvals/logout\"] button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    client
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css("input[name=\"token\"]"))
        .await
        .expect("signed out");
}

/// Waits until the page (a new one, after a form) shows a notice containing `needle`.
async fn notice_saying(client: &Client, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = String::new();
    while Instant::now() < deadline {
        if let Ok(notice) = client.find(Locator::Css("#notice")).await {
            last = notice.text().await.unwrap_or_default();
            if last.contains(needle) {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no notice saying {needle:?} (last: {last:?})");
}

async fn save_screenshot(client: &Client, name: &str) -> PathBuf {
    let png = client.screenshot().await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    let path = screenshot_dir().join(name);
    std::fs::write(&path, png).unwrap();
    eprintln!("screenshot: {}", path.display());
    path
}

/// The same queue in a desktop-size window of its own session.
async fn desktop_screenshot(server: &Server) {
    let desktop = browser(&server.driver, &server.chromium, Screen::Desktop).await;
    let outcome = std::panic::AssertUnwindSafe(async {
        desktop
            .goto(&format!("http://{}/approvals", server.addr))
            .await
            .unwrap();
        save_screenshot(&desktop, "approvals-login.png").await;
        sign_in(&desktop, server.addr, ALICE).await;
        save_screenshot(&desktop, "approvals-page.png").await;
    })
    .catch_unwind()
    .await;
    let _ = desktop.close().await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

async fn flow(client: &Client, server: &Server) {
    let registry = &server.registry;
    let deploy = park(
        registry,
        "deploy",
        json!({"service": "billing-api", "env": "production", "version": "2.14.0"}),
    )
    .await;
    let delete = park(
        registry,
        "delete_customer",
        json!({"customer_id": "cus_8812", "reason": "GDPR erasure request #4471", "api_key": "sk_live_not_shown"}),
    )
    .await;
    let earlier = park(
        registry,
        "deploy",
        json!({"service": "search", "env": "production", "version": "0.9.3-rc1"}),
    )
    .await;
    registry
        .decide_approval(
            &earlier,
            Verdict::Reject,
            Some("release candidates do not go to production"),
            &ToolContext::web("bob", ["approvals:grant"]),
        )
        .await
        .unwrap();

    sign_in(client, server.addr, ALICE).await;
    for id in [&deploy, &delete] {
        client
            .find(Locator::Css(&pending_card(id)))
            .await
            .unwrap_or_else(|_| panic!("pending item {id} shown"));
    }
    let grant_buttons = client
        .find_all(Locator::Css("button[name=\"decision\"][value=\"grant\"]"))
        .await
        .unwrap();
    assert_eq!(grant_buttons.len(), 2);
    let page_text = client
        .find(Locator::Css("body"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        !page_text.contains("sk_live_not_shown"),
        "secrets are redacted"
    );
    // What a person reads at 3 a.m.: what the tool does, whether it changes state, where
    // it goes, who asked through which client on which server, and what a grant does.
    let deploy_card = client
        .find(Locator::Css(&pending_card(&deploy)))
        .await
        .unwrap();
    assert_eq!(
        text_of(&deploy_card, ".description").await,
        "Deploys a service version to an environment"
    );
    assert_eq!(text_of(&deploy_card, ".badge.mutating").await, "Mutating");
    assert!(
        deploy_card
            .find_all(Locator::Css(".badge.upstream"))
            .await
            .unwrap()
            .is_empty(),
        "a local tool goes to no upstream"
    );
    assert_eq!(text_of(&deploy_card, "dd.client").await, "claude-desktop");
    assert_eq!(text_of(&deploy_card, "dd.server").await, "ops-east");
    let effect = text_of(&deploy_card, "form.decide .effect").await;
    assert!(
        effect.starts_with("Grant runs nothing now: the caller's retry runs this call once")
            && effect.contains("Reject: it never runs"),
        "{effect}"
    );
    // The line sits right before the buttons, in view on a phone.
    let before_buttons = client
        .execute(
            "const form = document.querySelector(arguments[0] + ' form.decide');
             const line = form.querySelector('.effect');
             return line.nextElementSibling.className === 'buttons'
               && line.getBoundingClientRect().width > 0;",
            vec![json!(pending_card(&deploy))],
        )
        .await
        .unwrap();
    assert_eq!(before_buttons, json!(true));
    let delete_card = client
        .find(Locator::Css(&pending_card(&delete)))
        .await
        .unwrap();
    assert_eq!(
        text_of(&delete_card, ".badge.upstream").await,
        "Upstream crm"
    );
    assert_eq!(text_of(&delete_card, ".badge.mutating").await, "Mutating");
    save_screenshot(client, "approvals-page-phone.png").await;
    desktop_screenshot(server).await;

    // Grant the deploy with a reason.
    let card = client
        .find(Locator::Css(&pending_card(&deploy)))
        .await
        .unwrap();
    card.find(Locator::Css("input[name=\"reason\"]"))
        .await
        .unwrap()
        .send_keys("release window is open")
        .await
        .unwrap();
    card.find(Locator::Css("button[name=\"decision\"][value=\"grant\"]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    notice_saying(client, "Granted deploy(").await;
    assert!(
        client
            .find_all(Locator::Css(&pending_card(&deploy)))
            .await
            .unwrap()
            .is_empty(),
        "the granted item left the pending list"
    );
    let decided = client
        .find(Locator::Css(&format!(
            "#decisions [data-decided-id=\"{deploy}\"]"
        )))
        .await
        .expect("the granted item among the decisions");
    let decided_text = decided.text().await.unwrap();
    assert!(decided_text.contains("alice"), "{decided_text}");
    assert!(
        decided_text.contains("release window is open"),
        "{decided_text}"
    );
    save_screenshot(client, "approvals-page-after-grant.png").await;

    // The agent's replay runs the parked arguments.
    assert_eq!(state(registry, &deploy).await, ApprovalState::Granted);
    let ran = registry
        .call("deploy", json!({"confirm_token": deploy}), &agent())
        .await;
    assert!(ran.success, "{ran:?}");
    assert_eq!(ran.data, json!({"deployed": "2.14.0"}));
    assert_eq!(server.deploys.load(Ordering::SeqCst), 1);

    // A form posted without its CSRF token is refused; the item stays pending. (WebDriver
    // scripts run outside the page's CSP, which allows only the page's own scripts.)
    client
        .execute(
            "document.querySelector(arguments[0] + ' input[name=\"csrf\"]').remove();",
            vec![json!(pending_card(&delete))],
        )
        .await
        .unwrap();
    client
        .find(Locator::Css(&format!(
            "{} button[name=\"decision\"][value=\"reject\"]",
            pending_card(&delete)
        )))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    notice_saying(client, "CSRF token is missing or wrong").await;
    assert_eq!(state(registry, &delete).await, ApprovalState::Pending);

    // A principal without approvals:grant cannot sign in: it sees nothing of the queue.
    client
        .goto(&format!("http://{}/approvals", server.addr))
        .await
        .unwrap();
    sign_out(client).await;
    let field = client
        .find(Locator::Css("input[name=\"token\"]"))
        .await
        .unwrap();
    field.send_keys(CAROL).await.unwrap();
    client
        .find(Locator::Css(
            "form[action=\"/approvals/login\"] button[type=\"submit\"]",
        ))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let refusal = client
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css("p.notice.refused"))
        .await
        .expect("the sign-in refused");
    assert!(
        refusal
            .text()
            .await
            .unwrap()
            .contains("does not carry the scope approvals:grant")
    );
    assert!(
        client
            .find_all(Locator::Css("#principal"))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        client
            .find_all(Locator::Css(&pending_card(&delete)))
            .await
            .unwrap()
            .is_empty(),
        "nothing of the queue shown"
    );
    assert_eq!(state(registry, &delete).await, ApprovalState::Pending);
}

/// chromedriver and Chromium, or `None` (the test says why and passes) outside CI.
fn browser_tools() -> Option<(Driver, PathBuf)> {
    let chromedriver = tool_path("CHROMEDRIVER", "/usr/bin/chromedriver");
    let chromium = tool_path("CHROMIUM", "/usr/bin/chromium");
    match start_driver(&chromedriver) {
        Ok(driver) if chromium.exists() => Some((driver, chromium)),
        outcome => {
            let why = match outcome {
                Err(why) => why,
                Ok(_) => format!("{} not found", chromium.display()),
            };
            if std::env::var_os("CI").is_some() {
                panic!(
                    "the browser test must run under CI: {why} (install chromium and chromium-driver)"
                );
            }
            eprintln!("skipping the browser test: {why} (install chromium and chromium-driver)");
            None
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_signs_in_and_grants_in_a_real_browser() {
    let Some((driver, chromium)) = browser_tools() else {
        return;
    };
    let _ = std::fs::remove_file(screenshot_dir().join("approvals-page-failure.png"));
    let server = server(driver, chromium).await;
    let client = browser(&server.driver, &server.chromium, Screen::Phone).await;
    let outcome = std::panic::AssertUnwindSafe(flow(&client, &server))
        .catch_unwind()
        .await;
    if outcome.is_err() {
        let _ = save_screenshot(&client, "approvals-page-failure.png").await;
    }
    let _ = client.close().await;
    drop(server);
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// WebDriver's WebAuthn extension: a virtual authenticator in the browser session (CTAP2,
/// built in, resident keys, user verification present and always given).
#[derive(Debug)]
struct AddVirtualAuthenticator;

impl WebDriverCompatibleCommand for AddVirtualAuthenticator {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!(
            "session/{}/webauthn/authenticator",
            session_id.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _request_url: &url::Url) -> (axum::http::Method, Option<String>) {
        let options = json!({
            "protocol": "ctap2",
            "transport": "internal",
            "hasResidentKey": true,
            "hasUserVerification": true,
            "isUserVerified": true,
        });
        (axum::http::Method::POST, Some(options.to_string()))
    }
}

/// Posts a decision form of the page's own making, as a person's browser could, without
/// the passkey script: `fields` as hidden inputs.
async fn post_plain_form(client: &Client, action: &str, fields: Value) {
    client
        .execute(
            "const form = document.createElement('form');
             form.method = 'post';
             form.action = arguments[0];
             for (const [name, value] of arguments[1]) {
               const input = document.createElement('input');
               input.type = 'hidden'; input.name = name; input.value = value;
               form.appendChild(input);
             }
             document.body.appendChild(form);
             form.submit();",
            vec![json!(action), fields],
        )
        .await
        .unwrap();
}

/// Signs alice in at `base` and enrols a passkey for her through the enrolment link of
/// `token` (the link `milpa approvals enroll` prints; the token made here the same way),
/// with a WebDriver virtual authenticator (user verification on).
async fn enrol_alice(client: &Client, base: &str, passkeys: &InMemoryPasskeyStore, token: &str) {
    client.issue_cmd(AddVirtualAuthenticator).await.unwrap();
    let expires = unix_millis(std::time::SystemTime::now()) + 600_000;
    passkeys
        .create_enrolment(&enrolment_token_hash(token), "alice", expires)
        .await
        .unwrap();
    sign_in_at(client, base, ALICE).await;
    client
        .goto(&format!("{base}/approvals/enroll/{token}"))
        .await
        .unwrap();
    let actor = client.find(Locator::Css("#enrol-actor")).await.unwrap();
    assert_eq!(actor.text().await.unwrap(), "alice");
    client
        .find(Locator::Css("form#passkey-enroll button[type=\"submit\"]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    notice_saying(client, "Passkey enrolled for alice").await;
    let enrolled = passkeys.for_actor("alice").await.unwrap();
    assert_eq!(enrolled.len(), 1, "one passkey");
    assert!(
        enrolled[0].public_credential.contains("cred_id"),
        "{}",
        enrolled[0].public_credential
    );
}

async fn passkey_flow(client: &Client, server: &Server, passkeys: &InMemoryPasskeyStore) {
    let registry = &server.registry;
    // The RP id is localhost: the page must be opened under that name.
    let base = format!("http://localhost:{}", server.addr.port());
    let token = "7b1f0c9e4d2a4f6b8e3c5a7d9f1b3e5c";
    enrol_alice(client, &base, passkeys, token).await;
    // The link served once.
    client
        .goto(&format!("{base}/approvals/enroll/{token}"))
        .await
        .unwrap();
    let gone = client
        .find(Locator::Css("main"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(gone.contains("used already"), "{gone}");

    // Grant with the passkey: the button runs the assertion, the replay runs once.
    let deploy = park(
        registry,
        "deploy",
        json!({"service": "billing-api", "env": "production", "version": "2.15.0"}),
    )
    .await;
    client.goto(&format!("{base}/approvals")).await.unwrap();
    client
        .find(Locator::Css(&format!(
            "{} form[data-passkey] button[name=\"decision\"][value=\"grant\"]",
            pending_card(&deploy)
        )))
        .await
        .expect("a passkey decision form")
        .click()
        .await
        .unwrap();
    notice_saying(client, "Granted deploy(").await;
    assert_eq!(state(registry, &deploy).await, ApprovalState::Granted);
    let ran = registry
        .call("deploy", json!({"confirm_token": deploy}), &agent())
        .await;
    assert!(ran.success, "{ran:?}");
    let again = registry
        .call("deploy", json!({"confirm_token": deploy}), &agent())
        .await;
    assert!(!again.success, "the replay runs once: {again:?}");
    assert_eq!(server.deploys.load(Ordering::SeqCst), 1);

    // A grant posted without an assertion is refused.
    let other = park(
        registry,
        "deploy",
        json!({"service": "search", "env": "production", "version": "1.0.0"}),
    )
    .await;
    client.goto(&format!("{base}/approvals")).await.unwrap();
    let csrf = client
        .find(Locator::Css("input[name=\"csrf\"]"))
        .await
        .unwrap()
        .attr("value")
        .await
        .unwrap()
        .unwrap();
    post_plain_form(
        client,
        &format!("/approvals/{other}"),
        json!([["csrf", csrf], ["decision", "grant"]]),
    )
    .await;
    notice_saying(client, "alice enrolled a passkey").await;
    assert_eq!(state(registry, &other).await, ApprovalState::Pending);

    // An assertion made for another approval id is refused: both challenges are started,
    // the authenticator signs the third item's, and it is posted for `other`.
    let third = park(
        registry,
        "deploy",
        json!({"service": "mail", "env": "production", "version": "3.1.0"}),
    )
    .await;
    client.goto(&format!("{base}/approvals")).await.unwrap();
    let assertion = client
        .execute_async(
            "const done = arguments[arguments.length - 1];
             const csrf = document.querySelector('input[name=\"csrf\"]').value;
             const start = (id) => fetch('/approvals/' + id + '/challenge', {
               method: 'POST',
               body: new URLSearchParams({csrf, decision: 'grant'}),
             }).then((r) => r.json());
             (async () => {
               await start(arguments[0]);
               const options = await start(arguments[1]);
               const publicKey = PublicKeyCredential.parseRequestOptionsFromJSON(options.publicKey);
               const credential = await navigator.credentials.get({publicKey});
               done(JSON.stringify(credential.toJSON()));
             })().catch((e) => done('error: ' + e));",
            vec![json!(other), json!(third)],
        )
        .await
        .unwrap();
    let assertion = assertion.as_str().unwrap().to_owned();
    assert!(!assertion.starts_with("error"), "{assertion}");
    post_plain_form(
        client,
        &format!("/approvals/{other}"),
        json!([
            ["csrf", csrf],
            ["decision", "grant"],
            ["assertion", assertion]
        ]),
    )
    .await;
    notice_saying(client, "passkey check failed").await;
    assert_eq!(state(registry, &other).await, ApprovalState::Pending);
    assert_eq!(state(registry, &third).await, ApprovalState::Pending);
    save_screenshot(client, "approvals-passkey-refused.png").await;

    // Opened as 127.0.0.1 the page says where the passkey works.
    sign_in(client, server.addr, ALICE).await;
    let note = client
        .find(Locator::Css("#passkey-host"))
        .await
        .expect("the RP id note")
        .text()
        .await
        .unwrap();
    assert!(
        note.contains(&format!(
            "http://localhost:{}/approvals",
            server.addr.port()
        )),
        "{note}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approver_with_a_passkey_decides_only_with_it() {
    let Some((driver, chromium)) = browser_tools() else {
        return;
    };
    let passkeys = Arc::new(InMemoryPasskeyStore::new());
    let server = server_with(driver, chromium, passkeys.clone(), QUIET).await;
    let client = browser(&server.driver, &server.chromium, Screen::Desktop).await;
    let outcome = std::panic::AssertUnwindSafe(passkey_flow(&client, &server, &passkeys))
        .catch_unwind()
        .await;
    if outcome.is_err() {
        let _ = save_screenshot(&client, "approvals-passkey-failure.png").await;
    }
    let _ = client.close().await;
    drop(server);
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// Runs `flow` in a browser session of its own on `server`, saving a screenshot named
/// `failure` if it panics.
async fn in_browser<F, Fut>(server: &Server, screen: Screen, failure: &str, flow: F)
where
    F: FnOnce(Client) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let client = browser(&server.driver, &server.chromium, screen).await;
    let outcome = std::panic::AssertUnwindSafe(flow(client.clone()))
        .catch_unwind()
        .await;
    if outcome.is_err() {
        let _ = save_screenshot(&client, failure).await;
    }
    let _ = client.close().await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// The value of the field `css`, and whether it has the focus.
async fn field_state(client: &Client, css: &str) -> (String, bool) {
    let state = client
        .execute(
            "const field = document.querySelector(arguments[0]);
             return [field ? field.value : null, field !== null && document.activeElement === field];",
            vec![json!(css)],
        )
        .await
        .unwrap();
    (
        state[0].as_str().unwrap_or_default().to_owned(),
        state[1] == json!(true),
    )
}

async fn refresh_flow(client: &Client, server: &Server) {
    let registry = &server.registry;
    let first = park(
        registry,
        "deploy",
        json!({"service": "billing-api", "env": "production", "version": "2.16.0"}),
    )
    .await;
    sign_in(client, server.addr, ALICE).await;
    let status = client
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css("#refresh-status:not([hidden])"))
        .await
        .expect("the refresh says it runs");
    assert!(
        status.text().await.unwrap().contains("every 1 s"),
        "{}",
        status.text().await.unwrap()
    );

    // Half a reason typed, the cursor still in the field.
    let reason = format!("{} input[name=\"reason\"]", pending_card(&first));
    client
        .find(Locator::Css(&reason))
        .await
        .unwrap()
        .send_keys("checking with on-call")
        .await
        .unwrap();
    assert_eq!(
        field_state(client, &reason).await,
        ("checking with on-call".to_owned(), true)
    );

    // A call parked now appears without a reload; the typed reason, and the focus, stay.
    let second = park(
        registry,
        "delete_customer",
        json!({"customer_id": "cus_9001", "reason": "duplicate account"}),
    )
    .await;
    client
        .wait()
        .at_most(Duration::from_secs(20))
        .for_element(Locator::Css(&pending_card(&second)))
        .await
        .expect("the new call appears after a refresh");
    assert_eq!(
        field_state(client, &reason).await,
        ("checking with on-call".to_owned(), true),
        "the half-written reason and its focus survive the refresh"
    );
    let count = client.find(Locator::Css("#pending-count")).await.unwrap();
    assert_eq!(count.text().await.unwrap(), "2");
    let refreshed = client
        .find(Locator::Css(&pending_card(&second)))
        .await
        .unwrap();
    assert_eq!(text_of(&refreshed, ".badge.upstream").await, "Upstream crm");
    assert_eq!(text_of(&refreshed, "dd.client").await, "claude-desktop");
    let status = client
        .find(Locator::Css("#refresh-status"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(status.starts_with("Updated at "), "{status}");
    save_screenshot(client, "approvals-page-refreshed.png").await;

    // The reason finished and sent: the decision carries it.
    client
        .find(Locator::Css(&reason))
        .await
        .unwrap()
        .send_keys(", go ahead")
        .await
        .unwrap();
    client
        .find(Locator::Css(&format!(
            "{} button[name=\"decision\"][value=\"grant\"]",
            pending_card(&first)
        )))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    notice_saying(client, "Granted deploy(").await;
    let decided = registry.approvals().get(&first).await.unwrap().unwrap();
    assert_eq!(
        decided.decided_by(),
        Some(("alice", Some("checking with on-call, go ahead")))
    );

    // The form of a card the refresh brought in works like any other (its CSRF token too).
    client
        .find(Locator::Css(&format!(
            "{} button[name=\"decision\"][value=\"reject\"]",
            pending_card(&second)
        )))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    notice_saying(client, "Rejected delete_customer(").await;
    assert_eq!(state(registry, &second).await, ApprovalState::Rejected);
}

/// With JavaScript off the queue is the same page, unrefreshed, and decides the same.
async fn no_script_flow(client: &Client, server: &Server) {
    let registry = &server.registry;
    let id = park(
        registry,
        "deploy",
        json!({"service": "search", "env": "staging", "version": "1.2.0"}),
    )
    .await;
    sign_in(client, server.addr, ALICE).await;
    let status = client.find(Locator::Css("#refresh-status")).await.unwrap();
    assert!(
        !status.is_displayed().await.unwrap(),
        "no refresh to speak of"
    );
    let card = client.find(Locator::Css(&pending_card(&id))).await.unwrap();
    assert_eq!(text_of(&card, ".badge.mutating").await, "Mutating");
    card.find(Locator::Css("input[name=\"reason\"]"))
        .await
        .unwrap()
        .send_keys("no script needed")
        .await
        .unwrap();
    card.find(Locator::Css("button[name=\"decision\"][value=\"grant\"]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    notice_saying(client, "Granted deploy(").await;
    let decided = registry.approvals().get(&id).await.unwrap().unwrap();
    assert_eq!(
        decided.decided_by(),
        Some(("alice", Some("no script needed")))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_refreshes_without_losing_a_half_written_reason() {
    let Some((driver, chromium)) = browser_tools() else {
        return;
    };
    let server = server_with(
        driver,
        chromium,
        Arc::new(InMemoryPasskeyStore::new()),
        Duration::from_secs(1),
    )
    .await;
    let server = &server;
    in_browser(
        server,
        Screen::Phone,
        "approvals-refresh-failure.png",
        |client| async move { refresh_flow(&client, server).await },
    )
    .await;
    in_browser(
        server,
        Screen::NoScript,
        "approvals-no-script-failure.png",
        |client| async move { no_script_flow(&client, server).await },
    )
    .await;
}

/// A card the refresh brings in is decided with the passkey like any other, while the
/// reason half-typed into another card stays as it was.
async fn passkey_refresh_flow(client: &Client, server: &Server, passkeys: &InMemoryPasskeyStore) {
    let registry = &server.registry;
    let base = format!("http://localhost:{}", server.addr.port());
    let first = park(
        registry,
        "deploy",
        json!({"service": "billing-api", "env": "production", "version": "2.17.0"}),
    )
    .await;
    enrol_alice(client, &base, passkeys, "5d3c1a9e7f2b4d6c8a0e2f4b6d8c0a1e").await;
    client.goto(&format!("{base}/approvals")).await.unwrap();
    client
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css("#refresh-status:not([hidden])"))
        .await
        .expect("the refresh runs beside the passkey script");
    let reason = format!("{} input[name=\"reason\"]", pending_card(&first));
    client
        .find(Locator::Css(&reason))
        .await
        .unwrap()
        .send_keys("asking the release owner")
        .await
        .unwrap();

    let second = park(
        registry,
        "delete_customer",
        json!({"customer_id": "cus_4242", "reason": "closed account"}),
    )
    .await;
    let brought_in = client
        .wait()
        .at_most(Duration::from_secs(20))
        .for_element(Locator::Css(&format!(
            "{} form[data-passkey]",
            pending_card(&second)
        )))
        .await
        .expect("the new call appears, with its passkey form, after a refresh");
    assert_eq!(
        field_state(client, &reason).await,
        ("asking the release owner".to_owned(), true),
        "the half-written reason and its focus survive the refresh"
    );
    brought_in
        .find(Locator::Css("input[name=\"reason\"]"))
        .await
        .unwrap()
        .send_keys("duplicate, confirmed")
        .await
        .unwrap();
    brought_in
        .find(Locator::Css("button[name=\"decision\"][value=\"grant\"]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    notice_saying(client, "Granted delete_customer(").await;
    let decided = registry.approvals().get(&second).await.unwrap().unwrap();
    assert_eq!(
        decided.decided_by(),
        Some(("alice", Some("duplicate, confirmed")))
    );
    assert_eq!(state(registry, &first).await, ApprovalState::Pending);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_the_refresh_brings_in_is_decided_with_a_passkey() {
    let Some((driver, chromium)) = browser_tools() else {
        return;
    };
    let passkeys = Arc::new(InMemoryPasskeyStore::new());
    let server = server_with(driver, chromium, passkeys.clone(), Duration::from_secs(1)).await;
    let (server, passkeys) = (&server, &passkeys);
    in_browser(
        server,
        Screen::Desktop,
        "approvals-passkey-refresh-failure.png",
        |client| async move { passkey_refresh_flow(&client, server, passkeys).await },
    )
    .await;
}
