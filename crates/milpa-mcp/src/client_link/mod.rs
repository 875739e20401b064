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

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
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

/// The most bytes of notifications one stream may hold unsent: past it, notifications
/// (progress, log messages, list changes) are dropped until the client reads again.
///
/// A client that stops reading must not make the server hold everything a chatty tool
/// says: 200 000 progress notifications to an HTTP client that did not read took the
/// server from 14 to 441 MB for one call. Responses and requests are never dropped (a
/// call's answer is bounded by the result cap, and a request waits for its answer).
pub(crate) const MAX_QUEUED_NOTIFICATION_BYTES: usize = 8 << 20;

/// A channel of outgoing messages: what the transport drains (stdio's writer, one HTTP
/// stream). Unbounded for responses and requests, bounded for notifications (see
/// [`MAX_QUEUED_NOTIFICATION_BYTES`]).
#[cfg_attr(not(any(feature = "stdio", feature = "http")), allow(dead_code))]
pub(crate) fn out_channel() -> (OutTx, OutRx) {
    let (tx, rx) = mpsc::unbounded_channel();
    let queued = Arc::new(AtomicUsize::new(0));
    (
        OutTx {
            tx,
            queued: Arc::clone(&queued),
        },
        OutRx { rx, queued },
    )
}

/// The sending end of an [`out_channel`]; cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct OutTx {
    tx: mpsc::UnboundedSender<Out>,
    /// Bytes of messages sent and not yet received.
    queued: Arc<AtomicUsize>,
}

#[cfg_attr(not(any(feature = "stdio", feature = "http")), allow(dead_code))]
impl OutTx {
    /// Sends `out` whatever the stream holds (a response, a request, the stream's end).
    pub fn send(&self, out: Out) -> Result<(), mpsc::error::SendError<Out>> {
        let bytes = out.bytes();
        self.queued.fetch_add(bytes, Ordering::Relaxed);
        self.tx.send(out).inspect_err(|_| {
            self.queued.fetch_sub(bytes, Ordering::Relaxed);
        })
    }

    /// Sends a notification unless the stream already holds more than
    /// [`MAX_QUEUED_NOTIFICATION_BYTES`] unread; false when it was dropped or the stream
    /// is gone.
    pub fn notify(&self, message: String) -> bool {
        if self.queued.load(Ordering::Relaxed) > MAX_QUEUED_NOTIFICATION_BYTES {
            tracing::debug!(
                target: "milpa::mcp",
                "a notification was dropped: the client is not reading its stream"
            );
            return false;
        }
        self.send(Out::Msg(message)).is_ok()
    }

    /// Whether the receiving end is gone.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// Completes once the receiving end is gone.
    pub async fn closed(&self) {
        self.tx.closed().await;
    }

    /// [`send`](Self::send) of one message; false when the stream is gone.
    fn send_message(&self, message: String) -> bool {
        self.send(Out::Msg(message)).is_ok()
    }
}

/// The receiving end of an [`out_channel`].
#[derive(Debug)]
pub(crate) struct OutRx {
    rx: mpsc::UnboundedReceiver<Out>,
    queued: Arc<AtomicUsize>,
}

#[cfg_attr(not(any(feature = "stdio", feature = "http")), allow(dead_code))]
impl OutRx {
    /// The next message; `None` once every sender is gone.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub async fn recv(&mut self) -> Option<Out> {
        let out = self.rx.recv().await;
        self.taken(out)
    }

    /// Up to `limit` messages into `buffer`, waiting for the first; 0 once every sender is
    /// gone.
    #[cfg_attr(not(feature = "stdio"), allow(dead_code))]
    pub async fn recv_many(&mut self, buffer: &mut Vec<Out>, limit: usize) -> usize {
        let from = buffer.len();
        let received = self.rx.recv_many(buffer, limit).await;
        let bytes: usize = buffer[from..].iter().map(Out::bytes).sum();
        self.queued.fetch_sub(bytes, Ordering::Relaxed);
        received
    }

    /// The next message if one is waiting.
    pub fn try_recv(&mut self) -> Result<Out, mpsc::error::TryRecvError> {
        let out = self.rx.try_recv()?;
        Ok(self.taken(Some(out)).expect("just received"))
    }

    fn taken(&self, out: Option<Out>) -> Option<Out> {
        if let Some(out) = &out {
            self.queued.fetch_sub(out.bytes(), Ordering::Relaxed);
        }
        out
    }
}

impl Out {
    /// What it counts against a stream's queue.
    fn bytes(&self) -> usize {
        match self {
            Out::Msg(message) => message.len(),
            _ => 0,
        }
    }
}

/// Where messages related to one request go.
#[derive(Clone, Debug)]
#[cfg_attr(not(any(feature = "stdio", feature = "http")), allow(dead_code))]
pub(crate) enum Route {
    /// A channel the transport drains (stdio's writer, one HTTP response stream).
    Channel(OutTx),
    /// One HTTP response stream a 2025-11-25 client can resume after the server closed
    /// it: the call may release it ([`Out::Release`]) and run on.
    #[cfg(feature = "http")]
    Resumable(OutTx),
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
    standalone: Mutex<Vec<OutTx>>,
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
    pub fn add_standalone(&self, stream: OutTx) {
        let mut streams = self.standalone.lock();
        streams.retain(|s| !s.is_closed());
        streams.push(stream);
    }

    /// Sends a message along `route`; false when it cannot be delivered.
    pub fn send(&self, route: &Route, message: String) -> bool {
        self.deliver(route, message, OutTx::send_message)
    }

    /// Sends a notification along `route`; false when it cannot be delivered, or was
    /// dropped because the client is not reading (see [`MAX_QUEUED_NOTIFICATION_BYTES`]).
    pub fn notify(&self, route: &Route, message: String) -> bool {
        self.deliver(route, message, OutTx::notify)
    }

    fn deliver(&self, route: &Route, message: String, send: fn(&OutTx, String) -> bool) -> bool {
        match route {
            Route::Channel(tx) => send(tx, message),
            #[cfg(feature = "http")]
            Route::Resumable(tx) => send(tx, message),
            Route::Standalone => {
                let mut streams = self.standalone.lock();
                while let Some(stream) = streams.last() {
                    if stream.is_closed() {
                        streams.pop();
                        continue;
                    }
                    return send(stream, message);
                }
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client that does not read gets notifications up to the cap, then none until it
    /// reads; responses go through whatever the stream holds.
    #[test]
    fn notifications_stop_at_the_cap_and_resume_once_read() {
        let (tx, mut rx) = out_channel();
        let note = "n".repeat(1024);
        let mut sent = 0;
        while tx.notify(note.clone()) {
            sent += 1;
            assert!(
                sent <= MAX_QUEUED_NOTIFICATION_BYTES / 1024 + 1,
                "never capped"
            );
        }
        assert_eq!(sent, MAX_QUEUED_NOTIFICATION_BYTES / 1024 + 1);
        assert!(!tx.notify(note.clone()), "still full");
        // A response is never dropped.
        assert!(tx.send(Out::Msg("response".into())).is_ok());
        // Reading frees room (the response counts too): once the stream holds no more
        // than the cap, a notification fits again.
        assert!(matches!(rx.try_recv(), Ok(Out::Msg(m)) if m == note));
        assert!(
            !tx.notify(note.clone()),
            "the response keeps it over the cap"
        );
        assert!(matches!(rx.try_recv(), Ok(Out::Msg(m)) if m == note));
        assert!(tx.notify(note.clone()));
        let mut held = Vec::new();
        while let Ok(Out::Msg(message)) = rx.try_recv() {
            held.push(message);
        }
        assert_eq!(
            held.len(),
            sent,
            "the rest, the response and the late one, in order"
        );
        assert_eq!(held[sent - 2], "response");
        assert_eq!(rx.queued.load(Ordering::Relaxed), 0);
    }

    /// The standalone stream holds the same cap, and a gone stream is skipped.
    #[tokio::test]
    async fn the_standalone_stream_is_capped_too() {
        let client = ClientLink::new(None, None);
        let (gone, gone_rx) = out_channel();
        drop(gone_rx);
        let (tx, mut rx) = out_channel();
        client.add_standalone(tx);
        client.add_standalone(gone);
        let note = "n".repeat(1 << 20);
        let delivered = (0..20)
            .filter(|_| client.notify(&Route::Standalone, note.clone()))
            .count();
        assert_eq!(delivered, 9, "8 MiB and the one that crossed it");
        let mut read = 0;
        while let Ok(Out::Msg(_)) = rx.try_recv() {
            read += 1;
        }
        assert_eq!(read, 9);
        assert!(client.notify(&Route::Standalone, note));
    }
}
