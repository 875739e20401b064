//! Requests this side sends to the client (sampling, elicitation, roots) and the table of
//! those awaiting an answer.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use milpa::PeerError;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::client::{ClientLink, Route};
use crate::jsonrpc::{self, ErrorObject, RequestId};

type Answer = Result<Value, PeerError>;

/// Requests sent to the client, by the id this side gave them.
#[derive(Debug, Default)]
pub(crate) struct PendingRequests {
    waiting: Mutex<HashMap<u64, oneshot::Sender<Answer>>>,
    next_id: AtomicU64,
}

impl PendingRequests {
    fn insert(&self) -> (u64, oneshot::Receiver<Answer>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.lock().insert(id, tx);
        (id, rx)
    }

    fn remove(&self, id: u64) -> Option<oneshot::Sender<Answer>> {
        self.lock().remove(&id)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<Answer>>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The capability a client must have declared to be sent `method`.
fn capability_for(method: &str) -> Option<&'static str> {
    match method {
        "sampling/createMessage" => Some("sampling"),
        "elicitation/create" => Some("elicitation"),
        "roots/list" => Some("roots"),
        _ => None,
    }
}

impl ClientLink {
    /// Sends a request to the client along `route` and awaits the answer.
    pub async fn request_client(
        &self,
        method: &str,
        params: Value,
        route: &Route,
    ) -> Result<Value, PeerError> {
        if let Some(capability) = capability_for(method) {
            if !self.has_capability(capability) {
                return Err(PeerError::new(format!(
                    "the client did not declare the {capability} capability"
                )));
            }
        }
        if self.is_closed() {
            return Err(PeerError::new("the client is not connected"));
        }
        let (id, rx) = self.pending.insert();
        let mut guard = PendingGuard {
            link: self,
            id,
            route,
            answered: false,
        };
        if !self.send(route, jsonrpc::request(id, method, &params)) {
            guard.answered = true;
            return Err(PeerError::new(
                "no open stream to the client to send the request on",
            ));
        }
        let answer = match self.request_timeout {
            Some(limit) => match tokio::time::timeout(limit, rx).await {
                Ok(answer) => answer,
                Err(_) => {
                    return Err(PeerError::new(format!(
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
            Err(_) => Err(PeerError::new("the client went away")),
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
        if let Some(sender) = self.pending.remove(n) {
            let _ = sender.send(result.map_err(|e| PeerError {
                code: Some(e.code),
                message: e.message,
            }));
        }
    }

    /// Fails every request awaiting the client's answer (the client cannot answer any more).
    pub fn fail_pending(&self) {
        self.pending.lock().clear();
    }
}

/// Forgets a request to the client when its waiter goes away; tells the client when it
/// was abandoned unanswered.
struct PendingGuard<'a> {
    link: &'a ClientLink,
    id: u64,
    route: &'a Route,
    answered: bool,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        let removed = self.link.pending.remove(self.id).is_some();
        if removed && !self.answered && !self.link.is_closed() {
            self.link.send(
                self.route,
                jsonrpc::notification(
                    "notifications/cancelled",
                    &json!({"requestId": self.id, "reason": "The tool call that asked was cancelled"}),
                ),
            );
        }
    }
}
