//! Upstreams start like services: in the background while milpa serves at once, a line in
//! the log while one is awaited, `start_timeout_seconds`, an upstream that cannot start is
//! down and tried again (never fatal), and an odd tool costs that tool only.

mod common;

use std::time::{Duration, Instant};

use common::stdio::StdioClient;
use common::{Sandbox, odd_command, odd_upstream, run_manifest};
use serde_json::{Value, json};

fn names(listed: &Value) -> Vec<String> {
    listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

fn wait_until(what: &str, seconds: u64, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn serve_answers_at_once_while_upstreams_start_and_tells_clients_when_their_tools_come() {
    let sb = Sandbox::new();
    let manifest = sb.write(
        "m.toml",
        &format!(
            "[[tools]]\nname = \"local\"\ncommand = [\"echo\", \"here\"]\n\
             [[upstreams]]\nname = \"slow\"\ncommand = {}\n\
             [[upstreams]]\nname = \"gone\"\ncommand = [\"/nonexistent/server\"]\n",
            odd_command(&["--start-delay", "7"])
        ),
    );
    let mut serve = common::http::milpa_command(&sb);
    serve
        .args(["--store", "memory", "--manifest"])
        .arg(&manifest)
        .arg("serve");
    let stderr = sb.path().join("serve.err");
    // The handshake is answered while both upstreams are still starting (or down).
    let mut client = StdioClient::start(serve, &stderr);
    assert_eq!(names(&client.request("tools/list", json!({}))), ["local"]);
    let local = client.call("local", json!({}));
    assert_eq!(local["content"][0]["text"], "here", "{local}");

    // Once the slow one is up, the client is told, and its tools are there.
    let changed = client.wait_for(|m| m["method"] == "notifications/tools/list_changed");
    assert!(changed.get("id").is_none(), "{changed}");
    let listed = names(&client.request("tools/list", json!({})));
    assert!(listed.contains(&"slow__echo".to_owned()), "{listed:?}");
    let echoed = client.call("slow__echo", json!({"text": "late but here"}));
    assert_eq!(echoed["content"][0]["text"], "late but here", "{echoed}");

    let log = std::fs::read_to_string(&stderr).unwrap();
    // The command as configured, cut after 60 characters.
    let command = format!("{} --start-delay 7", odd_upstream().display());
    let shown = match command.char_indices().nth(60) {
        Some((cut, _)) => format!("{} …", command[..cut].trim_end()),
        None => command,
    };
    let waiting = format!("waiting for upstream 'slow' ({shown}): 5 s");
    assert!(log.contains(&waiting), "{log}");
    assert!(
        log.contains("upstream `gone`: could not start `/nonexistent/server`"),
        "{log}"
    );
    assert!(log.contains("restarting in"), "{log}");
}

#[test]
fn an_upstream_that_cannot_start_or_is_too_slow_is_listed_down_and_the_rest_is_served() {
    let sb = Sandbox::new();
    let manifest = format!(
        "[[upstreams]]\nname = \"late\"\ncommand = {}\nstart_timeout_seconds = 1\n\
         [[upstreams]]\nname = \"gone\"\ncommand = [\"/nonexistent/server\"]\n\
         [[upstreams]]\nname = \"mute\"\ncommand = [\"true\"]\n\
         [[upstreams]]\nname = \"fine\"\ncommand = {}\n",
        odd_command(&["--start-delay", "30"]),
        odd_command(&[]),
    );
    let run = run_manifest(&sb, &manifest, &["--store", "memory", "tools"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let state = |name: &str| {
        run.stdout
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no row for {name}: {}", run.stdout))
            .to_owned()
    };
    assert!(
        state("late").contains(
            "down: upstream `late`: it did not finish starting within 1 s (start_timeout_seconds)"
        ),
        "{}",
        run.stdout
    );
    assert!(
        state("gone").contains("down: upstream `gone`: could not start `/nonexistent/server`"),
        "{}",
        run.stdout
    );
    assert!(
        state("mute").contains("down: upstream `mute`: initialize failed"),
        "{}",
        run.stdout
    );
    assert!(state("fine").contains("ready"), "{}", run.stdout);
    assert!(run.stdout.contains("fine__echo"), "{}", run.stdout);

    let zero = run_manifest(
        &sb,
        "[[upstreams]]\nname = \"u\"\ncommand = [\"x\"]\nstart_timeout_seconds = 0\n",
        &["tools"],
    );
    assert_eq!(zero.code, 2);
    assert!(
        zero.stderr
            .contains("m.toml:4: upstream `u`: start_timeout_seconds must be at least 1"),
        "{}",
        zero.stderr
    );
}

#[test]
fn an_odd_or_colliding_upstream_tool_is_skipped_naming_it_and_the_rest_are_served() {
    let sb = Sandbox::new();
    let long = "l".repeat(129);
    let manifest = format!(
        "[[tools]]\nname = \"pid\"\ncommand = [\"echo\", \"mine\"]\n\
         [[upstreams]]\nname = \"odd\"\nprefix = \"\"\ncommand = {}\n",
        odd_command(&[
            "--extra-tool",
            "has space",
            "--extra-tool",
            &long,
            "--extra-tool",
            "echo"
        ]),
    );
    let run = run_manifest(&sb, &manifest, &["--store", "memory", "tools"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let listed: Vec<&str> = run
        .stdout
        .lines()
        .skip(1)
        .take_while(|l| !l.is_empty() && !l.starts_with("UPSTREAM"))
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(
        listed,
        [
            "pid",
            "echo",
            "huge",
            "flood",
            "log",
            "roots",
            "open_page",
            "env",
            "args"
        ],
        "{}",
        run.stdout
    );
    // The local `pid` is ours: the upstream's is left out, and so are the odd ones.
    assert!(
        run.stderr.contains(
            "upstream `odd`: its tool `pid` would be registered as `pid`, which is already a tool of this server"
        ),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("upstream `odd`: its tool `has space` is not served: Invalid tool name"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains(&format!(
            "upstream `odd`: its tool `{long}` is not served: Invalid tool name"
        )),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains(
            "upstream `odd`: its tool `echo` would be registered as `echo`, which is already another tool of the same upstream"
        ),
        "{}",
        run.stderr
    );
    let called = run_manifest(
        &sb,
        &manifest,
        &[
            "--store",
            "memory",
            "call",
            "echo",
            r#"{"text": "still served"}"#,
        ],
    );
    assert_eq!(called.code, 0, "{}", called.stderr);
    assert!(called.stdout.contains("still served"), "{}", called.stdout);
}

#[test]
fn readiness_says_starting_until_the_upstream_is_up() {
    let sb = Sandbox::new();
    sb.write(
        "m.toml",
        &format!(
            "[[upstreams]]\nname = \"slow\"\ncommand = {}\n",
            odd_command(&["--start-delay", "3"])
        ),
    );
    let (_server, addr) = common::http::spawn_http(
        &sb,
        &[
            "--store",
            "memory",
            "--manifest",
            "m.toml",
            "serve",
            "--http",
            "127.0.0.1:0",
        ],
    );
    let get = |path: &str| common::http::get(addr, path);
    let first = get("/readyz");
    assert_eq!(first.status, 503, "{}", first.body);
    let checks: Value = serde_json::from_str(&first.body).unwrap();
    assert_eq!(
        checks["checks"][1],
        json!({"name": "upstream:slow", "ready": false, "detail": "starting"})
    );
    wait_until("the upstream to be up", 30, || get("/readyz").status == 200);
}
