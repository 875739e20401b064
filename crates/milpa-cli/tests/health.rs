//! `serve --http`'s probes: `/healthz` (alive) and `/readyz` (the store answers, each
//! upstream is up), across a real Redis going away and coming back.

mod common;

use std::time::{Duration, Instant};

use common::Sandbox;
use common::http::{get, milpa_command, spawn_http_command};
use common::redis::RedisServer;
use serde_json::{Value, json};

fn body(response: &common::http::Response) -> Value {
    serde_json::from_str(&response.body).unwrap_or_else(|e| panic!("{e}: {}", response.body))
}

/// Polls `/readyz` until it answers `status`, for up to 20 s; the last answer.
fn ready_becomes(addr: std::net::SocketAddr, status: u16) -> common::http::Response {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let answer = get(addr, "/readyz");
        if answer.status == status || Instant::now() > deadline {
            return answer;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_default_store_is_ready_and_the_process_alive() {
    let sb = Sandbox::new();
    let (_server, addr) =
        spawn_http_command(milpa_command(&sb), &["serve", "--http", "127.0.0.1:0"]);
    let alive = get(addr, "/healthz");
    assert_eq!(alive.status, 200);
    assert_eq!(body(&alive), json!({"status": "alive"}));
    let ready = get(addr, "/readyz");
    assert_eq!(ready.status, 200, "{}", ready.body);
    assert_eq!(ready.header("cache-control"), Some("no-store"));
    let ready = body(&ready);
    assert_eq!(ready["status"], "ready");
    assert_eq!(ready["checks"][0]["name"], "store");
    assert_eq!(ready["checks"][0]["ready"], true);
    assert!(
        ready["checks"][0]["detail"]
            .as_str()
            .unwrap()
            .starts_with("sqlite:"),
        "{ready}"
    );
}

#[test]
fn readiness_follows_redis_down_and_back() {
    let sb = Sandbox::new();
    let mut redis = RedisServer::start();
    let port = redis.port;
    let url = redis.url();
    let (_server, addr) = spawn_http_command(
        milpa_command(&sb),
        &["--store", &url, "serve", "--http", "127.0.0.1:0"],
    );
    let ready = ready_becomes(addr, 200);
    assert_eq!(ready.status, 200, "{}", ready.body);

    redis.stop();
    let down = ready_becomes(addr, 503);
    assert_eq!(down.status, 503, "{}", down.body);
    let down = body(&down);
    assert_eq!(down["status"], "not_ready");
    assert_eq!(down["checks"][0]["name"], "store");
    assert_eq!(down["checks"][0]["ready"], false);
    assert!(
        down["checks"][0]["detail"]
            .as_str()
            .unwrap()
            .starts_with(&url),
        "{down}"
    );
    // Alive all the while: the process answers, it just should not get traffic.
    assert_eq!(get(addr, "/healthz").status, 200);

    let _redis = RedisServer::start_on(port);
    let back = ready_becomes(addr, 200);
    assert_eq!(back.status, 200, "{}", back.body);
    assert_eq!(body(&back)["status"], "ready");
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
fn readiness_follows_an_upstream_that_crashes_and_is_restarted() {
    let sb = Sandbox::new();
    let upstream = sb.write(
        "upstream.toml",
        "[[tools]]\nname = \"hi\"\ncommand = [\"echo\", \"hi\"]\n",
    );
    sb.write(
        "m.toml",
        &format!(
            "[[upstreams]]\nname = \"up\"\ncommand = {}\n",
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
    let ready = body(&ready_becomes(addr, 200));
    assert_eq!(
        ready["checks"][1],
        json!({"name": "upstream:up", "ready": true, "detail": "ready"})
    );

    let upstreams = children(server.0.id());
    assert!(!upstreams.is_empty(), "the upstream runs as a child");
    for pid in upstreams {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let down = ready_becomes(addr, 503);
    assert_eq!(down.status, 503, "{}", down.body);
    let down = body(&down);
    assert_eq!(
        down["checks"][0]["ready"], true,
        "the store is fine: {down}"
    );
    assert_eq!(down["checks"][1]["name"], "upstream:up");
    assert_eq!(down["checks"][1]["ready"], false);

    // Restarted with backoff: ready again.
    let back = ready_becomes(addr, 200);
    assert_eq!(back.status, 200, "{}", back.body);
}
