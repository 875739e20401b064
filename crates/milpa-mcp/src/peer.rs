//! [`Peer`]: the MCP side of a tool's [`milpa::CallHandle`] — progress, log messages,
//! requests to the client and cancellation, for one `tools/call`.

use std::sync::{Arc, Mutex};

use milpa::{BoxFuture, CallPeer, LogLevel, PeerError};
use serde_json::{Map, Value, json};

use crate::jsonrpc;
use crate::session::{CallControl, ClientLink, Out, Route};

/// One call's line back to the client.
pub(crate) struct Peer {
    client: Arc<ClientLink>,
    control: Arc<CallControl>,
    progress_token: Option<Value>,
    route: Route,
    last_progress: Mutex<Option<f64>>,
}

impl Peer {
    pub fn new(
        client: Arc<ClientLink>,
        control: Arc<CallControl>,
        progress_token: Option<Value>,
        route: Route,
    ) -> Peer {
        Peer {
            client,
            control,
            progress_token,
            route,
            last_progress: Mutex::new(None),
        }
    }

    pub async fn request_client(&self, method: &str, params: Value) -> Result<Value, PeerError> {
        if self.control.is_cancelled() {
            return Err(PeerError::new("the call was cancelled"));
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
        if !self.client.log_enabled(level) || self.control.is_cancelled() {
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
        self.client.capabilities()
    }

    fn close_response_stream(&self) -> bool {
        match &self.route {
            Route::Resumable(stream) if !self.control.is_cancelled() => {
                stream.send(Out::Release).is_ok()
            }
            _ => false,
        }
    }
}
