//! Streamable HTTP upstreams: every message is a `POST` to the endpoint; the answer is one
//! JSON message (or a batch), or a `text/event-stream` whose events carry the messages
//! (progress first, then the answer), `202 Accepted` for a notification. The session id the
//! server hands out at `initialize` (`Mcp-Session-Id`) goes on every later message, and the
//! bearer token, when configured, on all of them. A server that forgot the session (it
//! restarted) answers `404`; a new session is then opened and the message sent again.
//!
//! Once the session is initialized, a `GET` opens the server's own stream, on which it
//! sends what belongs to no request (`notifications/tools/list_changed`); it is opened
//! again when it ends (after 1 s, doubling to 30 s while that fails), unless the server
//! answers `405` (it offers none). Each time it opens, the tools are discovered again, since
//! a change while it was closed was announced to nobody.
//!
//! `http://` and `https://` endpoints; an `https://` server's certificate is checked
//! against the system's trusted roots (`SSL_CERT_FILE` / `SSL_CERT_DIR` name others).

use std::collections::HashMap;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::body::Incoming;
use hyper::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use milpa_mcp::protocol::MODERN_VERSION;
use parking_lot::Mutex;
use serde_json::{Value, json};
use sse_stream::{Sse, SseByteStream};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use crate::PROTOCOL_VERSION;
use crate::connection::{Connection, Shared, dispatch};
use crate::unavailability::Unavailability;

/// The session header.
const SESSION_HEADER: &str = "mcp-session-id";
/// 2026-07-28: the method of the request (a routing header).
const METHOD_HEADER: &str = "mcp-method";
/// 2026-07-28: the tool, prompt or resource the request names (a routing header).
const NAME_HEADER: &str = "mcp-name";

/// Where messages go, and what every one of them carries.
struct Endpoint {
    upstream: Arc<str>,
    uri: Uri,
    /// The endpoint as configured (`${VAR}` unexpanded), for messages: no secret of the
    /// URL shows in the log.
    shown: Arc<str>,
    /// Sent on every request: the bearer token and the configured headers, each marked
    /// sensitive.
    headers: HeaderMap,
    /// The largest answer or event it may send.
    max_message_bytes: usize,
    session: Mutex<Option<String>>,
    /// The revision the server answered `initialize` with, named on every later request
    /// (until then, the one we asked for).
    protocol: Mutex<Option<HeaderValue>>,
    /// Held while a new session is opened, so concurrent messages open one, not many.
    renewing: tokio::sync::Mutex<()>,
    /// Whether the server's own stream is being listened to.
    listening: AtomicBool,
    client: HttpClient,
}

/// The HTTP client of one upstream: plain or TLS, as its URL says.
pub(crate) type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// A client for `http://` and `https://` URLs, trusting the system's roots (read now: a
/// restart of the upstream reads them again). Without any root, it fails for `https`
/// (`tls`), and plain `http://` still works: a host without CA certificates can reach a
/// server beside it.
pub(crate) fn client(tls: bool) -> std::io::Result<HttpClient> {
    // Each request is one small write the answer waits for: Nagle's algorithm would hold
    // it back behind the previous one's delayed acknowledgement.
    let mut tcp = HttpConnector::new();
    tcp.set_nodelay(true);
    tcp.enforce_http(false);
    let connector = match HttpsConnectorBuilder::new().with_native_roots() {
        Ok(builder) => builder,
        Err(error) if tls => return Err(error),
        Err(_) => HttpsConnectorBuilder::new().with_tls_config(trusting_nobody()),
    }
    .https_or_http()
    .enable_http1()
    .wrap_connector(tcp);
    Ok(Client::builder(TokioExecutor::new()).build(connector))
}

/// A TLS configuration with no trusted root: every certificate is refused.
fn trusting_nobody() -> tokio_rustls::rustls::ClientConfig {
    use tokio_rustls::rustls::{ClientConfig, RootCertStore, crypto::ring};
    ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_root_certificates(RootCertStore::empty())
        .with_no_client_auth()
}

/// A session with the server at `uri` through `client`, sending `headers` (its token and
/// the configured ones) on every request; messages name it as `shown`. An answer or an
/// event over `max_message_bytes` fails its exchange.
pub(crate) fn open(
    upstream: Arc<str>,
    uri: Uri,
    shown: Arc<str>,
    headers: HeaderMap,
    max_message_bytes: usize,
    client: HttpClient,
) -> Connection {
    Connection::with_transport(upstream, move |name, lines, outgoing, shared| {
        let endpoint = Arc::new(Endpoint {
            upstream: name,
            uri,
            shown,
            headers,
            max_message_bytes,
            session: Mutex::new(None),
            protocol: Mutex::new(None),
            renewing: tokio::sync::Mutex::new(()),
            listening: AtomicBool::new(false),
            client,
        });
        tokio::spawn(post_messages(endpoint, lines, outgoing, shared));
    })
}

/// Posts each message as its own exchange, so a long call's stream does not hold up the
/// others. The exchange of a request we cancel (`notifications/cancelled` naming it) is
/// dropped, which closes its stream: that is how a 2026-07-28 server hears that a
/// `subscriptions/listen` ended, and a call's stream of the older revisions is no longer
/// read for nothing.
async fn post_messages(
    endpoint: Arc<Endpoint>,
    mut lines: mpsc::UnboundedReceiver<String>,
    outgoing: mpsc::UnboundedSender<String>,
    shared: Arc<Shared>,
) {
    let mut exchanges: HashMap<u64, AbortHandle> = HashMap::new();
    while let Some(line) = lines.recv().await {
        let message = serde_json::from_str::<Value>(&line).ok();
        let method = message
            .as_ref()
            .and_then(|m| m["method"].as_str())
            .map(str::to_owned);
        let request_id = message
            .as_ref()
            .filter(|_| method.is_some())
            .and_then(|m| m["id"].as_u64());
        if method.as_deref() == Some("notifications/cancelled")
            && let Some(cancelled) = message
                .as_ref()
                .and_then(|m| m["params"]["requestId"].as_u64())
            && let Some(exchange) = exchanges.remove(&cancelled)
        {
            exchange.abort();
        }
        let endpoint = Arc::clone(&endpoint);
        let outgoing = outgoing.clone();
        let shared = Arc::clone(&shared);
        let task = tokio::spawn(async move {
            let initialized = method.as_deref() == Some("notifications/initialized");
            // Only the answer to `initialize` says which revision later requests name.
            let initializing = method.as_deref() == Some("initialize");
            // 2026-07-28 names the method (and the tool, prompt or resource) in headers.
            let routing = match (shared.is_stateless(), &message) {
                (true, Some(message)) => Some(Routing::of(message)),
                _ => None,
            };
            let outcome = exchange(
                &endpoint,
                Exchange {
                    line,
                    request_id,
                    initializing,
                    routing,
                },
                &outgoing,
                &shared,
            )
            .await;
            if initialized && outcome.is_ok() && !endpoint.listening.swap(true, Ordering::AcqRel) {
                tokio::spawn(listen(
                    Arc::clone(&endpoint),
                    outgoing.clone(),
                    Arc::clone(&shared),
                ));
            }
            if let Some(id) = request_id {
                // Delivered answers are gone from the table already; this fails the rest.
                let why = match outcome {
                    Ok(()) => Unavailability::new("the server ended its answer without a result"),
                    Err(why) => Unavailability::new(why.to_string()).with_cause(why),
                };
                shared.fail(id, why);
            } else if let Err(why) = outcome {
                tracing::warn!(target: "milpa::upstream", upstream = %endpoint.upstream, "{why}");
            }
        });
        if let Some(id) = request_id {
            // Bounded by the requests in flight: finished ones go as new ones come.
            exchanges.retain(|_, exchange| !exchange.is_finished());
            exchanges.insert(id, task.abort_handle());
        }
    }
}

/// The first delay before the server's stream is opened again.
const LISTEN_RETRY: Duration = Duration::from_secs(1);
/// The longest such delay.
const LISTEN_RETRY_MAX: Duration = Duration::from_secs(30);

/// Listens to the server's own stream (`GET`) until the session ends, opening it again
/// when it ends; stops for good when the server offers none (`405`).
async fn listen(
    endpoint: Arc<Endpoint>,
    outgoing: mpsc::UnboundedSender<String>,
    shared: Arc<Shared>,
) {
    let upstream = Arc::clone(&endpoint.upstream);
    let listening = async {
        let mut delay = LISTEN_RETRY;
        while shared.closed().is_none() {
            match get_stream(&endpoint, None).await {
                Ok(response) if response.status() == StatusCode::METHOD_NOT_ALLOWED => {
                    tracing::debug!(target: "milpa::upstream", upstream = %upstream, "the server offers no stream of its own");
                    return;
                }
                Ok(response) if response.status().is_success() => {
                    delay = LISTEN_RETRY;
                    // A change while no stream was open went unannounced: look again.
                    shared.tools_may_have_changed();
                    let read = read_messages(&endpoint, response, |message| {
                        dispatch(&upstream, message, &outgoing, &shared, None);
                    })
                    .await;
                    if let Err(why) = read {
                        tracing::debug!(target: "milpa::upstream", upstream = %upstream, "its stream ended: {why}");
                    }
                }
                Ok(response) => tracing::debug!(
                    target: "milpa::upstream",
                    upstream = %upstream,
                    "its stream was refused (HTTP {})",
                    response.status()
                ),
                Err(why) => {
                    tracing::debug!(target: "milpa::upstream", upstream = %upstream, "{why}")
                }
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(LISTEN_RETRY_MAX);
        }
    };
    tokio::select! {
        () = listening => {}
        () = shared.ended() => {}
    }
}

/// Opens the server's own stream, or (with `last_event_id`) takes up a stream it closed
/// after that event: a `GET` with the session id and the token.
async fn get_stream(
    endpoint: &Endpoint,
    last_event_id: Option<&str>,
) -> Result<Response<Incoming>, ExchangeError> {
    let mut request = Request::builder()
        .method(Method::GET)
        .uri(&endpoint.uri)
        .header(ACCEPT, "text/event-stream")
        .header("mcp-protocol-version", endpoint.protocol_version());
    if let Some(id) = last_event_id {
        request = request.header("last-event-id", id);
    }
    if let Some(session) = endpoint.session.lock().clone() {
        request = request.header(SESSION_HEADER, session);
    }
    for (name, value) in &endpoint.headers {
        request = request.header(name, value);
    }
    let request = request
        .body(Full::new(Bytes::new()))
        .map_err(ExchangeError::Build)?;
    endpoint
        .client
        .request(request)
        .await
        .map_err(|source| ExchangeError::Unreachable {
            uri: Arc::clone(&endpoint.shown),
            source,
        })
}

/// Why one exchange with the server (a `POST`, the `GET` of its own stream, or opening a
/// new session) failed. Its message is what a waiting call's `UPSTREAM_UNAVAILABLE`
/// result and the log say; the cause stays reachable as its source.
#[derive(Debug, thiserror::Error)]
enum ExchangeError {
    /// The request could not be put together (a session id or token that is no header value).
    #[error("could not build the request: {0}")]
    Build(#[source] hyper::http::Error),
    /// The server could not be reached (connection, TLS, or the request could not be sent).
    #[error("could not reach {uri}: {}", chain(.source))]
    Unreachable {
        /// The endpoint, as configured.
        uri: Arc<str>,
        /// What the client said.
        #[source]
        source: hyper_util::client::legacy::Error,
    },
    /// The server answered with an error status.
    #[error("{uri} answered HTTP {status}")]
    Status {
        /// The endpoint, as configured.
        uri: Arc<str>,
        /// Its status.
        status: StatusCode,
    },
    /// The server answered `initialize` for a new session without a protocol version.
    #[error("{uri} refused a new session")]
    SessionRefused {
        /// The endpoint, as configured.
        uri: Arc<str>,
    },
    /// A JSON answer's body broke off.
    #[error("could not read the answer: {}", chain(.0))]
    ReadAnswer(#[source] hyper::Error),
    /// An answer or an event over the upstream's `max_message_bytes`.
    #[error("it sent a message over {max} bytes (max_message_bytes)")]
    TooLarge {
        /// The limit.
        max: usize,
    },
    /// A JSON answer that is not JSON.
    #[error("the answer is not JSON ({0})")]
    NotJson(#[source] serde_json::Error),
    /// An event stream broke off.
    #[error("the event stream broke: {}", chain(.0))]
    StreamBroke(#[source] hyper::Error),
    /// An event stream that cannot be parsed (a field that is not UTF-8).
    #[error("the event stream is malformed: {0}")]
    Malformed(#[source] sse_stream::Error),
}

/// The error and its causes, one after the other ("client error (Connect): tcp connect
/// error: Connection refused").
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// One message to post, and what its answer is for.
struct Exchange {
    line: String,
    /// Our request's id (messages on its answer stream belong to it).
    request_id: Option<u64>,
    /// It is an `initialize`: its answer sets the revision later requests name.
    initializing: bool,
    /// 2026-07-28: the routing headers it goes with (no session, no resumption then).
    routing: Option<Routing>,
}

/// The routing headers of a 2026-07-28 request: `Mcp-Method`, and `Mcp-Name` for a
/// method that names a tool, prompt (`params.name`) or resource (`params.uri`).
#[derive(Debug, Clone, PartialEq)]
struct Routing {
    method: Option<HeaderValue>,
    name: Option<HeaderValue>,
}

impl Routing {
    /// The headers `message` goes with (a value that is no header value is left out; the
    /// server then says what is missing).
    fn of(message: &Value) -> Routing {
        let method = message["method"].as_str();
        let field = method.and_then(milpa_mcp::protocol::routing_name_field);
        let header = |text: Option<&str>| text.and_then(|t| HeaderValue::from_str(t).ok());
        Routing {
            method: header(method),
            name: header(field.and_then(|f| message["params"][f].as_str())),
        }
    }
}

/// Posts a message and hands what comes back to [`dispatch`] (messages on the answer
/// stream of our request `request_id` belong to it); the answer to an `initialize` sets
/// the revision later requests name. When the server no longer knows
/// our session (`404` to a message that carried one: it restarted, or dropped the session),
/// a new session is opened and the message sent once more.
async fn exchange(
    endpoint: &Endpoint,
    message: Exchange,
    outgoing: &mpsc::UnboundedSender<String>,
    shared: &Shared,
) -> Result<(), ExchangeError> {
    let Exchange {
        line,
        request_id,
        initializing,
        routing,
    } = message;
    let line = Bytes::from(line);
    let (mut response, sent_session) = post(endpoint, line.clone(), routing.as_ref()).await?;
    if response.status() == StatusCode::NOT_FOUND && sent_session.is_some() {
        renew(endpoint, sent_session).await?;
        response = post(endpoint, line, None).await?.0;
    }
    let mut end = read_messages(endpoint, response, |message| {
        if initializing {
            endpoint.note_protocol(&message);
        }
        dispatch(&endpoint.upstream, message, outgoing, shared, request_id);
    })
    .await?;
    // SEP-1699: the server may close a call's stream while the call runs on; the answer
    // then comes on a `GET` that names the last event seen. Bounded: a server that keeps
    // closing without answering fails the call after `MAX_RESUMES`. (2026-07-28 has no
    // resumption.)
    let (Some(id), None) = (request_id, &routing) else {
        return Ok(());
    };
    let mut resumes = 0;
    while shared.awaits(id) && resumes < MAX_RESUMES {
        let Some(last) = end.last_event_id.clone() else {
            break;
        };
        resumes += 1;
        tokio::time::sleep(end.retry.unwrap_or(RESUME_DELAY).min(MAX_RESUME_DELAY)).await;
        let response = get_stream(endpoint, Some(&last)).await?;
        let resumed = read_messages(endpoint, response, |message| {
            dispatch(&endpoint.upstream, message, outgoing, shared, request_id);
        })
        .await?;
        end = StreamEnd {
            last_event_id: resumed.last_event_id.or(Some(last)),
            retry: resumed.retry.or(end.retry),
        };
    }
    Ok(())
}

/// A stream taken up again at most this many times for one request.
const MAX_RESUMES: usize = 100;
/// How long to wait before taking a stream up again when the server did not say (`retry`).
const RESUME_DELAY: Duration = Duration::from_millis(500);
/// The longest wait before taking a stream up again, whatever the server says.
const MAX_RESUME_DELAY: Duration = Duration::from_secs(5);

impl Endpoint {
    /// The revision to name on a request: the one the server answered `initialize` with,
    /// else the one we ask for.
    fn protocol_version(&self) -> HeaderValue {
        self.protocol
            .lock()
            .clone()
            .unwrap_or(HeaderValue::from_static(PROTOCOL_VERSION))
    }

    /// Takes note of the revision when `message` answers `initialize`; says whether it did.
    fn note_protocol(&self, message: &Value) -> bool {
        let Some(version) = message["result"]["protocolVersion"].as_str() else {
            return false;
        };
        if let Ok(version) = HeaderValue::from_str(version) {
            *self.protocol.lock() = Some(version);
        }
        true
    }
}

/// Posts `body` with the session id (when there is one) and the token; notes the session
/// id the answer carries. Returns the answer and the session id it was sent with. With
/// `routing` (2026-07-28) it names that revision and carries the routing headers instead
/// of a session.
async fn post(
    endpoint: &Endpoint,
    body: Bytes,
    routing: Option<&Routing>,
) -> Result<(Response<Incoming>, Option<String>), ExchangeError> {
    let mut request = Request::builder()
        .method(Method::POST)
        .uri(&endpoint.uri)
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "application/json, text/event-stream");
    let session = match routing {
        Some(routing) => {
            request = request.header(
                "mcp-protocol-version",
                HeaderValue::from_static(MODERN_VERSION),
            );
            if let Some(method) = &routing.method {
                request = request.header(METHOD_HEADER, method);
            }
            if let Some(name) = &routing.name {
                request = request.header(NAME_HEADER, name);
            }
            None
        }
        None => {
            request = request.header("mcp-protocol-version", endpoint.protocol_version());
            endpoint.session.lock().clone()
        }
    };
    if let Some(session) = &session {
        request = request.header(SESSION_HEADER, session);
    }
    for (name, value) in &endpoint.headers {
        request = request.header(name, value);
    }
    let request = request
        .body(Full::new(body))
        .map_err(ExchangeError::Build)?;
    let response =
        endpoint
            .client
            .request(request)
            .await
            .map_err(|source| ExchangeError::Unreachable {
                uri: Arc::clone(&endpoint.shown),
                source,
            })?;
    if let Some(new) = response
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
    {
        *endpoint.session.lock() = Some(new.to_owned());
    }
    Ok((response, session))
}

/// Opens a new session in place of `stale` (unless another message did so already):
/// `initialize`, then `notifications/initialized`.
async fn renew(endpoint: &Endpoint, stale: Option<String>) -> Result<(), ExchangeError> {
    let _renewing = endpoint.renewing.lock().await;
    {
        let mut session = endpoint.session.lock();
        if *session != stale {
            return Ok(());
        }
        *session = None;
    }
    tracing::info!(
        target: "milpa::upstream",
        upstream = %endpoint.upstream,
        "the server forgot our session; opening a new one"
    );
    let initialize = json!({"jsonrpc": "2.0", "id": "milpa-session", "method": "initialize",
    "params": {
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": crate::relay::declared_capabilities(),
        "clientInfo": crate::revision::client_info()
    }});
    let (response, _) = post(endpoint, Bytes::from(initialize.to_string()), None).await?;
    let mut answered = false;
    read_messages(endpoint, response, |message| {
        answered |= endpoint.note_protocol(&message);
    })
    .await?;
    if !answered {
        return Err(ExchangeError::SessionRefused {
            uri: Arc::clone(&endpoint.shown),
        });
    }
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    post(endpoint, Bytes::from(initialized.to_string()), None).await?;
    Ok(())
}

/// Where an event stream can be taken up again: the id of its last event, and how long the
/// server asked a client to wait before it reconnects.
#[derive(Debug, Default)]
struct StreamEnd {
    last_event_id: Option<String>,
    retry: Option<Duration>,
}

/// Hands every message of an answer (one JSON message or batch, or an event stream) to
/// `deliver`, as it arrives; says where an event stream ended.
async fn read_messages(
    endpoint: &Endpoint,
    response: Response<Incoming>,
    mut deliver: impl FnMut(Value),
) -> Result<StreamEnd, ExchangeError> {
    let status = response.status();
    if status == StatusCode::ACCEPTED {
        return Ok(StreamEnd::default());
    }
    if !status.is_success() {
        return Err(ExchangeError::Status {
            uri: Arc::clone(&endpoint.shown),
            status,
        });
    }
    let event_stream = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("text/event-stream"));
    let mut body = response.into_body();
    let mut deliver = |message: Value| match message {
        Value::Array(batch) => batch.into_iter().for_each(&mut deliver),
        message => deliver(message),
    };
    let max = endpoint.max_message_bytes;
    if !event_stream {
        let mut bytes = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(ExchangeError::ReadAnswer)?;
            if let Some(data) = frame.data_ref() {
                if bytes.len() + data.len() > max {
                    return Err(ExchangeError::TooLarge { max });
                }
                bytes.extend_from_slice(data);
            }
        }
        if !bytes.is_empty() {
            let message = serde_json::from_slice(&bytes).map_err(ExchangeError::NotJson)?;
            deliver(message);
        }
        return Ok(StreamEnd::default());
    }
    let mut events = pin!(events(body.into_data_stream(), max));
    let mut end = StreamEnd::default();
    while let Some(event) = events.next().await {
        let event = event?;
        if let Some(id) = event.id {
            end.last_event_id = Some(id);
        }
        if let Some(retry) = event.retry {
            end.retry = Some(Duration::from_millis(retry));
        }
        // A priming event (an id, empty data) carries no message.
        let Some(data) = event.data.filter(|data| !data.is_empty()) else {
            continue;
        };
        match serde_json::from_str(&data) {
            Ok(message) => deliver(message),
            Err(error) => tracing::warn!(
                target: "milpa::upstream",
                upstream = %endpoint.upstream,
                "ignored an event that is not JSON ({error})"
            ),
        }
    }
    Ok(end)
}

/// The server-sent events of a `text/event-stream` body, as each one completes: `sse-stream`
/// parses them (LF, CRLF and lone CR line endings, comments, `event`, `id` and `retry`
/// fields, data lines joined with LF), decoding an event's bytes only once it is whole, so
/// a character split across two chunks stays whole. An event over `max` bytes fails the
/// stream with [`ExchangeError::TooLarge`]; a body that breaks off, with
/// [`ExchangeError::StreamBroke`].
fn events(
    body: impl Stream<Item = Result<Bytes, hyper::Error>>,
    max: usize,
) -> impl Stream<Item = Result<Sse, ExchangeError>> {
    // The parser buffers an unfinished event however large it grows: the limit is kept in
    // front of it, on the bytes it is handed.
    let mut limit = EventLimit::new(max);
    let body = body.map(move |chunk| {
        let chunk = chunk.map_err(ExchangeError::StreamBroke)?;
        limit.admit(&chunk)?;
        Ok::<_, ExchangeError>(chunk)
    });
    SseByteStream::new(body).map(|event| event.map_err(ExchangeError::from))
}

/// Counts the bytes of the event being received, ahead of the parser, so that a server
/// that never ends its event cannot grow our memory without bound. An event ends at a blank
/// line, whatever it held: a block of comments alone ends one too, so keep-alive comments
/// on a long-lived stream never add up to the limit. Every byte of the event counts (field
/// names, comments, line endings, a CRLF as one byte), as the data alone cannot be told
/// apart without parsing.
///
/// The exact bound: a chunk that would take the event being received past `max` bytes
/// fails the stream before the parser is handed any of it, so the parser never holds more
/// than `max` bytes of one event. The one chunk of slack is that chunk itself, which hyper
/// has already read into memory; it is dropped with the stream.
struct EventLimit {
    max: usize,
    /// Bytes of the event being received: since the last blank line.
    received: usize,
    /// Whether the last byte ended a line (so a line ending now makes a blank line).
    line_start: bool,
    /// Whether the last byte was a CR (so an LF now completes its CRLF, and ends no line).
    after_cr: bool,
}

impl EventLimit {
    fn new(max: usize) -> EventLimit {
        EventLimit {
            max,
            received: 0,
            line_start: true,
            after_cr: false,
        }
    }

    /// Counts `chunk` (carrying on from the chunks before it); fails when an event in it
    /// grows past the limit.
    fn admit(&mut self, chunk: &[u8]) -> Result<(), ExchangeError> {
        for &byte in chunk {
            self.received += 1;
            let after_cr = std::mem::replace(&mut self.after_cr, byte == b'\r');
            match byte {
                b'\n' if after_cr => self.received -= 1,
                b'\n' | b'\r' if self.line_start => self.received = 0,
                b'\n' | b'\r' => self.line_start = true,
                _ => self.line_start = false,
            }
            if self.received > self.max {
                return Err(ExchangeError::TooLarge { max: self.max });
            }
        }
        Ok(())
    }
}

impl From<sse_stream::Error> for ExchangeError {
    fn from(error: sse_stream::Error) -> ExchangeError {
        match error {
            // What `events` put on the byte stream (the body broke, an event too large) comes
            // back as it went in.
            sse_stream::Error::Body(cause) => match cause.downcast::<ExchangeError>() {
                Ok(error) => *error,
                Err(cause) => ExchangeError::Malformed(sse_stream::Error::Body(cause)),
            },
            error => ExchangeError::Malformed(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use futures_util::FutureExt;
    use std::pin::Pin;

    use super::*;

    /// An event stream fed chunk by chunk, as a body arrives.
    struct Feed {
        chunks: mpsc::UnboundedSender<Result<Bytes, hyper::Error>>,
        events: Pin<Box<dyn Stream<Item = Result<Sse, ExchangeError>>>>,
    }

    impl Feed {
        fn new(max: usize) -> Feed {
            let (chunks, mut body) = mpsc::unbounded_channel();
            let body = futures_util::stream::poll_fn(move |cx| body.poll_recv(cx));
            Feed {
                chunks,
                events: Box::pin(events(body, max)),
            }
        }

        /// Hands on `chunk`; returns the events it completed, or the stream's error.
        fn push(&mut self, chunk: &[u8]) -> Result<Vec<Sse>, ExchangeError> {
            self.chunks.send(Ok(Bytes::copy_from_slice(chunk))).unwrap();
            let mut complete = Vec::new();
            while let Some(Some(event)) = self.events.next().now_or_never() {
                complete.push(event?);
            }
            Ok(complete)
        }
    }

    #[test]
    fn events_are_cut_where_they_end_whatever_the_pieces() {
        let mut feed = Feed::new(1024);
        assert!(
            feed.push(b"id: 1\r\nevent: message\r\ndata: {\"a\"")
                .unwrap()
                .is_empty()
        );
        let events = feed
            .push(b":1}\r\n\r\n: keep-alive\n\nretry: 250\nid: s-2\ndata: 2\n\n")
            .unwrap();
        assert_eq!(
            events,
            [
                Sse {
                    id: Some("1".into()),
                    event: Some("message".into()),
                    data: Some("{\"a\":1}".into()),
                    ..Sse::default()
                },
                Sse {
                    id: Some("s-2".into()),
                    retry: Some(250),
                    data: Some("2".into()),
                    ..Sse::default()
                }
            ]
        );
        // A priming event: an id and empty data.
        let primed = feed.push(b"id: s-0\ndata:\n\n").unwrap();
        assert_eq!(primed[0].id.as_deref(), Some("s-0"));
        assert_eq!(primed[0].data.as_deref(), Some(""));
        // A character split across two pieces stays whole.
        let text = "data: \"año\"\n\n".as_bytes();
        let split = text.iter().position(|&b| b >= 0x80).unwrap() + 1;
        assert!(feed.push(&text[..split]).unwrap().is_empty());
        assert_eq!(
            feed.push(&text[split..]).unwrap()[0].data.as_deref(),
            Some("\"año\"")
        );
    }

    #[test]
    fn lone_cr_line_endings_cut_events_too() {
        let mut feed = Feed::new(1024);
        let events = feed
            .push(b"id: 7\rretry: 40\rdata: {\"a\":1}\r: note\rdata: 2\r\rdata: 3\r")
            .unwrap();
        assert_eq!(
            events,
            [Sse {
                id: Some("7".into()),
                retry: Some(40),
                data: Some("{\"a\":1}\n2".into()),
                ..Sse::default()
            }]
        );
        // A CR at the end of one chunk and an LF at the start of the next are one CRLF.
        assert!(feed.push(b"data: 4\r").unwrap().is_empty());
        let events = feed.push(b"\n\r\n").unwrap();
        assert_eq!(events[0].data.as_deref(), Some("3\n4"));
    }

    #[test]
    fn an_event_field_leaves_the_data_alone() {
        let mut feed = Feed::new(1024);
        let events = feed
            .push(b"data: [1,\nevent: message\ndata: 2]\n\nevent: ping\n\n")
            .unwrap();
        assert_eq!(events[0].data.as_deref(), Some("[1,\n2]"));
        assert_eq!(events[0].event.as_deref(), Some("message"));
        // An event with a type and no data carries no message.
        assert_eq!(events[1].data, None);
    }

    #[test]
    fn a_large_event_in_many_small_chunks_is_parsed() {
        let text = format!("data: \"{}\"\n\n", "a".repeat(64 * 1024));
        let mut feed = Feed::new(text.len());
        let mut events = Vec::new();
        for chunk in text.as_bytes().chunks(7) {
            events.extend(feed.push(chunk).unwrap());
        }
        assert_eq!(events.len(), 1);
        assert_eq!(
            events[0].data.as_ref().map(String::len),
            Some(64 * 1024 + 2)
        );
    }

    #[test]
    fn an_event_over_the_limit_fails() {
        let mut feed = Feed::new(16);
        assert!(feed.push(b"data: 0123456789").unwrap().is_empty());
        let error = feed.push(b"abcdef").unwrap_err();
        assert_eq!(
            error.to_string(),
            "it sent a message over 16 bytes (max_message_bytes)"
        );
        assert!(
            matches!(error, ExchangeError::TooLarge { max: 16 }),
            "{error:?}"
        );
        // Whole in one chunk, too.
        let error = Feed::new(16)
            .push(b"data: 0123456789abcdef\n\n")
            .unwrap_err();
        assert!(
            matches!(error, ExchangeError::TooLarge { max: 16 }),
            "{error:?}"
        );
    }

    #[test]
    fn keep_alive_comments_never_add_up_to_the_limit() {
        let mut feed = Feed::new(16);
        for _ in 0..100 {
            assert!(feed.push(b": keep-alive\r\n\r\n").unwrap().is_empty());
        }
        // 16 bytes with the blank line that ends it: the limit, not over it.
        let events = feed.push(b"data: 01234567\n\n").unwrap();
        assert_eq!(events[0].data.as_deref(), Some("01234567"));
    }

    #[test]
    fn an_event_that_is_not_utf8_fails_the_stream() {
        let error = Feed::new(1024).push(b"data: \xff\n\n").unwrap_err();
        assert!(matches!(error, ExchangeError::Malformed(_)), "{error:?}");
    }

    fn endpoint(uri: Uri) -> Endpoint {
        Endpoint {
            upstream: Arc::from("web"),
            shown: Arc::from(uri.to_string()),
            uri,
            headers: HeaderMap::new(),
            max_message_bytes: 1024,
            session: Mutex::new(None),
            protocol: Mutex::new(None),
            renewing: tokio::sync::Mutex::new(()),
            listening: AtomicBool::new(false),
            client: client(false).unwrap(),
        }
    }

    #[tokio::test]
    async fn an_unreachable_server_keeps_the_client_error_as_the_cause() {
        // A port nobody listens on: bound, then closed.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let uri: Uri = format!("http://{addr}/mcp").parse().unwrap();
        let error = post(&endpoint(uri), Bytes::from_static(b"{}"), None)
            .await
            .expect_err("nobody listens");
        assert!(
            matches!(error, ExchangeError::Unreachable { .. }),
            "{error:?}"
        );
        // The message names the endpoint and the whole chain, as before.
        let text = error.to_string();
        assert!(
            text.starts_with(&format!(
                "could not reach http://{addr}/mcp: client error (Connect)"
            )),
            "{text}"
        );
        let cause = std::error::Error::source(&error)
            .and_then(|cause| cause.downcast_ref::<hyper_util::client::legacy::Error>());
        assert!(cause.is_some_and(|cause| cause.is_connect()));
    }
}
