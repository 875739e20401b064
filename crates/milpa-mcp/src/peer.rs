//! [`Peer`]: the MCP side of a tool's [`milpa::CallHandle`] — progress, log messages,
//! requests to the client and cancellation, for one `tools/call`.

mod request_error;

use std::sync::Arc;

use milpa::{BoxFuture, CallPeer, LogLevel, PeerError};
use parking_lot::Mutex;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::client_link::{ClientLink, RequestMeta, Route, capability_for};
use crate::jsonrpc;
use crate::protocol::INPUT_KEY_META;

pub(crate) use request_error::ToolRequestError;

/// One call's line back to the client.
pub(crate) struct Peer {
    client: Arc<ClientLink>,
    /// The call's own cancellation (see `session::CallCancel`).
    control: CancellationToken,
    progress_token: Option<Value>,
    route: Route,
    last_progress: Mutex<Option<f64>>,
    /// 2026-07-28: what the request declared in its `_meta` (capabilities, log level). The
    /// connection's declaration (`initialize`) is used when `None`.
    request: Option<Arc<RequestMeta>>,
    /// 2026-07-28: the capability the tool needed and the request did not declare; the
    /// call is then answered with `-32021` instead of its result.
    missing_capability: Mutex<Option<&'static str>>,
    /// 2026-07-28: what the tool asked the client this round and has no answer for yet,
    /// by input key (becomes the `inputRequests` of an `input_required` result), and the
    /// answers it has (from earlier rounds and the retry's `inputResponses`).
    inputs: Mutex<ToolInputs>,
}

/// A 2026-07-28 call's requests to the client, answered across `input_required` rounds.
#[derive(Debug, Default)]
pub(crate) struct ToolInputs {
    /// Answers by input key.
    pub answers: Map<String, Value>,
    /// Requests without an answer yet, by input key.
    pub asked: Map<String, Value>,
    /// Requests made so far, for keys the tool did not choose.
    count: usize,
}

impl Peer {
    pub fn new(
        client: Arc<ClientLink>,
        control: CancellationToken,
        progress_token: Option<Value>,
        route: Route,
        request: Option<Arc<RequestMeta>>,
    ) -> Peer {
        Peer {
            client,
            control,
            progress_token,
            route,
            last_progress: Mutex::new(None),
            request,
            missing_capability: Mutex::new(None),
            inputs: Mutex::new(ToolInputs::default()),
        }
    }

    fn inputs(&self) -> parking_lot::MutexGuard<'_, ToolInputs> {
        self.inputs.lock()
    }

    /// 2026-07-28: the answers gathered before this round.
    pub fn add_answers(&self, answers: Map<String, Value>) {
        self.inputs().answers.extend(answers);
    }

    /// 2026-07-28: what was asked without an answer this round, and every answer so far.
    pub fn take_inputs(&self) -> (Map<String, Value>, Map<String, Value>) {
        let mut inputs = self.inputs();
        (
            std::mem::take(&mut inputs.asked),
            std::mem::take(&mut inputs.answers),
        )
    }

    /// 2026-07-28: the capability the call needed and its request did not declare.
    pub fn missing_capability(&self) -> Option<&'static str> {
        *self.missing_capability.lock()
    }

    /// Asks the client `method`: on the connection's route, or (2026-07-28) in the call's
    /// next `input_required` round unless an earlier round answered it.
    pub async fn request_client(
        &self,
        method: &str,
        mut params: Value,
    ) -> Result<Value, ToolRequestError> {
        if self.control.is_cancelled() {
            return Err(ToolRequestError::Cancelled);
        }
        let chosen = take_input_key(&mut params);
        if let Some(request) = &self.request {
            // 2026-07-28 has no server-to-client requests on a response stream.
            if let Some(capability) = capability_for(method)
                && !request.declares(capability)
            {
                *self.missing_capability.lock() = Some(capability);
                return Err(ToolRequestError::NotDeclaredByRequest { capability });
            }
            // Answered by an earlier round, or asked in the `input_required` result.
            let mut inputs = self.inputs();
            inputs.count += 1;
            let key = chosen.unwrap_or_else(|| format!("{method}#{}", inputs.count));
            if let Some(answer) = inputs.answers.get(&key) {
                return Ok(answer.clone());
            }
            inputs
                .asked
                .insert(key.clone(), json!({"method": method, "params": params}));
            return Err(ToolRequestError::AskedInRound {
                method: method.to_owned(),
                key,
            });
        }
        Ok(self
            .client
            .request_client(method, params, &self.route)
            .await?)
    }

    /// Sends a notification on this call's route; nothing once the call is cancelled.
    pub fn notify_client(&self, method: &str, params: &Value) {
        if self.control.is_cancelled() {
            return;
        }
        self.client
            .notify(&self.route, jsonrpc::notification(method, params));
    }
}

/// Takes the tool's [`INPUT_KEY_META`] out of a request's params (and `_meta` with it when
/// nothing else is left there): it is ours, not the client's.
fn take_input_key(params: &mut Value) -> Option<String> {
    let meta = params.get_mut("_meta").and_then(Value::as_object_mut)?;
    let key = meta.remove(INPUT_KEY_META);
    if meta.is_empty()
        && let Some(object) = params.as_object_mut()
    {
        object.remove("_meta");
    }
    key.and_then(|key| key.as_str().map(str::to_owned))
}

impl CallPeer for Peer {
    fn progress(&self, progress: f64, total: Option<f64>, message: Option<&str>) {
        let Some(token) = &self.progress_token else {
            return;
        };
        if self.control.is_cancelled() || !progress.is_finite() {
            return;
        }
        {
            // MCP: progress MUST increase with each notification.
            let mut last = self.last_progress.lock();
            if last.is_some_and(|l| progress <= l) {
                return;
            }
            *last = Some(progress);
        }
        let mut params = Map::with_capacity(4);
        params.insert("progressToken".into(), token.clone());
        params.insert("progress".into(), Value::from(progress));
        if let Some(total) = total.filter(|t| t.is_finite()) {
            params.insert("total".into(), Value::from(total));
        }
        if let Some(message) = message {
            params.insert("message".into(), Value::String(message.to_owned()));
        }
        self.client.notify(
            &self.route,
            jsonrpc::notification("notifications/progress", &params),
        );
    }

    fn log(&self, level: LogLevel, logger: Option<&str>, data: Value) {
        let enabled = match &self.request {
            Some(request) => request
                .log_level
                .is_some_and(|threshold| level >= threshold),
            None => self.client.log_enabled(level),
        };
        if !enabled || self.control.is_cancelled() {
            return;
        }
        let mut params = Map::with_capacity(3);
        params.insert("level".into(), json!(level));
        if let Some(logger) = logger {
            params.insert("logger".into(), Value::String(logger.to_owned()));
        }
        params.insert("data".into(), data);
        self.client.notify(
            &self.route,
            jsonrpc::notification("notifications/message", &params),
        );
    }

    fn request<'a>(
        &'a self,
        method: &'a str,
        params: Value,
    ) -> BoxFuture<'a, Result<Value, PeerError>> {
        Box::pin(async move { Ok(self.request_client(method, params).await?) })
    }

    fn is_cancelled(&self) -> bool {
        self.control.is_cancelled()
    }

    fn cancelled(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.control.cancelled())
    }

    fn client_capabilities(&self) -> Option<Value> {
        match &self.request {
            Some(request) => Some(request.capabilities.clone()),
            None => self.client.capabilities(),
        }
    }

    fn close_response_stream(&self) -> bool {
        match &self.route {
            #[cfg(feature = "http")]
            Route::Resumable(stream) if !self.control.is_cancelled() => {
                stream.send(crate::client_link::Out::Release).is_ok()
            }
            _ => false,
        }
    }
}
