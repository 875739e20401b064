//! [`CallHandle`]: what a running tool can ask of the client that called it — report
//! progress, send log messages, request a model completion (sampling) or ask the user
//! (elicitation), and notice that the caller cancelled.
//!
//! The runtime knows no transport: a transport (the MCP server) implements [`CallPeer`] and
//! puts a handle in the [`ToolContext`](crate::ToolContext). Outside such a transport the
//! handle is *detached*: progress and logs go nowhere, requests fail, nothing is cancelled.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::deferred::BoxFuture;

/// Log severity, as MCP (RFC 5424) names it, lowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    /// Detailed debugging information.
    Debug,
    /// Normal operation.
    Info,
    /// Normal but significant.
    Notice,
    /// A warning.
    Warning,
    /// An error.
    Error,
    /// A critical condition.
    Critical,
    /// Action must be taken at once.
    Alert,
    /// The system is unusable.
    Emergency,
}

/// A request the client could not or would not answer.
///
/// What the tool reads is the [`code`](Self::code) and the [`message`](Self::message); the
/// transport's own reason (a timer that ran out, a client that went away) is kept as the
/// [`cause`](Self::cause), so a tool that logs the error, or converts it with `?` into a
/// [`ToolError`](crate::ToolError), keeps the whole chain. Build one with [`new`](Self::new)
/// or [`with_code`](Self::with_code), then [`with_cause`](Self::with_cause).
///
/// ```
/// use std::error::Error as _;
///
/// let parse = "x".parse::<u8>().unwrap_err();
/// let error = milpa::PeerError::new("the answer is not a number").with_cause(parse);
/// assert_eq!(error.to_string(), "the answer is not a number");
/// let cause = error.source().expect("the cause is kept");
/// assert!(cause.downcast_ref::<std::num::ParseIntError>().is_some());
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PeerError {
    /// A JSON-RPC error code when the client sent one.
    pub code: Option<i64>,
    /// What went wrong.
    pub message: String,
    /// The error behind the message, if any; shared, since a `PeerError` is `Clone`.
    cause: Option<Arc<dyn std::error::Error + Send + Sync + 'static>>,
}

impl PeerError {
    /// An error with only a message.
    pub fn new(message: impl Into<String>) -> Self {
        PeerError {
            code: None,
            message: message.into(),
            cause: None,
        }
    }

    /// An error with the JSON-RPC code the client answered with (or the transport chose).
    pub fn with_code(code: i64, message: impl Into<String>) -> Self {
        PeerError {
            code: Some(code),
            message: message.into(),
            cause: None,
        }
    }

    /// The same error, caused by `cause` (code and message unchanged): for a transport that
    /// words the reason itself but keeps what it came from.
    pub fn with_cause(mut self, cause: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.cause = Some(Arc::new(cause));
        self
    }

    /// The error this one came from, if the transport kept one; its own
    /// [`source`](std::error::Error::source) continues the chain.
    pub fn cause(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.cause.as_deref()
    }
}

/// Two errors are equal when the tool would read the same: same code, same message (a
/// cause has no equality of its own).
impl PartialEq for PeerError {
    fn eq(&self, other: &Self) -> bool {
        self.code == other.code && self.message == other.message
    }
}

impl Eq for PeerError {}

impl fmt::Display for PeerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for PeerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause
            .as_deref()
            .map(|cause| cause as &(dyn std::error::Error + 'static))
    }
}

/// The transport side of a [`CallHandle`]; implemented by servers, not by tools.
pub trait CallPeer: Send + Sync + 'static {
    /// Reports progress (only sent when the client asked for progress).
    fn progress(&self, progress: f64, total: Option<f64>, message: Option<&str>);
    /// Sends a log message (only sent at or above the level the client set).
    fn log(&self, level: LogLevel, logger: Option<&str>, data: Value);
    /// Sends a request to the client (e.g. `sampling/createMessage`) and awaits its answer.
    fn request<'a>(
        &'a self,
        method: &'a str,
        params: Value,
    ) -> BoxFuture<'a, Result<Value, PeerError>>;
    /// Whether the client cancelled this call.
    fn is_cancelled(&self) -> bool;
    /// Completes when the client cancels this call.
    fn cancelled(&self) -> BoxFuture<'_, ()>;
    /// The capabilities the client declared (e.g. `{"elicitation": {}}`), if known.
    fn client_capabilities(&self) -> Option<Value> {
        None
    }
    /// Closes this call's response stream now, the call running on, when the transport can
    /// deliver the rest once the client reconnects; whether it will.
    fn close_response_stream(&self) -> bool {
        false
    }
}

/// A tool's line back to its caller. Cheap to clone.
///
/// ```
/// use milpa::call_handle::{CallHandle, LogLevel};
/// use serde_json::json;
///
/// let handle = CallHandle::detached();
/// handle.progress(1.0, Some(2.0), Some("half way"));   // goes nowhere when detached
/// handle.log(LogLevel::Info, json!("hello"));
/// assert!(!handle.is_cancelled());
/// ```
#[derive(Clone, Default)]
pub struct CallHandle {
    peer: Option<Arc<dyn CallPeer>>,
}

impl fmt::Debug for CallHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallHandle")
            .field("attached", &self.peer.is_some())
            .finish()
    }
}

impl CallHandle {
    /// A handle connected to a transport.
    pub fn new(peer: Arc<dyn CallPeer>) -> Self {
        CallHandle { peer: Some(peer) }
    }

    /// A handle with no client behind it.
    pub fn detached() -> Self {
        CallHandle { peer: None }
    }

    /// Whether a client is behind this handle.
    pub fn is_attached(&self) -> bool {
        self.peer.is_some()
    }

    /// Reports progress: `progress` of `total` (if known), with an optional message.
    pub fn progress(&self, progress: f64, total: Option<f64>, message: Option<&str>) {
        if let Some(peer) = &self.peer {
            peer.progress(progress, total, message);
        }
    }

    /// Sends a log message to the client.
    pub fn log(&self, level: LogLevel, data: Value) {
        if let Some(peer) = &self.peer {
            peer.log(level, None, data);
        }
    }

    /// Sends a log message naming its logger.
    pub fn log_with_logger(&self, level: LogLevel, logger: &str, data: Value) {
        if let Some(peer) = &self.peer {
            peer.log(level, Some(logger), data);
        }
    }

    /// Asks the client's model for a completion (`sampling/createMessage`).
    pub async fn create_message(&self, params: Value) -> Result<Value, PeerError> {
        self.request("sampling/createMessage", params).await
    }

    /// Asks the client's user for input (`elicitation/create`).
    pub async fn elicit(&self, params: Value) -> Result<Value, PeerError> {
        self.request("elicitation/create", params).await
    }

    /// Sends any request to the client and awaits the answer.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, PeerError> {
        match &self.peer {
            Some(peer) => peer.request(method, params).await,
            None => Err(PeerError::new("no client is connected to this call")),
        }
    }

    /// Asks the transport to close this call's response stream now, while the call runs
    /// on: a client of Streamable HTTP 2025-11-25 reconnects with `Last-Event-ID` and gets
    /// what the call sent meanwhile, then its result (SEP-1699). It frees the connection of
    /// a long call, which proxies and load balancers often cut when it stays idle. Returns
    /// whether the transport will; stdio, JSON answers and older clients cannot, and the
    /// call goes on as before.
    pub fn close_response_stream(&self) -> bool {
        self.peer
            .as_ref()
            .is_some_and(|peer| peer.close_response_stream())
    }

    /// Whether the caller cancelled the call.
    pub fn is_cancelled(&self) -> bool {
        self.peer.as_ref().is_some_and(|p| p.is_cancelled())
    }

    /// Completes when the caller cancels (never, when detached).
    pub async fn cancelled(&self) {
        match &self.peer {
            Some(peer) => peer.cancelled().await,
            None => std::future::pending().await,
        }
    }

    /// The capabilities the client declared, if known.
    pub fn client_capabilities(&self) -> Option<Value> {
        self.peer.as_ref().and_then(|p| p.client_capabilities())
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    /// The cause is reachable through `source`, and a clone shares it; what the tool reads
    /// (code, message, equality) does not depend on it.
    #[test]
    fn a_peer_error_keeps_its_cause_without_changing_what_it_reads() {
        let parse = "x".parse::<u8>().unwrap_err();
        let error = PeerError::with_code(-32600, "refused").with_cause(parse.clone());
        assert_eq!(error.to_string(), "refused");
        assert_eq!(error.code, Some(-32600));
        let clone = error.clone();
        let cause = clone.source().expect("the clone keeps the cause");
        assert_eq!(
            cause.downcast_ref::<std::num::ParseIntError>(),
            Some(&parse)
        );
        assert!(error.cause().is_some());
        assert_eq!(error, PeerError::with_code(-32600, "refused"));
        assert_ne!(error, PeerError::new("refused"));
        assert!(PeerError::new("no client").source().is_none());
    }
}
