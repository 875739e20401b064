//! State that outlives a process: the default SQLite store shared by separate `milpa`
//! processes, a `serve --http` killed with SIGKILL and restarted on the same file (legacy
//! tokens, verification requests, and an MCP 2026-07-28 confirmation round), and the audit
//! trail (`milpa audit`, `milpa audit verify`).

mod common;

use std::io::Write;
use std::net::SocketAddr;
use std::process::Stdio;

use common::http::{call, call_2026, initialize, milpa_command, spawn_http};
use common::{Run, Sandbox, run};
use milpa_mcp::auth::sha256_hex;
use serde_json::{Value, json};

fn call_json(sb: &Sandbox, tool: &str, args: &str, extra: &[&str]) -> Run {
    let mut cmd = sb.milpa();
    cmd.args(["call", tool, args, "--json"]).args(extra);
    run(&mut cmd)
}

#[test]
fn notes_and_tokens_outlive_the_process_in_the_default_store() {
    let sb = Sandbox::new();
    let added = call_json(&sb, "notes_add", r#"{"text":"milk"}"#, &[]);
    assert_eq!(added.code, 0, "{}", added.stderr);
    // The default store: $MILPA_HOME/state.db, created on first use.
    assert!(sb.path().join("state.db").exists());

    let listed = call_json(&sb, "notes_list", "{}", &[]);
    assert_eq!(listed.json()["data"], json!([{"id": 1, "text": "milk"}]));

    let asked = call_json(&sb, "notes_delete", r#"{"id":1}"#, &[]);
    assert_eq!(asked.code, 3, "nothing ran yet: {}", asked.stderr);
    let token = asked.json()["data"]["confirm_token"]
        .as_str()
        .expect("a token")
        .to_owned();
    assert!(!asked.stderr.contains("lives only in this process"));
    // Nothing ran yet.
    let listed = call_json(&sb, "notes_list", "{}", &[]);
    assert_eq!(listed.json()["data"].as_array().unwrap().len(), 1);

    // Another process redeems it; it runs the first call's arguments, once.
    let redeemed = call_json(&sb, "notes_delete", "{}", &["--confirm-token", &token]);
    assert_eq!(redeemed.code, 0, "{}", redeemed.stderr);
    assert_eq!(
        redeemed.json()["data"],
        json!({"deleted": 1, "text": "milk"})
    );
    let again = call_json(&sb, "notes_delete", "{}", &["--confirm-token", &token]);
    assert_eq!(again.code, 1);
    assert_eq!(
        again.json()["error"],
        "Invalid or expired confirmation token"
    );
    assert_eq!(
        call_json(&sb, "notes_list", "{}", &[]).json()["data"],
        json!([])
    );
}

#[test]
fn a_token_presented_by_someone_else_stays_its_owners() {
    let sb = Sandbox::new();
    let asked = call_json(&sb, "notes_delete", r#"{"id":7}"#, &[]);
    let token = asked.json()["data"]["confirm_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let foreign = call_json(
        &sb,
        "notes_delete",
        "{}",
        &[
            "--confirm-token",
            &token,
            "--actor",
            "mallory",
            "--scope",
            "notes:write",
        ],
    );
    assert_eq!(foreign.code, 1);
    assert_eq!(
        foreign.json()["error"],
        "Invalid or expired confirmation token"
    );
    // The owner's redemption still works (the note does not exist: NOT_FOUND, but it ran).
    let owner = call_json(&sb, "notes_delete", "{}", &["--confirm-token", &token]);
    assert_eq!(
        owner.json()["error"],
        "No note with id 7",
        "{}",
        owner.stdout
    );
}

#[test]
fn the_memory_store_keeps_todays_behaviour() {
    let sb = Sandbox::new();
    let memory = ["--store", "memory"];
    let added = call_json(&sb, "notes_add", r#"{"text":"milk"}"#, &memory);
    assert_eq!(added.code, 0);
    let listed = call_json(&sb, "notes_list", "{}", &memory);
    assert_eq!(listed.json()["data"], json!([]));
    assert!(!sb.path().join("state.db").exists());
    let r = run(sb.milpa().args(["--store", "memory", "audit"]));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("no audit trail"), "{}", r.stderr);
}

fn manifest() -> String {
    format!(
        r#"
[[auth.tokens]]
sha256 = "{alice}"
principal = "alice"
scopes = ["ops:write"]

[verification]
resolve_scopes = ["verification:resolve"]

[[tools]]
name = "wipe"
description = "Appends a line to wiped.log"
command = ["sh", "-c", "echo wiped >> wiped.log"]
mutating = true
confirm = true
scopes = ["ops:write"]
"#,
        alice = sha256_hex("alice-token"),
    )
}

const ALICE: (&str, &str) = ("Authorization", "Bearer alice-token");

fn serve(sb: &Sandbox) -> (common::http::Server, SocketAddr) {
    spawn_http(
        sb,
        &[
            "--manifest",
            "m.toml",
            "--store",
            "sqlite:state.db",
            "serve",
            "--http",
            "127.0.0.1:0",
        ],
    )
}

#[test]
fn a_killed_server_loses_no_token_and_no_verification_request() {
    let sb = Sandbox::new();
    sb.write("m.toml", &manifest());
    let (mut server, addr) = serve(&sb);
    let session = initialize(addr, &[ALICE]);
    let asked = call(addr, &session, &[ALICE], "wipe", json!({}));
    let token = asked["structuredContent"]["confirm_token"]
        .as_str()
        .unwrap_or_else(|| panic!("a token: {asked}"))
        .to_owned();
    let opened = call(
        addr,
        &session,
        &[ALICE],
        "request_verification",
        json!({"subject": "rotate the keys"}),
    );
    let request_id = opened["structuredContent"]["request_id"]
        .as_str()
        .unwrap_or_else(|| panic!("a request id: {opened}"))
        .to_owned();

    // SIGKILL: no shutdown code runs.
    server.0.kill().unwrap();
    server.0.wait().unwrap();
    let (_server, addr) = serve(&sb);

    // Presented four times at once after the restart: it runs exactly once.
    let session = initialize(addr, &[ALICE]);
    let answers: Vec<Value> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let (session, token) = (&session, &token);
                scope.spawn(move || {
                    call(
                        addr,
                        session,
                        &[ALICE],
                        "wipe",
                        json!({"confirm_token": token}),
                    )
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let ran = answers.iter().filter(|a| a["isError"] == false).count();
    assert_eq!(ran, 1, "{answers:#?}");
    for refused in answers.iter().filter(|a| a["isError"] == true) {
        assert_eq!(
            refused["content"][0]["text"],
            "Invalid or expired confirmation token"
        );
    }
    let log = std::fs::read_to_string(sb.path().join("wiped.log")).unwrap();
    assert_eq!(log, "wiped\n");

    // The request opened before the kill is resolved from a shell, once.
    let resolve = |sb: &Sandbox| {
        run(sb.milpa().args([
            "--manifest",
            "m.toml",
            "--store",
            "sqlite:state.db",
            "call",
            "resolve_verification",
            &json!({"request_id": request_id, "decision": "grant", "principal": "bob"}).to_string(),
            "--actor",
            "bob",
            "--scope",
            "verification:resolve",
            "--json",
        ]))
    };
    let granted = resolve(&sb);
    assert_eq!(granted.code, 0, "{}\n{}", granted.stdout, granted.stderr);
    assert_eq!(
        granted.json()["data"]["status"],
        "passed",
        "{}",
        granted.stdout
    );
    let twice = resolve(&sb);
    assert_eq!(twice.code, 1, "{}", twice.stdout);
}

/// A 2026-07-28 `tools/call` of `wipe` as alice, with `extra` params (the retry's).
fn modern_wipe(addr: SocketAddr, extra: Value) -> Value {
    let mut params = json!({"name": "wipe", "arguments": {}});
    if let (Value::Object(params), Value::Object(extra)) = (&mut params, extra) {
        params.extend(extra);
    }
    call_2026(addr, &[ALICE], "tools/call", params)
}

#[test]
fn a_2026_confirmation_asked_before_a_kill_completes_after_the_restart() {
    let sb = Sandbox::new();
    sb.write("m.toml", &manifest());
    let (mut server, addr) = serve(&sb);
    let asked = modern_wipe(addr, json!({}));
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    server.0.kill().unwrap();
    server.0.wait().unwrap();

    // The restarted server reads the same sealing key from the file, and the token the
    // state names is still there: the answer runs the call, once.
    let (_server, addr) = serve(&sb);
    let answer = json!({
        "requestState": asked["requestState"],
        "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": true}}},
    });
    let done = modern_wipe(addr, answer.clone());
    assert_eq!(done["resultType"], "complete", "{done}");
    assert_eq!(done["isError"], false, "{done}");
    let again = modern_wipe(addr, answer);
    assert_eq!(again["isError"], true, "{again}");
    let log = std::fs::read_to_string(sb.path().join("wiped.log")).unwrap();
    assert_eq!(log, "wiped\n");
}

/// Runs `milpa serve --stdio --audit FILE` on the demo toolset for a few calls.
fn audit_file_of_three_calls(sb: &Sandbox) -> std::path::PathBuf {
    let path = sb.path().join("audit.jsonl");
    let mut child = milpa_command(sb)
        .args(["--store", "memory", "serve", "--stdio", "--audit"])
        .arg(&path)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let mut lines = vec![
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ];
    for (id, text) in ["one", "two", "three"].iter().enumerate() {
        lines.push(
            json!({"jsonrpc": "2.0", "id": id + 1, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": text}}}),
        );
    }
    for line in lines {
        writeln!(input, "{line}").unwrap();
    }
    drop(input);
    assert!(child.wait().unwrap().success());
    path
}

#[test]
fn audit_verify_names_the_first_record_that_breaks_the_chain() {
    let sb = Sandbox::new();
    let path = audit_file_of_three_calls(&sb);
    let verify = |sb: &Sandbox| run(sb.milpa().args(["audit", "verify", "audit.jsonl"]));
    let intact = verify(&sb);
    assert_eq!(intact.code, 0, "{}", intact.stderr);
    assert!(
        intact.stdout.contains("intact, 3 records"),
        "{}",
        intact.stdout
    );

    let original = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = original.lines().collect();
    assert_eq!(lines.len(), 3);

    // Edited: the second record says another tool ran.
    std::fs::write(
        &path,
        original
            .replacen("\"tool\":\"echo\"", "\"tool\":\"ecko\"", 2)
            .replacen("\"tool\":\"ecko\"", "\"tool\":\"echo\"", 1),
    )
    .unwrap();
    let edited = verify(&sb);
    assert_eq!(edited.code, 1);
    assert!(edited.stderr.contains("line 2"), "{}", edited.stderr);
    assert!(edited.stderr.contains("seq 2"), "{}", edited.stderr);

    // Removed: the second record is gone.
    std::fs::write(&path, format!("{}\n{}\n", lines[0], lines[2])).unwrap();
    let removed = verify(&sb);
    assert_eq!(removed.code, 1);
    assert!(removed.stderr.contains("line 2"), "{}", removed.stderr);

    // Reordered: the last two swapped.
    std::fs::write(&path, format!("{}\n{}\n{}\n", lines[0], lines[2], lines[1])).unwrap();
    let swapped = verify(&sb);
    assert_eq!(swapped.code, 1);
    assert!(swapped.stderr.contains("line 2"), "{}", swapped.stderr);

    // Restored, and a fourth call appended by a new process continues the chain.
    std::fs::write(&path, &original).unwrap();
    audit_file_of_three_calls(&sb);
    let longer = verify(&sb);
    assert_eq!(longer.code, 0, "{}", longer.stderr);
    assert!(
        longer.stdout.contains("intact, 6 records"),
        "{}",
        longer.stdout
    );
}

#[test]
fn milpa_audit_lists_the_stores_trail_newest_first_with_filters() {
    let sb = Sandbox::new();
    assert_eq!(call_json(&sb, "add", r#"{"a":1,"b":2}"#, &[]).code, 0);
    assert_eq!(call_json(&sb, "echo", r#"{"text":"hi"}"#, &[]).code, 0);
    let denied = call_json(&sb, "notes_add", r#"{"text":"x"}"#, &["--actor", "eve"]);
    assert_eq!(denied.code, 1);

    let all = run(sb.milpa().args(["audit", "--json"]));
    assert_eq!(all.code, 0, "{}", all.stderr);
    let records = all.json();
    let tools: Vec<&str> = records
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["tool"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["notes_add", "echo", "add"]);
    assert_eq!(records[0]["seq"], 3);
    assert_eq!(records[0]["principal"], "eve");
    assert_eq!(records[0]["outcome"], "denied");

    let only_add = run(sb.milpa().args(["audit", "--tool", "add", "--json"])).json();
    assert_eq!(only_add.as_array().unwrap().len(), 1);
    let by_eve = run(sb.milpa().args(["audit", "--actor", "eve", "--json"])).json();
    assert_eq!(by_eve.as_array().unwrap().len(), 1);
    let successes =
        run(sb
            .milpa()
            .args(["audit", "--outcome", "executed", "--limit", "1", "--json"]))
        .json();
    assert_eq!(successes.as_array().unwrap().len(), 1);
    assert_eq!(successes[0]["tool"], "echo");
    let recent = run(sb.milpa().args(["audit", "--since", "1h", "--json"])).json();
    assert_eq!(recent.as_array().unwrap().len(), 3);

    let table = run(sb.milpa().arg("audit"));
    assert!(table.stdout.starts_with("SEQ"), "{}", table.stdout);
    assert_eq!(table.stdout.lines().count(), 4);

    let verified = run(sb.milpa().args(["audit", "verify"]));
    assert_eq!(verified.code, 0, "{}", verified.stderr);
    assert!(
        verified.stdout.contains("intact, 3 records"),
        "{}",
        verified.stdout
    );
}
