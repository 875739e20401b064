//! `/metrics`: the server's counters and gauges in the Prometheus text format (version
//! 0.0.4, `text/plain; version=0.0.4`), for a Prometheus server to scrape.
//!
//! | metric | type | labels | fed by |
//! |---|---|---|---|
//! | `milpa_tool_calls_total` | counter | `tool`, `channel`, `outcome` | [`CallCounts`] (the audit records) |
//! | `milpa_tool_call_duration_seconds` | histogram | `tool` | [`CallCounts`] (`took_ms` of calls that ran) |
//! | `milpa_calls_in_flight` | gauge | | the server's call slots |
//! | `milpa_approvals_pending` | gauge | | the registry's approval queue, this server's items |
//! | `milpa_upstream_up` | gauge | `upstream` | [`UpstreamReports`] |
//! | `milpa_upstream_restarts_total` | counter | `upstream` | [`UpstreamReports`] |
//! | `milpa_store_errors_total` | counter | `kind` | [`StoreError::made`] |
//! | `milpa_http_sessions` | gauge | `caller` | the session table |
//! | `milpa_http_streams` | gauge | `caller` | the stream budget |
//!
//! A call of a name that is no counted tool is labelled `tool="(unknown)"`, a call on a
//! channel without a policy `channel="(other)"` (see [`CallCounts`] for why every label is
//! bounded). `caller` is `anonymous` or `authenticated`; `kind` is `unavailable`, `backend`
//! or `corrupt`.
//!
//! The numbers are read when the scrape comes, never kept up to date for it: the call
//! path pays only [`CallCounts`]' few atomic additions. The pending approvals are read from
//! the store (with a time limit); when the store does not answer, the gauge is left out of
//! that scrape (and the failure shows in `milpa_store_errors_total`).
//!
//! Access ([`MetricsAccess`]): by default a bearer token whose scopes include
//! [`METRICS_SCOPE`] (`401` with `WWW-Authenticate: Bearer` without one, `403` with one
//! lacking the scope; unknown tokens are refused and throttled as on the endpoint), or
//! anyone who can reach the server ([`MetricsAccess::Public`]). Either way the
//! `Host`/`Origin` check runs first.

mod families;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use milpa::audit::CallCounts;
use milpa::{StoreError, StoreErrorKind, scope_matches};
use tower::ServiceBuilder;
use tower_http::validate_request::ValidateRequestHeaderLayer;

use super::HttpState;
use super::identity::{self, Gate};
use crate::listener::HostOriginCheck;
use crate::session::Caller;
use families::{ByCaller, Scrape};

/// Where the metrics are served.
pub(crate) const METRICS_PATH: &str = "/metrics";

/// The scope a token needs to read `/metrics` (unless it is public).
pub const METRICS_SCOPE: &str = "metrics:read";

/// The most pending approvals counted (the gauge stops there).
const APPROVALS_COUNTED: usize = 1000;

/// How long a scrape waits for the store to count pending approvals.
const APPROVALS_TIMEOUT: Duration = Duration::from_secs(2);

/// Who may read `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum MetricsAccess {
    /// A bearer token holding [`METRICS_SCOPE`] (the default).
    #[default]
    Token,
    /// Anyone who reaches the server (behind the `Host`/`Origin` check): for a server only
    /// a local Prometheus can reach.
    Public,
}

/// How one upstream server stands, for `/metrics`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UpstreamReport {
    /// Its name (the `upstream` label).
    pub name: String,
    /// Whether it serves calls now.
    pub up: bool,
    /// How many times it was launched again after its process died.
    pub restarts: u64,
}

impl UpstreamReport {
    /// Upstream `name`, up or not, restarted `restarts` times.
    pub fn new(name: impl Into<String>, up: bool, restarts: u64) -> UpstreamReport {
        UpstreamReport {
            name: name.into(),
            up,
            restarts,
        }
    }
}

/// What `/metrics` asks about upstream servers (a gateway's). Keep it quick: it is asked on
/// every scrape.
///
/// ```
/// use milpa_mcp::{UpstreamReport, UpstreamReports};
///
/// struct One;
/// impl UpstreamReports for One {
///     fn upstreams(&self) -> Vec<UpstreamReport> {
///         vec![UpstreamReport::new("files", true, 0)]
///     }
/// }
/// ```
pub trait UpstreamReports: Send + Sync + 'static {
    /// Each upstream, as it stands now.
    fn upstreams(&self) -> Vec<UpstreamReport>;
}

/// What the route reads.
pub(crate) struct Sources {
    pub access: MetricsAccess,
    pub calls: Option<Arc<CallCounts>>,
    pub upstreams: Option<Arc<dyn UpstreamReports>>,
    pub http: Arc<HttpState>,
}

/// The `/metrics` router, behind the `Host`/`Origin` check and, unless public, the caller's
/// identity from `gate`.
pub(crate) fn router(sources: Sources, gate: Arc<Gate>, hosts: HostOriginCheck) -> Router {
    let public = sources.access == MetricsAccess::Public;
    let route = Router::new()
        .route(METRICS_PATH, axum::routing::get(scrape))
        .with_state(Arc::new(sources));
    let route = if public {
        route
    } else {
        route.layer(axum::middleware::from_fn_with_state(
            gate,
            identity::authenticate,
        ))
    };
    route.layer(ServiceBuilder::new().layer(ValidateRequestHeaderLayer::custom(hosts)))
}

async fn scrape(
    State(sources): State<Arc<Sources>>,
    caller: Option<axum::Extension<Caller>>,
) -> Response {
    if sources.access == MetricsAccess::Token
        && let Some(refused) = refusal(caller.as_ref().map(|c| &c.0))
    {
        return refused;
    }
    let state = &sources.http;
    let pending = tokio::time::timeout(
        APPROVALS_TIMEOUT,
        state
            .shared
            .registry
            .approvals()
            .pending_here(APPROVALS_COUNTED),
    )
    .await;
    let approvals_pending = match pending {
        Ok(Ok(pending)) => Some(pending.len()),
        Ok(Err(error)) => {
            tracing::warn!(target: "milpa_mcp", %error, "/metrics: the pending approvals could not be counted");
            None
        }
        Err(_) => {
            tracing::warn!(target: "milpa_mcp", "/metrics: the store took too long to count the pending approvals");
            None
        }
    };
    let (anonymous, authenticated) = state.sessions.open();
    let sessions = ByCaller {
        anonymous,
        authenticated,
    };
    let (anonymous, authenticated) = state.streams.open_now_by_class();
    let streams = ByCaller {
        anonymous,
        authenticated,
    };
    let facts = Scrape {
        calls: sources.calls.as_ref().map(|c| c.read()).unwrap_or_default(),
        in_flight: state
            .call_slot_count
            .saturating_sub(state.call_slots.available_permits()),
        approvals_pending,
        upstreams: sources
            .upstreams
            .as_ref()
            .map(|u| u.upstreams())
            .unwrap_or_default(),
        store_errors: StoreErrorKind::ALL
            .iter()
            .map(|kind| (*kind, StoreError::made(*kind)))
            .collect(),
        sessions,
        streams,
    };
    match facts.into_text() {
        Ok(text) => (
            StatusCode::OK,
            [
                (
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(prometheus::TEXT_FORMAT),
                ),
                (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            ],
            text,
        )
            .into_response(),
        Err(error) => {
            tracing::error!(target: "milpa_mcp", %error, "/metrics: the metrics could not be written");
            plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Internal Server Error: the metrics could not be written",
                None,
            )
        }
    }
}

/// Why `caller` may not read the metrics, if it may not: `401` without a token, `403`
/// without the scope.
fn refusal(caller: Option<&Caller>) -> Option<Response> {
    let Some(caller) = caller.filter(|c| c.principal.is_some()) else {
        return Some(plain(
            StatusCode::UNAUTHORIZED,
            "Unauthorized: /metrics needs a bearer token (Authorization: Bearer) holding the scope metrics:read",
            Some(HeaderValue::from_static("Bearer")),
        ));
    };
    if caller
        .scopes
        .iter()
        .any(|held| scope_matches(held, METRICS_SCOPE))
    {
        return None;
    }
    Some(plain(
        StatusCode::FORBIDDEN,
        "Forbidden: this token does not hold the scope metrics:read",
        Some(HeaderValue::from_static(
            "Bearer error=\"insufficient_scope\", scope=\"metrics:read\"",
        )),
    ))
}

/// A short text answer, with a `WWW-Authenticate` challenge when given.
fn plain(status: StatusCode, text: &'static str, challenge: Option<HeaderValue>) -> Response {
    let mut response = (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        )],
        text,
    )
        .into_response();
    if let Some(challenge) = challenge {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, challenge);
    }
    response
}
