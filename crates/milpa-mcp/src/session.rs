//! One MCP connection's protocol state, whatever carries it: initialization and version,
//! the client's capabilities and log level, the calls in flight (for cancellation), and the
//! requests this side sent to the client (sampling, elicitation) awaiting their answers.
//!
//! A transport feeds messages in ([`Session::dispatch`], [`Session::notify`],
//! [`Session::answer`]) and says where outgoing messages go with a [`Route`].

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Instant, SystemTime};

use milpa::confirm::{ConfirmationBinding, unix_millis};
use milpa::{
    CallHandle, ErrorCode, LogLevel, RuntimeMeta, ToolContext, ToolRegistry, ToolResult, channel,
    generate_request_id,
};
use serde::Deserialize;
use serde::de::{self, value::StrDeserializer};
use serde_json::{Map, Value, json};
use tokio::sync::{Notify, mpsc, oneshot};

use crate::jsonrpc::{
    self, ErrorObject, INVALID_PARAMS, INVALID_REQUEST, Incoming, METHOD_NOT_FOUND, Params,
    Rejected, RequestId,
};
use crate::mapping;
use crate::peer::Peer;
use crate::protocol::{self, ServerOptions};

/// A message on its way out, or the end of a stream.
#[derive(Debug)]
pub(crate) enum Out {
    /// One serialized JSON-RPC message.
    Msg(String),
    /// Ends the stream (HTTP: the response was sent).
    Close,
}

/// Where messages related to one request go.
#[derive(Clone, Debug)]
pub(crate) enum Route {
    /// A channel the transport drains (stdio's writer, one HTTP response stream).
    Channel(mpsc::UnboundedSender<Out>),
    /// The session's standalone stream (HTTP `GET`), if one is open.
    Standalone,
}

/// The server's shared, precomputed state.
pub(crate) struct Shared {
    pub registry: Arc<ToolRegistry>,
    pub options: ServerOptions,
    tools: Vec<Value>,
}

impl Shared {
    pub fn new(registry: Arc<ToolRegistry>, options: ServerOptions) -> Arc<Shared> {
        let tools = registry.definitions().map(mapping::tool_entry).collect();
        Arc::new(Shared {
            registry,
            options,
            tools,
        })
    }

    fn page(&self, cursor: Option<&str>) -> Result<Value, ErrorObject> {
        let total = self.tools.len();
        let start = match cursor {
            None => 0,
            Some(cursor) => decode_cursor(cursor, total)
                .ok_or_else(|| ErrorObject::new(INVALID_PARAMS, "Invalid cursor"))?,
        };
        let size = self.options.page_size.max(1);
        let end = (start + size).min(total);
        let mut result = Map::new();
        result.insert(
            "tools".into(),
            Value::Array(self.tools[start..end].to_vec()),
        );
        if end < total {
            result.insert(
                "nextCursor".into(),
                Value::String(encode_cursor(end, total)),
            );
        }
        Ok(Value::Object(result))
    }
}

fn encode_cursor(offset: usize, total: usize) -> String {
    format!("t{offset:x}.{total:x}")
}

fn decode_cursor(cursor: &str, total: usize) -> Option<usize> {
    let (offset, count) = cursor.strip_prefix('t')?.split_once('.')?;
    let offset = usize::from_str_radix(offset, 16).ok()?;
    let count = usize::from_str_radix(count, 16).ok()?;
    (count == total && offset < total).then_some(offset)
}

/// Who sent a request over HTTP (stdio callers are the trusted local process).
#[derive(Debug, Clone, Default)]
pub(crate) struct Caller {
    pub principal: Option<String>,
    pub scopes: Vec<String>,
    pub ip: Option<String>,
    pub user_agent: Option<String>,
}

/// What the transport should do with a request.
pub(crate) enum Dispatch {
    /// Send this response now.
    Reply(String),
    /// Run this tool call; it yields the response, or `None` when it was cancelled (no
    /// response is sent for a cancelled request).
    Call(Pin<Box<dyn Future<Output = Option<String>> + Send + 'static>>),
}

#[derive(Debug)]
struct ClientInfo {
    version: &'static str,
    capabilities: Value,
}

/// A running call's cancellation state.
#[derive(Debug, Default)]
pub(crate) struct CallControl {
    cancelled: AtomicBool,
    notify: Notify,
}

impl CallControl {
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    pub async fn cancelled(&self) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}

const LOG_OFF: u8 = u8::MAX;

/// One connection's protocol state.
pub(crate) struct Session {
    pub shared: Arc<Shared>,
    stdio: bool,
    /// Set once, by `initialize`: the session is initialized from then on.
    client: OnceLock<ClientInfo>,
    /// The lowest level sent (`LogLevel as u8`, whose order is the levels' order), or
    /// `LOG_OFF`.
    log_level: AtomicU8,
    // foldhash: an insert and a removal on every call, and SipHash showed in profiles.
    // Its seed is random per map; a client that forces collisions only slows its own
    // session.
    calls: Mutex<HashMap<RequestId, Arc<CallControl>, foldhash::fast::RandomState>>,
    pending: Mutex<HashMap<u64, oneshot::Sender<Result<Value, milpa::PeerError>>>>,
    next_id: AtomicU64,
    standalone: Mutex<Vec<mpsc::UnboundedSender<Out>>>,
    closed: AtomicBool,
    /// HTTP: the session id, for tool contexts.
    pub session_id: Option<String>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("stdio", &self.stdio)
            .field("session_id", &self.session_id)
            .finish_non_exhaustive()
    }
}

impl Session {
    pub fn new(shared: Arc<Shared>, stdio: bool, session_id: Option<String>) -> Arc<Session> {
        let level = shared
            .options
            .default_log_level
            .map_or(LOG_OFF, |level| level as u8);
        Arc::new(Session {
            shared,
            stdio,
            client: OnceLock::new(),
            log_level: AtomicU8::new(level),
            calls: Mutex::new(HashMap::default()),
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            standalone: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
            session_id,
        })
    }

    /// The negotiated protocol version, once initialized.
    pub fn protocol_version(&self) -> Option<&'static str> {
        self.client.get().map(|c| c.version)
    }

    pub fn is_initialized(&self) -> bool {
        self.client.get().is_some()
    }

    /// The capabilities the client declared at `initialize`.
    pub fn client_capabilities(&self) -> Option<Value> {
        self.client.get().map(|c| c.capabilities.clone())
    }

    fn client_has(&self, capability: &str) -> bool {
        self.client
            .get()
            .and_then(|c| c.capabilities.get(capability))
            .is_some_and(|v| !v.is_null())
    }

    /// Whether the client can answer form-mode `elicitation/create` (an empty
    /// `elicitation` object means form mode; a client that declared only `url` cannot).
    pub fn client_supports_form_elicitation(&self) -> bool {
        match self
            .client
            .get()
            .and_then(|c| c.capabilities.get("elicitation"))
        {
            Some(Value::Object(map)) => map.is_empty() || map.contains_key("form"),
            _ => false,
        }
    }

    pub fn log_enabled(&self, level: LogLevel) -> bool {
        let threshold = self.log_level.load(Ordering::Relaxed);
        threshold != LOG_OFF && level as u8 >= threshold
    }

    /// Handles one incoming message (or answers why it was rejected): requests are
    /// dispatched with `route` (cloned only for them), notifications and responses to this
    /// side's requests are taken in and get nothing to send.
    pub fn handle(
        self: &Arc<Self>,
        message: Result<Incoming, Rejected>,
        caller: &Caller,
        route: &Route,
    ) -> Option<Dispatch> {
        match message {
            Err(rejected) => Some(Dispatch::Reply(jsonrpc::error_response(
                rejected.id.as_ref(),
                &rejected.error,
            ))),
            Ok(Incoming::Request { id, method, params }) => {
                Some(self.dispatch(id, &method, params, caller, route.clone()))
            }
            Ok(Incoming::Notification { method, params }) => {
                self.notify(&method, params);
                None
            }
            Ok(Incoming::Response { id, result }) => {
                self.answer(&id, result);
                None
            }
        }
    }

    /// Handles one request. Calls are registered for cancellation before this returns.
    pub fn dispatch(
        self: &Arc<Self>,
        id: RequestId,
        method: &str,
        params: Option<Params>,
        caller: &Caller,
        route: Route,
    ) -> Dispatch {
        let reply = |result: Result<Value, ErrorObject>| {
            Dispatch::Reply(match result {
                Ok(value) => jsonrpc::response(&id, &value),
                Err(error) => jsonrpc::error_response(Some(&id), &error),
            })
        };
        match method {
            "initialize" => reply(self.initialize(jsonrpc::params_value(params))),
            "ping" => reply(Ok(json!({}))),
            _ if !self.is_initialized() => reply(Err(ErrorObject::new(
                METHOD_NOT_FOUND,
                format!(
                    "Method not found: {method} (the session is not initialized; send initialize first)"
                ),
            ))),
            "tools/list" => {
                let params = jsonrpc::params_value(params);
                let cursor = params
                    .as_ref()
                    .and_then(|p| p.get("cursor"))
                    .filter(|c| !c.is_null());
                match cursor {
                    Some(Value::String(c)) => reply(self.shared.page(Some(c))),
                    Some(_) => reply(Err(ErrorObject::new(INVALID_PARAMS, "Invalid cursor"))),
                    None => reply(self.shared.page(None)),
                }
            }
            "tools/call" => match parse_call(params) {
                Ok(call) => self.start_call(id, call, caller, route),
                Err(error) => reply(Err(error)),
            },
            "logging/setLevel" => {
                let level = jsonrpc::params_value(params);
                let level = level
                    .as_ref()
                    .and_then(|p| p.get("level"))
                    // The name only (a derived enum would also take `{"info": null}`).
                    .and_then(Value::as_str)
                    .and_then(|name| {
                        LogLevel::deserialize(StrDeserializer::<de::value::Error>::new(name)).ok()
                    });
                match level {
                    Some(level) => {
                        self.log_level.store(level as u8, Ordering::Relaxed);
                        reply(Ok(json!({})))
                    }
                    None => reply(Err(ErrorObject::new(
                        INVALID_PARAMS,
                        "Invalid params: level must be one of debug, info, notice, warning, error, critical, alert, emergency",
                    ))),
                }
            }
            other => reply(Err(ErrorObject::new(
                METHOD_NOT_FOUND,
                format!("Method not found: {other}"),
            ))),
        }
    }

    fn initialize(&self, params: Option<Value>) -> Result<Value, ErrorObject> {
        let params = params.unwrap_or(Value::Null);
        let Some(requested) = params.get("protocolVersion").and_then(Value::as_str) else {
            return Err(ErrorObject::new(
                INVALID_PARAMS,
                "Invalid params: protocolVersion (a string) is required",
            ));
        };
        let capabilities = match params.get("capabilities") {
            None | Some(Value::Null) => json!({}),
            Some(Value::Object(map)) => Value::Object(map.clone()),
            Some(_) => {
                return Err(ErrorObject::new(
                    INVALID_PARAMS,
                    "Invalid params: capabilities must be an object",
                ));
            }
        };
        let version = protocol::negotiate(requested);
        if self
            .client
            .set(ClientInfo {
                version,
                capabilities,
            })
            .is_err()
        {
            return Err(ErrorObject::new(
                INVALID_REQUEST,
                "Invalid Request: the session is already initialized",
            ));
        }
        let client_name = params
            .get("clientInfo")
            .and_then(|c| c.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("?");
        tracing::debug!(target: "milpa_mcp", client = client_name, version, "initialized");
        let options = &self.shared.options;
        let mut info = Map::new();
        info.insert("name".into(), Value::String(options.name.clone()));
        info.insert("version".into(), Value::String(options.version.clone()));
        if let Some(title) = &options.title {
            info.insert("title".into(), Value::String(title.clone()));
        }
        let mut result = Map::new();
        result.insert("protocolVersion".into(), Value::String(version.into()));
        result.insert(
            "capabilities".into(),
            json!({"tools": {"listChanged": false}, "logging": {}}),
        );
        result.insert("serverInfo".into(), Value::Object(info));
        if let Some(instructions) = &options.instructions {
            result.insert("instructions".into(), Value::String(instructions.clone()));
        }
        Ok(Value::Object(result))
    }

    fn start_call(
        self: &Arc<Self>,
        id: RequestId,
        call: CallParams,
        caller: &Caller,
        route: Route,
    ) -> Dispatch {
        let control = Arc::new(CallControl::default());
        {
            let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
            if calls.contains_key(&id) {
                drop(calls);
                return Dispatch::Reply(jsonrpc::error_response(
                    Some(&id),
                    &ErrorObject::new(
                        INVALID_REQUEST,
                        "Invalid Request: a request with this id is still running",
                    ),
                ));
            }
            calls.insert(id.clone(), control.clone());
        }
        let session = self.clone();
        let caller = caller.clone();
        let grace = self.shared.options.cancel_grace;
        Dispatch::Call(Box::pin(async move {
            let guard = CallGuard {
                session: &session,
                id: &id,
            };
            let work = session.run_call(call, &caller, route, control.clone());
            let value = tokio::select! {
                biased;
                () = async {
                    control.cancelled().await;
                    if !grace.is_zero() {
                        tokio::time::sleep(grace).await;
                    }
                } => None,
                value = work => Some(value),
            };
            drop(guard);
            if control.is_cancelled() {
                return None;
            }
            value.map(|(name, result)| {
                jsonrpc::call_response(&id, &mapping::CallResult::new(&name, &result))
            })
        }))
    }

    async fn run_call(
        self: &Arc<Self>,
        call: CallParams,
        caller: &Caller,
        route: Route,
        control: Arc<CallControl>,
    ) -> (String, ToolResult) {
        let peer = Arc::new(Peer::new(self.clone(), control, call.progress_token, route));
        let ctx = self.context(caller, CallHandle::new(peer.clone()));
        let result = self
            .shared
            .registry
            .call(&call.name, call.arguments, &ctx)
            .await;
        let result = if result.requires_confirmation()
            && self.shared.options.elicitation_confirmation
            && self.client_supports_form_elicitation()
        {
            self.confirm_by_elicitation(&call.name, result, &ctx, &peer)
                .await
        } else {
            result
        };
        (call.name, result)
    }

    fn context(&self, caller: &Caller, handle: CallHandle) -> ToolContext {
        let request_id = generate_request_id();
        if self.stdio {
            return ToolContext::builder(channel::MCP)
                .request_id(request_id)
                .principal("stdio")
                .scopes(["*"])
                .call_handle(handle)
                .build();
        }
        let mut builder = ToolContext::builder(channel::MCP)
            .request_id(request_id)
            .scopes(caller.scopes.iter().cloned())
            .call_handle(handle);
        if let Some(principal) = &caller.principal {
            builder = builder.principal(principal.clone());
        }
        if let Some(ip) = &caller.ip {
            builder = builder.ip(ip.clone());
        }
        if let Some(agent) = &caller.user_agent {
            builder = builder.user_agent(agent.clone());
        }
        if let Some(session) = &self.session_id {
            builder = builder.extra("mcp_session_id", Value::String(session.clone()));
        }
        builder.build()
    }

    /// Asks the client to confirm through `elicitation/create`; runs the stored call on
    /// accept. Falls back to the token round trip when the client cannot be asked.
    async fn confirm_by_elicitation(
        &self,
        tool: &str,
        first: ToolResult,
        ctx: &ToolContext,
        peer: &Peer,
    ) -> ToolResult {
        let Some(token) = first.confirm_token().map(str::to_owned) else {
            return first;
        };
        let started = Instant::now();
        let summary = first
            .data
            .get("action_summary")
            .and_then(Value::as_str)
            .unwrap_or(tool)
            .to_owned();
        let mut params = json!({
            "message": format!("Confirm this action: {summary}"),
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "confirm": {
                        "type": "boolean",
                        "title": "Confirm",
                        "description": format!("Run {summary}?"),
                        "default": false
                    }
                },
                "required": ["confirm"]
            }
        });
        if self.protocol_version() == Some("2025-11-25") {
            params["mode"] = json!("form");
        }
        let answer = match peer.request_client("elicitation/create", params).await {
            Ok(answer) => answer,
            Err(error) => {
                tracing::warn!(target: "milpa_mcp", tool, %error, "elicitation failed; falling back to confirm_token");
                return first;
            }
        };
        let action = answer.get("action").and_then(Value::as_str).unwrap_or("");
        let confirmed = answer
            .get("content")
            .and_then(|c| c.get("confirm"))
            .and_then(Value::as_bool);
        let outcome = match (action, confirmed) {
            ("accept", Some(false)) => "declined",
            ("accept", _) => {
                return self
                    .shared
                    .registry
                    .call(tool, json!({"confirm_token": token}), ctx)
                    .await;
            }
            ("decline", _) => "declined",
            ("cancel", _) => "cancelled",
            _ => {
                tracing::warn!(target: "milpa_mcp", tool, action, "unknown elicitation action; falling back to confirm_token");
                return first;
            }
        };
        // Revoke the token: nobody confirmed it.
        let binding = ConfirmationBinding::for_call(tool, ctx);
        let now = unix_millis(SystemTime::now());
        let _ = self
            .shared
            .registry
            .confirmation_store()
            .consume(&token, &binding, now)
            .await;
        tracing::info!(target: "milpa_mcp", tool, request_id = ctx.request_id(), outcome, "confirmation refused by the client");
        let message = if outcome == "declined" {
            format!("Not done: confirmation of {summary} was declined.")
        } else {
            format!("Not done: confirmation of {summary} was cancelled.")
        };
        let mut result = ToolResult::blocked(message, None);
        result
            .meta
            .set_code(ErrorCode::Other("CONFIRMATION_DECLINED".into()));
        result
            .meta
            .insert("confirmation", Value::String(outcome.into()));
        result.meta.set_runtime(RuntimeMeta::new(
            tool,
            started.elapsed().as_millis() as u64,
            ctx,
        ));
        result
    }

    /// Handles a notification from the client.
    pub fn notify(&self, method: &str, params: Option<Params>) {
        match method {
            "notifications/cancelled" => {
                if let Some(id) = jsonrpc::params_value(params)
                    .as_ref()
                    .and_then(|p| p.get("requestId"))
                    .and_then(RequestId::from_value)
                {
                    self.cancel(&id);
                }
            }
            "notifications/initialized" => {}
            other => {
                tracing::trace!(target: "milpa_mcp", method = other, "notification ignored");
            }
        }
    }

    /// Routes the client's answer to a request this side sent.
    pub fn answer(&self, id: &RequestId, result: Result<Value, ErrorObject>) {
        let RequestId::Number(n) = id else {
            return;
        };
        let Ok(n) = u64::try_from(*n) else {
            return;
        };
        let sender = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&n);
        if let Some(sender) = sender {
            let _ = sender.send(result.map_err(|e| milpa::PeerError {
                code: Some(e.code),
                message: e.message,
            }));
        }
    }

    /// Cancels the call with this request id, if it runs.
    pub fn cancel(&self, id: &RequestId) {
        let control = self
            .calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned();
        if let Some(control) = control {
            control.cancel();
        }
    }

    /// How many calls are running.
    pub fn calls_in_flight(&self) -> usize {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// The client is gone: cancel every call, fail every pending client request, end the
    /// standalone streams.
    pub fn shutdown(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.fail_pending();
        let calls: Vec<_> = self
            .calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        for control in calls {
            control.cancel();
        }
        for stream in self
            .standalone
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            let _ = stream.send(Out::Close);
        }
    }

    /// Fails every request awaiting the client's answer (the client cannot answer any more).
    pub fn fail_pending(&self) {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Adds a standalone stream (HTTP `GET`); later streams are preferred.
    pub fn add_standalone(&self, stream: mpsc::UnboundedSender<Out>) {
        let mut streams = self.standalone.lock().unwrap_or_else(|e| e.into_inner());
        streams.retain(|s| !s.is_closed());
        streams.push(stream);
    }

    /// Sends a message along `route`; false when it cannot be delivered.
    pub fn send(&self, route: &Route, message: String) -> bool {
        match route {
            Route::Channel(tx) => tx.send(Out::Msg(message)).is_ok(),
            Route::Standalone => {
                let mut streams = self.standalone.lock().unwrap_or_else(|e| e.into_inner());
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

    /// Sends a request to the client along `route` and awaits the answer.
    pub async fn request_client(
        &self,
        method: &str,
        params: Value,
        route: &Route,
    ) -> Result<Value, milpa::PeerError> {
        let needed = match method {
            "sampling/createMessage" => Some("sampling"),
            "elicitation/create" => Some("elicitation"),
            "roots/list" => Some("roots"),
            _ => None,
        };
        if let Some(capability) = needed {
            if !self.client_has(capability) {
                return Err(milpa::PeerError::new(format!(
                    "the client did not declare the {capability} capability"
                )));
            }
        }
        if self.is_closed() {
            return Err(milpa::PeerError::new("the client is not connected"));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, tx);
        let mut guard = PendingGuard {
            session: self,
            id,
            route,
            answered: false,
        };
        if !self.send(route, jsonrpc::request(id, method, &params)) {
            guard.answered = true;
            return Err(milpa::PeerError::new(
                "no open stream to the client to send the request on",
            ));
        }
        let answer = match self.shared.options.client_request_timeout {
            Some(limit) => match tokio::time::timeout(limit, rx).await {
                Ok(answer) => answer,
                Err(_) => {
                    return Err(milpa::PeerError::new(format!(
                        "the client did not answer {method} within {} s",
                        limit.as_secs()
                    )));
                }
            },
            None => rx.await,
        };
        guard.answered = true;
        match answer {
            Ok(result) => result,
            Err(_) => Err(milpa::PeerError::new("the client went away")),
        }
    }
}

/// Removes a finished (or dropped) call from the in-flight table.
struct CallGuard<'a> {
    session: &'a Session,
    id: &'a RequestId,
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        self.session
            .calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(self.id);
    }
}

/// Forgets a request to the client when its waiter goes away; tells the client when it
/// was abandoned unanswered.
struct PendingGuard<'a> {
    session: &'a Session,
    id: u64,
    route: &'a Route,
    answered: bool,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        let removed = self
            .session
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id)
            .is_some();
        if removed && !self.answered && !self.session.is_closed() {
            self.session.send(
                self.route,
                jsonrpc::notification(
                    "notifications/cancelled",
                    &json!({"requestId": self.id, "reason": "The tool call that asked was cancelled"}),
                ),
            );
        }
    }
}

struct CallParams {
    name: String,
    arguments: Value,
    progress_token: Option<Value>,
}

/// `tools/call` parameters as they arrive; checked by [`parse_call`].
#[derive(serde::Deserialize)]
struct CallWire {
    #[serde(default)]
    name: Option<Value>,
    #[serde(default)]
    arguments: Option<Value>,
    #[serde(default, rename = "_meta")]
    meta: Option<Value>,
}

fn parse_call(params: Option<Params>) -> Result<CallParams, ErrorObject> {
    let needs_object = || {
        ErrorObject::new(
            INVALID_PARAMS,
            "Invalid params: tools/call needs an object with a name",
        )
    };
    let params = params.ok_or_else(needs_object)?;
    if !params.get().starts_with('{') {
        return Err(needs_object());
    }
    let wire: CallWire = params
        .parse()
        .map_err(|error| ErrorObject::new(INVALID_PARAMS, format!("Invalid params: {error}")))?;
    let name = match wire.name {
        Some(Value::String(name)) => name,
        _ => {
            return Err(ErrorObject::new(
                INVALID_PARAMS,
                "Invalid params: name (a string) is required",
            ));
        }
    };
    let arguments = match wire.arguments {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(args @ Value::Object(_)) => args,
        Some(_) => {
            return Err(ErrorObject::new(
                INVALID_PARAMS,
                "Invalid params: arguments must be an object",
            ));
        }
    };
    let progress_token = wire
        .meta
        .as_ref()
        .and_then(|m| m.get("progressToken"))
        .filter(|t| t.is_string() || t.is_number())
        .cloned();
    Ok(CallParams {
        name,
        arguments,
        progress_token,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_are_checked() {
        assert_eq!(decode_cursor(&encode_cursor(3, 10), 10), Some(3));
        assert_eq!(decode_cursor(&encode_cursor(3, 10), 11), None);
        assert_eq!(decode_cursor("garbage", 10), None);
        assert_eq!(decode_cursor(&encode_cursor(10, 10), 10), None);
    }

    fn reply(session: &Arc<Session>, line: &str) -> Value {
        let jsonrpc::Parsed::Single(message) = jsonrpc::parse(line.as_bytes()) else {
            panic!("not a single message: {line}");
        };
        match session.handle(message, &Caller::default(), &Route::Standalone) {
            Some(Dispatch::Reply(reply)) => serde_json::from_str(&reply).unwrap(),
            _ => panic!("no reply to {line}"),
        }
    }

    #[test]
    fn log_levels_are_set_by_name_and_filter_in_order() {
        let names = [
            "debug",
            "info",
            "notice",
            "warning",
            "error",
            "critical",
            "alert",
            "emergency",
        ];
        let levels = [
            LogLevel::Debug,
            LogLevel::Info,
            LogLevel::Notice,
            LogLevel::Warning,
            LogLevel::Error,
            LogLevel::Critical,
            LogLevel::Alert,
            LogLevel::Emergency,
        ];
        let shared = Shared::new(Arc::new(ToolRegistry::new()), ServerOptions::default());
        let session = Session::new(shared, true, None);
        assert!(!session.is_initialized());
        let init = reply(
            &session,
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}"#,
        );
        assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
        assert!(session.is_initialized());
        // The default threshold is info.
        assert!(!session.log_enabled(LogLevel::Debug));
        assert!(session.log_enabled(LogLevel::Info));
        for (i, name) in names.iter().enumerate() {
            let line = format!(
                r#"{{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{{"level":"{name}"}}}}"#
            );
            assert_eq!(reply(&session, &line)["result"], json!({}), "{name}");
            for (j, level) in levels.iter().enumerate() {
                assert_eq!(json!(level), names[j]);
                assert_eq!(session.log_enabled(*level), j >= i, "{name} vs {level:?}");
            }
        }
        for bad in [r#""verbose""#, r#""Info""#, r#"{"info":null}"#, "3", "null"] {
            let line = format!(
                r#"{{"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{{"level":{bad}}}}}"#
            );
            assert_eq!(
                reply(&session, &line)["error"]["code"],
                INVALID_PARAMS,
                "{bad}"
            );
        }
        // A refused level leaves the last one set (emergency).
        assert!(!session.log_enabled(LogLevel::Alert));
        assert!(session.log_enabled(LogLevel::Emergency));
    }
}
