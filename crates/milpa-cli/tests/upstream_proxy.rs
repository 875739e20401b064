//! `milpa proxy` and `[[upstreams]]`: a real upstream MCP server (this build's `milpa serve`
//! over stdio, with command tools) served through the pipeline.

mod common;

use std::net::SocketAddr;
use std::process::Command;

use common::stdio::StdioClient;
use common::terminal::decide;
use common::{Sandbox, run_manifest, upstream_command};
use serde_json::{Value, json};

/// The upstream's tools: a greeting, a failing command, and a write that leaves a mark.
fn upstream_manifest(sb: &Sandbox) -> std::path::PathBuf {
    let marks = sb.path().join("written.txt");
    sb.write(
        "upstream.toml",
        &format!(
            r#"
[[tools]]
name = "greet"
description = "Say hello"
command = ["echo", "hello {{who}}"]
[tools.params.who]
type = "string"
description = "Whom to greet"
required = true

[[tools]]
name = "fail"
description = "Always fails"
command = ["sh", "-c", "echo broken disk >&2; exit 3"]

[[tools]]
name = "write_note"
description = "Appends a note"
mutating = true
command = ["sh", "-c", "printf '%s\n' \"$1\" >> {marks}", "sh", "{{text}}"]
[tools.params.text]
type = "string"
required = true
"#,
            marks = marks.display()
        ),
    )
}

fn milpa(sb: &Sandbox) -> Command {
    common::http::milpa_command(sb)
}

fn code(result: &Value) -> &str {
    result["_meta"]["milpa"]["code"].as_str().unwrap_or("")
}

#[test]
fn proxy_lists_the_servers_tools_under_their_own_names_with_their_schemas_and_forwards_calls() {
    let sb = Sandbox::new();
    let upstream = upstream_manifest(&sb);
    let mut proxy = milpa(&sb);
    proxy.args(["--store", "memory", "proxy", "--"]);
    proxy.arg(assert_cmd::cargo::cargo_bin("milpa"));
    proxy.args(["--store", "memory", "--manifest"]);
    proxy.arg(&upstream);
    proxy.arg("serve");
    let mut client = StdioClient::start(proxy, &sb.path().join("proxy.err"));
    client.wait_for_tool("write_note");

    let listed = client.request("tools/list", json!({}));
    let tools = listed["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["greet", "fail", "write_note"]);
    assert_eq!(tools[0]["description"], "Say hello");
    assert_eq!(
        tools[0]["inputSchema"]["properties"]["who"]["description"],
        "Whom to greet"
    );
    assert_eq!(tools[0]["inputSchema"]["required"], json!(["who"]));
    // Read-only upstream tools stay read-only; the upstream's mutating one is ours too.
    assert_eq!(tools[0]["annotations"]["readOnlyHint"], true);
    assert_eq!(tools[2]["annotations"]["destructiveHint"], true);

    let greeted = client.call("greet", json!({"who": "ana"}));
    assert_eq!(greeted["isError"], false, "{greeted}");
    assert_eq!(
        greeted["content"],
        json!([{"type": "text", "text": "hello ana"}])
    );
    assert_eq!(greeted["structuredContent"], json!({"result": "hello ana"}));
    assert_eq!(greeted["_meta"]["milpa"]["tool"], "greet");

    // The upstream's error arrives as an error result with its own text.
    let failed = client.call("fail", json!({}));
    assert_eq!(failed["isError"], true, "{failed}");
    assert_eq!(
        failed["content"][0]["text"],
        "Command exited with code 3: broken disk"
    );

    // Our pipeline validates against the upstream's schema before anything is forwarded.
    let invalid = client.call("greet", json!({"who": 5}));
    assert_eq!(code(&invalid), "VALIDATION_ERROR", "{invalid}");
}

#[test]
fn milpa_tools_and_inspect_show_upstream_tools_with_their_upstream_and_its_state() {
    let sb = Sandbox::new();
    let upstream = upstream_manifest(&sb);
    let manifest = format!(
        "[[upstreams]]\nname = \"up\"\ncommand = {}\nprefix = \"u_\"\n\
         [upstreams.tools.\"fail\"]\nhide = true\n\
         [upstreams.tools.\"greet\"]\nscopes = [\"hello:use\"]\n",
        upstream_command(&upstream)
    );
    let run = run_manifest(&sb, &manifest, &["--store", "memory", "tools"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(lines[0].starts_with("NAME"), "{}", run.stdout);
    assert!(lines[0].contains("UPSTREAM"), "{}", run.stdout);
    let greet = lines.iter().find(|l| l.starts_with("u_greet")).unwrap();
    assert!(
        greet.contains("hello:use") && greet.contains(" up "),
        "{greet}"
    );
    assert!(!run.stdout.contains("u_fail"), "hidden: {}", run.stdout);
    let write = lines
        .iter()
        .find(|l| l.starts_with("u_write_note"))
        .unwrap();
    assert!(write.contains("mutating"), "{write}");
    let state = lines.iter().find(|l| l.starts_with("up ")).unwrap();
    assert!(state.contains("ready"), "{state}");

    let inspected = run_manifest(
        &sb,
        &manifest,
        &["--store", "memory", "tools", "inspect", "u_greet"],
    );
    assert_eq!(inspected.code, 0, "{}", inspected.stderr);
    assert!(
        inspected.stdout.ends_with("\nupstream: up (ready)\n"),
        "{}",
        inspected.stdout
    );
    let json = run_manifest(
        &sb,
        &manifest,
        &["--store", "memory", "tools", "inspect", "u_greet", "--json"],
    );
    assert_eq!(
        json.json()["upstream"],
        json!({"name": "up", "state": "ready"})
    );
}

#[test]
fn a_human_confirm_override_parks_the_call_and_nothing_reaches_the_upstream_until_granted() {
    let sb = Sandbox::new();
    let upstream = upstream_manifest(&sb);
    let manifest = format!(
        "[[upstreams]]\nname = \"up\"\ncommand = {}\n\
         [upstreams.tools.\"write_*\"]\nconfirm = \"human\"\n",
        upstream_command(&upstream)
    );
    let path = sb.write("m.toml", &manifest);
    let marks = sb.path().join("written.txt");
    let mut serve = milpa(&sb);
    serve.arg("--manifest").arg(&path).arg("serve");
    let mut client = StdioClient::start(serve, &sb.path().join("serve.err"));
    client.wait_for_tool("write_note");

    let parked = client.call("write_note", json!({"text": "first"}));
    assert_eq!(code(&parked), "APPROVAL_PENDING", "{parked}");
    let id = parked["structuredContent"]["approval_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        !marks.exists(),
        "nothing may reach the upstream before a grant"
    );
    // The person deciding sees where it goes: the upstream, its tool's description and
    // effect, the server and the client that asked.
    let shown = run_manifest(&sb, &manifest, &["approvals", "show", &id, "--json"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    let shown = shown.json();
    assert_eq!(shown["upstream"], "up", "{shown}");
    assert_eq!(shown["description"], "Appends a note", "{shown}");
    assert_eq!(shown["mutating"], true, "{shown}");
    assert_eq!(shown["server"], "m", "{shown}");
    assert_eq!(shown["client"], "t", "{shown}");

    let early = client.call("write_note", json!({"text": "first", "confirm_token": id}));
    assert_eq!(code(&early), "APPROVAL_PENDING", "{early}");
    assert!(!marks.exists());

    let granted =
        decide(
            sb.with_manifest(&manifest)
                .args(["approvals", "grant", &id, "--actor", "alice"]),
        );
    assert_eq!(granted.code, 0, "{}", granted.stderr);
    assert!(!marks.exists(), "a grant runs nothing by itself");

    let ran = client.call("write_note", json!({"text": "first", "confirm_token": id}));
    assert_eq!(ran["isError"], false, "{ran}");
    assert_eq!(std::fs::read_to_string(&marks).unwrap(), "first\n");
}

#[test]
fn manifest_upstreams_refuse_unknown_keys_and_name_the_line() {
    let sb = Sandbox::new();
    let typo = run_manifest(
        &sb,
        "[[upstreams]]\nname = \"up\"\ncommand = [\"x\"]\n\n[upstreams.tools.\"*\"]\nconfrim = true\n",
        &["tools"],
    );
    assert_eq!(typo.code, 2);
    assert!(
        typo.stderr.contains("m.toml:6: unknown field `confrim`"),
        "{}",
        typo.stderr
    );
    let twice = run_manifest(
        &sb,
        "[[upstreams]]\nname = \"up\"\ncommand = [\"x\"]\n[[upstreams]]\nname = \"up\"\ncommand = [\"y\"]\n",
        &["tools"],
    );
    assert_eq!(twice.code, 2);
    assert!(
        twice
            .stderr
            .contains("m.toml:5: upstream `up` is declared twice"),
        "{}",
        twice.stderr
    );
}

#[test]
fn proxy_over_http_serves_the_upstream_with_the_manifests_tokens_and_audits_each_call() {
    let sb = Sandbox::new();
    let upstream = upstream_manifest(&sb);
    sb.write(
        "tokens.toml",
        &format!(
            "[[auth.tokens]]\nsha256 = \"{}\"\nprincipal = \"agent\"\nscopes = [\"*\"]\n",
            milpa_mcp::auth::sha256_hex("agent-token")
        ),
    );
    let milpa_bin = assert_cmd::cargo::cargo_bin("milpa").display().to_string();
    let upstream = upstream.display().to_string();
    let (_server, addr) = common::http::spawn_http(
        &sb,
        &[
            "--store",
            "memory",
            "--manifest",
            "tokens.toml",
            "proxy",
            "--http",
            "127.0.0.1:0",
            "--name",
            "up",
            "--audit",
            "audit.jsonl",
            "--",
            &milpa_bin,
            "--store",
            "memory",
            "--manifest",
            &upstream,
            "serve",
        ],
    );
    // The upstream starts in the background: /readyz says when it is up.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while common::http::get(addr, "/readyz").status != 200 {
        assert!(
            std::time::Instant::now() < deadline,
            "the upstream never came up"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let auth = [("Authorization", "Bearer agent-token")];
    let session = common::http::initialize(addr, &auth);
    let greeted = common::http::call(addr, &session, &auth, "greet", json!({"who": "eva"}));
    assert_eq!(greeted["content"][0]["text"], "hello eva", "{greeted}");
    assert_eq!(greeted["_meta"]["milpa"]["principal"], "agent");
    let failed = common::http::call(addr, &session, &auth, "fail", json!({}));
    assert_eq!(failed["isError"], true, "{failed}");

    let audit = std::fs::read_to_string(sb.path().join("audit.jsonl")).unwrap();
    let records: Vec<Value> = audit
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(records.len(), 2, "{audit}");
    assert_eq!(records[0]["tool"], "greet", "{audit}");
    assert_eq!(records[0]["principal"], "agent", "{audit}");
    assert_eq!(records[1]["tool"], "fail", "{audit}");
}

/// Starts `milpa ARGS… proxy --http 127.0.0.1:0 -- <upstream>` and reads its standard
/// error up to the line after `serving MCP on` (`and_next`), or up to that line.
fn proxy_http_head(sb: &Sandbox, before: &[&str], and_next: bool) -> (Vec<String>, SocketAddr) {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;

    let upstream = upstream_manifest(sb);
    let mut proxy = milpa(sb);
    proxy
        .args(before)
        .args(["proxy", "--http", "127.0.0.1:0", "--name", "up", "--"])
        .arg(assert_cmd::cargo::cargo_bin("milpa"))
        .args(["--store", "memory", "--manifest"])
        .arg(&upstream)
        .arg("serve")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = proxy.spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let _server = common::http::Server(child);
    let mut lines = BufReader::new(stderr).lines().map(Result::unwrap);
    let mut head = Vec::new();
    let addr: SocketAddr = loop {
        let line = lines.next().expect("the proxy said where it listens");
        head.push(line.clone());
        if let Some(rest) = line.strip_prefix("milpa: serving MCP on http://") {
            break rest.trim_end_matches("/mcp").parse().unwrap();
        }
    };
    if and_next {
        head.push(lines.next().expect("a line after the MCP address"));
    }
    (head, addr)
}

#[test]
fn proxy_over_http_prints_the_approvals_page_with_and_without_a_manifest() {
    let sb = Sandbox::new();
    sb.write(
        "tokens.toml",
        &format!(
            "[[auth.tokens]]\nsha256 = \"{}\"\nprincipal = \"agent\"\nscopes = [\"*\"]\n",
            milpa_mcp::auth::sha256_hex("agent-token")
        ),
    );
    let (head, addr) = proxy_http_head(
        &sb,
        &["--store", "memory", "--manifest", "tokens.toml"],
        true,
    );
    assert_eq!(
        head.last().unwrap(),
        &format!(
            "milpa: approvals page on http://{addr}/approvals (sign in with a token holding \
             approvals:grant)"
        ),
        "{head:#?}"
    );

    // Without a manifest, the announcement of the run's tokens names the page.
    let (head, addr) = proxy_http_head(&sb, &["--store", "memory"], false);
    let page = head
        .iter()
        .find(|line| line.contains("approvals page"))
        .unwrap_or_else(|| panic!("no approvals page line in {head:#?}"));
    assert!(
        page.ends_with(&format!(" http://{addr}/approvals")),
        "{head:#?}"
    );
}
