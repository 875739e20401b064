//! One JSON-RPC session with an upstream MCP server, requests matched to answers by id: over
//! a child's standard input and output (newline-delimited messages), or over Streamable
//! HTTP (see [`crate::http`], which feeds what it receives into [`dispatch`]).
//!
//! - a request whose caller goes away before the answer (the call was cancelled, or hit
//!   its hard timeout) sends `notifications/cancelled` for its id, so the upstream stops
//!   working on it;
//! - `notifications/progress` for a token a request sent goes to that request's
//!   [`CallHandle`], so our caller sees the upstream's progress;
//! - `notifications/message` (the server's log) goes to the clients with the upstream's
//!   name as the logger, and to our log at debug (see [`crate::upstream_log`]);
//! - `notifications/tools/list_changed` wakes the upstream's re-discovery
//!   ([`Connection::on_list_changed`]);
//! - requests from the upstream are answered: `ping` with `{}`, sampling, elicitation and
//!   `roots/list` by relaying them to the client of the call they belong to (see
//!   [`crate::relay`]), anything else with "method not found";
//! - a message is at most the upstream's `max_message_bytes` (a line over it resets the
//!   session: its calls fail, and the supervisor starts the server again), so nothing it
//!   writes is buffered without bound;
//! - when the session ends (the child closed its output, or could not be written to),
//!   every waiting request fails with [`CallError::Unavailable`] and the reason (the
//!   error behind it kept as its source).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use futures_util::StreamExt;
use milpa::LogLevel;
use milpa::call_handle::CallHandle;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{Notify, mpsc, oneshot, watch};
use tokio_util::codec::{AnyDelimiterCodec, AnyDelimiterCodecError, FramedRead};

use crate::relay::{self, CallTarget};
use crate::revision::{self, Answered, MAX_INPUT_ROUNDS};
use crate::unavailability::Unavailability;
use crate::upstream_log::UpstreamLog;

/// JSON-RPC "method not found".
const METHOD_NOT_FOUND: i64 = milpa_mcp::jsonrpc::ErrorCode::METHOD_NOT_FOUND.value();
/// A paged list stops after this many pages (an upstream whose cursors never end).
const MAX_PAGES: usize = 1000;

/// What hears the upstream's notifications about its resources and prompts.
pub(crate) trait CatalogListener: Send + Sync {
    /// It said its resource, template or prompt list changed.
    fn lists_changed(&self);
    /// It said the resource at `uri` changed (`notifications/resources/updated`).
    fn updated(&self, uri: &str);
}

/// Why a request to the upstream got no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The session is gone (or never was): the reason, and the error behind it as the
    /// source (shared by every request that was waiting, hence the `Arc` inside).
    #[error(transparent)]
    Unavailable(Unavailability),
    /// The upstream answered with a JSON-RPC error.
    #[error("{message} (JSON-RPC error {code})")]
    Rpc {
        /// The JSON-RPC error code.
        code: i64,
        /// The upstream's message.
        message: String,
    },
}

impl CallError {
    /// Unavailable for `reason`, with no error behind it.
    pub(crate) fn unavailable(reason: impl Into<String>) -> CallError {
        CallError::Unavailable(Unavailability::new(reason))
    }
}

type Answer = Result<Value, CallError>;

/// State the transport tasks and the requesters share.
#[derive(Default)]
pub(crate) struct Shared {
    pending: Mutex<HashMap<u64, oneshot::Sender<Answer>>>,
    progress: Mutex<HashMap<String, CallHandle>>,
    /// The forwarded calls waiting for their answer, by request id: where a request from
    /// the upstream is relayed to.
    calls: Mutex<HashMap<u64, CallTarget>>,
    /// Told when the upstream says its tool list changed.
    list_changed: Mutex<Option<Arc<Notify>>>,
    /// Where its log messages go.
    log: Mutex<Option<Arc<UpstreamLog>>>,
    /// Where its news of its resources and prompts go.
    catalog: Mutex<Option<Arc<dyn CatalogListener>>>,
    /// Whether it declared the `logging` capability at `initialize`.
    declares_logging: AtomicBool,
    /// Whether it is spoken to in the 2026-07-28 revision (see [`crate::revision`]).
    stateless: AtomicBool,
    /// 2026-07-28: the log level its requests ask for (the clients' most verbose).
    log_level: Mutex<Option<LogLevel>>,
    /// 2026-07-28: the resources whose updates its `subscriptions/listen` asks for.
    resource_subscriptions: Mutex<BTreeSet<String>>,
    /// 2026-07-28: told when a resource is added to those.
    listen_filter: Notify,
    /// Becomes true when the session ends (for tasks that wait on the upstream).
    ended: watch::Sender<bool>,
    /// Set once the session ended: why.
    closed: Mutex<Option<Unavailability>>,
    next_id: AtomicU64,
}

impl Shared {
    /// Ends the session (the first reason wins) and fails every waiting request.
    fn close(&self, why: Unavailability) {
        let why = self.closed.lock().get_or_insert(why).clone();
        let waiting: Vec<_> = self.pending.lock().drain().collect();
        for (_, answer) in waiting {
            let _ = answer.send(Err(CallError::Unavailable(why.clone())));
        }
        self.progress.lock().clear();
        self.calls.lock().clear();
        self.ended.send_replace(true);
    }

    /// Wakes the upstream's re-discovery: its tool list may have changed unseen (a stream
    /// that would have carried the notification was not open).
    pub(crate) fn tools_may_have_changed(&self) {
        if let Some(notify) = self.list_changed.lock().as_ref() {
            notify.notify_one();
        }
    }

    /// Whether the upstream is spoken to in the 2026-07-28 revision.
    pub(crate) fn is_stateless(&self) -> bool {
        self.stateless.load(Ordering::Acquire)
    }

    /// Completes once the session ended.
    pub(crate) async fn ended(&self) {
        let mut ended = self.ended.subscribe();
        let _ = ended.wait_for(|ended| *ended).await;
    }

    /// The call a request from the upstream belongs to: the one whose answer stream it came
    /// on (`origin`, HTTP), else the only forwarded call in flight (stdio); none when that
    /// is not known for sure.
    fn call_for(&self, origin: Option<u64>) -> Option<CallTarget> {
        let calls = self.calls.lock();
        match origin {
            Some(id) => calls.get(&id).cloned(),
            None if calls.len() == 1 => calls.values().next().cloned(),
            None => None,
        }
    }

    /// Whether request `id` still waits for its answer.
    pub(crate) fn awaits(&self, id: u64) -> bool {
        self.pending.lock().contains_key(&id)
    }

    /// Fails the waiting request `id` (its message could not be delivered).
    pub(crate) fn fail(&self, id: u64, why: Unavailability) {
        if let Some(answer) = self.pending.lock().remove(&id) {
            let _ = answer.send(Err(CallError::Unavailable(why)));
        }
    }

    /// Why the session ended, once it has.
    pub(crate) fn closed(&self) -> Option<Unavailability> {
        self.closed.lock().clone()
    }
}

/// A live session with one upstream. Cheap to share behind an `Arc`.
pub(crate) struct Connection {
    upstream: Arc<str>,
    outgoing: mpsc::UnboundedSender<String>,
    shared: Arc<Shared>,
}

impl Connection {
    /// Starts the reader and writer tasks over `input` (what the upstream writes, lines of
    /// at most `max_message_bytes`) and `output` (what it reads).
    pub(crate) fn open(
        upstream: Arc<str>,
        input: impl AsyncRead + Unpin + Send + 'static,
        output: impl AsyncWrite + Unpin + Send + 'static,
        max_message_bytes: usize,
    ) -> Connection {
        Connection::with_transport(upstream, |name, lines, outgoing, shared| {
            tokio::spawn(write_lines(output, lines, Arc::clone(&shared)));
            tokio::spawn(read_messages(
                name,
                input,
                max_message_bytes,
                outgoing,
                shared,
            ));
        })
    }

    /// A session whose messages `start` carries: it gets the upstream's name, the messages
    /// to send (serialized), a sender for replies, and the state to dispatch answers into.
    pub(crate) fn with_transport(
        upstream: Arc<str>,
        start: impl FnOnce(
            Arc<str>,
            mpsc::UnboundedReceiver<String>,
            mpsc::UnboundedSender<String>,
            Arc<Shared>,
        ),
    ) -> Connection {
        let shared = Arc::new(Shared::default());
        let (outgoing, lines) = mpsc::unbounded_channel();
        start(
            Arc::clone(&upstream),
            lines,
            outgoing.clone(),
            Arc::clone(&shared),
        );
        Connection {
            upstream,
            outgoing,
            shared,
        }
    }

    /// Has `notify` told each time the upstream sends `notifications/tools/list_changed`.
    pub(crate) fn on_list_changed(&self, notify: Arc<Notify>) {
        *self.shared.list_changed.lock() = Some(notify);
    }

    /// Has its notifications about its resources and prompts taken in by `listener`.
    pub(crate) fn on_catalog(&self, listener: Arc<dyn CatalogListener>) {
        *self.shared.catalog.lock() = Some(listener);
    }

    /// Every entry of a paged list (`tools/list`, `resources/list`, …): the entries under
    /// `key` of each page, following `nextCursor` for at most [`MAX_PAGES`] pages.
    pub(crate) async fn list_all(&self, method: &str, key: &str) -> Result<Vec<Value>, CallError> {
        let mut entries = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = match &cursor {
                Some(cursor) => json!({"cursor": cursor}),
                None => json!({}),
            };
            let mut page = self.request(method, params, None).await?;
            if let Some(Value::Array(listed)) = page.get_mut(key).map(Value::take) {
                entries.extend(listed);
            }
            match page.get("nextCursor").and_then(Value::as_str) {
                Some(next) if !next.is_empty() => cursor = Some(next.to_owned()),
                _ => return Ok(entries),
            }
        }
        Err(CallError::unavailable(format!(
            "{method} still had more after {MAX_PAGES} pages"
        )))
    }

    /// Has its log messages (`notifications/message`) taken in by `log`.
    pub(crate) fn on_log(&self, log: Arc<UpstreamLog>) {
        *self.shared.log.lock() = Some(log);
    }

    /// Records whether the upstream declared the `logging` capability.
    pub(crate) fn set_declares_logging(&self, declares: bool) {
        self.shared
            .declares_logging
            .store(declares, Ordering::Relaxed);
    }

    /// Whether the upstream declared the `logging` capability (it takes `logging/setLevel`).
    pub(crate) fn declares_logging(&self) -> bool {
        self.shared.declares_logging.load(Ordering::Relaxed)
    }

    /// Speaks the 2026-07-28 revision from now on (`true`: every request carries its
    /// `_meta`, an `input_required` answer is relayed and retried), or the older ones.
    pub(crate) fn set_stateless(&self, stateless: bool) {
        self.shared.stateless.store(stateless, Ordering::Release);
    }

    /// Whether it is spoken to in the 2026-07-28 revision.
    pub(crate) fn is_stateless(&self) -> bool {
        self.shared.is_stateless()
    }

    /// 2026-07-28: the log level its requests ask for from now on.
    pub(crate) fn set_log_level(&self, level: LogLevel) {
        *self.shared.log_level.lock() = Some(level);
    }

    /// 2026-07-28: asks for `uri`'s updates from now on (its `subscriptions/listen` is
    /// opened again with it; see `upstream::listen_for_changes`).
    pub(crate) fn subscribe_resource(&self, uri: &str) {
        if self
            .shared
            .resource_subscriptions
            .lock()
            .insert(uri.to_owned())
        {
            self.shared.listen_filter.notify_one();
        }
    }

    /// 2026-07-28: the resources whose updates are asked for.
    pub(crate) fn resource_subscriptions(&self) -> Vec<String> {
        self.shared
            .resource_subscriptions
            .lock()
            .iter()
            .cloned()
            .collect()
    }

    /// 2026-07-28: completes when a resource was added to those asked for.
    pub(crate) async fn listen_filter_changed(&self) {
        self.shared.listen_filter.notified().await;
    }

    /// Wakes the re-discovery of its tools and of its resources and prompts: a change may
    /// have gone unannounced (no subscription was open).
    pub(crate) fn lists_may_have_changed(&self) {
        self.shared.tools_may_have_changed();
        if let Some(listener) = self.shared.catalog.lock().clone() {
            listener.lists_changed();
        }
    }

    /// Ends the session: waiting requests fail with `why`.
    pub(crate) fn close(&self, why: Unavailability) {
        self.shared.close(why);
    }

    /// Completes once the session ended (closed by either side, or broken).
    pub(crate) async fn ended(&self) {
        self.shared.ended().await;
    }

    /// Why the session ended, once it has.
    pub(crate) fn closed(&self) -> Option<Unavailability> {
        self.shared.closed()
    }

    /// Sends a notification (no answer expected).
    pub(crate) fn notify(&self, method: &str, params: Value) -> Result<(), CallError> {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}))
    }

    fn send(&self, message: Value) -> Result<(), CallError> {
        self.send_line(message.to_string())
    }

    fn send_line(&self, line: String) -> Result<(), CallError> {
        if let Some(why) = self.shared.closed() {
            return Err(CallError::Unavailable(why));
        }
        self.outgoing.send(line).map_err(|closed| {
            CallError::Unavailable(Unavailability::new("its input is closed").with_cause(closed))
        })
    }

    /// Sends a request and waits for its answer. With `call` (the handle of the tool call
    /// being forwarded), the upstream's requests while it runs are relayed to that call's
    /// client, and when the handle is attached the request carries a progress token whose
    /// progress goes to it. Dropping the future before the answer tells the upstream the
    /// request is cancelled.
    ///
    /// In the 2026-07-28 revision the request carries its `_meta`, and an `input_required`
    /// answer is relayed to the call's client and the request sent again with the answers
    /// (at most [`MAX_INPUT_ROUNDS`] times); the result comes without its `resultType`.
    pub(crate) async fn request(
        &self,
        method: &str,
        mut params: Value,
        call: Option<&CallHandle>,
    ) -> Answer {
        if !self.is_stateless() {
            return self.exchange(method, &mut params, call).await;
        }
        for _ in 0..MAX_INPUT_ROUNDS {
            let answer = self.exchange(method, &mut params, call).await?;
            let (requests, state) = match Answered::read(answer) {
                Answered::Complete(result) => return Ok(result),
                Answered::InputRequired { requests, state } => (requests, state),
            };
            let responses = relay::gather(&self.upstream, requests, call).await?;
            if let Some(fields) = params.as_object_mut() {
                fields.insert("inputResponses".into(), Value::Object(responses));
                match state {
                    Some(state) => fields.insert("requestState".into(), state),
                    None => fields.remove("requestState"),
                };
            }
        }
        Err(CallError::unavailable(format!(
            "it still asked for input after {MAX_INPUT_ROUNDS} rounds of {method}"
        )))
    }

    /// One request and its answer (see [`request`](Self::request)); `params` get the
    /// request's `_meta` (a retry's replaces the one before).
    async fn exchange(
        &self,
        method: &str,
        params: &mut Value,
        call: Option<&CallHandle>,
    ) -> Answer {
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let (answer, answered) = oneshot::channel();
        self.shared.pending.lock().insert(id, answer);
        let mut in_flight = InFlight {
            connection: self,
            id,
            token: None,
            call: None,
            answered: false,
        };
        if let Some(handle) = call {
            let (ended, ended_rx) = watch::channel(());
            let target = CallTarget {
                handle: handle.clone(),
                ended: ended_rx,
            };
            self.shared.calls.lock().insert(id, target);
            in_flight.call = Some(ended);
            if handle.is_attached() {
                let token = format!("milpa-{id}");
                self.shared
                    .progress
                    .lock()
                    .insert(token.clone(), handle.clone());
                in_flight.token = Some(token);
            }
        }
        let meta = if self.is_stateless() {
            Some(revision::request_meta(
                *self.shared.log_level.lock(),
                in_flight.token.as_deref(),
            ))
        } else {
            in_flight
                .token
                .as_ref()
                .map(|token| json!({"progressToken": token}))
        };
        if let (Some(Value::Object(meta)), Some(fields)) = (meta, params.as_object_mut()) {
            // Beside whatever `_meta` the request already has.
            match fields.get_mut("_meta") {
                Some(Value::Object(existing)) => existing.extend(meta),
                _ => {
                    fields.insert("_meta".into(), Value::Object(meta));
                }
            }
        }
        // A session that closed after the entry went in has already drained it; one that
        // closed before is caught by `send`.
        let line = serde_json::to_string(&RequestLine {
            jsonrpc: "2.0",
            id,
            method,
            params,
        })
        .map_err(|error| {
            CallError::Unavailable(
                Unavailability::new("a request could not be written").with_cause(error),
            )
        })?;
        self.send_line(line)?;
        let answer = answered.await;
        in_flight.answered = true;
        match answer {
            Ok(answer) => answer,
            Err(dropped) => Err(CallError::Unavailable(self.shared.closed().unwrap_or_else(
                || Unavailability::new("the session ended").with_cause(dropped),
            ))),
        }
    }
}

/// A request as it is written: its params serialized where they are, not copied into a
/// message first.
#[derive(serde::Serialize)]
struct RequestLine<'a> {
    jsonrpc: &'static str,
    id: u64,
    method: &'a str,
    params: &'a Value,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.shared
            .close(Unavailability::new("the gateway shut down"));
    }
}

/// A request waiting for its answer; dropped early, it cancels the request upstream.
struct InFlight<'a> {
    connection: &'a Connection,
    id: u64,
    token: Option<String>,
    /// For a forwarded call: dropped with it, which ends the relays made for it.
    call: Option<watch::Sender<()>>,
    answered: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Some(token) = &self.token {
            self.connection.shared.progress.lock().remove(token);
        }
        if self.call.take().is_some() {
            self.connection.shared.calls.lock().remove(&self.id);
        }
        if self.answered {
            return;
        }
        let waiting = self
            .connection
            .shared
            .pending
            .lock()
            .remove(&self.id)
            .is_some();
        if waiting {
            tracing::debug!(
                target: "milpa::upstream",
                upstream = %self.connection.upstream,
                request = self.id,
                "cancelling the upstream request"
            );
            let _ = self.connection.notify(
                "notifications/cancelled",
                json!({"requestId": self.id, "reason": "The caller cancelled the call"}),
            );
        }
    }
}

async fn write_lines(
    mut output: impl AsyncWrite + Unpin,
    mut lines: mpsc::UnboundedReceiver<String>,
    shared: Arc<Shared>,
) {
    while let Some(mut line) = lines.recv().await {
        line.push('\n');
        let written = async {
            output.write_all(line.as_bytes()).await?;
            output.flush().await
        };
        if let Err(error) = written.await {
            shared.close(
                Unavailability::new(format!("could not write to it ({error})")).with_cause(error),
            );
            return;
        }
    }
}

async fn read_messages(
    upstream: Arc<str>,
    input: impl AsyncRead + Unpin,
    max_message_bytes: usize,
    outgoing: mpsc::UnboundedSender<String>,
    shared: Arc<Shared>,
) {
    let mut lines = FramedRead::new(input, bounded_lines(max_message_bytes));
    loop {
        match lines.next().await {
            Some(Ok(line)) if line.trim_ascii().is_empty() => {}
            Some(Ok(line)) => match serde_json::from_slice::<Value>(&line) {
                Ok(message) => dispatch(&upstream, message, &outgoing, &shared, None),
                Err(error) => tracing::warn!(
                    target: "milpa::upstream",
                    upstream = %upstream,
                    "ignored a line that is not JSON ({error})"
                ),
            },
            None => {
                shared.close(Unavailability::new("it closed its output"));
                return;
            }
            Some(Err(AnyDelimiterCodecError::MaxChunkLengthExceeded)) => {
                shared.close(over_size(max_message_bytes));
                return;
            }
            Some(Err(AnyDelimiterCodecError::Io(error))) => {
                shared.close(
                    Unavailability::new(format!("could not read from it ({error})"))
                        .with_cause(error),
                );
                return;
            }
        }
    }
}

/// Newline-delimited chunks of at most `max` bytes (the newline not counted).
pub(crate) fn bounded_lines(max: usize) -> AnyDelimiterCodec {
    AnyDelimiterCodec::new_with_max_length(b"\n".to_vec(), Vec::new(), max)
}

/// Why a session was reset: the upstream sent a message over its limit.
pub(crate) fn over_size(max_message_bytes: usize) -> Unavailability {
    Unavailability::new(format!(
        "it sent a message over {max_message_bytes} bytes (max_message_bytes); the session was reset"
    ))
}

/// Handles one message from the upstream: an answer, a notification or a request.
/// `origin` is the id of our request whose answer stream carried it (HTTP), if any.
pub(crate) fn dispatch(
    upstream: &str,
    mut message: Value,
    outgoing: &mpsc::UnboundedSender<String>,
    shared: &Shared,
    origin: Option<u64>,
) {
    let id = message.get("id").cloned();
    match (message.get("method").and_then(Value::as_str), id) {
        (Some(method), Some(id)) if relay::is_relayed(method) => {
            let method = method.to_owned();
            let params = message.get_mut("params").map_or(Value::Null, Value::take);
            let target = shared.call_for(origin);
            relay::answer(upstream, id, &method, params, target, outgoing);
        }
        (Some(method), Some(id)) => {
            let reply = if method == "ping" {
                json!({"jsonrpc": "2.0", "id": id, "result": {}})
            } else {
                json!({"jsonrpc": "2.0", "id": id, "error": {
                    "code": METHOD_NOT_FOUND,
                    "message": format!("milpa does not relay `{method}` from upstream servers")
                }})
            };
            let _ = outgoing.send(reply.to_string());
        }
        (Some("notifications/progress"), None) => {
            let params = &message["params"];
            let token = match &params["progressToken"] {
                Value::String(token) => token.clone(),
                other => other.to_string(),
            };
            let handle = shared.progress.lock().get(&token).cloned();
            if let (Some(handle), Some(progress)) = (handle, params["progress"].as_f64()) {
                handle.progress(
                    progress,
                    params["total"].as_f64(),
                    params["message"].as_str(),
                );
            }
        }
        (Some("notifications/tools/list_changed"), None) => {
            tracing::debug!(target: "milpa::upstream", upstream, "its tool list changed");
            shared.tools_may_have_changed();
        }
        (
            Some("notifications/resources/list_changed" | "notifications/prompts/list_changed"),
            None,
        ) => {
            tracing::debug!(target: "milpa::upstream", upstream, "its resource or prompt list changed");
            if let Some(listener) = shared.catalog.lock().clone() {
                listener.lists_changed();
            }
        }
        (Some("notifications/resources/updated"), None) => {
            let listener = shared.catalog.lock().clone();
            if let (Some(listener), Some(uri)) = (listener, message["params"]["uri"].as_str()) {
                listener.updated(uri);
            }
        }
        (Some("notifications/message"), None) => {
            // The server's log goes to the clients (and to ours at debug).
            let log = shared.log.lock().clone();
            // On a call's own stream (HTTP): about that call, for its client only.
            let call = origin.and_then(|id| shared.calls.lock().get(&id).map(|c| c.handle.clone()));
            match log {
                Some(log) => log.relay(upstream, &message["params"], call.as_ref()),
                None => tracing::debug!(
                    target: "milpa::upstream",
                    upstream,
                    "{}",
                    message["params"]
                ),
            }
        }
        (Some(method), None) => {
            tracing::debug!(target: "milpa::upstream", upstream, method, "notification ignored");
        }
        (None, Some(id)) => {
            let Some(id) = id.as_u64() else {
                return;
            };
            let Some(answer) = shared.pending.lock().remove(&id) else {
                return;
            };
            let result = match (
                message.get_mut("result").map(Value::take),
                message.get("error"),
            ) {
                (Some(result), _) => Ok(result),
                (None, Some(error)) => Err(CallError::Rpc {
                    code: error["code"].as_i64().unwrap_or(0),
                    message: error["message"].as_str().unwrap_or("no message").to_owned(),
                }),
                (None, None) => Err(CallError::Rpc {
                    code: 0,
                    message: "an answer with neither result nor error".into(),
                }),
            };
            let _ = answer.send(result);
        }
        (None, None) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> (watch::Sender<()>, CallTarget) {
        let (ended, ended_rx) = watch::channel(());
        let target = CallTarget {
            handle: CallHandle::detached(),
            ended: ended_rx,
        };
        (ended, target)
    }

    /// Over HTTP the stream says which call a request belongs to; over stdio only a single
    /// call in flight does.
    #[test]
    fn a_request_belongs_to_its_stream_or_the_only_call_in_flight() {
        let shared = Shared::default();
        assert!(shared.call_for(None).is_none());
        let (_first_ended, first) = target();
        shared.calls.lock().insert(1, first);
        assert!(shared.call_for(None).is_some(), "the only call");
        assert!(shared.call_for(Some(1)).is_some());
        assert!(shared.call_for(Some(2)).is_none(), "not a call in flight");
        let (_second_ended, second) = target();
        shared.calls.lock().insert(2, second);
        assert!(shared.call_for(None).is_none(), "two calls: not known");
        assert!(shared.call_for(Some(2)).is_some());
    }
}
