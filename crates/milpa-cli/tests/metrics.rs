//! `serve --http`'s `/metrics`: the Prometheus text a scrape reads after real tool calls
//! (counters by tool, channel and outcome, the latency histogram, calls in flight, pending
//! approvals, sessions, upstreams, store errors), who may read it (a token with
//! `metrics:read`, or anyone with `[server] metrics = "public"`), and `promtool check
//! metrics` on what the server wrote.

mod common;

use std::io::Write;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::Sandbox;
use common::http::{
    Server, call, get, get_with, initialize, milpa_command, spawn_http, spawn_http_command,
};
use common::redis::RedisServer;
use milpa_mcp::auth::sha256_hex;
use serde_json::json;

const AGENT: [(&str, &str); 1] = [("Authorization", "Bearer agent-token")];
const WATCHER: [(&str, &str); 1] = [("Authorization", "Bearer watcher-token")];

/// Tools that answer, fail, run past their time limit, take over a second, and wait for a
/// person; an agent's token
/// that may call them, and a watcher's that may read the metrics only.
fn manifest(server: &str) -> String {
    format!(
        r#"
[server]
{server}

[[auth.tokens]]
sha256 = "{agent}"
principal = "agent"
scopes = ["ops:read"]

[[auth.tokens]]
sha256 = "{watcher}"
principal = "watcher"
scopes = ["metrics:read"]

[[tools]]
name = "hi"
description = "Says hi"
command = ["echo", "hi"]
scopes = ["ops:read"]

[[tools]]
name = "boom"
description = "Always fails"
command = ["false"]
scopes = ["ops:read"]

[[tools]]
name = "stuck"
description = "Runs past its time limit"
command = ["sleep", "30"]
timeout_seconds = 1
scopes = ["ops:read"]

[[tools]]
name = "nap"
description = "Takes a while"
command = ["sleep", "1.2"]
scopes = ["ops:read"]

[[tools]]
name = "wipe"
description = "Needs a person"
command = ["true"]
mutating = true
confirm = "human"
scopes = ["ops:read"]
"#,
        agent = sha256_hex("agent-token"),
        watcher = sha256_hex("watcher-token"),
    )
}

fn start(sb: &Sandbox, server: &str) -> (Server, SocketAddr) {
    sb.write("m.toml", &manifest(server));
    spawn_http(
        sb,
        &["--manifest", "m.toml", "serve", "--http", "127.0.0.1:0"],
    )
}

/// A scrape that must succeed: its text.
fn scrape(addr: SocketAddr, auth: &[(&str, &str)]) -> String {
    let answer = get_with(addr, "/metrics", auth);
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(
        answer.header("content-type"),
        Some("text/plain; version=0.0.4")
    );
    answer.body
}

/// The value of the sample `series` (name and labels as written), if the text has it.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map(|value| value.trim().parse().unwrap())
}

fn value(text: &str, series: &str) -> f64 {
    sample(text, series).unwrap_or_else(|| panic!("no sample {series} in\n{text}"))
}

/// Scrapes until `series` reads `want`, for up to 20 s; the last text.
fn scrape_until(addr: SocketAddr, auth: &[(&str, &str)], series: &str, want: f64) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = scrape(addr, auth);
        if sample(&text, series) == Some(want) || Instant::now() > deadline {
            return text;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether this runs under CI (`CI` set, as CI services set it: `true`, `1`, …), where a
/// missing tool fails the test instead of skipping a check.
fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// `promtool check metrics` finds nothing wrong in `text` (no parse error, no lint
/// finding). Where promtool is not installed the check is skipped, except under CI
/// (`CI=true`): there it must run (`scripts/install-test-deps.sh` installs Debian's
/// `prometheus`).
fn promtool_accepts(text: &str) {
    let spawned = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut promtool = match spawned {
        Ok(child) => child,
        Err(error) if under_ci() => {
            panic!("promtool must run under CI: {error} (Debian package `prometheus`)")
        }
        Err(error) => {
            eprintln!("skipping promtool: {error} (install Debian's `prometheus` package)");
            return;
        }
    };
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = promtool.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool: {said}\n{text}");
    assert_eq!(said.trim(), "", "promtool's findings on\n{text}");
}

#[test]
fn calls_move_the_counters_and_the_text_passes_promtool() {
    let sb = Sandbox::new();
    let (_server, addr) = start(&sb, "");
    let session = initialize(addr, &AGENT);

    // Before any call: the gauges are there, no call is counted yet.
    let before = scrape(addr, &WATCHER);
    assert_eq!(value(&before, "milpa_calls_in_flight"), 0.0);
    assert_eq!(value(&before, "milpa_approvals_pending"), 0.0);
    assert!(
        value(&before, r#"milpa_http_sessions{caller="authenticated"}"#) >= 1.0,
        "{before}"
    );
    assert!(!before.contains("milpa_tool_calls_total{"), "{before}");

    for _ in 0..2 {
        let result = call(addr, &session, &AGENT, "hi", json!({}));
        assert_eq!(result["isError"], false, "{result}");
    }
    let result = call(addr, &session, &AGENT, "boom", json!({}));
    assert_eq!(result["isError"], true, "{result}");
    let result = call(addr, &session, &AGENT, "stuck", json!({}));
    assert_eq!(result["_meta"]["milpa"]["code"], "TIMEOUT", "{result}");
    let result = call(addr, &session, &AGENT, "wipe", json!({}));
    assert_eq!(
        result["_meta"]["milpa"]["code"], "APPROVAL_PENDING",
        "{result}"
    );
    // Names that are no tool count together, under one label, whatever they were.
    call(addr, &session, &AGENT, "no-such-tool", json!({}));
    call(addr, &session, &AGENT, "another\nodd name", json!({}));

    // A slow call is in flight while it runs, and only then.
    let napping = std::thread::spawn({
        let session = session.clone();
        move || call(addr, &session, &AGENT, "nap", json!({}))
    });
    let during = scrape_until(addr, &WATCHER, "milpa_calls_in_flight", 1.0);
    assert_eq!(value(&during, "milpa_calls_in_flight"), 1.0, "{during}");
    let napped = napping.join().unwrap();
    assert_eq!(napped["isError"], false, "{napped}");

    let after = scrape_until(addr, &WATCHER, "milpa_calls_in_flight", 0.0);
    for (series, want) in [
        (
            r#"milpa_tool_calls_total{tool="hi",channel="mcp",outcome="executed"}"#,
            2.0,
        ),
        // The tool ran and answered with an error result (its exit code): the audit
        // outcome is `executed`, as in the audit trail.
        (
            r#"milpa_tool_calls_total{tool="boom",channel="mcp",outcome="executed"}"#,
            1.0,
        ),
        (
            r#"milpa_tool_calls_total{tool="stuck",channel="mcp",outcome="timed_out"}"#,
            1.0,
        ),
        (
            r#"milpa_tool_call_duration_seconds_count{tool="stuck"}"#,
            1.0,
        ),
        (
            r#"milpa_tool_calls_total{tool="wipe",channel="mcp",outcome="approval_pending"}"#,
            1.0,
        ),
        (
            r#"milpa_tool_calls_total{tool="nap",channel="mcp",outcome="executed"}"#,
            1.0,
        ),
        (
            r#"milpa_tool_calls_total{tool="(unknown)",channel="mcp",outcome="not_found"}"#,
            2.0,
        ),
        // Timed: the calls that ran their tool.
        (r#"milpa_tool_call_duration_seconds_count{tool="hi"}"#, 2.0),
        (
            r#"milpa_tool_call_duration_seconds_count{tool="boom"}"#,
            1.0,
        ),
        // The nap took over a second (how much more depends on the machine's load).
        (
            r#"milpa_tool_call_duration_seconds_bucket{tool="nap",le="1"}"#,
            0.0,
        ),
        (
            r#"milpa_tool_call_duration_seconds_bucket{tool="nap",le="300"}"#,
            1.0,
        ),
        (
            r#"milpa_tool_call_duration_seconds_bucket{tool="nap",le="+Inf"}"#,
            1.0,
        ),
        ("milpa_calls_in_flight", 0.0),
        ("milpa_approvals_pending", 1.0),
        // A SQLite store that works has answered no error.
        (r#"milpa_store_errors_total{kind="unavailable"}"#, 0.0),
    ] {
        assert_eq!(value(&after, series), want, "{series} in\n{after}");
    }
    let nap_sum = value(
        &after,
        r#"milpa_tool_call_duration_seconds_sum{tool="nap"}"#,
    );
    assert!((1.2..300.0).contains(&nap_sum), "{nap_sum}");
    // Buckets are cumulative: each holds the narrower ones' calls, and at most all of them.
    let hi_within_1s = value(
        &after,
        r#"milpa_tool_call_duration_seconds_bucket{tool="hi",le="1"}"#,
    );
    let hi_within_1ms = value(
        &after,
        r#"milpa_tool_call_duration_seconds_bucket{tool="hi",le="0.001"}"#,
    );
    assert!(
        hi_within_1ms <= hi_within_1s && hi_within_1s <= 2.0,
        "{after}"
    );
    // A call that ran nothing is not timed.
    assert!(
        sample(
            &after,
            r#"milpa_tool_call_duration_seconds_count{tool="wipe"}"#
        )
        .is_none(),
        "{after}"
    );
    // No label carries a name a caller made up.
    assert!(!after.contains("no-such-tool") && !after.contains("odd name"));
    promtool_accepts(&after);

    // The counters keep moving.
    call(addr, &session, &AGENT, "hi", json!({}));
    let later = scrape(addr, &WATCHER);
    assert_eq!(
        value(
            &later,
            r#"milpa_tool_calls_total{tool="hi",channel="mcp",outcome="executed"}"#
        ),
        3.0
    );
    assert_eq!(
        value(
            &later,
            r#"milpa_tool_call_duration_seconds_count{tool="hi"}"#
        ),
        3.0
    );
}

#[test]
fn metrics_need_a_token_holding_metrics_read() {
    let sb = Sandbox::new();
    let (_server, addr) = start(&sb, "");

    let anonymous = get(addr, "/metrics");
    assert_eq!(anonymous.status, 401, "{}", anonymous.body);
    assert_eq!(anonymous.header("www-authenticate"), Some("Bearer"));
    assert!(!anonymous.body.contains("milpa_"), "{}", anonymous.body);

    let agent = get_with(addr, "/metrics", &AGENT);
    assert_eq!(agent.status, 403, "{}", agent.body);
    assert_eq!(
        agent.header("www-authenticate"),
        Some(r#"Bearer error="insufficient_scope", scope="metrics:read""#)
    );
    assert!(!agent.body.contains("milpa_"), "{}", agent.body);

    let stranger = get_with(addr, "/metrics", &[("Authorization", "Bearer who-knows")]);
    assert_eq!(stranger.status, 401, "{}", stranger.body);

    let text = scrape(addr, &WATCHER);
    assert!(
        text.contains("# TYPE milpa_calls_in_flight gauge"),
        "{text}"
    );
    assert_eq!(
        get_with(addr, "/metrics", &WATCHER).header("cache-control"),
        Some("no-store")
    );
}

#[test]
fn public_metrics_need_no_token() {
    let sb = Sandbox::new();
    let (_server, addr) = start(&sb, r#"metrics = "public""#);
    let anonymous = get(addr, "/metrics");
    assert_eq!(anonymous.status, 200, "{}", anonymous.body);
    assert!(
        anonymous.body.contains("milpa_calls_in_flight 0"),
        "{}",
        anonymous.body
    );
    // The tools stay behind their tokens.
    let session = initialize(addr, &AGENT);
    call(addr, &session, &AGENT, "hi", json!({}));
    let text = get(addr, "/metrics").body;
    assert_eq!(
        value(
            &text,
            r#"milpa_tool_calls_total{tool="hi",channel="mcp",outcome="executed"}"#
        ),
        1.0
    );
    promtool_accepts(&text);
}

#[test]
fn a_bad_metrics_setting_is_refused_naming_the_line() {
    let sb = Sandbox::new();
    sb.write("m.toml", "[server]\nmetrics = \"open\"\n");
    let out = sb
        .milpa()
        .args(["--manifest", "m.toml", "serve", "--http", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("m.toml:2"), "{said}");
    assert!(said.contains("unknown variant `open`"), "{said}");
}

/// The processes `pid` started (from `/proc`, every thread's children).
fn children(pid: u32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect()
}

#[test]
fn an_upstream_that_crashes_is_down_then_counted_restarted() {
    let sb = Sandbox::new();
    let upstream = sb.write(
        "upstream.toml",
        "[[tools]]\nname = \"hi\"\ncommand = [\"echo\", \"hi\"]\n",
    );
    sb.write(
        "m.toml",
        &format!(
            "[server]\nmetrics = \"public\"\n\n[[upstreams]]\nname = \"up\"\ncommand = {}\n",
            common::upstream_command(&upstream)
        ),
    );
    let (server, addr) = spawn_http_command(
        milpa_command(&sb),
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
    let up = r#"milpa_upstream_up{upstream="up"}"#;
    let restarts = r#"milpa_upstream_restarts_total{upstream="up"}"#;
    let text = scrape_until(addr, &[], up, 1.0);
    assert_eq!(value(&text, up), 1.0, "{text}");
    assert_eq!(value(&text, restarts), 0.0, "{text}");

    let upstreams = children(server.0.id());
    assert!(!upstreams.is_empty(), "the upstream runs as a child");
    for pid in upstreams {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let down = scrape_until(addr, &[], up, 0.0);
    assert_eq!(value(&down, up), 0.0, "{down}");
    // Launched again with backoff: up, and counted.
    let back = scrape_until(addr, &[], restarts, 1.0);
    assert_eq!(value(&back, restarts), 1.0, "{back}");
    assert_eq!(value(&back, up), 1.0, "{back}");
    promtool_accepts(&back);
}

#[test]
fn store_errors_are_counted_and_pending_approvals_left_out_while_redis_is_down() {
    let sb = Sandbox::new();
    let mut redis = RedisServer::start();
    let url = redis.url();
    sb.write("m.toml", "[server]\nmetrics = \"public\"\n");
    let (_server, addr) = spawn_http_command(
        milpa_command(&sb),
        &[
            "--store",
            &url,
            "--manifest",
            "m.toml",
            "serve",
            "--http",
            "127.0.0.1:0",
        ],
    );
    let unavailable = r#"milpa_store_errors_total{kind="unavailable"}"#;
    let fine = scrape(addr, &[]);
    assert_eq!(value(&fine, "milpa_approvals_pending"), 0.0, "{fine}");
    let before = value(&fine, unavailable);

    redis.stop();
    // The readiness probe asks the store, which does not answer.
    assert_eq!(get(addr, "/readyz").status, 503);
    let down = scrape(addr, &[]);
    assert!(value(&down, unavailable) > before, "{down}");
    assert!(
        sample(&down, "milpa_approvals_pending").is_none(),
        "not known, so not written: {down}"
    );
    promtool_accepts(&down);
}
