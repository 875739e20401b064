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
//! [`ServerOptions::max_message_bytes`] get `413`. `Authorization: Bearer` tokens map to a
//! principal and scopes through an [`Authenticator`]; without one the caller is anonymous.
//!
//! A session is bound to the principal that created it; a request with another identity
//! cannot use it. Sessions idle for longer than the idle timeout (default 30 min) are ended.
//!
//! Not supported: resuming a broken SSE stream (`Last-Event-ID` is ignored): a `tools/call`
//! whose response stream is dropped before the response is cancelled.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use milpa::{ToolRegistry, generate_request_id};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::auth::Authenticator;
use crate::jsonrpc::{
    self, ErrorObject, INVALID_REQUEST, Incoming, METHOD_NOT_FOUND, Parsed, RequestId, SERVER_ERROR,
};
use crate::protocol::{self, KNOWN_METHODS, ServerOptions};
use crate::session::{Caller, Dispatch, Out, Route, Session, Shared};

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";

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
    hosts: Option<Vec<String>>,
    origins: Vec<String>,
    json_response: bool,
    idle_timeout: Duration,
    max_sessions: usize,
    allow_remote: bool,
    path: String,
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer")
            .field("options", &self.options)
            .field("authenticator", &self.auth.is_some())
            .field("hosts", &self.hosts)
            .field("origins", &self.origins)
            .field("json_response", &self.json_response)
            .field("path", &self.path)
            .finish_non_exhaustive()
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
            hosts: Some(Vec::new()),
            origins: Vec::new(),
            json_response: false,
            idle_timeout: Duration::from_secs(30 * 60),
            max_sessions: 10_000,
            allow_remote: false,
            path: "/mcp".into(),
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

    /// Like [`authenticator`](Self::authenticator), for a shared one.
    pub fn authenticator_arc(mut self, authenticator: Arc<dyn Authenticator>) -> Self {
        self.auth = Some(authenticator);
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

    /// How long an unused session lives (default 30 minutes).
    pub fn session_idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// How many sessions may exist at once (default 10 000); `initialize` beyond gets `503`.
    pub fn max_sessions(mut self, max: usize) -> Self {
        self.max_sessions = max.max(1);
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

    /// The axum router serving the endpoint. Serve it with connect info
    /// (`into_make_service_with_connect_info::<SocketAddr>()`) to see callers' addresses.
    pub fn router(self) -> Router {
        let path = self.path.clone();
        let state = self.into_state();
        router_for(state, &path)
    }

    fn into_state(self) -> Arc<HttpState> {
        let hosts = self.hosts.map(|mut extra| {
            extra.extend(["localhost", "127.0.0.1", "[::1]", "::1"].map(String::from));
            extra
        });
        Arc::new(HttpState {
            shared: Shared::new(self.registry, self.options),
            auth: self.auth,
            hosts,
            origins: self.origins,
            json_response: self.json_response,
            idle_timeout: self.idle_timeout,
            max_sessions: self.max_sessions,
            sessions: Mutex::new(HashMap::new()),
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

    /// Serves on a bound listener until `shutdown` completes.
    pub async fn serve_listener(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> io::Result<()> {
        let path = self.path.clone();
        let state = self.into_state();
        let sweeper = {
            let state = Arc::downgrade(&state);
            let every = (state
                .upgrade()
                .map(|s| s.idle_timeout)
                .unwrap_or(Duration::from_secs(60))
                / 2)
            .max(Duration::from_secs(1));
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    match state.upgrade() {
                        Some(state) => state.sweep(),
                        None => break,
                    }
                }
            })
        };
        let app = router_for(state.clone(), &path);
        let result = axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .with_graceful_shutdown(shutdown)
        .await;
        sweeper.abort();
        state.end_all();
        result
    }
}

fn router_for(state: Arc<HttpState>, path: &str) -> Router {
    Router::new()
        .route(path, axum::routing::any(endpoint))
        .with_state(state)
}

struct HttpSession {
    core: Arc<Session>,
    principal: Option<String>,
    last_seen: Mutex<Instant>,
}

impl HttpSession {
    fn touch(&self) {
        *self.last_seen.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    fn idle_for(&self) -> Duration {
        self.last_seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .elapsed()
    }
}

struct HttpState {
    shared: Arc<Shared>,
    auth: Option<Arc<dyn Authenticator>>,
    hosts: Option<Vec<String>>,
    origins: Vec<String>,
    json_response: bool,
    idle_timeout: Duration,
    max_sessions: usize,
    sessions: Mutex<HashMap<String, Arc<HttpSession>>>,
}

impl HttpState {
    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<HttpSession>>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Ends sessions idle past the timeout with nothing running.
    fn sweep(&self) {
        let expired: Vec<Arc<HttpSession>> = {
            let mut sessions = self.sessions();
            let ids: Vec<String> = sessions
                .iter()
                .filter(|(_, s)| s.idle_for() > self.idle_timeout && s.core.calls_in_flight() == 0)
                .map(|(id, _)| id.clone())
                .collect();
            ids.iter().filter_map(|id| sessions.remove(id)).collect()
        };
        for session in expired {
            session.core.shutdown();
        }
    }

    fn end_all(&self) {
        let all: Vec<_> = self.sessions().drain().map(|(_, s)| s).collect();
        for session in all {
            session.core.shutdown();
        }
    }

    fn host_allowed(&self, headers: &HeaderMap) -> bool {
        let Some(hosts) = &self.hosts else {
            return true;
        };
        let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
            return false;
        };
        hosts.iter().any(|h| *h == host_name(host))
    }

    fn origin_allowed(&self, headers: &HeaderMap) -> bool {
        let Some(origin) = headers.get(header::ORIGIN) else {
            return true;
        };
        let Ok(origin) = origin.to_str() else {
            return false;
        };
        let origin = origin.to_ascii_lowercase();
        if self.origins.contains(&origin) {
            return true;
        }
        let Some((scheme, rest)) = origin.split_once("://") else {
            return false;
        };
        if scheme != "http" && scheme != "https" {
            return false;
        }
        match &self.hosts {
            Some(hosts) => hosts.iter().any(|h| *h == host_name(rest)),
            // No host check configured: only explicitly allowed origins pass.
            None => false,
        }
    }

    async fn caller(&self, headers: &HeaderMap, ip: Option<String>) -> Caller {
        let mut caller = Caller {
            ip,
            user_agent: headers
                .get(header::USER_AGENT)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            ..Caller::default()
        };
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                let (scheme, token) = v.split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
            })
            .filter(|t| !t.is_empty());
        if let (Some(auth), Some(token)) = (&self.auth, token) {
            match auth.authenticate(token).await {
                Some(identity) => {
                    caller.principal = Some(identity.principal);
                    caller.scopes = identity.scopes;
                }
                None => {
                    tracing::warn!(target: "milpa_mcp", "unknown bearer token; caller is anonymous");
                }
            }
        }
        caller
    }
}

/// The host part of a `Host` header or an origin's authority, lowercased, without port.
fn host_name(authority: &str) -> String {
    let authority = authority.trim().to_ascii_lowercase();
    let authority = authority.split('/').next().unwrap_or("");
    if let Some(rest) = authority.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((inner, _)) => format!("[{inner}]"),
            None => authority.to_owned(),
        };
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host.to_owned(),
        _ => authority.to_owned(),
    }
}

fn rpc_error(status: StatusCode, id: Option<&RequestId>, code: i64, message: &str) -> Response {
    json_body(
        status,
        jsonrpc::error_response(id, &ErrorObject::new(code, message)),
    )
}

fn json_body(status: StatusCode, body: String) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

fn accepts(headers: &HeaderMap, kind: &str) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains(kind) || v.contains("*/*"))
}

async fn endpoint(State(state): State<Arc<HttpState>>, request: Request) -> Response {
    let headers = request.headers();
    if !state.host_allowed(headers) {
        return rpc_error(
            StatusCode::FORBIDDEN,
            None,
            SERVER_ERROR,
            "Forbidden: Host header not allowed",
        );
    }
    if !state.origin_allowed(headers) {
        return rpc_error(
            StatusCode::FORBIDDEN,
            None,
            SERVER_ERROR,
            "Forbidden: Origin not allowed",
        );
    }
    if let Some(version) = headers.get(VERSION_HEADER) {
        let ok = version.to_str().is_ok_and(protocol::is_supported);
        if !ok {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                None,
                INVALID_REQUEST,
                &format!(
                    "Bad Request: unsupported MCP-Protocol-Version (supported: {})",
                    protocol::SUPPORTED_VERSIONS.join(", ")
                ),
            );
        }
    }
    match *request.method() {
        Method::POST => post(state, request).await,
        Method::GET => get(state, request).await,
        Method::DELETE => delete(state, request).await,
        _ => (
            StatusCode::METHOD_NOT_ALLOWED,
            [(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"))],
        )
            .into_response(),
    }
}

enum Lookup {
    Missing,
    Found(Arc<HttpSession>),
    Unknown,
}

fn lookup(state: &HttpState, headers: &HeaderMap, caller: &Caller) -> Lookup {
    let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
        return Lookup::Missing;
    };
    let session = state.sessions().get(id).cloned();
    match session {
        Some(session) if caller.principal == session.principal => {
            session.touch();
            Lookup::Found(session)
        }
        _ => Lookup::Unknown,
    }
}

fn session_not_found() -> Response {
    rpc_error(
        StatusCode::NOT_FOUND,
        None,
        -32001,
        "Session not found (it ended or never existed); send initialize to start a new one",
    )
}

fn session_required(id: Option<&RequestId>) -> Response {
    rpc_error(
        StatusCode::BAD_REQUEST,
        id,
        INVALID_REQUEST,
        "Bad Request: Mcp-Session-Id header is required (send initialize first)",
    )
}

async fn post(state: Arc<HttpState>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let headers = parts.headers;
    let content_type_ok = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().contains("json"));
    if !content_type_ok {
        return rpc_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            None,
            INVALID_REQUEST,
            "Unsupported Media Type: Content-Type must be application/json",
        );
    }
    let limit = state.shared.options.max_message_bytes;
    let too_large = || {
        rpc_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            None,
            INVALID_REQUEST,
            &format!("Payload Too Large: bodies are limited to {limit} bytes"),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return too_large();
    }
    let bytes = match axum::body::to_bytes(body, limit).await {
        Ok(bytes) => bytes,
        Err(_) => return too_large(),
    };
    let ip = parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip().to_string());
    let caller = state.caller(&headers, ip).await;
    let sse_ok = !state.json_response && accepts(&headers, "text/event-stream");

    match jsonrpc::parse(&bytes) {
        Parsed::Single(Err(rejected)) => json_body(
            StatusCode::BAD_REQUEST,
            jsonrpc::error_response(rejected.id.as_ref(), &rejected.error),
        ),
        Parsed::Single(Ok(Incoming::Request { id, method, params })) => {
            if method == "initialize" && headers.get(SESSION_HEADER).is_none() {
                return initialize(&state, id, params, &caller);
            }
            let session = match lookup(&state, &headers, &caller) {
                Lookup::Found(session) => session,
                Lookup::Unknown => return session_not_found(),
                Lookup::Missing => {
                    return if method == "ping" {
                        json_body(
                            StatusCode::OK,
                            jsonrpc::response(&id, &serde_json::json!({})),
                        )
                    } else if KNOWN_METHODS.contains(&method.as_str()) {
                        session_required(Some(&id))
                    } else {
                        rpc_error(
                            StatusCode::OK,
                            Some(&id),
                            METHOD_NOT_FOUND,
                            &format!("Method not found: {method}"),
                        )
                    };
                }
            };
            if method == "tools/call" && sse_ok {
                let (tx, rx) = mpsc::unbounded_channel();
                let dispatch = session.core.dispatch(
                    id.clone(),
                    &method,
                    params,
                    &caller,
                    Route::Channel(tx.clone()),
                );
                match dispatch {
                    Dispatch::Reply(reply) => json_body(StatusCode::OK, reply),
                    Dispatch::Call(call) => {
                        tokio::spawn(async move {
                            if let Some(reply) = call.await {
                                let _ = tx.send(Out::Msg(reply));
                            }
                            let _ = tx.send(Out::Close);
                        });
                        sse(
                            rx,
                            Some(CancelOnDrop {
                                session: session.core.clone(),
                                id,
                            }),
                        )
                    }
                }
            } else {
                match session
                    .core
                    .dispatch(id, &method, params, &caller, Route::Standalone)
                {
                    Dispatch::Reply(reply) => json_body(StatusCode::OK, reply),
                    Dispatch::Call(call) => match call.await {
                        Some(reply) => json_body(StatusCode::OK, reply),
                        None => StatusCode::ACCEPTED.into_response(),
                    },
                }
            }
        }
        Parsed::Single(Ok(Incoming::Notification { method, params })) => {
            match lookup(&state, &headers, &caller) {
                Lookup::Found(session) => session.core.notify(&method, params),
                Lookup::Unknown => return session_not_found(),
                Lookup::Missing => {}
            }
            StatusCode::ACCEPTED.into_response()
        }
        Parsed::Single(Ok(Incoming::Response { id, result })) => {
            match lookup(&state, &headers, &caller) {
                Lookup::Found(session) => {
                    session.core.answer(&id, result);
                    StatusCode::ACCEPTED.into_response()
                }
                Lookup::Unknown => session_not_found(),
                Lookup::Missing => session_required(None),
            }
        }
        Parsed::Batch(items) => {
            let session = match lookup(&state, &headers, &caller) {
                Lookup::Found(session) => session,
                Lookup::Unknown => return session_not_found(),
                Lookup::Missing => return session_required(None),
            };
            let mut replies = Vec::new();
            let mut calls = Vec::new();
            for item in items {
                match session.core.handle(item, &caller, &Route::Standalone) {
                    Some(Dispatch::Reply(reply)) => replies.push(reply),
                    Some(Dispatch::Call(call)) => calls.push(call),
                    None => {}
                }
            }
            replies.extend(
                futures_util::future::join_all(calls)
                    .await
                    .into_iter()
                    .flatten(),
            );
            if replies.is_empty() {
                StatusCode::ACCEPTED.into_response()
            } else {
                json_body(StatusCode::OK, jsonrpc::batch(&replies))
            }
        }
    }
}

fn initialize(
    state: &HttpState,
    id: RequestId,
    params: Option<jsonrpc::Params>,
    caller: &Caller,
) -> Response {
    state.sweep();
    if state.sessions().len() >= state.max_sessions {
        return rpc_error(
            StatusCode::SERVICE_UNAVAILABLE,
            Some(&id),
            SERVER_ERROR,
            "Service Unavailable: too many sessions",
        );
    }
    let session_id = generate_request_id();
    let core = Session::new(state.shared.clone(), Some(session_id.clone()));
    let reply = match core.dispatch(id, "initialize", params, caller, Route::Standalone) {
        Dispatch::Reply(reply) => reply,
        Dispatch::Call(_) => unreachable_reply(),
    };
    if !core.is_initialized() {
        // Refused (bad params): no session.
        return json_body(StatusCode::OK, reply);
    }
    state.sessions().insert(
        session_id.clone(),
        Arc::new(HttpSession {
            core,
            principal: caller.principal.clone(),
            last_seen: Mutex::new(Instant::now()),
        }),
    );
    let mut response = json_body(StatusCode::OK, reply);
    if let Ok(value) = HeaderValue::from_str(&session_id) {
        response.headers_mut().insert(SESSION_HEADER, value);
    }
    response
}

fn unreachable_reply() -> String {
    jsonrpc::error_response(
        None,
        &ErrorObject::new(jsonrpc::INTERNAL_ERROR, "initialize did not reply"),
    )
}

async fn get(state: Arc<HttpState>, request: Request) -> Response {
    let headers = request.headers();
    if !accepts(headers, "text/event-stream") {
        return rpc_error(
            StatusCode::NOT_ACCEPTABLE,
            None,
            INVALID_REQUEST,
            "Not Acceptable: GET needs Accept: text/event-stream",
        );
    }
    let ip = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip().to_string());
    let caller = state.caller(headers, ip).await;
    let session = match lookup(&state, headers, &caller) {
        Lookup::Found(session) => session,
        Lookup::Unknown => return session_not_found(),
        Lookup::Missing => return session_required(None),
    };
    let (tx, rx) = mpsc::unbounded_channel();
    session.core.add_standalone(tx);
    sse(rx, None)
}

async fn delete(state: Arc<HttpState>, request: Request) -> Response {
    let headers = request.headers();
    let caller = state.caller(headers, None).await;
    match lookup(&state, headers, &caller) {
        Lookup::Found(session) => {
            if let Some(id) = &session.core.session_id {
                state.sessions().remove(id);
            }
            session.core.shutdown();
            StatusCode::OK.into_response()
        }
        Lookup::Unknown => session_not_found(),
        Lookup::Missing => session_required(None),
    }
}

/// Cancels a call whose response stream went away before the response.
struct CancelOnDrop {
    session: Arc<Session>,
    id: RequestId,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.session.cancel(&self.id);
    }
}

struct StreamState {
    rx: mpsc::UnboundedReceiver<Out>,
    _guard: Option<CancelOnDrop>,
}

fn sse(rx: mpsc::UnboundedReceiver<Out>, guard: Option<CancelOnDrop>) -> Response {
    let state = StreamState { rx, _guard: guard };
    let stream = futures_util::stream::unfold(state, |mut state| async move {
        match state.rx.recv().await {
            Some(Out::Msg(message)) => {
                Some((Ok::<_, Infallible>(Event::default().data(message)), state))
            }
            Some(Out::Close) | None => None,
        }
    });
    let mut response = Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

#[cfg(test)]
mod tests {
    use super::host_name;

    #[test]
    fn host_names_lose_their_ports() {
        assert_eq!(host_name("127.0.0.1:8080"), "127.0.0.1");
        assert_eq!(host_name("LOCALHOST"), "localhost");
        assert_eq!(host_name("[::1]:3000"), "[::1]");
        assert_eq!(host_name("evil.example.com"), "evil.example.com");
        assert_eq!(host_name("localhost:80/x"), "localhost");
    }
}
