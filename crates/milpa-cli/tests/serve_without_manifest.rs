//! `milpa serve --http` without a manifest: two bearer tokens made for the run, printed once
//! on stderr (never inside a URL) with the endpoint and the approvals page.

mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use common::Sandbox;
use common::http::{Server, call, initialize, milpa_command};
use common::terminal::decide;
use serde_json::json;

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

    // The approver token holds approvals:grant only: a scoped tool is FORBIDDEN.
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

    // No token is anonymous, refused too.
    let anonymous = initialize(s.addr, &[]);
    let refused = call(s.addr, &anonymous, &[], "notes_add", json!({"text": "x"}));
    assert_eq!(refused["_meta"]["milpa"]["code"], "FORBIDDEN", "{refused}");

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
