//! Command tools run by the real binary: argv substitution, environment, stdin, working
//! folder, output cap, JSON output, failures, timeouts that kill the whole process group.

mod common;

use std::time::{Duration, Instant};

use common::{Sandbox, run, run_manifest};
use serde_json::{Value, json};

/// A tool whose output is its argv after the program: the count, then `[arg]` per line.
const ARGV_TOOL: &str = r#"
[[tools]]
name = "argv"
command = ["sh", "-c", "printf '%s\n' \"$#\"; for a in \"$@\"; do printf '[%s]\n' \"$a\"; done", "argv", "{a}", "--opt={b}", "{c}"]

# The script takes its arguments as operands: values starting with `-` are data here.
[tools.params.a]
type = "string"
required = true
allow_leading_dash = true

[tools.params.b]
type = "string"

[tools.params.c]
type = "integer"
default = 7
allow_leading_dash = true
"#;

fn argv_of(sb: &Sandbox, args: Value) -> Vec<String> {
    let r = run_manifest(
        sb,
        ARGV_TOOL,
        &["call", "argv", &args.to_string(), "--json"],
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let text = r.json()["data"].as_str().unwrap().to_owned();
    let mut lines = text.split('\n');
    let count: usize = lines.next().unwrap().parse().unwrap();
    let rest: Vec<&str> = lines.collect();
    let joined = rest.join("\n");
    // Each argument is `[…]`; arguments may hold newlines themselves.
    let args: Vec<String> = joined
        .strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .map(|s| s.split("]\n[").map(str::to_owned).collect())
        .unwrap_or_default();
    assert_eq!(args.len(), count, "{text}");
    args
}

#[test]
fn hostile_values_arrive_as_exactly_one_argv_element() {
    let sb = Sandbox::new();
    for hostile in [
        "; rm -rf /",
        "$(id)",
        "`id`",
        "a b   c",
        "-rf",
        "--help",
        "'quoted\" \\ back",
        "*",
        "two\nlines",
        "{b}",
        "$HOME",
        "",
    ] {
        let args = argv_of(&sb, json!({"a": hostile, "b": hostile}));
        assert_eq!(
            args,
            [
                hostile.to_owned(),
                format!("--opt={hostile}"),
                "7".to_owned()
            ],
            "value {hostile:?}"
        );
    }
}

/// `touch {path}` (options possible) and `touch -- {path}` (operands only), in `cwd`.
const TOUCH_TOOLS: &str = r#"
[[tools]]
name = "touch"
command = ["touch", "{path}"]

[tools.params.path]
type = "string"
required = true

[[tools]]
name = "touch_operand"
command = ["touch", "--", "{path}"]

[tools.params.path]
type = "string"
required = true

[[tools]]
name = "head"
command = ["head", "-n", "{count}", "{file}"]

[tools.params.count]
type = "integer"
default = -1

[tools.params.file]
type = "string"
required = true

[[tools]]
name = "ls"
command = ["ls", "{flags}", "{dir}"]

[tools.params.flags]
type = "string"
enum = ["-a", "-1"]
default = "-1"

[tools.params.dir]
type = "string"
required = true
"#;

#[test]
fn a_value_that_would_be_read_as_an_option_is_refused() {
    let sb = Sandbox::new();
    for (tool, args, param) in [
        ("touch", json!({"path": "--version"}), "path"),
        ("touch", json!({"path": "-"}), "path"),
        ("head", json!({"file": "-", "count": 1}), "file"),
        ("head", json!({"file": "x", "count": -5}), "count"),
    ] {
        let r = run_manifest(
            &sb,
            TOUCH_TOOLS,
            &["call", tool, &args.to_string(), "--json"],
        );
        assert_eq!(r.code, 1, "{tool} {args}: {}", r.stdout);
        let result = r.json();
        assert_eq!(result["meta"]["code"], "VALIDATION_ERROR", "{result}");
        assert_eq!(
            result["error"],
            format!("{param}: must not start with `-` (the command would read it as an option)")
        );
        // Nothing ran: `touch --version` would have printed its version.
        assert_eq!(result["data"], Value::Null, "{result}");
    }
    // A dash inside a value, or after literal text, is no option.
    let r = run_manifest(
        &sb,
        TOUCH_TOOLS,
        &["call", "touch", r#"{"path":"a-b"}"#, "--json"],
    );
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert!(sb.path().join("a-b").exists());
    let hostile = argv_of(&sb, json!({"a": "x", "b": "--help"}));
    assert_eq!(hostile, ["x", "--opt=--help", "7"]);
}

#[test]
fn allow_leading_dash_and_enum_values_let_a_dash_through() {
    let sb = Sandbox::new();
    // Opted in (`a` and `c` of the argv tool): one element each, as given.
    assert_eq!(
        argv_of(&sb, json!({"a": "--version", "c": -3})),
        ["--version", "-3"]
    );
    // The manifest's own values (an enum, a default) are not the caller's to abuse.
    std::fs::write(sb.path().join("lines"), "one\ntwo\n").unwrap();
    let r = run_manifest(
        &sb,
        TOUCH_TOOLS,
        &["call", "ls", r#"{"flags":"-a","dir":"."}"#, "--json"],
    );
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert!(
        r.json()["data"].as_str().unwrap().contains(".."),
        "{}",
        r.stdout
    );
    let r = run_manifest(
        &sb,
        TOUCH_TOOLS,
        &["call", "head", r#"{"file":"lines"}"#, "--json"],
    );
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert_eq!(r.json()["data"], "one");
}

#[test]
fn a_literal_double_dash_before_the_placeholder_lets_a_dash_through() {
    let sb = Sandbox::new();
    let r = run_manifest(
        &sb,
        TOUCH_TOOLS,
        &["call", "touch_operand", r#"{"path":"--version"}"#, "--json"],
    );
    assert_eq!(r.code, 0, "{}", r.stdout);
    // touch made a file of that name instead of printing its version.
    assert!(sb.path().join("--version").is_file());
    assert_eq!(r.json()["data"], Value::Null, "{}", r.stdout);
}

#[test]
fn absent_params_leave_their_element_out_and_defaults_fill_in() {
    let sb = Sandbox::new();
    assert_eq!(argv_of(&sb, json!({"a": "x"})), ["x", "7"]);
    assert_eq!(argv_of(&sb, json!({"a": "x", "c": -3})), ["x", "-3"]);
    // Unknown properties are refused by the schema (additionalProperties: false).
    let r = run_manifest(
        &sb,
        ARGV_TOOL,
        &["call", "argv", r#"{"a":"x","z":1}"#, "--json"],
    );
    assert_eq!(r.code, 1);
    assert_eq!(r.json()["error"], "Unknown property: z");
}

#[test]
fn the_environment_is_cleared_except_path_home_lang_and_the_allow_list() {
    let sb = Sandbox::new();
    let manifest = r#"
[[tools]]
name = "env"
command = ["env"]
env = ["MILPA_TEST_ALLOWED"]
"#;
    let r = run(sb
        .with_manifest(manifest)
        .args(["call", "env", "--json"])
        .env("MILPA_TEST_ALLOWED", "yes")
        .env("MILPA_TEST_SECRET", "hunter2")
        .env("LANG", "C.UTF-8"));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let text = r.json()["data"].as_str().unwrap().to_owned();
    let names: Vec<&str> = text.lines().filter_map(|l| l.split('=').next()).collect();
    assert!(names.contains(&"MILPA_TEST_ALLOWED"), "{text}");
    assert!(names.contains(&"PATH") && names.contains(&"LANG"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
    for name in &names {
        assert!(
            ["PATH", "HOME", "LANG", "MILPA_TEST_ALLOWED"].contains(name),
            "unexpected variable {name}"
        );
    }
}

#[test]
fn stdin_is_closed_and_cwd_is_honoured() {
    let sb = Sandbox::new();
    std::fs::create_dir(sb.path().join("work")).unwrap();
    let manifest = r#"
[[tools]]
name = "cat"
command = ["sh", "-c", "cat; echo done"]

[[tools]]
name = "where"
command = ["pwd"]
cwd = "work"

[[tools]]
name = "script"
command = ["./bin/hello.sh", "{who}"]

[tools.params.who]
type = "string"
required = true
"#;
    let r = run(sb
        .with_manifest(manifest)
        .args(["call", "cat", "--json"])
        .write_stdin("leaked input\n"));
    assert_eq!(r.json()["data"], "done");
    // A relative cwd is relative to the manifest's folder, wherever milpa runs.
    let elsewhere = Sandbox::new();
    let manifest_path = sb.write("m.toml", manifest);
    let r = run(elsewhere.milpa().args([
        "--manifest",
        manifest_path.to_str().unwrap(),
        "call",
        "where",
        "--json",
    ]));
    let cwd = r.json()["data"].as_str().unwrap().to_owned();
    assert!(cwd.ends_with("/work"), "{cwd}");
    assert_eq!(
        std::fs::canonicalize(&cwd).unwrap(),
        std::fs::canonicalize(sb.path().join("work")).unwrap()
    );
    // A working folder that is gone is named as such.
    std::fs::remove_dir(sb.path().join("work")).unwrap();
    let r = run(elsewhere.milpa().args([
        "--manifest",
        manifest_path.to_str().unwrap(),
        "call",
        "where",
        "--json",
    ]));
    assert_eq!(r.code, 1);
    let error = r.json()["error"].as_str().unwrap().to_owned();
    assert!(
        error.starts_with("The working folder `") && error.ends_with("work` does not exist"),
        "{error}"
    );
    // So is a relative program path.
    sb.script("bin/hello.sh", "#!/bin/sh\necho \"hello $1\"\n");
    let r = run(elsewhere.milpa().args([
        "--manifest",
        manifest_path.to_str().unwrap(),
        "call",
        "script",
        r#"{"who":"ana"}"#,
        "--json",
    ]));
    assert_eq!(r.json()["data"], "hello ana", "{}", r.stdout);
}

#[test]
fn json_stdout_becomes_structured_data() {
    let sb = Sandbox::new();
    let manifest = r#"
[[tools]]
name = "facts"
command = ["printf", '{"ok": true, "n": [1, 2], "name": "%s"}', "{name}"]

[tools.params.name]
type = "string"
required = true

[[tools]]
name = "words"
command = ["echo", "not json"]
"#;
    let r = run_manifest(
        &sb,
        manifest,
        &["call", "facts", r#"{"name":"x\"y"}"#, "--json"],
    );
    // The value made the JSON invalid: it is text then, never an injection.
    assert!(r.json()["data"].is_string(), "{}", r.stdout);
    let r = run_manifest(
        &sb,
        manifest,
        &["call", "facts", r#"{"name":"db"}"#, "--json"],
    );
    assert_eq!(r.code, 0);
    let result = r.json();
    assert_eq!(
        result["data"],
        json!({"ok": true, "n": [1, 2], "name": "db"})
    );
    assert_eq!(result["meta"]["exit_code"], 0);
    assert_eq!(result["meta"]["truncated"], false);
    let r = run_manifest(&sb, manifest, &["call", "words", "--json"]);
    assert_eq!(r.json()["data"], "not json");
    // Rendered for a person.
    let r = run_manifest(&sb, manifest, &["call", "facts", r#"{"name":"db"}"#]);
    assert!(r.stdout.contains("Ok: Yes"), "{}", r.stdout);
}

#[test]
fn huge_stdout_is_truncated() {
    let sb = Sandbox::new();
    let manifest = r#"
[[tools]]
name = "big"
command = ["sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' x"]
max_output_bytes = 1000

[[tools]]
name = "endless"
command = ["yes", "spam"]
max_output_bytes = 4096
timeout_seconds = 1

[[tools]]
name = "default_cap"
command = ["sh", "-c", "head -c 2000000 /dev/zero | tr '\\0' y"]
"#;
    let r = run_manifest(&sb, manifest, &["call", "big", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    let result = r.json();
    assert_eq!(result["data"].as_str().unwrap(), "x".repeat(1000));
    assert_eq!(result["meta"]["truncated"], true);
    // A program that never stops writing meets its timeout (memory stays bounded).
    let started = Instant::now();
    let r = run_manifest(&sb, manifest, &["call", "endless", "--json"]);
    assert!(started.elapsed() < Duration::from_secs(15));
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert_eq!(r.json()["meta"]["code"], "TIMEOUT");
    let r = run_manifest(&sb, manifest, &["call", "default_cap", "--json"]);
    assert_eq!(r.json()["data"].as_str().unwrap().len(), 1024 * 1024);
    assert_eq!(r.json()["meta"]["truncated"], true);
}

#[test]
fn a_failing_command_is_a_failed_result_with_exit_code_and_stderr_tail() {
    let sb = Sandbox::new();
    let manifest = r#"
[[tools]]
name = "fail"
command = ["sh", "-c", "echo partial; echo 'disk on fire' >&2; exit 3"]

[[tools]]
name = "chatty"
command = ["sh", "-c", "i=0; while [ $i -lt 3000 ]; do echo line$i >&2; i=$((i+1)); done; exit 4"]

[[tools]]
name = "missing"
command = ["/nonexistent/program"]
"#;
    let r = run_manifest(&sb, manifest, &["call", "fail", "--json"]);
    assert_eq!(r.code, 1);
    let result = r.json();
    assert_eq!(result["success"], false);
    assert_eq!(result["meta"]["code"], "COMMAND_FAILED");
    assert_eq!(result["meta"]["exit_code"], 3);
    assert_eq!(result["error"], "Command exited with code 3: disk on fire");
    assert_eq!(result["data"], "partial");
    let r = run_manifest(&sb, manifest, &["call", "fail"]);
    assert!(r.stdout.contains("disk on fire"), "{}", r.stdout);

    let r = run_manifest(&sb, manifest, &["call", "chatty", "--json"]);
    let error = r.json()["error"].as_str().unwrap().to_owned();
    assert!(
        error.starts_with("Command exited with code 4: …"),
        "{error}"
    );
    assert!(error.ends_with("line2999"));
    assert!(!error.contains("line10\n"));
    assert!(error.len() < 2200, "{}", error.len());

    let r = run_manifest(&sb, manifest, &["call", "missing", "--json"]);
    assert_eq!(r.code, 1);
    assert_eq!(r.json()["meta"]["code"], "INTERNAL_ERROR");
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .starts_with("Could not start `/nonexistent/program`")
    );
}

fn alive(pid: u32) -> bool {
    // A zombie (state Z) is dead, only not yet reaped by whoever adopted it.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z')
        }
        Err(_) => false,
    }
}

/// A manifest with the tool `hang`: it writes a background sleeper's pid and its own to
/// `pidfile`, then sleeps; `timeout` is its timeout_seconds.
fn hang_tool(timeout: u64) -> String {
    format!(
        r#"
[[tools]]
name = "hang"
description = "Starts a background sleeper, then sleeps itself"
command = ["sh", "-c", "sleep 100 & echo $! > \"$1\"; echo $$ >> \"$1\"; sleep 100", "hang", "{{pidfile}}"]
timeout_seconds = {timeout}

[tools.params.pidfile]
type = "string"
required = true
"#
    )
}

/// Waits up to 5 s for every pid to be gone, then asserts none survived `what`.
fn assert_gone(pids: &[u32], what: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while pids.iter().any(|p| alive(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    for pid in pids {
        assert!(!alive(*pid), "process {pid} survived {what}");
    }
}

#[test]
fn a_timeout_kills_the_whole_process_group() {
    let sb = Sandbox::new();
    let manifest = hang_tool(1);
    let pidfile = sb.path().join("pids");
    let args = json!({"pidfile": pidfile.to_str().unwrap()}).to_string();
    let started = Instant::now();
    let r = run_manifest(&sb, &manifest, &["call", "hang", &args, "--json"]);
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert_eq!(r.json()["meta"]["code"], "TIMEOUT");
    assert_eq!(
        r.json()["error"],
        "Tool 'hang' timed out after 1s (hard timeout)"
    );
    let pids: Vec<u32> = std::fs::read_to_string(&pidfile)
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 2);
    assert_gone(&pids, "the timeout");
}

#[test]
fn stragglers_are_killed_when_the_program_exits() {
    let sb = Sandbox::new();
    let manifest = r#"
[[tools]]
name = "leave"
command = ["sh", "-c", "sleep 100 & echo $! > \"$1\"; echo bye", "leave", "{pidfile}"]
timeout_seconds = 30

[tools.params.pidfile]
type = "string"
required = true
"#;
    let pidfile = sb.path().join("pid");
    let args = json!({"pidfile": pidfile.to_str().unwrap()}).to_string();
    let started = Instant::now();
    let r = run_manifest(&sb, manifest, &["call", "leave", &args, "--json"]);
    // The sleeper held stdout open; killing the group ends the call at once.
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(r.json()["data"], "bye", "{}", r.stdout);
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_gone(&[pid], "the program's exit");
}

#[test]
fn ctrl_c_during_a_call_kills_the_command_too() {
    let sb = Sandbox::new();
    sb.write("m.toml", &hang_tool(60));
    let pidfile = sb.path().join("pids");
    let args = json!({"pidfile": pidfile.to_str().unwrap()}).to_string();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("milpa"))
        .current_dir(sb.path())
        .env("MILPA_HOME", sb.path())
        .args(["--manifest", "m.toml", "call", "hang", &args])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let pids: Vec<u32> = loop {
        let text = std::fs::read_to_string(&pidfile).unwrap_or_default();
        let pids: Vec<u32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
        if pids.len() == 2 {
            break pids;
        }
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let code = child.wait().unwrap().code();
    assert_eq!(code, Some(130));
    assert_gone(&pids, "Ctrl-C");
}

/// A script that starts a descendant in a session of its own (`setsid`), out of the
/// program's process group: the descendant writes its pid to `$1`, waits until the file
/// `$1.go` exists (20 s at most), then creates the file `$2`. The script waits for the pid,
/// then sleeps `$3` seconds.
const ESCAPE_SCRIPT: &str = r#"#!/bin/sh
setsid sh -c 'echo $$ > "$1.tmp"; mv "$1.tmp" "$1"; i=0; while [ ! -e "$1.go" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done; touch "$2"' escaped "$1" "$2" &
while [ ! -e "$1" ]; do sleep 0.05; done
sleep "$3"
echo bye
"#;

fn escape_tool(timeout: u64) -> String {
    format!(
        r#"
[[tools]]
name = "escape"
command = ["./escape.sh", "{{pidfile}}", "{{marker}}", "{{sleep}}"]
timeout_seconds = {timeout}

[tools.params.pidfile]
type = "string"
required = true

[tools.params.marker]
type = "string"
required = true

[tools.params.sleep]
type = "integer"
required = true
"#
    )
}

/// Runs the escape tool (the program sleeping `sleep` s), then checks that the escaped
/// descendant is gone and never created its marker.
fn assert_escapee_killed(timeout: u64, sleep: u64, what: &str) -> Value {
    let sb = Sandbox::new();
    sb.script("escape.sh", ESCAPE_SCRIPT);
    let pidfile = sb.path().join("escaped.pid");
    let marker = sb.path().join("MARKER");
    let args = json!({
        "pidfile": pidfile.to_str().unwrap(),
        "marker": marker.to_str().unwrap(),
        "sleep": sleep,
    })
    .to_string();
    let r = run_manifest(
        &sb,
        &escape_tool(timeout),
        &["call", "escape", &args, "--json"],
    );
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_gone(&[pid], what);
    // A descendant still running would now create its marker.
    std::fs::write(sb.path().join("escaped.pid.go"), "").unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !marker.exists(),
        "the escaped descendant ran on after {what}"
    );
    r.json()
}

#[test]
fn a_timeout_kills_descendants_that_left_the_process_group() {
    let result = assert_escapee_killed(1, 30, "the timeout");
    assert_eq!(result["meta"]["code"], "TIMEOUT", "{result}");
}

#[test]
fn descendants_that_left_the_process_group_die_with_the_program() {
    let result = assert_escapee_killed(30, 0, "the program's exit");
    assert_eq!(result["data"], "bye", "{result}");
}

/// Whether `/proc/PID` exists at all (a zombie counts: nobody reaped it yet).
fn exists(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn a_long_running_server_reaps_the_descendants_it_killed() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command, Stdio};

    let sb = Sandbox::new();
    sb.script("escape.sh", ESCAPE_SCRIPT);
    sb.write("m.toml", &escape_tool(1));
    let pidfile = sb.path().join("escaped.pid");
    let marker = sb.path().join("MARKER");
    let mut server = Command::new(assert_cmd::cargo::cargo_bin("milpa"))
        .current_dir(sb.path())
        .env("MILPA_HOME", sb.path())
        .args(["--manifest", "m.toml", "serve", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = server.stdin.take().unwrap();
    let messages = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "escape",
        "arguments": {
            "pidfile": pidfile.to_str().unwrap(),
            "marker": marker.to_str().unwrap(),
            "sleep": 30
        }}}),
    ];
    for message in &messages {
        writeln!(stdin, "{message}").unwrap();
    }
    stdin.flush().unwrap();
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let answer = loop {
        let line = lines.next().expect("an answer").unwrap();
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["id"] == 2 {
            break message;
        }
    };
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // The server still runs, and the escaped descendant is not even a zombie: reaped.
    let deadline = Instant::now() + Duration::from_secs(5);
    while exists(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!exists(pid), "process {pid} was not reaped");
    assert!(server.try_wait().unwrap().is_none(), "the server stopped");
    std::fs::write(sb.path().join("escaped.pid.go"), "").unwrap();
    std::thread::sleep(Duration::from_millis(500));
    drop(stdin);
    let _ = server.wait();
    assert!(!marker.exists());
}

/// Many quick commands at once (in one process, as `milpa serve` runs them): each call's
/// orphan scan used to take another call's just-started program for an orphan and reap it
/// from under tokio ("Could not wait: No child processes").
#[test]
fn concurrent_quick_commands_all_finish() {
    use std::sync::Arc;

    use milpa::ToolContext;
    use milpa_cli::manifest::Manifest;
    use milpa_cli::setup::build_registry;
    use milpa_cli::store::Stores;

    let manifest = Manifest::parse(
        "m.toml",
        "[[tools]]\nname = \"quick\"\ncommand = [\"true\"]\n",
    )
    .unwrap();
    let registry = Arc::new(
        build_registry(&manifest, &Stores::memory(), None, Box::new(|_, _| Ok(()))).unwrap(),
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        for _ in 0..5 {
            let calls: Vec<_> = (0..48)
                .map(|_| {
                    let registry = registry.clone();
                    tokio::spawn(async move {
                        registry.call("quick", json!({}), &ToolContext::cli()).await
                    })
                })
                .collect();
            for call in calls {
                let result = call.await.unwrap();
                assert!(result.success, "{:?}", result.error);
            }
        }
    });
}
