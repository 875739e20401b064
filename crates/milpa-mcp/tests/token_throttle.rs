//! Refused bearer tokens are throttled per client address: past the budget, `429` with
//! `Retry-After`; an accepted token from the same address keeps working; every refusal is
//! logged with the address and never the token. Alone in its test binary, so the
//! thread-local subscriber sees every event.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{JSON_HEADERS, fixture, http};
use milpa_mcp::HttpServer;
use milpa_mcp::auth::StaticTokens;
use serde_json::json;

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

fn discover() -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }}})
    .to_string()
    .into_bytes()
}

#[tokio::test]
async fn the_eleventh_bad_token_from_an_address_gets_429_and_a_good_one_still_works() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_writer(captured.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let mut tokens = StaticTokens::new();
    tokens.insert_token("good-token", "alice", ["*"]);
    let (addr, _stop) =
        common::start_http(HttpServer::new(fixture().registry).authenticator(tokens)).await;
    let with_token = |token: &'static str| {
        let mut headers = JSON_HEADERS.to_vec();
        headers.push(("MCP-Protocol-Version", "2026-07-28"));
        headers.push(("Mcp-Method", "server/discover"));
        headers.push(("Authorization", token));
        headers
    };

    for i in 0..10 {
        let r = http(addr, "POST", &with_token("Bearer guess-nr-x"), &discover()).await;
        assert_eq!(r.status, 401, "failure {i}: {}", r.body);
    }
    let r = http(addr, "POST", &with_token("Bearer guess-nr-x"), &discover()).await;
    assert_eq!(r.status, 429, "{}", r.body);
    let retry: u64 = r
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("Too Many Requests"),
        "{}",
        r.body
    );

    // The rightful client on the same address is not locked out.
    let r = tokio::time::timeout(
        Duration::from_secs(5),
        http(addr, "POST", &with_token("Bearer good-token"), &discover()),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    // A further bad one is still throttled.
    let r = http(addr, "POST", &with_token("Bearer guess-nr-x"), &discover()).await;
    assert_eq!(r.status, 429);

    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(
        log.contains("bearer token refused") && log.contains("ip=127.0.0.1"),
        "{log}"
    );
    assert!(log.contains("this address is throttled"), "{log}");
    assert!(!log.contains("guess-nr-x") && !log.contains("good-token"));
}
