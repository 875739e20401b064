//! Upstreams start in the background: [`Upstream::spawn`] returns at once, an upstream that
//! cannot start is down (never fatal) and is tried again with backoff, and once it can
//! start its tools appear in the registry following it, which tells its watchers. Over
//! stdio (the `stdio_server` example behind a gate the test opens) and over HTTP (the
//! `asking_server` example started late on the address the upstream was given).

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use milpa::{ToolContext, ToolRegistry};
use milpa_gateway::{Upstream, UpstreamConfig, UpstreamState};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::time::Instant;

/// An example server, built by `cargo test` next to this test's binary.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let debug = exe.parent().unwrap().parent().unwrap();
    let server = debug.join("examples").join(name);
    assert!(
        server.exists(),
        "{} is built by cargo test",
        server.display()
    );
    server
}

fn names(registry: &ToolRegistry) -> Vec<String> {
    registry.tool_names().map(|n| n.to_string()).collect()
}

/// Waits (up to 20 s) until `upstream` is ready.
async fn until_ready(upstream: &Upstream) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while upstream.state() != UpstreamState::Ready {
        assert!(
            Instant::now() < deadline,
            "still not ready: {}",
            upstream.state()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_stdio_upstream_that_cannot_start_is_down_and_comes_up_when_it_can() {
    let dir = std::env::temp_dir().join(format!("milpa-gw-start-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let gate = dir.join("open");
    let _ = std::fs::remove_file(&gate);
    // Exits at once (before any handshake) until the gate file exists.
    let script = format!(
        "test -f '{}' || exit 3; exec '{}'",
        gate.display(),
        example("stdio_server").display()
    );
    let config = UpstreamConfig::stdio("ex", vec!["sh".into(), "-c".into(), script]);
    let registry = Arc::new(ToolRegistry::new());
    let mut changes = registry.tool_list_changes();
    changes.borrow_and_update();

    let began = Instant::now();
    let upstream = Upstream::spawn(config);
    upstream.follow_tool_list(&registry);
    assert!(
        began.elapsed() < Duration::from_millis(200),
        "spawn returns at once"
    );
    assert_eq!(upstream.state(), UpstreamState::Starting);
    assert!(names(&registry).is_empty());

    upstream.settled().await;
    let state = upstream.state();
    match &state {
        UpstreamState::Down { why, .. } => {
            assert!(why.starts_with("upstream `ex`: initialize failed"), "{why}")
        }
        other => panic!("expected down, got {other}"),
    }
    assert!(names(&registry).is_empty());
    // A call to it meanwhile is refused, not hung.
    assert!(registry.get("ex__echo").is_none());

    std::fs::write(&gate, "").unwrap();
    until_ready(&upstream).await;
    assert!(
        names(&registry).contains(&"ex__echo".to_owned()),
        "{:?}",
        names(&registry)
    );
    assert!(
        changes.has_changed().unwrap(),
        "the registry's watchers were told"
    );
    let echoed = registry
        .call("ex__echo", json!({"text": "up now"}), &ToolContext::cli())
        .await;
    assert!(echoed.success, "{echoed:?}");
    assert_eq!(echoed.data["content"][0]["text"], "up now");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn an_http_upstream_not_listening_yet_is_down_and_comes_up_when_it_listens() {
    // A free loopback port, nothing listening on it yet.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let url = format!("http://{addr}/mcp");
    let registry = Arc::new(ToolRegistry::new());
    let upstream = Upstream::spawn(UpstreamConfig::http("as", url.clone(), None));
    upstream.follow_tool_list(&registry);
    upstream.settled().await;
    match upstream.state() {
        UpstreamState::Down { why, .. } => {
            assert!(why.contains(&format!("could not reach {url}")), "{why}")
        }
        other => panic!("expected down, got {other}"),
    }
    assert!(names(&registry).is_empty());

    let mut server = tokio::process::Command::new(example("asking_server"))
        .args(["--http", &addr.to_string()])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let printed = BufReader::new(server.stdout.take().unwrap())
        .lines()
        .next_line()
        .await
        .unwrap();
    assert_eq!(printed.as_deref(), Some(url.as_str()));
    until_ready(&upstream).await;
    assert_eq!(
        names(&registry),
        [
            "as__toggle_extra",
            "as__ask_model",
            "as__ask_user",
            "as__say"
        ]
    );
}
