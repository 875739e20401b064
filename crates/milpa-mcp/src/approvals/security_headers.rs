//! The response headers every approvals page carries, as tower layers.
//!
//! - `Content-Security-Policy`: nothing loads from anywhere (`default-src 'none'`) but the
//!   inline stylesheet; forms post only to this origin; no page may frame this one. The
//!   queue (its refresh script, which fetches `/approvals/live`) and the pages of an
//!   approver with a passkey (`/approvals/passkeys.js`, which calls the page's own challenge
//!   endpoint) also run scripts and requests from the page's own origin, and only those
//!   (`script-src 'self'; connect-src 'self'`: no inline script, no `eval`).
//! - `X-Frame-Options: DENY` for browsers that predate `frame-ancestors` (clickjacking).
//! - `Cache-Control: no-store`: a decision page never comes back from a cache or history.
//! - `Referrer-Policy: same-origin`: no URL of the page leaves the page. Not
//!   `no-referrer`: under it browsers send `Origin: null` with the page's own form posts,
//!   which the `Origin` check (rightly) refuses.
//! - `X-Content-Type-Options: nosniff`.

use axum::Router;
use axum::http::{HeaderName, HeaderValue, header};
use axum::response::Response;
use tower_http::set_header::SetResponseHeaderLayer;

/// The page's content security policy.
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The policy of a page that runs a script of its own (the refresh, the passkey ceremonies):
/// the same, plus scripts and requests from the page's own origin only (no inline script,
/// no `eval`).
pub(crate) const SCRIPTED_CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// `response` with the content security policy that lets the page run its own scripts.
pub(crate) fn with_script_policy(mut response: Response) -> Response {
    response.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(SCRIPTED_CONTENT_SECURITY_POLICY),
    );
    response
}

const HEADERS: [(HeaderName, &str); 4] = [
    (header::X_FRAME_OPTIONS, "DENY"),
    (header::CACHE_CONTROL, "no-store"),
    (header::REFERRER_POLICY, "same-origin"),
    (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
];

/// `router` with the headers set on every response (replacing any a handler set, except
/// that a handler may choose the passkey page's policy).
pub(crate) fn apply(mut router: Router) -> Router {
    router = router.layer(SetResponseHeaderLayer::if_not_present(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    ));
    for (name, value) in HEADERS {
        router = router.layer(SetResponseHeaderLayer::overriding(
            name,
            HeaderValue::from_static(value),
        ));
    }
    router
}
