//! The approvals page: where a person sees what waits for a decision and decides it, from
//! a browser, on the same listener as the MCP endpoint (`/approvals`).
//!
//! - `GET /approvals`: signed out, a login form (one field, `token`: a bearer token the
//!   server's [`Authenticator`] knows; it is posted, never put in a URL). Signed in, every
//!   pending approval (`data-approval-id="<id>"`) with its summary, the tool, badges for
//!   whether it changes state (`Mutating` / `Read-only`) and for the upstream it goes to,
//!   what the tool does, who asked through which client (MCP `clientInfo.name`, as the
//!   client named itself) on which server and channel, the redacted arguments, age and
//!   expiry, and the last decisions. A principal holding `approvals:grant` gets a form per
//!   item (an optional `reason`, a line saying what a grant and a reject do, buttons
//!   `decision=grant` and `decision=reject`), except on the items it asked for itself.
//!   An upstream tool or prompt whose definition changed since it was pinned shows the
//!   upstream that changed it, its description before and now, and the diff of the rest
//!   ([`definition_diff`]).
//!   The list refreshes itself every 15 s ([`DEFAULT_REFRESH`]) without losing a
//!   half-written reason; calls parked before the tool's facts were kept show what they
//!   have.
//! - `GET /approvals/live`, `GET /approvals/refresh.js`: the list alone and the script that
//!   fetches it again and puts it in place (`src/approvals/refresh.rs` says how).
//! - `GET /approvals/{id}`: one approval (the `approve_url` of a parked call), or why it
//!   cannot be decided any more.
//! - `POST /approvals/login`, `POST /approvals/logout`, `POST /approvals/{id}`: forms,
//!   each with a CSRF token, answered with `303` when they went through.
//!
//! Decisions go through [`ToolRegistry::decide_approval`] on the `web` channel as the
//! signed-in principal, so the core's rules apply (named approver, scope, never the
//! caller of the parked call) and each decision is audited. A refusal is shown with the
//! status that says which: `403` (self-approval, missing scope, bad CSRF token), `404`,
//! `409` (already decided or expired), `401` (not signed in).
//!
//! Failed sign-ins are counted per client address: after 5 within 5 minutes the address
//! gets `429` with `Retry-After` until the 5 minutes are over (each failure is logged
//! with the address; the counting is the listener's `FailureThrottle`, the one that
//! also counts bad bearer tokens, here with the limits `SIGN_IN_THROTTLE`).
//!
//! Sessions live in memory (random 128-bit ids, at most 1000, ended after 30 min idle or
//! 12 h, and on logout); the browser holds the id in an `HttpOnly`, `SameSite=Strict`
//! cookie scoped to `/approvals` (`Secure` too when a proxy says the request came over
//! https with `X-Forwarded-Proto`; on plain loopback http a `Secure` cookie would never be
//! sent back). The login form carries its own CSRF token, in a cookie of the same kind.
//! The page's requests pass the same `Host`/`Origin` checks as `/mcp`, so another site can
//! neither read it (DNS rebinding) nor post to it, and then a stricter one: a browser's
//! `Origin` must be the page's own scheme, host and port (another port on the same machine
//! is another site); signing in needs a token carrying `approvals:grant`, and the sign-in
//! form's CSRF token is signed by the server (`login_csrf.rs`); every response carries a strict
//! `Content-Security-Policy` (nothing loads but the inline stylesheet and the page's own
//! scripts, forms post only here, no framing), `X-Frame-Options: DENY`, `Cache-Control: no-store` and
//! `Referrer-Policy: same-origin`. Forms are capped at 16 KiB, reasons at
//! [`MAX_REASON_CHARS`] characters; every text an agent or a person supplied is
//! HTML-escaped.
//!
//! [`Authenticator`]: crate::auth::Authenticator
//! [`ToolRegistry::decide_approval`]: milpa::ToolRegistry::decide_approval

mod cookies;
mod definition_diff;
mod form;
mod html_escaper;
mod login_csrf;
mod logins;
mod own_origin;
mod passkey_routes;
pub mod passkeys;
mod path_segment;
mod refresh;
mod relative_time;
mod render;
mod routes;
mod security_headers;
mod signed_in_form;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::HeaderMap;
use axum::routing::{get, post};
use milpa::ToolRegistry;
use tower_http::validate_request::ValidateRequestHeaderLayer;

use crate::auth::Authenticator;
use crate::listener::HostOriginCheck;
use crate::listener::throttle::{FailureThrottle, ThrottleLimits};
pub use definition_diff::definition_diff;
use login_csrf::LoginCsrf;
pub(crate) use logins::LoginLimits;
use logins::{Login, LoginSessions};
use own_origin::OwnOrigin;
use passkeys::Passkeys;
pub use passkeys::{PasskeyConfigError, PasskeyOptions};
pub use refresh::DEFAULT_REFRESH;

/// Where the page is served.
pub const PAGE_PATH: &str = "/approvals";

/// The longest reason a decision may carry, in characters.
pub const MAX_REASON_CHARS: usize = 500;

/// How failed sign-ins are counted per client address: after 5 within 5 minutes (from the
/// address's first), the address is refused until the 5 minutes are over. The delay is the
/// bearer tokens' only; a refused sign-in is answered at once.
const SIGN_IN_THROTTLE: ThrottleLimits = ThrottleLimits {
    max_failures: 5,
    window: Duration::from_secs(300),
    delay: Duration::ZERO,
    max_addresses: 10_000,
};

/// What the page's handlers share.
pub(crate) struct PageState {
    registry: Arc<ToolRegistry>,
    auth: Option<Arc<dyn Authenticator>>,
    logins: LoginSessions,
    login_csrf: LoginCsrf,
    origin: OwnOrigin,
    passkeys: Passkeys,
    sign_in_throttle: FailureThrottle,
    body_read_timeout: Duration,
    /// How often the queue fetches its list again (zero: never).
    refresh: Duration,
}

impl PageState {
    /// The page for `registry`'s approval queue, signing people in through `auth`, with
    /// passkeys as `passkeys` says, the queue fetched again every `refresh` (zero: never).
    /// A relying party `passkeys` cannot describe (check it first with
    /// [`PasskeyOptions::check`]) is logged and replaced by the default one on the same
    /// store: enrolled approvers' assertions then fail, so nothing is decided without a
    /// passkey.
    pub(crate) fn new(
        registry: Arc<ToolRegistry>,
        auth: Option<Arc<dyn Authenticator>>,
        limits: LoginLimits,
        body_read_timeout: Duration,
        passkeys: PasskeyOptions,
        refresh: Duration,
    ) -> Arc<PageState> {
        let origin = OwnOrigin::new(passkeys.origin.as_deref());
        let store = passkeys.store.clone();
        let passkeys = Passkeys::new(passkeys).unwrap_or_else(|error| {
            tracing::error!(target: "milpa_mcp", error = %error, "approvals page: passkeys misconfigured");
            Passkeys::new(PasskeyOptions::new(store)).expect("the default relying party is valid")
        });
        Arc::new(PageState {
            registry,
            auth,
            logins: LoginSessions::new(limits),
            login_csrf: LoginCsrf::new(),
            origin,
            passkeys,
            sign_in_throttle: FailureThrottle::new(SIGN_IN_THROTTLE),
            body_read_timeout,
            refresh,
        })
    }

    /// The signed-in session the request's cookie names, if it is live.
    fn login(&self, headers: &HeaderMap) -> Option<Login> {
        self.logins.find(cookies::read(headers, cookies::SESSION)?)
    }

    /// The signed-in session the request's cookie names, if it is live, without counting
    /// the request as the person's (see [`LoginSessions::find_unattended`]).
    fn unattended_login(&self, headers: &HeaderMap) -> Option<Login> {
        self.logins
            .find_unattended(cookies::read(headers, cookies::SESSION)?)
    }

    /// Whether anyone can sign in (there is an authenticator to check tokens).
    fn can_log_in(&self) -> bool {
        self.auth.is_some()
    }
}

/// Whether an MCP endpoint at `mcp_path` leaves room for the page.
pub(crate) fn fits_beside(mcp_path: &str) -> bool {
    let mcp_path = mcp_path.trim_end_matches('/');
    mcp_path != PAGE_PATH && !mcp_path.starts_with("/approvals/")
}

/// The page's routes with their checks: `Host`/`Origin` first, then the handlers; every
/// response gets the security headers.
pub(crate) fn router(state: Arc<PageState>, hosts: HostOriginCheck) -> Router {
    let origin = state.origin.clone();
    let routes = Router::new()
        .route(PAGE_PATH, get(routes::queue))
        .route(
            "/approvals/login",
            get(routes::login_get).post(routes::login),
        )
        .route("/approvals/logout", post(routes::logout))
        .route("/approvals/passkeys.js", get(passkey_routes::script))
        .route("/approvals/refresh.js", get(refresh::script))
        .route("/approvals/live", get(refresh::live))
        .route(
            "/approvals/enroll/{token}",
            get(passkey_routes::enrol_page).post(passkey_routes::enrol),
        )
        .route("/approvals/{id}", get(routes::item).post(routes::decide))
        .route("/approvals/{id}/challenge", post(passkey_routes::challenge))
        .with_state(state)
        .layer(ValidateRequestHeaderLayer::custom(origin))
        .layer(ValidateRequestHeaderLayer::custom(hosts));
    security_headers::apply(routes)
}
