//! `[approvals] notify_command`: a program told of every approval that opens, beside the
//! call and never failing it.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::http::{call, initialize, spawn_http};
use common::{Sandbox, run};
use milpa_mcp::auth::sha256_hex;
use serde_json::json;

/// A manifest with a human-gated `deploy`, the verification tools and `approvals`.
fn manifest(approvals: &str) -> String {
    format!(
        r#"
[approvals]
{approvals}

[verification]

[[auth.tokens]]
sha256 = "{agent}"
principal = "agent"
scopes = ["ops:write"]

[[tools]]
name = "deploy"
command = ["true", "{{env}}"]
mutating = true
confirm = "human"
scopes = ["ops:write"]

[tools.params.env]
type = "string"
required = true
"#,
        agent = sha256_hex("agent-token"),
    )
}

/// A script writing its arguments, one a line, to `out` (atomically, by a rename).
fn recorder(sb: &Sandbox, out: &Path) -> String {
    let script = sb.script(
        "notify.sh",
        &format!(
            "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > '{out}.tmp'\nmv '{out}.tmp' '{out}'\n",
            out = out.display()
        ),
    );
    script.display().to_string()
}

fn wait_for(path: &Path) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

const ALL: &str =
    r#"["{id}", "{summary}", "{tool}", "{requested_by}", "{kind}", "{expires_at}", "{url}"]"#;

#[test]
fn the_notify_command_hears_of_a_call_parked_over_http_with_its_page() {
    let sb = Sandbox::new();
    let out = sb.path().join("notified.txt");
    let program = recorder(&sb, &out);
    let command = ALL.replacen('[', &format!("[\"{program}\", "), 1);
    sb.write("m.toml", &manifest(&format!("notify_command = {command}")));
    let (_server, addr) = spawn_http(
        &sb,
        &["--manifest", "m.toml", "serve", "--http", "127.0.0.1:0"],
    );
    let auth = [("Authorization", "Bearer agent-token")];
    let session = initialize(addr, &auth);
    let parked = call(addr, &session, &auth, "deploy", json!({"env": "prod"}));
    assert_eq!(parked["_meta"]["milpa"]["code"], "APPROVAL_PENDING");
    let id = parked["structuredContent"]["approval_id"].as_str().unwrap();

    let argv = wait_for(&out);
    assert_eq!(argv.len(), 7, "{argv:?}");
    assert_eq!(argv[0], id);
    assert_eq!(argv[1], "deploy(env=prod)");
    assert_eq!(argv[2], "deploy");
    assert_eq!(argv[3], "agent");
    assert_eq!(argv[4], "tool_call");
    assert_eq!(
        argv[5],
        parked["structuredContent"]["expires_at"]
            .as_str()
            .unwrap()
            .replace("+00:00", "Z")
    );
    assert_eq!(argv[6], format!("http://{addr}/approvals/{id}"));
}

#[test]
fn milpa_call_waits_for_the_notify_command_and_verification_requests_notify_too() {
    let sb = Sandbox::new();
    let out = sb.path().join("notified.txt");
    let program = recorder(&sb, &out);
    let command = ALL.replacen('[', &format!("[\"{program}\", "), 1);
    sb.write("m.toml", &manifest(&format!("notify_command = {command}")));

    let mut open = sb.milpa();
    open.args([
        "--manifest",
        "m.toml",
        "call",
        "request_verification",
        r#"{"subject": "rotate the keys"}"#,
        "--actor",
        "bot",
        "--json",
    ]);
    let opened = run(&mut open);
    assert_eq!(opened.code, 0, "{}", opened.stdout);
    let id = opened.json()["data"]["request_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // The process ended only after its notify command did: the file is there at once.
    assert!(out.exists(), "milpa call ended before its notify command");
    let argv = wait_for(&out);
    // No tool, no expiry, no page: empty elements, never missing ones.
    assert_eq!(
        argv,
        [&id, "rotate the keys", "", "bot", "verification", "", ""]
    );
}

#[test]
fn a_failing_notify_command_is_logged_and_never_fails_the_call() {
    for (command, logged) in [
        (
            r#"notify_command = ["/nonexistent/notify"]"#,
            "could not start for approval",
        ),
        (
            r#"notify_command = ["sh", "-c", "echo no bus >&2; exit 3"]"#,
            "failed (exit status: 3): no bus",
        ),
        (
            "notify_command = [\"sleep\", \"30\"]\nnotify_timeout_seconds = 1",
            "ran longer than 1s and was killed",
        ),
    ] {
        let sb = Sandbox::new();
        sb.write("m.toml", &manifest(command));
        let started = Instant::now();
        let mut park = sb.milpa();
        park.args([
            "--manifest",
            "m.toml",
            "call",
            "deploy",
            r#"{"env": "prod"}"#,
            "--actor",
            "agent",
            "--scope",
            "ops:write",
            "--json",
        ]);
        let parked = run(&mut park);
        assert!(started.elapsed() < Duration::from_secs(20));
        // The call answered as always: parked, with its id, and listed.
        let result = parked.json();
        assert_eq!(result["meta"]["code"], "APPROVAL_PENDING", "{command}");
        let id = result["data"]["approval_id"].as_str().unwrap();
        assert!(
            parked.stderr.contains(logged) && parked.stderr.contains(id),
            "{command}: {}",
            parked.stderr
        );
        assert!(parked.stderr.contains("WARN"), "{}", parked.stderr);
        let mut list = sb.milpa();
        list.args(["--manifest", "m.toml", "approvals", "--json"]);
        assert_eq!(run(&mut list).json()[0]["id"], id);
    }
}

#[test]
fn a_value_read_as_an_option_is_not_passed_to_the_notify_command() {
    let sb = Sandbox::new();
    let out = sb.path().join("notified.txt");
    let program = recorder(&sb, &out);
    sb.write(
        "m.toml",
        &manifest(&format!(r#"notify_command = ["{program}", "{{summary}}"]"#)),
    );
    let mut open = sb.milpa();
    open.args([
        "--manifest",
        "m.toml",
        "call",
        "request_verification",
        r#"{"subject": "--help"}"#,
        "--json",
    ]);
    let opened = run(&mut open);
    assert_eq!(opened.code, 0, "{}", opened.stdout);
    assert!(!out.exists());
    assert!(
        opened.stderr.contains("{summary} of approval ")
            && opened.stderr.contains("starts with `-`"),
        "{}",
        opened.stderr
    );
}
