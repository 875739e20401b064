//! Reads from upstreams are bounded: a stdio line over `max_message_bytes` (default 16 MiB)
//! fails the call with `UPSTREAM_UNAVAILABLE` naming the limit and resets the session (the
//! server is started again); a child writing endless standard error without a newline
//! costs a bounded line; milpa's memory stays bounded and the other upstreams and local
//! tools keep answering. The hostile server is `examples/odd_upstream.rs`.

mod common;

use std::time::{Duration, Instant};

use common::stdio::StdioClient;
use common::{Sandbox, odd_command};
use serde_json::{Value, json};

fn code(result: &Value) -> &str {
    result["_meta"]["milpa"]["code"].as_str().unwrap_or("")
}

/// The peak resident memory of process `pid`, in KiB (`VmHWM`).
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

#[test]
fn an_over_size_line_fails_the_call_resets_the_upstream_and_memory_stays_bounded() {
    let sb = Sandbox::new();
    let manifest = sb.write(
        "m.toml",
        &format!(
            "[[tools]]\nname = \"local\"\ncommand = [\"echo\", \"here\"]\n\
             [[upstreams]]\nname = \"odd\"\ncommand = {}\nmax_message_bytes = 1048576\n\
             [[upstreams]]\nname = \"noisy\"\ncommand = {}\n",
            odd_command(&[]),
            odd_command(&["--stderr-flood"])
        ),
    );
    let mut serve = common::http::milpa_command(&sb);
    serve
        .args(["--store", "memory", "--manifest"])
        .arg(&manifest)
        .arg("serve");
    let mut client = StdioClient::start(serve, &sb.path().join("serve.err"));
    client.wait_for_tool("odd__echo");
    client.wait_for_tool("noisy__echo");

    let first_pid = client.call("odd__pid", json!({}))["content"][0]["text"].clone();
    // 64 MiB on one line, against a 1 MiB limit.
    let huge = client.call("odd__huge", json!({"bytes": 64 << 20}));
    assert_eq!(huge["isError"], true, "{huge}");
    assert_eq!(code(&huge), "UPSTREAM_UNAVAILABLE", "{huge}");
    let text = huge["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("it sent a message over 1048576 bytes (max_message_bytes)"),
        "{text}"
    );

    // The session was reset: the server is started again, a new process.
    let deadline = Instant::now() + Duration::from_secs(20);
    let again = loop {
        let answer = client.call("odd__pid", json!({}));
        if answer["isError"] == false {
            break answer["content"][0]["text"].clone();
        }
        assert!(Instant::now() < deadline, "never back: {answer}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_ne!(again, first_pid);

    // The default limit (16 MiB) holds for the upstream flooding its standard error too,
    // which keeps answering meanwhile, as do the local tools.
    let noisy = client.call("noisy__echo", json!({"text": "still here"}));
    assert_eq!(noisy["content"][0]["text"], "still here", "{noisy}");
    let huge = client.call("noisy__huge", json!({"bytes": 64 << 20}));
    assert_eq!(code(&huge), "UPSTREAM_UNAVAILABLE", "{huge}");
    assert!(
        huge["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("over 16777216 bytes"),
        "{huge}"
    );
    let local = client.call("local", json!({}));
    assert_eq!(local["content"][0]["text"], "here", "{local}");
    let echoed = client.call("odd__echo", json!({"text": "fine"}));
    assert_eq!(echoed["content"][0]["text"], "fine", "{echoed}");

    // Two 64 MiB lines and a stderr flood later, milpa's peak memory stays small.
    let peak = peak_rss_kib(client.pid());
    eprintln!("milpa peak RSS: {} MiB", peak / 1024);
    assert!(peak < 160 * 1024, "peak RSS {peak} KiB");
    let log = std::fs::read_to_string(sb.path().join("serve.err")).unwrap();
    assert!(
        log.contains("a line of its standard error over 8192 bytes was dropped"),
        "{}",
        &log[..log.len().min(4000)]
    );
}
