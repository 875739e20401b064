//! What refused calls cost a real `milpa serve --http`: repeats of one caller's refusal are
//! folded into one audit record with a `count`, and `[caller_budget]` refuses a caller's
//! calls past its budget before their tool is even looked up, other callers untouched.

mod common;

use common::Sandbox;
use common::http::{call, initialize, spawn_http};
use milpa_mcp::auth::sha256_hex;
use serde_json::{Value, json};

fn manifest(budget: &str) -> String {
    format!(
        r#"
{budget}

[[auth.tokens]]
sha256 = "{alice}"
principal = "alice"
scopes = ["*"]

[[auth.tokens]]
sha256 = "{bob}"
principal = "bob"
scopes = ["*"]

[[tools]]
name = "status"
description = "Reads the status"
command = ["echo", "all good"]
"#,
        alice = sha256_hex("alice-token"),
        bob = sha256_hex("bob-token"),
    )
}

fn audit_lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn repeated_unknown_tool_refusals_of_one_caller_fold_into_counted_records() {
    let sb = Sandbox::new();
    sb.write("m.toml", &manifest(""));
    let audit = sb.path().join("audit.jsonl");
    let audit_arg = audit.to_str().unwrap().to_owned();
    let (server, addr) = spawn_http(
        &sb,
        &[
            "--manifest",
            "m.toml",
            "--store",
            "memory",
            "serve",
            "--http",
            "127.0.0.1:0",
            "--audit",
            &audit_arg,
        ],
    );
    let alice = [("Authorization", "Bearer alice-token")];
    let session = initialize(addr, &alice);
    const REFUSALS: u64 = 200;
    for _ in 0..REFUSALS {
        let result = call(addr, &session, &alice, "no_such_tool", json!({}));
        assert_eq!(result["isError"], true);
        assert_eq!(result["_meta"]["milpa"]["code"], "TOOL_NOT_FOUND");
    }
    // Once the fold window (1 s) has passed, the next record writes the count before it.
    std::thread::sleep(std::time::Duration::from_millis(1200));
    let ok = call(addr, &session, &alice, "status", json!({}));
    assert_eq!(ok["isError"], false, "{ok}");
    // The file is read while the server runs: what it wrote so far is what a kill keeps.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let records = loop {
        let records = audit_lines(&audit);
        if records.iter().any(|r| r["tool"] == "status") || std::time::Instant::now() > deadline {
            break records;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    drop(server);
    let refusals: Vec<&Value> = records
        .iter()
        .filter(|r| r["tool"] == "no_such_tool")
        .collect();
    let total: u64 = refusals
        .iter()
        .map(|r| r["count"].as_u64().unwrap_or(1))
        .sum();
    assert_eq!(total, REFUSALS, "every refusal is counted: {refusals:?}");
    assert!(
        refusals.len() < 20,
        "{} records for {REFUSALS} refusals",
        refusals.len()
    );
    let executed = records.iter().filter(|r| r["tool"] == "status").count();
    assert_eq!(executed, 1);
}

#[test]
fn the_caller_budget_refuses_a_caller_past_it_before_any_lookup_and_spares_the_others() {
    let sb = Sandbox::new();
    sb.write(
        "m.toml",
        &manifest("[caller_budget]\nmax_tokens = 5\nwindow_seconds = 3600\n"),
    );
    let (_server, addr) = spawn_http(
        &sb,
        &[
            "--manifest",
            "m.toml",
            "--store",
            "memory",
            "serve",
            "--http",
            "127.0.0.1:0",
        ],
    );
    let alice = [("Authorization", "Bearer alice-token")];
    let bob = [("Authorization", "Bearer bob-token")];
    let alice_session = initialize(addr, &alice);
    for _ in 0..5 {
        let result = call(addr, &alice_session, &alice, "no_such_tool", json!({}));
        assert_eq!(result["_meta"]["milpa"]["code"], "TOOL_NOT_FOUND");
    }
    // The sixth call is refused whatever it names, a real tool included.
    for tool in ["no_such_tool", "status"] {
        let result = call(addr, &alice_session, &alice, tool, json!({}));
        assert_eq!(result["isError"], true);
        assert_eq!(
            result["_meta"]["milpa"]["code"], "RATE_LIMITED",
            "{tool}: {result}"
        );
    }
    let bob_session = initialize(addr, &bob);
    let result = call(addr, &bob_session, &bob, "status", json!({}));
    assert_eq!(result["isError"], false, "{result}");
}

#[test]
fn a_caller_budget_of_zero_is_a_manifest_error_naming_the_line() {
    let sb = Sandbox::new();
    sb.write(
        "m.toml",
        "[caller_budget]\nmax_tokens = 0\nwindow_seconds = 60\n",
    );
    let run = common::run(sb.milpa().args(["--manifest", "m.toml", "tools"]));
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("m.toml:2: caller_budget.max_tokens must be at least 1"),
        "{}",
        run.stderr
    );
}
