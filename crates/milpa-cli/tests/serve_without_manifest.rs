//! `milpa serve --http` without a manifest: two bearer tokens made for the run, printed once
//! on stderr (never inside a URL) with the endpoint and the approvals page.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use common::http::{Response, Server, call, initialize, milpa_command, parse};
use common::terminal::decide;
use common::{Sandbox, run, trail_until};
use serde_json::{Value, json};

struct Started {
    server: Server,
    addr: SocketAddr,
    agent: String,
    approver: String,
    /// Everything the server wrote on stderr so far (kept filling in the background).
    stderr: Arc<Mutex<String>>,
}

/// The value after `label` on its `milpa:` line.
fn value_of(lines: &[String], label: &str) -> String {
    let line = lines
        .iter()
        .find(|l| {
            l.trim_start_matches("milpa:")
                .trim_start()
                .starts_with(label)
        })
        .unwrap_or_else(|| panic!("a line {label:?} in {lines:#?}"));
    line.trim_start_matches("milpa:").trim_start()[label.len()..]
        .trim()
        .to_owned()
}

fn start(sb: &Sandbox) -> Started {
    let mut child = milpa_command(sb)
        .args(["serve", "--http", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let server = Server(child);
    let mut lines = BufReader::new(stderr).lines();
    let mut head = Vec::new();
    let addr: SocketAddr = loop {
        let line = lines
            .next()
            .expect("the server said where it listens")
            .unwrap();
        head.push(line.clone());
        if let Some(rest) = line.strip_prefix("milpa: serving MCP on http://") {
            break rest.trim_end_matches("/mcp").parse().unwrap();
        }
    };
    let all = Arc::new(Mutex::new(head.join("\n") + "\n"));
    let sink = Arc::clone(&all);
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            let mut all = sink.lock().unwrap();
            all.push_str(&line);
            all.push('\n');
        }
    });
    assert_eq!(
        value_of(&head, "MCP endpoint"),
        format!("http://{addr}/mcp")
    );
    assert_eq!(
        value_of(&head, "approvals page"),
        format!("http://{addr}/approvals")
    );
    Started {
        server,
        addr,
        agent: value_of(&head, "agent token"),
        approver: value_of(&head, "approver token"),
        stderr: all,
    }
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

#[test]
fn the_run_makes_an_agent_token_and_an_approver_token() {
    let sb = Sandbox::new();
    let mut s = start(&sb);
    for token in [&s.agent, &s.approver] {
        assert_eq!(token.len(), 64, "{token}");
        assert!(token.bytes().all(|b| b.is_ascii_hexdigit()), "{token}");
    }
    assert_ne!(s.agent, s.approver);

    // The agent token calls tools as local-user, with every scope.
    let agent = bearer(&s.agent);
    let auth = [("Authorization", agent.as_str())];
    let session = initialize(s.addr, &auth);
    let added = call(
        s.addr,
        &session,
        &auth,
        "notes_add",
        json!({"text": "milk"}),
    );
    assert_eq!(added["isError"], false, "{added}");
    assert_eq!(added["_meta"]["milpa"]["principal"], "local-user");

    // The approver token calls no tool: a scoped tool is FORBIDDEN.
    let approver = bearer(&s.approver);
    let approver_auth = [("Authorization", approver.as_str())];
    let approver_session = initialize(s.addr, &approver_auth);
    let refused = call(
        s.addr,
        &approver_session,
        &approver_auth,
        "notes_add",
        json!({"text": "x"}),
    );
    assert_eq!(refused["_meta"]["milpa"]["code"], "FORBIDDEN", "{refused}");

    // No token is refused at `initialize` (401 with a challenge): nothing would be served.
    let r = common::http::post(
        s.addr,
        &[],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
    );
    assert_eq!(r.status, 401, "{}", r.body);
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));

    // The agents' identity cannot approve what it parked (why there are two tokens).
    let parked = call(s.addr, &session, &auth, "notes_clear", json!({}));
    assert_eq!(
        parked["_meta"]["milpa"]["code"], "APPROVAL_PENDING",
        "{parked}"
    );
    let id = parked["structuredContent"]["approval_id"].as_str().unwrap();
    let own = decide(
        sb.milpa()
            .args(["approvals", "grant", id, "--actor", "local-user"]),
    );
    assert_eq!(own.code, 1);
    assert!(
        own.stderr.contains("'local-user' asked for approval"),
        "{}",
        own.stderr
    );

    // A restart makes new tokens: the old ones stop working.
    let old_agent = s.agent.clone();
    let _ = s.server.0.kill();
    let _ = s.server.0.wait();
    let printed = s.stderr.lock().unwrap().clone();
    let again = start(&sb);
    assert_ne!(again.agent, old_agent);
    let old = bearer(&old_agent);
    let r = common::http::post(
        again.addr,
        &[("Authorization", old.as_str())],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
    );
    assert_eq!(r.status, 401, "{}", r.body);

    // Each token was printed once, on a line of its own, never inside a URL.
    for token in [&s.agent, &s.approver] {
        assert_eq!(printed.matches(token.as_str()).count(), 1, "{printed}");
        let line = printed
            .lines()
            .find(|l| l.contains(token.as_str()))
            .unwrap();
        assert!(!line.contains("http"), "{line}");
    }
    assert!(
        printed.contains("nobody may approve a call they made themselves"),
        "{printed}"
    );
}

#[test]
fn a_manifest_keeps_its_own_tokens() {
    let sb = Sandbox::new();
    sb.write("milpa.toml", "[server]\nname = \"ops\"\n");
    let mut child = milpa_command(&sb)
        .args(["serve", "--http", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let _server = Server(child);
    let mut head = String::new();
    for line in BufReader::new(stderr).lines() {
        let line = line.unwrap();
        head.push_str(&line);
        head.push('\n');
        if line.starts_with("milpa: serving MCP on") {
            break;
        }
    }
    assert!(!head.contains("token "), "{head}");
    assert!(
        head.contains("no [[auth.tokens]] in the manifest"),
        "{head}"
    );
}

/// A browser on the approvals page: a cookie jar, and forms posted with the page's `Origin`.
struct Page {
    addr: SocketAddr,
    cookies: Vec<(String, String)>,
}

impl Page {
    fn new(addr: SocketAddr) -> Page {
        Page {
            addr,
            cookies: Vec::new(),
        }
    }

    fn request(&mut self, method: &str, path: &str, form: &[(&str, &str)]) -> Response {
        let body = form
            .iter()
            .map(|(k, v)| format!("{}={}", url_encode(k), url_encode(v)))
            .collect::<Vec<_>>()
            .join("&");
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nOrigin: http://{addr}\r\n\
             Connection: close\r\nContent-Type: application/x-www-form-urlencoded\r\n\
             Content-Length: {}\r\n",
            body.len(),
            addr = self.addr,
        );
        if !self.cookies.is_empty() {
            let jar: Vec<String> = self
                .cookies
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            head.push_str(&format!("Cookie: {}\r\n", jar.join("; ")));
        }
        head.push_str("\r\n");
        let mut stream = TcpStream::connect(self.addr).unwrap();
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(body.as_bytes()).unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        let response = parse(&raw);
        for (name, value) in &response.headers {
            if !name.eq_ignore_ascii_case("set-cookie") {
                continue;
            }
            let pair = value.split(';').next().unwrap_or("");
            if let Some((k, v)) = pair.split_once('=') {
                self.cookies.retain(|(name, _)| name != k.trim());
                if !v.is_empty() && !value.contains("Max-Age=0") {
                    self.cookies
                        .push((k.trim().to_owned(), v.trim().to_owned()));
                }
            }
        }
        response
    }

    /// Posts the sign-in form with `token`.
    fn login(&mut self, token: &str) -> Response {
        let form = self.request("GET", "/approvals", &[]);
        assert_eq!(form.status, 200, "{}", form.body);
        let csrf = csrf(&form.body).expect("a csrf field on the sign-in form");
        self.request(
            "POST",
            "/approvals/login",
            &[("csrf", &csrf), ("next", "/approvals"), ("token", token)],
        )
    }

    /// Posts a decision on `id` with the CSRF token of the signed-in item page.
    fn decide(&mut self, id: &str, decision: &str) -> Response {
        let item = self.request("GET", &format!("/approvals/{id}"), &[]);
        let csrf = csrf(&item.body).unwrap_or_default();
        self.request(
            "POST",
            &format!("/approvals/{id}"),
            &[("csrf", &csrf), ("decision", decision), ("reason", "")],
        )
    }
}

fn url_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The value of a page's first hidden `csrf` field.
fn csrf(html: &str) -> Option<String> {
    let marker = "name=\"csrf\" value=\"";
    let start = html.find(marker)? + marker.len();
    let end = html[start..].find('"')? + start;
    Some(html[start..end].to_owned())
}

/// The text a tool result shows.
fn text_of(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// A call the person at the shell parks (the demo's `notes_clear` waits for someone else);
/// its approval id.
fn park_from_shell(sb: &Sandbox) -> String {
    let parked = run(sb.milpa().args(["call", "notes_clear", "--json"]));
    assert_eq!(parked.code, 3, "nothing ran yet: {}", parked.stdout);
    parked.json()["data"]["approval_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The shell's replay of its parked call: the code of the result, or `ok`.
fn replay_from_shell(sb: &Sandbox, id: &str) -> String {
    let replayed = run(sb
        .milpa()
        .args(["call", "notes_clear", "--confirm-token", id, "--json"]));
    let result = replayed.json();
    if replayed.code == 0 {
        "ok".to_owned()
    } else {
        result["code"]
            .as_str()
            .or(result["meta"]["code"].as_str())
            .unwrap_or_default()
            .to_owned()
    }
}

#[test]
fn the_agent_token_calls_every_tool_but_decides_nothing_and_acts_as_nobody_else() {
    let sb = Sandbox::new();
    let s = start(&sb);
    let agent = bearer(&s.agent);
    let auth = [("Authorization", agent.as_str())];
    let session = initialize(s.addr, &auth);

    // Every tool: one that asks for no scope, and a scoped one.
    let sum = call(s.addr, &session, &auth, "add", json!({"a": 2, "b": 3}));
    assert_eq!(sum["isError"], false, "{sum}");
    assert_eq!(sum["structuredContent"]["result"], 5, "{sum}");
    let added = call(
        s.addr,
        &session,
        &auth,
        "notes_add",
        json!({"text": "milk"}),
    );
    assert_eq!(added["isError"], false, "{added}");

    // Not in someone else's name: a request opened for another requester is refused...
    let other = call(
        s.addr,
        &session,
        &auth,
        "request_verification",
        json!({"subject": "rotate the keys", "requested_by": "someone-else"}),
    );
    assert_eq!(other["isError"], true, "{other}");
    assert!(
        text_of(&other).contains("requested_by 'someone-else' is not the caller ('local-user')"),
        "{other}"
    );
    // ... and so is a decision recorded under another principal.
    let bot = run(sb.milpa().args([
        "call",
        "request_verification",
        r#"{"subject": "drop the table"}"#,
        "--actor",
        "bot",
        "--json",
    ]));
    assert_eq!(bot.code, 0, "{}", bot.stdout);
    let request_id = bot.json()["data"]["request_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let posing = call(
        s.addr,
        &session,
        &auth,
        "resolve_verification",
        json!({"request_id": request_id, "decision": "grant", "principal": "local-approver"}),
    );
    assert_eq!(posing["_meta"]["milpa"]["code"], "FORBIDDEN", "{posing}");
    assert!(
        text_of(&posing).contains("principal 'local-approver' is not the caller ('local-user')"),
        "{posing}"
    );

    // Not on the approvals page: it lacks approvals:grant, so a call the person parked
    // from the shell stays parked.
    let id = park_from_shell(&sb);
    let mut page = Page::new(s.addr);
    let login = page.login(&s.agent);
    if login.status == 303 {
        // Signed in (sign-in is not gated by the scope here): deciding is refused.
        let decided = page.decide(&id, "grant");
        assert_eq!(decided.status, 403, "{}", decided.body);
    } else {
        assert!([401, 403].contains(&login.status), "{}", login.body);
    }
    assert_eq!(replay_from_shell(&sb, &id), "APPROVAL_PENDING");
}

#[test]
fn the_approver_token_decides_on_the_page_and_calls_no_tool() {
    let sb = Sandbox::new();
    let s = start(&sb);
    let approver = bearer(&s.approver);
    let auth = [("Authorization", approver.as_str())];
    let session = initialize(s.addr, &auth);

    // Not even a tool that asks for no scope: refused in the pipeline, with the reason.
    let refused = call(s.addr, &session, &auth, "add", json!({"a": 2, "b": 3}));
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(refused["_meta"]["milpa"]["code"], "FORBIDDEN", "{refused}");
    assert_eq!(
        text_of(&refused),
        "The approver token decides approvals on the page; it calls no tool.",
        "{refused}"
    );
    // It reads the metrics; the agent's token does not.
    let metrics = common::http::get_with(s.addr, "/metrics", &auth);
    assert_eq!(metrics.status, 200, "{}", metrics.body);
    assert!(
        metrics
            .body
            .contains(r#"milpa_tool_calls_total{tool="add",channel="mcp",outcome="denied"} 1"#),
        "{}",
        metrics.body
    );
    let agent = bearer(&s.agent);
    let agent_metrics =
        common::http::get_with(s.addr, "/metrics", &[("Authorization", agent.as_str())]);
    assert_eq!(agent_metrics.status, 403, "{}", agent_metrics.body);
    // And audited as a denial.
    trail_until(
        || run(sb.milpa().args(["audit", "--json", "--tool", "add"])),
        |records| {
            records
                .iter()
                .any(|r| r["outcome"] == "denied" && r["principal"] == "local-approver")
        },
    );

    // It signs in on the page and grants the call the person parked from the shell.
    let id = park_from_shell(&sb);
    let mut page = Page::new(s.addr);
    let login = page.login(&s.approver);
    assert_eq!(login.status, 303, "{}", login.body);
    let decided = page.decide(&id, "grant");
    assert_eq!(decided.status, 303, "{}", decided.body);
    assert_eq!(replay_from_shell(&sb, &id), "ok");
}
