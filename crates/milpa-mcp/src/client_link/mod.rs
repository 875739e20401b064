//! The client end of one connection as the server sees it: what the client declared at
//! `initialize`, the log level it set, the streams messages reach it on, and the requests
//! sent to it awaiting answers. A tool's [`Peer`](crate::peer::Peer) holds this (not the
//! whole session): it is all a call needs to talk back to its client.
//!
//! It sits below both [`session`](crate::session) and [`peer`](crate::peer), so neither
//! imports the other for it.
//!
//! - [`outgoing`]: requests to the client (sampling, elicitation) awaiting answers.
//! - [`request_error`]: why a request to the client got no answer.
//! - [`request_meta`]: what a 2026-07-28 request declares in its `_meta`.

mod outgoing;
mod request_error;
mod request_meta;

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use milpa::LogLevel;
use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub(crate) use outgoing::capability_for;
pub(crate) use request_error::ClientRequestError;
pub(crate) use request_meta::RequestMeta;

use outgoing::PendingRequests;

/// A message on its way out, or the end of a stream.
#[derive(Debug)]
// A build with no transport (say `otel` alone) sends nothing anywhere.
#[cfg_attr(not(any(feature = "stdio", feature = "http")), allow(dead_code))]
pub(crate) enum Out {
    /// One serialized JSON-RPC message.
    Msg(String),
    /// Ends the stream (HTTP: the response was sent).
    Close,
    /// Ends a resumable HTTP response stream while its call runs on; the client resumes
    /// it with `Last-Event-ID` (see [`Route::Resumable`]).
    #[cfg(feature = "http")]
    Release,
}

/// Where messages related to one request go.
#[derive(Clone, Debug)]
#[cfg_attr(not(any(feature = "stdio", feature = "http")), allow(dead_code))]
pub(crate) enum Route {
    /// A channel the transport drains (stdio's writer, one HTTP response stream).
    Channel(mpsc::UnboundedSender<Out>),
    /// One HTTP response stream a 2025-11-25 client can resume after the server closed
    /// it: the call may release it ([`Out::Release`]) and run on.
    #[cfg(feature = "http")]
    Resumable(mpsc::UnboundedSender<Out>),
    /// The session's standalone stream (HTTP `GET`), if one is open.
    Standalone,
}

/// What the client declared at `initialize`.
#[derive(Debug)]
pub(crate) struct ClientInfo {
    pub version: &'static str,
    pub capabilities: Value,
    /// `clientInfo.name` (see [`client_name`]).
    pub name: Option<Arc<str>>,
}

/// The `name` of a client's `Implementation` (`clientInfo` at `initialize`, or a
/// 2026-07-28 request's `_meta`), for people to read: the approvals page names the client a
/// parked call came through. Self-reported and display-only, so a malformed one is not
/// worth refusing a request over: anything but an object with a non-blank string `name`
/// reads as none. The request's size limit bounds it; the parked call keeps the first
/// characters of it.
pub(crate) fn client_name(info: Option<&Value>) -> Option<Arc<str>> {
    let name = info?.get("name")?.as_str()?.trim();
    (!name.is_empty()).then(|| Arc::from(name))
}

const LOG_OFF: u8 = u8::MAX;

/// The client's side of a session.
#[derive(Debug)]
pub(crate) struct ClientLink {
    /// Set once, by `initialize`: the session is initialized from then on.
    info: OnceLock<ClientInfo>,
    /// The lowest level sent (`LogLevel as u8`, whose order is the levels' order), or
    /// `LOG_OFF`.
    log_level: AtomicU8,
    standalone: Mutex<Vec<mpsc::UnboundedSender<Out>>>,
    closed: AtomicBool,
    /// Cancelled when the client is gone: ends the tasks that send it notifications.
    closing: CancellationToken,
    pending: PendingRequests,
    /// How long a request to the client waits for its answer.
    request_timeout: Option<Duration>,
}

impl ClientLink {
    pub fn new(default_log_level: Option<LogLevel>, request_timeout: Option<Duration>) -> Self {
        ClientLink {
            info: OnceLock::new(),
            log_level: AtomicU8::new(default_log_level.map_or(LOG_OFF, |level| level as u8)),
            standalone: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
            closing: CancellationToken::new(),
            pending: PendingRequests::default(),
            request_timeout,
        }
    }

    /// Records what the client declared; false when it had already (`initialize` twice).
    pub fn declare(&self, info: ClientInfo) -> bool {
        self.info.set(info).is_ok()
    }

    /// The name the client gave at `initialize` (none on a 2026-07-28 session: each
    /// request names its client).
    pub fn client_name(&self) -> Option<Arc<str>> {
        self.info.get().and_then(|c| c.name.clone())
    }

    pub fn protocol_version(&self) -> Option<&'static str> {
        self.info.get().map(|c| c.version)
    }

    pub fn is_initialized(&self) -> bool {
        self.info.get().is_some()
    }

    pub fn capabilities(&self) -> Option<Value> {
        self.info.get().map(|c| c.capabilities.clone())
    }

    pub fn has_capability(&self, capability: &str) -> bool {
        self.info
            .get()
            .and_then(|c| c.capabilities.get(capability))
            .is_some_and(|v| !v.is_null())
    }

    /// Whether the client can answer form-mode `elicitation/create` (an empty
    /// `elicitation` object means form mode; a client that declared only `url` cannot).
    pub fn supports_form_elicitation(&self) -> bool {
        match self
            .info
            .get()
            .and_then(|c| c.capabilities.get("elicitation"))
        {
            Some(Value::Object(map)) => map.is_empty() || map.contains_key("form"),
            _ => false,
        }
    }

    /// Whether the client can answer URL-mode `elicitation/create` (2025-11-25): it
    /// declared `elicitation.url` and negotiated a version that has URL mode.
    pub fn supports_url_elicitation(&self) -> bool {
        let Some(info) = self.info.get() else {
            return false;
        };
        let before_url_mode = matches!(info.version, "2024-11-05" | "2025-03-26" | "2025-06-18");
        !before_url_mode
            && info
                .capabilities
                .get("elicitation")
                .and_then(|e| e.get("url"))
                .is_some_and(|url| !url.is_null())
    }

    /// Whether the client declared the elicitation mode `params` asks for (`mode`, `form`
    /// when absent): servers must not send a mode the client did not declare.
    pub fn supports_elicitation_of(&self, params: &Value) -> bool {
        match params.get("mode").and_then(Value::as_str) {
            None | Some("form") => self.supports_form_elicitation(),
            Some("url") => self.supports_url_elicitation(),
            Some(_) => false,
        }
    }

    pub fn set_log_level(&self, level: LogLevel) {
        self.log_level.store(level as u8, Ordering::Relaxed);
    }

    pub fn log_enabled(&self, level: LogLevel) -> bool {
        let threshold = self.log_level.load(Ordering::Relaxed);
        threshold != LOG_OFF && level as u8 >= threshold
    }

    /// The client is gone: nothing more is sent; the standalone streams end.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.closing.cancel();
        self.fail_pending();
        for stream in self.standalone.lock().drain(..) {
            let _ = stream.send(Out::Close);
        }
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Completes once the client is gone.
    pub async fn closing(&self) {
        self.closing.cancelled().await;
    }

    /// Adds a standalone stream (HTTP `GET`); later streams are preferred.
    pub fn add_standalone(&self, stream: mpsc::UnboundedSender<Out>) {
        let mut streams = self.standalone.lock();
        streams.retain(|s| !s.is_closed());
        streams.push(stream);
    }

    /// Sends a message along `route`; false when it cannot be delivered.
    pub fn send(&self, route: &Route, message: String) -> bool {
        match route {
            Route::Channel(tx) => tx.send(Out::Msg(message)).is_ok(),
            #[cfg(feature = "http")]
            Route::Resumable(tx) => tx.send(Out::Msg(message)).is_ok(),
            Route::Standalone => {
                let mut streams = self.standalone.lock();
                let mut message = Out::Msg(message);
                while let Some(stream) = streams.last() {
                    match stream.send(message) {
                        Ok(()) => return true,
                        Err(mpsc::error::SendError(back)) => {
                            message = back;
                            streams.pop();
                        }
                    }
                }
                false
            }
        }
    }
}
