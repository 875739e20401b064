//! No token reaches a log line: every event the server emits while it accepts, refuses and
//! refetches keys for tokens is captured and searched. Alone in its test binary, so the
//! thread-local subscriber sees every event (no other test races tracing's callsite
//! cache).

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::oauth::*;
use jsonwebtoken::{Algorithm, get_current_timestamp};
use serde_json::json;

/// Collects everything the server logs.
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

#[tokio::test]
async fn no_token_reaches_a_log_line() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(captured.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let signer = Signer::new("ec-1", Algorithm::ES256);
    let rotated = Signer::new("ec-2", Algorithm::ES256);
    let jwks = JwksServer::start(vec![signer.jwk.clone()]).await;
    let p = protected_with(&jwks.url, |c| c.refresh_interval(Duration::ZERO), |s| s).await;
    let good = signer.sign(&claims(&p.audience, "ivy", json!("notes:read")));
    let mut expired = claims(&p.audience, "ivy", json!("notes:read"));
    expired["exp"] = json!(get_current_timestamp() - 600);
    let expired = signer.sign(&expired);
    let unknown_kid = rotated.sign(&claims(&p.audience, "ivy", json!("notes:read")));

    let (r, _) = call(p.addr, &good, "whoami", true).await;
    assert_eq!(r.status, 200);
    let (r, _) = call(p.addr, &good, "write_note", false).await;
    assert_eq!(r.status, 403);
    assert_eq!(initialize(p.addr, Some(&expired)).await.status, 401);
    assert_eq!(initialize(p.addr, Some(&unknown_kid)).await.status, 401);

    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    // The capture works: the refusal and the refetch were logged...
    assert!(log.contains("access token refused"), "{log}");
    assert!(log.contains("JWKS refreshed"), "{log}");
    // ...and no token, nor its signature part, is in it.
    for token in [&good, &expired, &unknown_kid] {
        assert!(!log.contains(token.as_str()));
        let signature = token.rsplit('.').next().unwrap();
        assert!(!log.contains(signature));
    }
}
