//! [`Peer`]: the MCP side of a tool's [`milpa::CallHandle`] — progress, log messages,
//! requests to the client and cancellation, for one `tools/call`.

use std::sync::{Arc, Mutex};

use milpa::{BoxFuture, CallPeer, LogLevel, PeerError};
use serde_json::{Map, Value, json};

use crate::jsonrpc;
use crate::protocol::MISSING_REQUIRED_CLIENT_CAPABILITY;
use crate::session::{CallControl, ClientLink, RequestMeta, Route, capability_for};

/// One call's line back to the client.
pub(crate) struct Peer {
    client: Arc<ClientLink>,
    control: Arc<CallControl>,
    progress_token: Option<Value>,
    route: Route,
    last_progress: Mutex<Option<f64>>,
    /// 2026-07-28: what the request declared in its `_meta` (capabilities, log level). The
    /// connection's declaration (`initialize`) is used when `None`.
    request: Option<Arc<RequestMeta>>,
    /// 2026-07-28: the capability the tool needed and the request did not declare; the
    /// call is then answered with `-32021` instead of its result.
    missing_capability: Mutex<Option<&'static str>>,
}

impl Peer {
    pub fn new(
        client: Arc<ClientLink>,
        control: Arc<CallControl>,
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
        }
    }

    /// 2026-07-28: the capability the call needed and its request did not declare.
    pub fn missing_capability(&self) -> Option<&'static str> {
        *self
            .missing_capability
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    pub async fn request_client(&self, method: &str, params: Value) -> Result<Value, PeerError> {
        if self.control.is_cancelled() {
            return Err(PeerError::new("the call was cancelled"));
        }
        if let Some(request) = &self.request {
            // 2026-07-28 has no server-to-client requests on a response stream.
            if let Some(capability) = capability_for(method)
                && !request.declares(capability)
            {
                *self
                    .missing_capability
                    .lock()
                    .unwrap_or_else(|e| e.into_inner()) = Some(capability);
                return Err(PeerError {
                    code: Some(MISSING_REQUIRED_CLIENT_CAPABILITY),
                    message: format!("the request did not declare the {capability} capability"),
                });
            }
            return Err(PeerError::new(format!(
                "{method} cannot be sent to a 2026-07-28 client during a call"
            )));
        }
        self.client
            .request_client(method, params, &self.route)
            .await
    }

    /// Sends a notification on this call's route; nothing once the call is cancelled.
    pub fn notify_client(&self, method: &str, params: &Value) {
        if self.control.is_cancelled() {
            return;
        }
        self.client
            .send(&self.route, jsonrpc::notification(method, params));
    }
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
            let mut last = self.last_progress.lock().unwrap_or_else(|e| e.into_inner());
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
        self.client.send(
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
        self.client.send(
            &self.route,
            jsonrpc::notification("notifications/message", &params),
        );
    }

    fn request<'a>(
        &'a self,
        method: &'a str,
        params: Value,
    ) -> BoxFuture<'a, Result<Value, PeerError>> {
        Box::pin(self.request_client(method, params))
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
}
