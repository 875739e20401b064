//! The Streamable HTTP transport (one endpoint, `/mcp` by default).
//!
//! - `POST` carries client messages. `initialize` creates a session (`Mcp-Session-Id` in the
//!   response); later requests must send that header (`400` without it, `404` for an unknown
//!   or ended session). Notifications and responses get `202 Accepted`. A `tools/call` is
//!   answered with an SSE stream (its progress, log messages and requests to the client,
//!   then the response) when the client accepts `text/event-stream`, otherwise with JSON;
//!   other requests are answered with JSON. Several streams per session run at once.
//! - `GET` opens a standalone SSE stream for messages not tied to a request (and for a
//!   call's messages when its response is sent as JSON).
//! - `DELETE` ends the session: its running calls are cancelled (and audited so).
//!
//! Every request's `Host` must name an allowed host (by default the loopback names
//! `localhost`, `127.0.0.1` and `[::1]`, any port) and its `Origin`, when present, an allowed
//! origin — the DNS-rebinding defence; others get `403`. Bodies over
//! [`ServerOptions::max_message_bytes`] get `413`, bodies slower than the body read timeout
//! `408`. Anonymous bodies are smaller when no tool runs anonymously, and all of them
//! together hold a bounded number of bytes ([`HttpServer::anonymous_max_body_bytes`],
//! [`HttpServer::anonymous_body_buffer_bytes`]). `Authorization: Bearer` tokens map to a principal and scopes through an
//! [`Authenticator`]; without a token the caller is anonymous, and a token the
//! authenticator does not know gets `401` before any of the body is read (`429` with
//! `Retry-After` once its address has had too many refused, see
//! [`HttpServer::failed_token_limit`]). With an OAuth
//! resource server ([`HttpServer::oauth`]) access tokens are accepted too, every request
//! needs a valid token (`401` with a challenge otherwise), a call denied for a missing scope
//! gets `403 insufficient_scope`, and the RFC 9728 metadata is served.
//!
//! A session is bound to the principal that created it; a request with another identity
//! cannot use it. Sessions idle for longer than the idle timeout (default 30 min, 5 min for
//! anonymous ones) are ended. Each principal, and anonymous callers together, may hold a
//! limited number of sessions; anonymous sessions never count against principals.
//!
//! Resources are bounded: open connections (the next one waits until one closes; anonymous
//! callers never hold the reserved share, [`HttpServer::reserved_connections`]), long-lived
//! streams per principal and for anonymous callers together, with an idle limit
//! ([`HttpServer::max_streams_per_principal`], [`HttpServer::max_anonymous_streams`]), the time
//! to send headers (which also ends idle keep-alive connections) and a body, calls running
//! at once per session ([`ServerOptions::max_in_flight`]) and in all, and messages per
//! batch ([`ServerOptions::max_batch_len`]).
//!
//! The approvals page (`/approvals`, see [`crate::approvals`]) is served on the same
//! listener behind the same `Host`/`Origin` checks, unless turned off with
//! [`HttpServer::approvals_page`]. So are the probes `/healthz` and `/readyz`
//! ([`Readiness`]) and the Prometheus metrics at `/metrics` (see [`MetricsAccess`] and
//! [`HttpServer::call_counts`]).
//!
//! Not supported: resuming a broken SSE stream (`Last-Event-ID` is ignored): a `tools/call`
//! whose response stream is dropped before the response is cancelled.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, header};
use axum::response::IntoResponse;
use milpa::ToolRegistry;
use milpa::audit::CallCounts;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower::ServiceBuilder;
use tower_http::validate_request::ValidateRequestHeaderLayer;

#[cfg(feature = "approvals-page")]
use crate::approvals::{self, LoginLimits, PageState, PasskeyOptions};
use crate::auth::Authenticator;
#[cfg(all(feature = "oauth", feature = "approvals-page"))]
use crate::auth::either::StaticOrAccessToken;
#[cfg(feature = "oauth")]
use crate::auth::oauth::OAuthResource;
use crate::protocol::ServerOptions;
use crate::session::Shared;

mod accept;
mod body_budget;
mod connection_share;
mod delete;
mod get;
mod guard;
mod health;
mod identity;
#[cfg(feature = "oauth")]
mod metadata;
mod metrics;
mod modern;
mod post;
mod rejection;
mod resume;
#[cfg(feature = "oauth")]
mod scope_challenge;
mod sessions;
mod stream;
mod stream_budget;

use crate::listener::HostOriginCheck;
use crate::listener::throttle::{FailureThrottle, ThrottleLimits};
use accept::ConnectionLimits;
pub use health::{Readiness, ReadinessCheck};
pub use metrics::{METRICS_SCOPE, MetricsAccess, UpstreamReport, UpstreamReports};
use rejection::HttpRejection;
use sessions::{SessionLimits, Sessions};
use stream_budget::{StreamBudget, StreamLimits};

const SESSION_HEADER: &str = "mcp-session-id";

/// Configures and runs the Streamable HTTP transport.
///
/// ```no_run
/// use std::sync::Arc;
/// use milpa::ToolRegistry;
/// use milpa_mcp::{HttpServer, auth::StaticTokens};
///
/// # async fn run() -> std::io::Result<()> {
/// let mut tokens = StaticTokens::new();
/// tokens.insert_token("secret", "alice", ["notes:*"]);
/// HttpServer::new(Arc::new(ToolRegistry::new()))
///     .authenticator(tokens)
///     .serve("127.0.0.1:8080".parse().unwrap())
///     .await
/// # }
/// ```
pub struct HttpServer {
    registry: Arc<ToolRegistry>,
    options: ServerOptions,
    auth: Option<Arc<dyn Authenticator>>,
    token_required: bool,
    hosts: Option<Vec<String>>,
    origins: Vec<String>,
    json_response: bool,
    sessions: SessionLimits,
    connections: ConnectionLimits,
    body_read_timeout: Duration,
    max_calls_in_flight: usize,
    allow_remote: bool,
    path: String,
    #[cfg(feature = "approvals-page")]
    approvals_page: bool,
    #[cfg(feature = "approvals-page")]
    approval_page_url: Option<String>,
    #[cfg(feature = "approvals-page")]
    approval_passkeys: PasskeyOptions,
    #[cfg(feature = "approvals-page")]
    approvals_refresh: Duration,
    #[cfg(feature = "oauth")]
    oauth: Option<Arc<OAuthResource>>,
    token_throttle: ThrottleLimits,
    anonymous_body_limit: usize,
    anonymous_body_budget: usize,
    streams: StreamLimits,
    readiness: Option<Arc<dyn Readiness>>,
    call_counts: Option<Arc<CallCounts>>,
    upstream_reports: Option<Arc<dyn UpstreamReports>>,
    metrics_access: MetricsAccess,
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = f.debug_struct("HttpServer");
        out.field("options", &self.options)
            .field("authenticator", &self.auth.is_some())
            .field("hosts", &self.hosts)
            .field("origins", &self.origins)
            .field("json_response", &self.json_response)
            .field("sessions", &self.sessions)
            .field("connections", &self.connections)
            .field("body_read_timeout", &self.body_read_timeout)
            .field("max_calls_in_flight", &self.max_calls_in_flight)
            .field("path", &self.path)
            .field("token_throttle", &self.token_throttle)
            .field("anonymous_body_limit", &self.anonymous_body_limit)
            .field("anonymous_body_budget", &self.anonymous_body_budget)
            .field("streams", &self.streams)
            .field("call_counts", &self.call_counts.is_some())
            .field("metrics_access", &self.metrics_access);
        #[cfg(feature = "approvals-page")]
        out.field("approvals_page", &self.approvals_page)
            .field("approval_page_url", &self.approval_page_url)
            .field("approvals_refresh", &self.approvals_refresh);
        #[cfg(feature = "oauth")]
        out.field("oauth", &self.oauth);
        out.finish_non_exhaustive()
    }
}

impl HttpServer {
    /// A server for `registry` with default options: loopback hosts only, no
    /// authenticator (every caller anonymous), SSE for tool calls, 30 min idle sessions.
    pub fn new(registry: Arc<ToolRegistry>) -> Self {
        HttpServer {
            registry,
            options: ServerOptions::default(),
            auth: None,
            token_required: false,
            hosts: Some(Vec::new()),
            origins: Vec::new(),
            json_response: false,
            sessions: SessionLimits {
                max_sessions: 10_000,
                max_per_principal: 100,
                max_anonymous: 100,
                idle_timeout: Duration::from_secs(30 * 60),
                anonymous_idle_timeout: Duration::from_secs(5 * 60),
            },
            connections: ConnectionLimits {
                max_connections: 1024,
                reserved_for_authenticated: None,
                header_read_timeout: Duration::from_secs(30),
            },
            body_read_timeout: Duration::from_secs(30),
            max_calls_in_flight: 1024,
            allow_remote: false,
            path: "/mcp".into(),
            #[cfg(feature = "approvals-page")]
            approvals_page: true,
            #[cfg(feature = "approvals-page")]
            approval_page_url: None,
            #[cfg(feature = "approvals-page")]
            approval_passkeys: PasskeyOptions::default(),
            #[cfg(feature = "approvals-page")]
            approvals_refresh: approvals::DEFAULT_REFRESH,
            #[cfg(feature = "oauth")]
            oauth: None,
            token_throttle: ThrottleLimits::default(),
            anonymous_body_limit: 64 * 1024,
            anonymous_body_budget: 8 * 1024 * 1024,
            streams: StreamLimits::default(),
            readiness: None,
            call_counts: None,
            upstream_reports: None,
            metrics_access: MetricsAccess::default(),
        }
    }

    /// Protocol options (server name, limits, confirmation by elicitation, …).
    pub fn options(mut self, options: ServerOptions) -> Self {
        self.options = options;
        self
    }

    /// Maps bearer tokens to principals and scopes.
    pub fn authenticator(mut self, authenticator: impl Authenticator) -> Self {
        self.auth = Some(Arc::new(authenticator));
        self
    }

    /// Refuses a request to the endpoint without a bearer token: `401` with
    /// `WWW-Authenticate: Bearer`, from `initialize` on (default: off, such a request is an
    /// anonymous caller's). Turn it on when the `mcp` channel serves anonymous callers
    /// nothing (`require_auth`), so a client learns it needs a token when it connects rather
    /// than from a tool error at its first call. An unknown path stays `404`.
    pub fn require_token(mut self, required: bool) -> Self {
        self.token_required = required;
        self
    }

    /// Like [`authenticator`](Self::authenticator), for a shared one.
    pub fn authenticator_arc(mut self, authenticator: Arc<dyn Authenticator>) -> Self {
        self.auth = Some(authenticator);
        self
    }

    /// Protects the endpoint as an OAuth 2.1 resource server: every request needs a bearer
    /// token, either one the [`authenticator`](Self::authenticator) knows or an access
    /// token `resource` accepts; others get `401` with a challenge naming the RFC 9728
    /// metadata, served at `/.well-known/oauth-protected-resource` (and with the
    /// resource's path appended). A tool call denied for a missing scope gets `403
    /// insufficient_scope` naming every scope it needs. See [`crate::auth::oauth`].
    #[cfg(feature = "oauth")]
    #[cfg_attr(docsrs, doc(cfg(feature = "oauth")))]
    pub fn oauth(mut self, resource: OAuthResource) -> Self {
        self.oauth = Some(Arc::new(resource));
        self
    }

    /// Host names accepted in `Host` and `Origin` besides the loopback ones (e.g. the name
    /// a reverse proxy forwards). Any port is accepted.
    pub fn allowed_hosts(mut self, hosts: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let list = self.hosts.get_or_insert_with(Vec::new);
        list.extend(hosts.into_iter().map(|h| h.into().to_ascii_lowercase()));
        self
    }

    /// Turns the `Host` check off (only behind a proxy that checks it). `Origin` is still
    /// checked against the allowed origins.
    pub fn allow_any_host(mut self) -> Self {
        self.hosts = None;
        self
    }

    /// Whole origins (`https://app.example.com`) accepted in `Origin` besides those of
    /// the allowed hosts.
    pub fn allowed_origins(mut self, origins: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.origins
            .extend(origins.into_iter().map(|o| o.into().to_ascii_lowercase()));
        self
    }

    /// Answers every request with JSON, never SSE (a call's progress and requests then go
    /// on the session's `GET` stream, if one is open).
    pub fn json_response(mut self, json: bool) -> Self {
        self.json_response = json;
        self
    }

    /// How long an unused session lives (default 30 minutes; anonymous ones see
    /// [`anonymous_session_idle_timeout`](Self::anonymous_session_idle_timeout)).
    pub fn session_idle_timeout(mut self, timeout: Duration) -> Self {
        self.sessions.idle_timeout = timeout;
        self
    }

    /// How long an unused anonymous session lives (default 5 minutes; never longer than
    /// the [`session_idle_timeout`](Self::session_idle_timeout)).
    pub fn anonymous_session_idle_timeout(mut self, timeout: Duration) -> Self {
        self.sessions.anonymous_idle_timeout = timeout;
        self
    }

    /// How many authenticated sessions may exist at once (default 10 000; anonymous
    /// sessions are counted apart and are never more than this either); `initialize`
    /// beyond gets `503`.
    pub fn max_sessions(mut self, max: usize) -> Self {
        self.sessions.max_sessions = max.max(1);
        self
    }

    /// How many sessions one principal may hold at once (default 100); its `initialize`
    /// beyond gets `503`, other principals are not affected.
    pub fn max_sessions_per_principal(mut self, max: usize) -> Self {
        self.sessions.max_per_principal = max.max(1);
        self
    }

    /// How many sessions all anonymous callers together may hold at once (default 100);
    /// an anonymous `initialize` beyond gets `503`, authenticated callers are not affected.
    pub fn max_anonymous_sessions(mut self, max: usize) -> Self {
        self.sessions.max_anonymous = max.max(1);
        self
    }

    /// How many connections may be open at once (default 1024). Further clients wait in
    /// the listen backlog until one closes. Only [`serve`](Self::serve) and
    /// [`serve_listener`](Self::serve_listener) enforce it.
    pub fn max_connections(mut self, max: usize) -> Self {
        self.connections.max_connections = max.max(1);
        self
    }

    /// How many of the [`max_connections`](Self::max_connections) anonymous callers may
    /// never hold (default a quarter of them): an anonymous request on a connection beyond
    /// the rest gets `503` with `Retry-After` and the connection is closed, so
    /// authenticated callers still get a connection. A connection counts as anonymous
    /// from its first anonymous request until it closes. Only [`serve`](Self::serve) and
    /// [`serve_listener`](Self::serve_listener) enforce it.
    pub fn reserved_connections(mut self, reserved: usize) -> Self {
        self.connections.reserved_for_authenticated = Some(reserved);
        self
    }

    /// How long a client may take to send a request's headers (default 30 s); the
    /// connection is closed after that. It also bounds how long an idle keep-alive
    /// connection stays open. Only [`serve`](Self::serve) and
    /// [`serve_listener`](Self::serve_listener) enforce it.
    pub fn header_read_timeout(mut self, timeout: Duration) -> Self {
        self.connections.header_read_timeout = timeout;
        self
    }

    /// How long a client may take to send a request's whole body (default 30 s); slower
    /// bodies get `408`.
    pub fn body_read_timeout(mut self, timeout: Duration) -> Self {
        self.body_read_timeout = timeout;
        self
    }

    /// How many `tools/call`s all sessions together may run at once (default 1024; each
    /// session also at most [`ServerOptions::max_in_flight`]). Further calls wait for a
    /// free slot.
    pub fn max_calls_in_flight(mut self, max: usize) -> Self {
        self.max_calls_in_flight = max.max(1);
        self
    }

    /// How many refused bearer tokens one client address may send per `window` (default
    /// 10 a minute, counted from its first refusal; IPv6 addresses by their /64). Past
    /// that, its further refused tokens get `429` with `Retry-After` (each after a short
    /// delay) until the window passes; accepted tokens from the address still work.
    pub fn failed_token_limit(mut self, max_failures: u32, window: Duration) -> Self {
        self.token_throttle.max_failures = max_failures;
        self.token_throttle.window = window;
        self
    }

    /// How many long-lived streams one principal may hold open at once (default 64): `GET`
    /// streams, `subscriptions/listen` streams and `tools/call` answers on SSE. Beyond it a
    /// `GET` or a `subscriptions/listen` gets `429` with `Retry-After`, and a call is
    /// answered with JSON instead of a stream. Other principals are not affected.
    pub fn max_streams_per_principal(mut self, max: usize) -> Self {
        self.streams.per_principal = max.max(1);
        self
    }

    /// How many long-lived streams all anonymous callers together may hold open at once
    /// (default 16; see [`max_streams_per_principal`](Self::max_streams_per_principal) for
    /// what counts and what happens beyond). Principals are not affected.
    pub fn max_anonymous_streams(mut self, max: usize) -> Self {
        self.streams.anonymous = max.max(1);
        self
    }

    /// How long a principal's `GET` or `subscriptions/listen` stream stays open carrying
    /// nothing (default 30 minutes; keep-alive comments do not count). The client reopens
    /// it when it needs it again.
    pub fn stream_idle_timeout(mut self, timeout: Duration) -> Self {
        self.streams.idle_timeout = timeout;
        self
    }

    /// Like [`stream_idle_timeout`](Self::stream_idle_timeout), for anonymous callers'
    /// streams (default 60 s; never longer than the principals' limit).
    pub fn anonymous_stream_idle_timeout(mut self, timeout: Duration) -> Self {
        self.streams.anonymous_idle_timeout = timeout;
        self
    }

    /// The largest body an anonymous caller may send (default 64 KiB; `413` beyond) while
    /// the registry's `mcp` channel requires authentication, so that no tool can run
    /// anonymously. When anonymous callers may run tools, their bodies get the usual
    /// [`ServerOptions::max_message_bytes`].
    pub fn anonymous_max_body_bytes(mut self, max: usize) -> Self {
        self.anonymous_body_limit = max;
        self
    }

    /// How many bytes all anonymous bodies being read may hold at once (default 8 MiB).
    /// Each reserves its declared length (or its limit, when chunked) before it is read;
    /// one that does not fit gets `503` with `Retry-After: 1`, unread.
    pub fn anonymous_body_buffer_bytes(mut self, max: usize) -> Self {
        self.anonymous_body_budget = max;
        self
    }

    /// Allows [`serve`](Self::serve) on a non-loopback address (default: refused). Add the
    /// names clients use with [`allowed_hosts`](Self::allowed_hosts), and use tokens.
    pub fn allow_remote(mut self, allow: bool) -> Self {
        self.allow_remote = allow;
        self
    }

    /// The endpoint path (default `/mcp`).
    pub fn path(mut self, path: impl Into<String>) -> Self {
        self.path = path.into();
        self
    }

    /// Serves the approvals page at `/approvals` (default: on): people sign in with a
    /// bearer token the [`authenticator`](Self::authenticator) knows (or, with
    /// [`oauth`](Self::oauth), an access token the resource server accepts) and grant or reject
    /// what waits in the registry's approval queue (see [`crate::approvals`]). While it is
    /// on, `APPROVAL_PENDING` results carry `approve_url = <page>/<approval_id>`.
    #[cfg(feature = "approvals-page")]
    #[cfg_attr(docsrs, doc(cfg(feature = "approvals-page")))]
    pub fn approvals_page(mut self, on: bool) -> Self {
        self.approvals_page = on;
        self
    }

    /// The address people open the approvals page at, when it is not
    /// `http://<bound address>/approvals` (behind a reverse proxy, or to name the host
    /// people use): e.g. `https://tools.example.com/approvals`, without a trailing slash.
    /// [`router`](Self::router) knows no bound address, so only this links results there.
    #[cfg(feature = "approvals-page")]
    #[cfg_attr(docsrs, doc(cfg(feature = "approvals-page")))]
    pub fn approval_page_url(mut self, url: impl Into<String>) -> Self {
        self.approval_page_url = Some(url.into().trim_end_matches('/').to_owned());
        self
    }

    /// Where the approvals page keeps approvers' passkeys and which WebAuthn relying party
    /// it is (default: RP id `localhost`, passkeys in memory); see
    /// [`crate::approvals::passkeys`].
    #[cfg(feature = "approvals-page")]
    #[cfg_attr(docsrs, doc(cfg(feature = "approvals-page")))]
    pub fn approval_passkeys(mut self, options: PasskeyOptions) -> Self {
        self.approval_passkeys = options;
        self
    }

    /// How often the approvals page's queue fetches its list again and puts it in place,
    /// keeping what a person is typing (default [`approvals::DEFAULT_REFRESH`], 15 s;
    /// `Duration::ZERO` turns the refresh off, and the queue then loads no script).
    #[cfg(feature = "approvals-page")]
    #[cfg_attr(docsrs, doc(cfg(feature = "approvals-page")))]
    pub fn approvals_refresh(mut self, every: Duration) -> Self {
        self.approvals_refresh = every;
        self
    }

    /// What `/readyz` checks (the store, upstreams…); without one, ready means alive. See
    /// [`Readiness`].
    pub fn readiness(mut self, readiness: impl Readiness) -> Self {
        self.readiness = Some(Arc::new(readiness));
        self
    }

    /// The calls `/metrics` reports (`milpa_tool_calls_total`, the latency histogram): the
    /// counts a [`CountingAuditSink`](milpa::audit::CountingAuditSink) in front of the
    /// registry's audit sink feeds, following this server's registry
    /// ([`CallCounts::follow`]). Without them `/metrics` reports no calls.
    pub fn call_counts(mut self, counts: Arc<CallCounts>) -> Self {
        self.call_counts = Some(counts);
        self
    }

    /// The upstream servers `/metrics` reports (`milpa_upstream_up`,
    /// `milpa_upstream_restarts_total`). See [`UpstreamReports`].
    pub fn upstream_reports(mut self, reports: impl UpstreamReports) -> Self {
        self.upstream_reports = Some(Arc::new(reports));
        self
    }

    /// Who may read `/metrics` (default: a bearer token holding [`METRICS_SCOPE`]). See
    /// [`MetricsAccess`].
    pub fn metrics_access(mut self, access: MetricsAccess) -> Self {
        self.metrics_access = access;
        self
    }

    /// The axum router serving the endpoint (and the approvals page), with every request
    /// check. Serve it with connect info (`into_make_service_with_connect_info::<SocketAddr>()`)
    /// to see callers' addresses; the connection limits and the header read timeout are then
    /// up to you (prefer [`serve_listener`](Self::serve_listener)).
    pub fn router(self) -> Router {
        let page_url = self.page_url(None);
        let (state, page) = self.into_state(page_url);
        router_for(state, page)
    }

    /// Where `APPROVAL_PENDING` results send people: the configured page URL, else the page
    /// on the bound address (a wildcard address named by its loopback), else nowhere.
    #[cfg(feature = "approvals-page")]
    fn page_url(&self, bound: Option<SocketAddr>) -> Option<String> {
        if !self.serves_approvals_page() {
            return None;
        }
        if let Some(url) = &self.approval_page_url {
            return Some(url.clone());
        }
        let mut addr = bound?;
        if addr.ip().is_unspecified() {
            addr.set_ip(match addr.ip() {
                std::net::IpAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                std::net::IpAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        Some(format!("http://{addr}{}", approvals::PAGE_PATH))
    }

    /// Built without the approvals page, results link nowhere.
    #[cfg(not(feature = "approvals-page"))]
    fn page_url(&self, _bound: Option<SocketAddr>) -> Option<String> {
        None
    }

    #[cfg(feature = "approvals-page")]
    fn serves_approvals_page(&self) -> bool {
        if self.approvals_page && !approvals::fits_beside(&self.path) {
            tracing::warn!(target: "milpa_mcp", path = %self.path, "the MCP endpoint's path takes the approvals page's place; the page is not served");
            return false;
        }
        self.approvals_page
    }

    /// The endpoint's state and, when the page is served, the page's (and the checks).
    fn into_state(self, page_url: Option<String>) -> (Endpoint, Option<Page>) {
        let check = HostOriginCheck::new(self.hosts.clone(), self.origins.clone());
        #[cfg(not(feature = "approvals-page"))]
        let page = None;
        #[cfg(feature = "approvals-page")]
        let page = self.serves_approvals_page().then(|| {
            // People sign in with the tokens the endpoint accepts: with OAuth, access
            // tokens too.
            #[cfg(feature = "oauth")]
            let sign_in: Option<Arc<dyn Authenticator>> = match &self.oauth {
                Some(oauth) => Some(Arc::new(StaticOrAccessToken::new(
                    self.auth.clone(),
                    oauth.clone(),
                ))),
                None => self.auth.clone(),
            };
            #[cfg(not(feature = "oauth"))]
            let sign_in = self.auth.clone();
            PageState::new(
                self.registry.clone(),
                sign_in,
                LoginLimits::default(),
                self.body_read_timeout,
                self.approval_passkeys.clone(),
                self.approvals_refresh,
            )
        });
        let gate = Arc::new(identity::Gate {
            token_required: self.token_required,
            auth: self.auth.clone(),
            #[cfg(feature = "oauth")]
            oauth: self.oauth.clone(),
            #[cfg(feature = "oauth")]
            scopes: metadata::tool_scopes(&self.registry).into(),
            throttle: FailureThrottle::new(self.token_throttle),
        });
        // Without authentication no tool runs for an anonymous caller, so no request of
        // theirs needs a large body.
        let anonymous_runs_tools = !self
            .registry
            .policy_gate()
            .channel_policy(milpa::channel::MCP)
            .require_auth;
        let anonymous_limit = if anonymous_runs_tools {
            self.options.max_message_bytes
        } else {
            self.anonymous_body_limit
                .min(self.options.max_message_bytes)
        };
        let budget = Arc::new(body_budget::BodyBudget::new(
            anonymous_limit,
            self.anonymous_body_budget,
        ));
        let endpoint = Endpoint {
            path: self.path.clone(),
            readiness: self.readiness.clone(),
            call_counts: self.call_counts.clone(),
            upstream_reports: self.upstream_reports.clone(),
            metrics_access: self.metrics_access,
            gate,
            budget,
            check,
            state: self.into_http_state(page_url),
        };
        (endpoint, page)
    }

    fn into_http_state(self, page_url: Option<String>) -> Arc<HttpState> {
        let per_session = self.options.max_in_flight;
        Arc::new(HttpState {
            shared: Shared::with_approval_page(self.registry, self.options, page_url),
            json_response: self.json_response,
            body_read_timeout: self.body_read_timeout,
            call_slots: Arc::new(Semaphore::new(self.max_calls_in_flight)),
            call_slot_count: self.max_calls_in_flight,
            sessions: Sessions::new(self.sessions, per_session),
            streams: StreamBudget::new(self.streams),
        })
    }

    /// Binds `addr` and serves until the process ends. A non-loopback address is refused
    /// unless [`allow_remote`](Self::allow_remote) was set.
    pub async fn serve(self, addr: SocketAddr) -> io::Result<()> {
        if !addr.ip().is_loopback() && !self.allow_remote {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "refusing to serve MCP on non-loopback address {addr} (allow_remote is off)"
                ),
            ));
        }
        let listener = TcpListener::bind(addr).await?;
        self.serve_listener(listener, std::future::pending()).await
    }

    /// Serves on a bound listener until `shutdown` completes, with the connection limits
    /// (every accepted socket with `TCP_NODELAY`).
    pub async fn serve_listener(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> io::Result<()> {
        let connections = self.connections;
        let page_url = self.page_url(Some(listener.local_addr()?));
        let (endpoint, page) = self.into_state(page_url);
        let state = endpoint.state.clone();
        let sweeper = {
            let every = state.sessions.limits().sweep_every();
            let state = Arc::downgrade(&state);
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    match state.upgrade() {
                        Some(state) => state.sessions.sweep(),
                        None => break,
                    }
                }
            })
        };
        let app = router_for(endpoint, page);
        let result = accept::serve(listener, app, connections, shutdown, || {
            sweeper.abort();
            state.sessions.end_all();
        })
        .await;
        state.sessions.end_all();
        result
    }
}

/// The MCP endpoint and what its router needs.
struct Endpoint {
    path: String,
    readiness: Option<Arc<dyn Readiness>>,
    call_counts: Option<Arc<CallCounts>>,
    upstream_reports: Option<Arc<dyn UpstreamReports>>,
    metrics_access: MetricsAccess,
    gate: Arc<identity::Gate>,
    budget: Arc<body_budget::BodyBudget>,
    check: HostOriginCheck,
    state: Arc<HttpState>,
}

/// The endpoint with its checks, outermost first: `Host`/`Origin`, protocol version, the
/// caller's identity, the anonymous callers' share of the connections, a `POST`'s content
/// type, then what an anonymous body may hold; the
/// handlers read bodies only after.
/// The probes, the metrics, the approvals page (when served) and the OAuth metadata (when
/// OAuth is on) sit beside it with their own checks.
fn router_for(endpoint: Endpoint, page: Option<Page>) -> Router {
    let Endpoint {
        path,
        readiness,
        call_counts,
        upstream_reports,
        metrics_access,
        gate,
        budget,
        check: hosts,
        state,
    } = endpoint;
    #[cfg(feature = "oauth")]
    let metadata = gate
        .oauth
        .clone()
        .map(|oauth| metadata::router(oauth, &gate.scopes, &path, hosts.clone()));
    #[cfg(not(feature = "oauth"))]
    let metadata: Option<Router> = None;
    #[cfg(feature = "approvals-page")]
    let page = page.map(|page| approvals::router(page, hosts.clone()));
    #[cfg(not(feature = "approvals-page"))]
    let page: Option<Router> = page.map(|none| match none {});
    let probes = health::router(readiness, hosts.clone());
    let metrics = metrics::router(
        metrics::Sources {
            access: metrics_access,
            calls: call_counts,
            upstreams: upstream_reports,
            http: state.clone(),
        },
        gate.clone(),
        hosts.clone(),
    );
    let methods = axum::routing::get(get::get)
        .post(post::post)
        .delete(delete::delete)
        .fallback(|| async { HttpRejection::MethodNotAllowed.into_response() });
    let mut mcp = Router::new().route(&path, methods);
    if gate.token_required {
        mcp = mcp.route_layer(axum::middleware::from_fn(identity::require_token));
    }
    let mcp = mcp.with_state(state).layer(
        ServiceBuilder::new()
            .layer(ValidateRequestHeaderLayer::custom(hosts))
            .layer(ValidateRequestHeaderLayer::custom(
                guard::ProtocolVersionCheck,
            ))
            .layer(axum::middleware::from_fn_with_state(
                gate,
                identity::authenticate,
            ))
            .layer(axum::middleware::from_fn(
                connection_share::limit_anonymous_connections,
            ))
            .layer(ValidateRequestHeaderLayer::custom(guard::ContentTypeCheck))
            .layer(axum::middleware::from_fn_with_state(
                budget,
                body_budget::limit_anonymous_bodies,
            )),
    );
    let mcp = mcp.merge(probes).merge(metrics);
    let mcp = match metadata {
        Some(metadata) => mcp.merge(metadata),
        None => mcp,
    };
    match page {
        Some(page) => mcp.merge(page),
        None => mcp,
    }
}

/// The approvals page's state, when the page is built in.
#[cfg(feature = "approvals-page")]
type Page = Arc<PageState>;
/// Built without the approvals page there is no page to serve: a type without values.
#[cfg(not(feature = "approvals-page"))]
type Page = std::convert::Infallible;

/// What the handlers share.
struct HttpState {
    shared: Arc<Shared>,
    json_response: bool,
    body_read_timeout: Duration,
    /// Calls all sessions together may run at once.
    call_slots: Arc<Semaphore>,
    /// How many permits `call_slots` holds when no call runs.
    call_slot_count: usize,
    sessions: Sessions,
    /// Long-lived streams open, per class of caller.
    streams: Arc<StreamBudget>,
}

/// The request's `Mcp-Session-Id`, if any.
fn session_id(headers: &HeaderMap) -> Option<&str> {
    headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok())
}

fn accepts(headers: &HeaderMap, kind: &str) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains(kind) || v.contains("*/*"))
}

#[cfg(all(test, feature = "approvals-page"))]
mod tests {
    use super::*;

    fn server() -> HttpServer {
        HttpServer::new(Arc::new(ToolRegistry::new()))
    }

    #[test]
    fn approval_links_point_at_the_page_on_the_bound_address() {
        let bound = |addr: &str| server().page_url(Some(addr.parse().unwrap()));
        assert_eq!(
            bound("127.0.0.1:8080").as_deref(),
            Some("http://127.0.0.1:8080/approvals")
        );
        assert_eq!(
            bound("[::1]:9").as_deref(),
            Some("http://[::1]:9/approvals")
        );
        // A wildcard address is not one a browser can open: its loopback is.
        assert_eq!(
            bound("0.0.0.0:80").as_deref(),
            Some("http://127.0.0.1:80/approvals")
        );
        assert_eq!(
            bound("[::]:80").as_deref(),
            Some("http://[::1]:80/approvals")
        );
        // The router alone knows no address.
        assert_eq!(server().page_url(None), None);
    }

    #[test]
    fn a_configured_url_wins_and_no_page_means_no_links() {
        let addr = Some("127.0.0.1:8080".parse().unwrap());
        let proxied = server().approval_page_url("https://tools.example.com/approvals/");
        assert_eq!(
            proxied.page_url(addr).as_deref(),
            Some("https://tools.example.com/approvals")
        );
        assert_eq!(
            proxied.page_url(None).as_deref(),
            Some("https://tools.example.com/approvals")
        );
        assert_eq!(server().approvals_page(false).page_url(addr), None);
        // An MCP endpoint in the page's place leaves no page to link to.
        assert_eq!(server().path("/approvals").page_url(addr), None);
        assert_eq!(server().path("/approvals/mcp").page_url(addr), None);
        assert!(server().path("/approvals-mcp").page_url(addr).is_some());
    }

    #[test]
    fn the_page_url_reaches_the_sessions_shared_state() {
        let url = "http://127.0.0.1:1/approvals".to_owned();
        let (endpoint, page) = server().into_state(Some(url.clone()));
        assert_eq!(endpoint.state.shared.approval_page, Some(url));
        assert!(page.is_some());
        let (endpoint, page) = server().approvals_page(false).into_state(None);
        assert_eq!(endpoint.state.shared.approval_page, None);
        assert!(page.is_none());
    }
}
