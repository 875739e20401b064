//! Many `milpa` processes deciding and replaying one approval at once, on the default
//! SQLite store: exactly one decision is recorded, and the granted call runs once.

mod common;

use std::process::{Output, Stdio};

use common::http::milpa_command;
use common::terminal::{AtTerminal, spawn_decision};
use common::{Run, Sandbox, run};
use serde_json::{Value, json};

const MANIFEST: &str = r#"
[[tools]]
name = "deploy"
command = ["sh", "-c", "printf '%s\n' \"$1\" >> deployed.log", "sh", "{env}"]
mutating = true
confirm = "human"
scopes = ["ops:write"]

[tools.params.env]
type = "string"
required = true
"#;

/// Starts `count` processes `milpa --manifest m.toml ARGS(i)…` together; waits for all.
fn all_at_once(sb: &Sandbox, count: usize, args: impl Fn(usize) -> Vec<String>) -> Vec<Output> {
    let children: Vec<_> = (0..count)
        .map(|i| {
            milpa_command(sb)
                .args(["--manifest", "m.toml"])
                .args(args(i))
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    children
        .into_iter()
        .map(|child| child.wait_with_output().unwrap())
        .collect()
}

fn agent_call(extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = ["call", "deploy"].iter().map(|s| (*s).to_owned()).collect();
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    args.extend(
        ["--actor", "agent", "--scope", "ops:write", "--json"]
            .iter()
            .map(|s| (*s).to_owned()),
    );
    args
}

#[test]
fn concurrent_grants_record_one_decision_and_the_call_runs_once() {
    let sb = Sandbox::new();
    sb.write("m.toml", MANIFEST);
    let mut park = sb.milpa();
    park.args(["--manifest", "m.toml"])
        .args(agent_call(&[r#"{"env": "prod"}"#]));
    let parked = run(&mut park);
    assert_eq!(parked.json()["meta"]["code"], "APPROVAL_PENDING");
    let id = parked.json()["data"]["approval_id"]
        .as_str()
        .unwrap()
        .to_owned();

    // Eight people at eight terminals, each typing the code.
    let deciding: Vec<_> = (0..8)
        .map(|i| {
            let mut grant = milpa_command(&sb);
            grant.args(["--manifest", "m.toml", "approvals", "grant", &id, "--actor"]);
            grant.arg(format!("x{i}"));
            spawn_decision(grant)
        })
        .collect();
    let grants: Vec<Run> = deciding.into_iter().map(AtTerminal::wait).collect();
    let winners: Vec<(usize, String)> = grants
        .iter()
        .enumerate()
        .filter(|(_, out)| out.code == 0)
        .map(|(i, out)| (i, out.stdout.clone()))
        .collect();
    assert_eq!(
        winners.len(),
        1,
        "exactly one grant is recorded: {grants:#?}"
    );
    let (winner, said) = &winners[0];
    assert_eq!(
        said,
        &format!("granted {id} (deploy(env=prod)) as x{winner}\n")
    );
    for (i, out) in grants.iter().enumerate().filter(|(i, _)| i != winner) {
        assert_eq!(out.code, 1, "grant {i}: {}", out.stderr);
        let stderr = &out.stderr;
        assert!(
            stderr.contains(&format!("already decided: granted by x{winner}")),
            "grant {i}: {stderr}"
        );
    }

    // Four replays at once: one runs the parked call, the others find the token spent.
    let token = id.clone();
    let replays = all_at_once(&sb, 4, |_| agent_call(&["--confirm-token", &token]));
    let results: Vec<Value> = replays
        .iter()
        .map(|out| serde_json::from_slice(&out.stdout).unwrap())
        .collect();
    let ran = results.iter().filter(|r| r["success"] == true).count();
    assert_eq!(ran, 1, "{results:#?}");
    assert!(
        results
            .iter()
            .filter(|r| r["success"] != true)
            .all(|r| r["error"] == "Invalid or expired confirmation token"),
        "{results:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(sb.path().join("deployed.log")).unwrap(),
        "prod\n"
    );

    // The trail holds one grant and seven refusals.
    let mut audit = sb.milpa();
    audit.args([
        "--manifest",
        "m.toml",
        "audit",
        "--json",
        "--tool",
        "deploy",
    ]);
    let records = run(&mut audit).json();
    let count = |outcome: &str| {
        records
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["outcome"] == json!(outcome))
            .count()
    };
    assert_eq!(count("approval_granted"), 1);
    assert_eq!(count("approval_refused"), 7);
    assert_eq!(count("executed"), 1);
}
