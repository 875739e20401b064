//! The Streamable HTTP endpoint's POST path: the input is the body of a POST within a
//! session initialized once (its first byte picks the `Accept` and `Content-Type` headers).
//! The router must answer every body with a complete response.

#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, to_bytes};
use axum::http::{Request, StatusCode, header};
use libfuzzer_sys::fuzz_target;
use tokio::runtime::Runtime;
use tower::ServiceExt;

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fuzz","version":"0"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// Largest answer read back (a body is at most 4 MiB, answers stay far below).
const ANSWER_LIMIT: usize = 64 << 20;

struct Fixture {
    runtime: Runtime,
    router: Router,
    session: String,
}

fn post(
    body: impl Into<Body>,
    session: Option<&str>,
    accept: &str,
    content_type: &str,
) -> Request<Body> {
    let mut request = Request::post("/mcp")
        .header(header::HOST, "127.0.0.1")
        .header(header::ACCEPT, accept)
        .header(header::CONTENT_TYPE, content_type)
        .header("mcp-protocol-version", "2025-06-18");
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    request.body(body.into()).expect("a request")
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let mut options = milpa_mcp::ServerOptions::default();
        options.elicitation_confirmation = false;
        let router = milpa_mcp::HttpServer::new(milpa_fuzz::registry())
            .options(options)
            .router();
        let session = runtime.block_on(async {
            let answer = router
                .clone()
                .oneshot(post(
                    INITIALIZE,
                    None,
                    "application/json, text/event-stream",
                    "application/json",
                ))
                .await
                .expect("the router answers");
            assert_eq!(answer.status(), StatusCode::OK, "initialize succeeds");
            let session = answer.headers()["mcp-session-id"]
                .to_str()
                .expect("a session id")
                .to_owned();
            let answer = router
                .clone()
                .oneshot(post(
                    INITIALIZED,
                    Some(&session),
                    "application/json, text/event-stream",
                    "application/json",
                ))
                .await
                .expect("the router answers");
            assert!(answer.status().is_success(), "initialized is accepted");
            session
        });
        Fixture {
            runtime,
            router,
            session,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let fixture = fixture();
    let (selector, body) = match data.split_first() {
        Some((first, rest)) => (*first, rest),
        None => (0, data),
    };
    let accept = match selector & 3 {
        0 => "application/json, text/event-stream",
        1 => "text/event-stream",
        2 => "application/json",
        _ => "*/*",
    };
    let content_type = if selector & 4 == 0 {
        "application/json"
    } else {
        "text/plain"
    };
    let session = (selector & 8 == 0).then_some(fixture.session.as_str());
    fixture.runtime.block_on(async {
        let request = post(body.to_vec(), session, accept, content_type);
        let answered = tokio::time::timeout(Duration::from_secs(20), async {
            let answer = fixture
                .router
                .clone()
                .oneshot(request)
                .await
                .expect("the router is infallible");
            let status = answer.status();
            let bytes = to_bytes(answer.into_body(), ANSWER_LIMIT).await;
            (status, bytes)
        })
        .await;
        let (status, bytes) = answered.expect("a POST is answered completely");
        let bytes = bytes.expect("the answer body can be read");
        assert!(
            status != StatusCode::INTERNAL_SERVER_ERROR,
            "a client's body never causes a 500: {:?}",
            String::from_utf8_lossy(&bytes)
        );
    });
});
