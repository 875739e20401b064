//! `milpa serve`: the real binary over stdio and over Streamable HTTP with bearer tokens
//! from the manifest, and the audit file.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::Sandbox;
use common::http::{Server, call, initialize_expecting, milpa_command, post, spawn_http};
use milpa_mcp::auth::sha256_hex;
use serde_json::{Value, json};

/// Starts `milpa --manifest m.toml serve --http 127.0.0.1:0 …`.
fn start_http(sb: &Sandbox, extra: &[&str]) -> (Server, SocketAddr) {
    let mut args = vec!["--manifest", "m.toml", "serve", "--http", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    spawn_http(sb, &args)
}

fn initialize(addr: SocketAddr, auth: &[(&str, &str)]) -> String {
    initialize_expecting(addr, auth, Some("ops-test"))
}

fn manifest() -> String {
    format!(
        r#"
[server]
name = "ops-test"
version = "9.9.9"

[[auth.tokens]]
sha256 = "{alice}"
principal = "alice"
scopes = ["ops:read", "ops:write"]

[[auth.tokens]]
sha256 = "{bob}"
principal = "bob"
scopes = ["ops:read"]

[[tools]]
name = "status"
description = "Reads the status"
command = ["echo", "all good"]
scopes = ["ops:read"]

[[tools]]
name = "deploy"
description = "Deploys a version"
command = ["echo", "deployed", "{{version}}"]
scopes = ["ops:write"]

[tools.params.version]
type = "string"
required = true
"#,
        alice = sha256_hex("alice-token"),
        bob = sha256_hex("bob-token"),
    )
    // `{{version}}` above is format!'s escape: the manifest holds `{version}`.
}

#[test]
fn http_bearer_tokens_map_to_their_principals_and_scopes() {
    let sb = Sandbox::new();
    sb.write("m.toml", &manifest());
    let audit = sb.path().join("audit.jsonl");
    let (server, addr) = start_http(&sb, &["--audit", audit.to_str().unwrap()]);

    let alice = [("Authorization", "Bearer alice-token")];
    let bob = [("Authorization", "Bearer bob-token")];
    let stranger = [("Authorization", "Bearer who-knows")];

    // alice holds ops:write.
    let session = initialize(addr, &alice);
    let result = call(addr, &session, &alice, "deploy", json!({"version": "1.2"}));
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(
        result["structuredContent"],
        json!({"result": "deployed 1.2"})
    );
    assert_eq!(result["_meta"]["milpa"]["principal"], "alice");
    assert_eq!(result["_meta"]["milpa"]["channel"], "mcp");

    // bob holds only ops:read: status yes, deploy no.
    let session = initialize(addr, &bob);
    let result = call(addr, &session, &bob, "status", json!({}));
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["_meta"]["milpa"]["principal"], "bob");
    let result = call(addr, &session, &bob, "deploy", json!({"version": "1.2"}));
    assert_eq!(result["isError"], true);
    assert_eq!(result["_meta"]["milpa"]["code"], "FORBIDDEN");
    assert_eq!(
        result["content"][0]["text"],
        "Missing required scope for tool 'deploy'. Need one of: ops:write \u{2014} context has: ops:read."
    );

    // An unknown token is refused before anything runs (401), not taken as anonymous.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "milpa-cli-test", "version": "1"}
    }});
    let r = post(addr, &stranger, &body);
    assert_eq!(r.status, 401, "{}", r.body);
    // No token at all, where the manifest has tokens and the channel requires a
    // principal: 401 with a challenge at `initialize`, before anything runs.
    let r = post(addr, &[], &body);
    assert_eq!(r.status, 401, "{}", r.body);
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    assert_eq!(
        r.message()["error"]["message"],
        "Unauthorized: this server needs a bearer token (Authorization: Bearer); anonymous callers are served nothing"
    );

    // One audit line per call outcome, flushed as written; no token text in it.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let text = loop {
        let text = std::fs::read_to_string(&audit).unwrap_or_default();
        if text.lines().count() >= 3 || std::time::Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The refused requests never reached the pipeline: nothing of theirs is audited.
    assert_eq!(records.len(), 3, "{text}");
    let who: Vec<(&str, &str)> = records
        .iter()
        .map(|r| {
            (
                r["principal"].as_str().unwrap_or("anonymous"),
                r["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        who,
        [
            ("alice", "executed"),
            ("bob", "executed"),
            ("bob", "denied"),
        ]
    );
    for secret in ["alice-token", "bob-token", "who-knows"] {
        assert!(!text.contains(secret));
    }

    // SIGTERM stops the server cleanly.
    let mut server = server;
    let status = Command::new("kill")
        .args(["-TERM", &server.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(server.0.wait().unwrap().code(), Some(0));
}

#[test]
fn stdio_serves_the_demo_toolset() {
    for args in [&["serve"][..], &["serve", "--stdio"][..]] {
        stdio_round_trip(args);
    }
}

fn stdio_round_trip(args: &[&str]) {
    let sb = Sandbox::new();
    let mut child = milpa_command(&sb)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let server = Server(child);
    let messages = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "add", "arguments": {"a": 2, "b": 3}}}),
    ];
    for message in &messages {
        writeln!(stdin, "{message}").unwrap();
    }
    stdin.flush().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let mut responses = Vec::new();
    while responses.len() < 3 {
        let line = lines.next().expect("a response").unwrap();
        responses.push(serde_json::from_str::<Value>(&line).unwrap());
    }
    assert_eq!(responses[0]["result"]["serverInfo"]["name"], "milpa");
    let tools = responses[1]["result"]["tools"].as_array().unwrap();
    assert!(
        tools
            .iter()
            .any(|t| t["name"] == "notes_delete" && t["annotations"]["destructiveHint"] == true)
    );
    assert_eq!(
        responses[2]["result"]["structuredContent"],
        json!({"result": 5})
    );
    assert_eq!(
        responses[2]["result"]["_meta"]["milpa"]["principal"],
        "stdio"
    );
    // End of input ends the server; the audit went to stderr, not stdout.
    drop(stdin);
    let mut rest = String::new();
    for line in lines {
        rest.push_str(&line.unwrap());
    }
    assert!(rest.is_empty(), "unexpected stdout: {rest}");
    let mut errors = String::new();
    BufReader::new(stderr).read_to_string(&mut errors).unwrap();
    assert!(
        errors.contains("[ToolAudit]") && errors.contains("| add |"),
        "{errors}"
    );
    drop(server);
}

/// Calls the confirmed tool `wipe` over stdio from a client that declares elicitation;
/// returns the first message the server sends after the call.
fn first_answer_to_a_confirmed_call(manifest: &str) -> Value {
    let sb = Sandbox::new();
    sb.write("m.toml", manifest);
    let mut child = milpa_command(&sb)
        .args(["--manifest", "m.toml", "serve"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let _server = Server(child);
    for message in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "t", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "wipe", "arguments": {}}}),
    ] {
        writeln!(stdin, "{message}").unwrap();
    }
    stdin.flush().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let _initialized = lines.next().unwrap().unwrap();
    serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap()
}

#[test]
fn elicitation_confirmation_follows_the_manifest() {
    let tool =
        "[[tools]]\nname = \"wipe\"\ncommand = [\"true\"]\nmutating = true\nconfirm = true\n";
    let asked = first_answer_to_a_confirmed_call(tool);
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    let off = format!("[confirmation]\nelicitation = false\n\n{tool}");
    let answered = first_answer_to_a_confirmed_call(&off);
    assert_eq!(answered["id"], 2, "{answered}");
    let data = &answered["result"]["structuredContent"];
    assert_eq!(data["requires_confirmation"], true, "{answered}");
    assert_eq!(data["confirm_token"].as_str().unwrap().len(), 32);
}

#[test]
fn a_command_error_quoting_a_password_is_scrubbed_in_the_audit_file() {
    let sb = Sandbox::new();
    sb.write(
        "m.toml",
        &format!(
            r#"
[server]
name = "ops-test"
version = "9.9.9"

[[auth.tokens]]
sha256 = "{alice}"
principal = "alice"
scopes = ["ops:write"]

[[tools]]
name = "login"
description = "Logs in, and echoes its argv on failure like many commands do"
command = ["sh", "-c", "echo \"access denied for $0 with $1\" >&2; exit 3", "{{user}}", "{{password}}"]

[tools.params.user]
type = "string"
required = true

[tools.params.password]
type = "string"
required = true
"#,
            alice = sha256_hex("alice-token"),
        ),
    );
    let audit = sb.path().join("audit.jsonl");
    let (server, addr) = start_http(&sb, &["--audit", audit.to_str().unwrap()]);
    let alice = [("Authorization", "Bearer alice-token")];
    let session = initialize(addr, &alice);
    let args = json!({"user": "ann", "password": "hunter22"});
    let result = call(addr, &session, &alice, "login", args);
    assert_eq!(result["isError"], true, "{result}");
    // What leaves milpa quotes no secret argument, not even back to the caller who sent it.
    assert!(!result.to_string().contains("hunter22"), "{result}");
    assert!(
        result
            .to_string()
            .contains("access denied for ann with [REDACTED]"),
        "{result}"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let text = loop {
        let text = std::fs::read_to_string(&audit).unwrap_or_default();
        if text.lines().count() >= 1 || std::time::Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(server);
    let record: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert!(!text.contains("hunter22"), "{text}");
    let error = record["error"].as_str().unwrap();
    assert!(
        error.contains("access denied for ann with [REDACTED]"),
        "{error}"
    );
    assert_eq!(record["args"]["password"], "***REDACTED***");
}

#[test]
fn serving_a_manifest_over_http_prints_the_approvals_page() {
    let sb = Sandbox::new();
    sb.write("m.toml", &manifest());
    let mut child = milpa_command(&sb)
        .args(["--manifest", "m.toml", "serve", "--http", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let _server = Server(child);
    let mut lines = BufReader::new(stderr).lines().map(Result::unwrap);
    let mcp = lines
        .find_map(|l| l.strip_prefix("milpa: serving MCP on ").map(str::to_owned))
        .expect("the MCP address");
    let page = lines.next().expect("the page's line");
    let expected = format!(
        "milpa: approvals page on {} (sign in with a token holding approvals:grant)",
        mcp.replace("/mcp", "/approvals")
    );
    assert_eq!(page, expected);
}
