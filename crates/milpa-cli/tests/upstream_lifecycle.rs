//! An upstream's life behind the gateway: killed mid-session it makes its calls fail with
//! `UPSTREAM_UNAVAILABLE` and comes back after a restart; a cancelled call is cancelled
//! upstream too.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::stdio::StdioClient;
use common::{Sandbox, upstream_command};
use serde_json::{Value, json};

fn code(result: &Value) -> &str {
    result["_meta"]["milpa"]["code"].as_str().unwrap_or("")
}

/// A stdio proxy (`milpa serve` on a manifest with one upstream `up`) in front of this
/// build's `milpa serve`, whose tools are `pid` (the upstream server's pid) and `slow`
/// (writes its own pid to `slow.pid`, then sleeps).
fn start(sb: &Sandbox) -> StdioClient {
    start_with(sb, "")
}

/// [`start`], with `overrides` (TOML) after the upstream's entry.
fn start_with(sb: &Sandbox, overrides: &str) -> StdioClient {
    let slow_pid = sb.path().join("slow.pid");
    let upstream = sb.write(
        "upstream.toml",
        &format!(
            r#"
[[tools]]
name = "pid"
command = ["sh", "-c", "echo $PPID"]

[[tools]]
name = "slow"
timeout_seconds = 120
command = ["sh", "-c", "echo $$ > {slow_pid}; exec sleep 60"]
"#,
            slow_pid = slow_pid.display()
        ),
    );
    let manifest = sb.write(
        "m.toml",
        &format!(
            "[[upstreams]]\nname = \"up\"\ncommand = {}\n{overrides}",
            upstream_command(&upstream)
        ),
    );
    let mut serve = common::http::milpa_command(sb);
    serve
        .args(["--store", "memory", "--manifest"])
        .arg(manifest)
        .arg("serve");
    let mut client = StdioClient::start(serve, &sb.path().join("serve.err"));
    client.wait_for_tool("slow");
    client
}

fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // A zombie has ended; only its parent's wait is missing.
        Ok(stat) => !stat[stat.rfind(')').unwrap() + 1..]
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn upstream_pid(client: &mut StdioClient) -> i32 {
    let answer = client.call("pid", json!({}));
    assert_eq!(answer["isError"], false, "{answer}");
    i32::try_from(answer["structuredContent"]["result"].as_i64().unwrap()).unwrap()
}

#[test]
fn a_killed_upstream_fails_its_calls_with_upstream_unavailable_then_comes_back() {
    let sb = Sandbox::new();
    let mut client = start(&sb);
    let first = upstream_pid(&mut client);
    assert!(alive(first));

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(first),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let down = client.call("pid", json!({}));
    assert_eq!(down["isError"], true, "{down}");
    assert_eq!(code(&down), "UPSTREAM_UNAVAILABLE", "{down}");
    let message = down["content"][0]["text"].as_str().unwrap();
    assert!(
        message.starts_with("Upstream `up` is unavailable: "),
        "{message}"
    );

    // The server kept serving: protocol requests still answer at once.
    let listed = client.request("tools/list", json!({}));
    assert_eq!(listed["result"]["tools"].as_array().unwrap().len(), 2);

    // Restarted with backoff: calls succeed again, on a new upstream process.
    let mut second = None;
    wait_until("the upstream to come back", || {
        let answer = client.call("pid", json!({}));
        if answer["isError"] == false {
            second = answer["structuredContent"]["result"].as_i64();
            return true;
        }
        assert_eq!(code(&answer), "UPSTREAM_UNAVAILABLE", "{answer}");
        false
    });
    let second = i32::try_from(second.unwrap()).unwrap();
    assert_ne!(second, first);
    assert!(alive(second));

    // Ending the proxy ends its upstream.
    let proxy = i32::try_from(client.pid()).unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(proxy),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    wait_until("the upstream to end with the proxy", || !alive(second));
}

fn read_pid(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[test]
fn cancelling_a_slow_upstream_call_cancels_it_upstream() {
    let sb = Sandbox::new();
    let mut client = start(&sb);
    let id = client.send("tools/call", json!({"name": "slow", "arguments": {}}));
    let pid_file = sb.path().join("slow.pid");
    let mut sleeper = None;
    wait_until("the upstream tool to start", || {
        sleeper = read_pid(&pid_file);
        sleeper.is_some()
    });
    let sleeper = sleeper.unwrap();
    assert!(alive(sleeper));

    client.notify(
        "notifications/cancelled",
        json!({"requestId": id, "reason": "changed my mind"}),
    );
    // The upstream ends its command only when it hears of the cancellation.
    wait_until("the upstream command to be killed", || !alive(sleeper));
    // And the proxy still serves.
    let answer = client.call("pid", json!({}));
    assert_eq!(answer["isError"], false, "{answer}");
}

#[test]
fn a_slow_upstream_call_does_not_hold_up_the_calls_after_it() {
    // The proxy and its upstream (`milpa serve` over stdio) each run on one thread: a call
    // waiting on its upstream, or on its command, must leave the thread to the others.
    let sb = Sandbox::new();
    let mut client = start(&sb);
    let slow = client.send("tools/call", json!({"name": "slow", "arguments": {}}));
    let pid_file = sb.path().join("slow.pid");
    let mut sleeper = None;
    wait_until("the upstream tool to start", || {
        sleeper = read_pid(&pid_file);
        sleeper.is_some()
    });
    let sleeper = sleeper.unwrap();
    for _ in 0..3 {
        let answer = client.call("pid", json!({}));
        assert_eq!(answer["isError"], false, "{answer}");
    }
    let listed = client.request("tools/list", json!({}));
    assert_eq!(listed["result"]["tools"].as_array().unwrap().len(), 2);
    assert!(alive(sleeper), "the slow call still runs");
    client.notify("notifications/cancelled", json!({"requestId": slow}));
    wait_until("the upstream command to be killed", || !alive(sleeper));
}

#[test]
fn a_timeout_override_ends_a_slow_upstream_call_and_cancels_it_upstream() {
    let sb = Sandbox::new();
    let mut client = start_with(&sb, "[upstreams.tools.\"slow\"]\ntimeout_seconds = 1\n");
    let answer = client.call("slow", json!({}));
    assert_eq!(code(&answer), "TIMEOUT", "{answer}");
    let sleeper = read_pid(&sb.path().join("slow.pid")).expect("the upstream tool started");
    wait_until("the upstream command to be killed", || !alive(sleeper));
}
