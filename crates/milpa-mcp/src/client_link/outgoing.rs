//! Requests this side sends to the client (sampling, elicitation, roots) and the table of
//! those awaiting an answer.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use milpa::PeerError;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::request_error::ClientRequestError;
use super::{ClientLink, Route};
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

    fn lock(&self) -> parking_lot::MutexGuard<'_, HashMap<u64, oneshot::Sender<Answer>>> {
        self.waiting.lock()
    }
}

/// The capability a client must have declared to be sent `method`.
pub(crate) fn capability_for(method: &str) -> Option<&'static str> {
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
    ) -> Result<Value, ClientRequestError> {
        if let Some(capability) = capability_for(method)
            && !self.has_capability(capability)
        {
            return Err(ClientRequestError::CapabilityNotDeclared { capability });
        }
        if method == "elicitation/create" && !self.supports_elicitation_of(&params) {
            let mode = params.get("mode").and_then(Value::as_str).unwrap_or("form");
            return Err(ClientRequestError::ElicitationModeNotDeclared {
                mode: mode.to_owned(),
            });
        }
        if self.is_closed() {
            return Err(ClientRequestError::NotConnected);
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
            return Err(ClientRequestError::NoStream);
        }
        let answer = match self.request_timeout {
            Some(limit) => match tokio::time::timeout(limit, rx).await {
                Ok(answer) => answer,
                Err(elapsed) => {
                    return Err(ClientRequestError::TimedOut {
                        method: method.to_owned(),
                        limit,
                        source: elapsed,
                    });
                }
            },
            None => rx.await,
        };
        guard.answered = true;
        match answer {
            Ok(result) => result.map_err(ClientRequestError::Answered),
            Err(closed) => Err(ClientRequestError::WentAway(closed)),
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
            let _ =
                sender.send(result.map_err(|e| PeerError::with_code(e.code.value(), e.message)));
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::client_link::out_channel;
    use serde_json::{Value, json};

    use super::*;
    use crate::client_link::{ClientInfo, Out};

    /// Whether `elicitation/create` with `params` reaches a client that declared
    /// `capabilities` (which answers at once when it does).
    async fn sent(version: &'static str, capabilities: Value, params: Value) -> bool {
        let link = ClientLink::new(None, Some(Duration::from_secs(5)));
        assert!(link.declare(ClientInfo {
            version,
            capabilities,
            name: None,
        }));
        let (tx, mut rx) = out_channel();
        let route = Route::Channel(tx);
        let asking = link.request_client("elicitation/create", params, &route);
        let answering = async {
            let Some(Out::Msg(request)) = rx.recv().await else {
                return;
            };
            let request: Value = serde_json::from_str(&request).unwrap();
            let id = RequestId::from_value(&request["id"]).unwrap();
            link.answer(&id, Ok(json!({"action": "decline"})));
        };
        let (answer, ()) = tokio::join!(asking, async {
            tokio::select! {
                () = answering => {}
                () = tokio::time::sleep(Duration::from_millis(200)) => {}
            }
        });
        match answer {
            Ok(_) => true,
            Err(error) => {
                let error = PeerError::from(error);
                assert!(
                    error.message.ends_with("-mode elicitation")
                        || error.message.contains("elicitation capability"),
                    "{}",
                    error.message
                );
                false
            }
        }
    }

    /// Servers must not send an elicitation mode the client did not declare: an empty
    /// `elicitation` object means form only; `url` needs its own key and 2025-11-25.
    #[tokio::test]
    async fn elicitation_goes_out_only_in_a_mode_the_client_declared() {
        let form =
            json!({"message": "Sure?", "requestedSchema": {"type": "object", "properties": {}}});
        let url = json!({"mode": "url", "elicitationId": "e1", "url": "http://127.0.0.1/a", "message": "Open"});
        let new = "2025-11-25";
        let both = json!({"elicitation": {"form": {}, "url": {}}});
        let cases = [
            (new, json!({"elicitation": {}}), &form, true),
            (new, json!({"elicitation": {}}), &url, false),
            (new, json!({"elicitation": {"form": {}}}), &url, false),
            (new, json!({"elicitation": {"url": {}}}), &url, true),
            (new, json!({"elicitation": {"url": {}}}), &form, false),
            (new, both.clone(), &form, true),
            (new, both.clone(), &url, true),
            (
                "2025-06-18",
                json!({"elicitation": {"url": {}}}),
                &url,
                false,
            ),
            (new, json!({}), &form, false),
        ];
        for (version, capabilities, params, expected) in cases {
            let label = format!("{version} {capabilities} {}", params["mode"]);
            assert_eq!(
                sent(version, capabilities, params.clone()).await,
                expected,
                "{label}"
            );
        }
        let unknown_mode = json!({"mode": "telepathy", "message": "?"});
        assert!(!sent(new, both, unknown_mode).await);
    }
}
