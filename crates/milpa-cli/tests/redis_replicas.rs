//! Two `milpa serve --http` replicas on one real Redis: one rate budget, one-time tokens,
//! a Redis outage that refuses calls (`UNAVAILABLE`) until Redis is back, with no
//! restart of milpa, and MCP 2026-07-28 requests (no sessions) answered by either replica,
//! a confirmation or an approval asked by one and completed on the other.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::Sandbox;
use common::http::{
    Server, V2026, call, call_2026, initialize, milpa_command, post_2026, spawn_http,
};
use common::redis::RedisServer;
use common::terminal::spawn_decision;
use milpa_mcp::auth::sha256_hex;
use serde_json::{Value, json};

const ALICE: (&str, &str) = ("Authorization", "Bearer alice-token");

fn manifest(max_tokens: u32) -> String {
    format!(
        r#"
[rate_limit]
max_tokens = {max_tokens}
window_seconds = 3600

[[auth.tokens]]
sha256 = "{alice}"
principal = "alice"
scopes = ["ops:write"]

[[tools]]
name = "ping"
description = "Does nothing"
command = ["true"]
scopes = ["ops:write"]

[[tools]]
name = "wipe"
description = "Appends a line to wiped.log"
command = ["sh", "-c", "echo wiped >> wiped.log"]
mutating = true
confirm = true
scopes = ["ops:write"]

[[tools]]
name = "deploy"
description = "Appends a line to deployed.log once a person approves"
command = ["sh", "-c", "echo deployed >> deployed.log"]
mutating = true
confirm = "human"
scopes = ["ops:write"]
"#,
        alice = sha256_hex("alice-token"),
    )
}

/// Two replicas of `milpa serve --http` on `redis`.
fn replicas(sb: &Sandbox, redis: &RedisServer) -> [(Server, SocketAddr); 2] {
    let url = redis.url();
    let args = [
        "--manifest",
        "m.toml",
        "--store",
        url.as_str(),
        "serve",
        "--http",
        "127.0.0.1:0",
    ];
    [spawn_http(sb, &args), spawn_http(sb, &args)]
}

fn code(result: &Value) -> &str {
    result["_meta"]["milpa"]["code"].as_str().unwrap_or("")
}

#[test]
fn two_replicas_share_one_budget() {
    let redis = RedisServer::start();
    let sb = Sandbox::new();
    sb.write("m.toml", &manifest(20));
    let [(_a, a), (_b, b)] = replicas(&sb, &redis);
    let sessions = [initialize(a, &[ALICE]), initialize(b, &[ALICE])];
    let addrs = [a, b];

    // 200 calls of one principal, 20 at a time, alternating between the replicas.
    let results: Vec<Value> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..20)
            .map(|worker| {
                let sessions = &sessions;
                scope.spawn(move || {
                    (0..10)
                        .map(|i| {
                            let r = (worker + i) % 2;
                            call(addrs[r], &sessions[r], &[ALICE], "ping", json!({}))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    assert_eq!(results.len(), 200);
    let allowed = results.iter().filter(|r| r["isError"] == false).count();
    let limited = results.iter().filter(|r| code(r) == "RATE_LIMITED").count();
    let others: Vec<&Value> = results
        .iter()
        .filter(|r| r["isError"] != false && code(r) != "RATE_LIMITED")
        .collect();
    assert!(others.is_empty(), "{others:#?}");
    assert_eq!(allowed, 20, "the budget is 20 across both replicas");
    assert_eq!(limited, 180);
}

#[test]
fn a_token_runs_once_across_replicas_and_an_outage_is_refused_then_survived() {
    let mut redis = RedisServer::start();
    let sb = Sandbox::new();
    sb.write("m.toml", &manifest(1000));
    let [(_a, a), (_b, b)] = replicas(&sb, &redis);
    let sessions = [initialize(a, &[ALICE]), initialize(b, &[ALICE])];
    let addrs = [a, b];

    let asked = call(a, &sessions[0], &[ALICE], "wipe", json!({}));
    let token = asked["structuredContent"]["confirm_token"]
        .as_str()
        .unwrap_or_else(|| panic!("a token: {asked}"))
        .to_owned();
    // Presented 8 times at once, 4 on each replica.
    let answers: Vec<Value> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let (sessions, token) = (&sessions, &token);
                scope.spawn(move || {
                    let r = i % 2;
                    call(
                        addrs[r],
                        &sessions[r],
                        &[ALICE],
                        "wipe",
                        json!({"confirm_token": token}),
                    )
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(
        answers.iter().filter(|r| r["isError"] == false).count(),
        1,
        "{answers:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(sb.path().join("wiped.log")).unwrap(),
        "wiped\n"
    );

    // Redis goes away: calls that need it are refused, the servers keep serving.
    let port = redis.port;
    redis.stop();
    for (r, addr) in addrs.iter().enumerate() {
        let refused = call(*addr, &sessions[r], &[ALICE], "ping", json!({}));
        assert_eq!(refused["isError"], true, "{refused}");
        assert_eq!(code(&refused), "UNAVAILABLE", "{refused}");
    }

    // Redis comes back on the same port: both replicas recover by themselves.
    let _redis = RedisServer::start_on(port);
    for (r, addr) in addrs.iter().enumerate() {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let result = call(*addr, &sessions[r], &[ALICE], "ping", json!({}));
            if result["isError"] == false {
                break;
            }
            assert_eq!(code(&result), "UNAVAILABLE", "{result}");
            assert!(Instant::now() < deadline, "replica {r} did not recover");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// One 2026-07-28 request as alice; its result.
fn modern(addr: SocketAddr, method: &str, params: Value) -> Value {
    call_2026(addr, &[ALICE], method, params)
}

#[test]
fn replicas_answer_2026_requests_alike_and_complete_each_others_rounds() {
    let redis = RedisServer::start();
    let sb = Sandbox::new();
    sb.write("m.toml", &manifest(1000));
    let [(_a, a), (_b, b)] = replicas(&sb, &redis);

    // Discovery and listing, alternating: the same answers.
    let found = [a, b].map(|addr| modern(addr, "server/discover", json!({})));
    assert_eq!(found[0]["supportedVersions"], found[1]["supportedVersions"]);
    assert!(
        found[0]["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!(V2026)),
        "{}",
        found[0]
    );
    let listed = [b, a].map(|addr| modern(addr, "tools/list", json!({})));
    assert_eq!(listed[0]["tools"], listed[1]["tools"]);
    assert_eq!(listed[0]["tools"].as_array().unwrap().len(), 3);

    // A confirmation asked by replica A, answered on replica B: runs once.
    let wipe = json!({"name": "wipe", "arguments": {}});
    let asked = modern(a, "tools/call", wipe.clone());
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    assert_eq!(
        asked["inputRequests"]["confirm"]["params"]["mode"], "form",
        "{asked}"
    );
    let mut answer = wipe.clone();
    answer["requestState"] = asked["requestState"].clone();
    answer["inputResponses"] =
        json!({"confirm": {"action": "accept", "content": {"confirm": true}}});
    let done = modern(b, "tools/call", answer.clone());
    assert_eq!(done["resultType"], "complete", "{done}");
    assert_eq!(done["isError"], false, "{done}");
    assert_eq!(
        std::fs::read_to_string(sb.path().join("wiped.log")).unwrap(),
        "wiped\n"
    );
    // The same answer again, on A: the token is spent in Redis, nothing runs twice.
    let again = modern(a, "tools/call", answer);
    assert_eq!(again["isError"], true, "{again}");
    assert_eq!(
        std::fs::read_to_string(sb.path().join("wiped.log")).unwrap(),
        "wiped\n"
    );

    // A state sealed by a server with another key (another Redis) is refused on both.
    let other_redis = RedisServer::start();
    let other_url = other_redis.url();
    let (_c, c) = spawn_http(
        &sb,
        &[
            "--manifest",
            "m.toml",
            "--store",
            &other_url,
            "serve",
            "--http",
            "127.0.0.1:0",
        ],
    );
    let foreign = modern(c, "tools/call", wipe.clone());
    let mut forged = wipe.clone();
    forged["requestState"] = foreign["requestState"].clone();
    forged["inputResponses"] =
        json!({"confirm": {"action": "accept", "content": {"confirm": true}}});
    for replica in [a, b] {
        let refused = post_2026(replica, &[ALICE], "tools/call", forged.clone());
        assert_eq!(refused.status, 400, "{}", refused.body);
        assert_eq!(
            refused.message()["error"]["code"],
            -32602,
            "{}",
            refused.body
        );
    }

    // A person's approval: parked through B, granted with `milpa approvals grant` on the
    // same Redis, completed through A.
    let deploy = json!({"name": "deploy", "arguments": {}});
    let parked = modern(b, "tools/call", deploy.clone());
    assert_eq!(parked["resultType"], "input_required", "{parked}");
    let ask = &parked["inputRequests"]["approval"]["params"];
    assert_eq!(ask["mode"], "url", "{parked}");
    let id = ask["elicitationId"].as_str().unwrap().to_owned();
    let mut grant = milpa_command(&sb);
    grant
        .args(["--manifest", "m.toml", "--store", &redis.url()])
        .args(["approvals", "grant", &id, "--actor", "bob"]);
    let granted = spawn_decision(grant).wait();
    assert_eq!(granted.code, 0, "{}", granted.stderr);
    let mut resume = deploy;
    resume["requestState"] = parked["requestState"].clone();
    resume["inputResponses"] = json!({"approval": {"action": "accept"}});
    let deployed = modern(a, "tools/call", resume);
    assert_eq!(deployed["resultType"], "complete", "{deployed}");
    assert_eq!(deployed["isError"], false, "{deployed}");
    assert_eq!(
        std::fs::read_to_string(sb.path().join("deployed.log")).unwrap(),
        "deployed\n"
    );
}
