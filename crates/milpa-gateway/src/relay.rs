//! Requests an upstream sends us during a forwarded call (`sampling/createMessage`,
//! `elicitation/create`, `roots/list`): relayed to the MCP client that made the call,
//! through that call's [`CallHandle`], when that client declared the capability (and, for
//! elicitation, the mode asked for); declined otherwise. The client's answer, result or error, goes back upstream
//! as it came.
//!
//! Which call a request belongs to:
//! - over Streamable HTTP it arrives on the response stream of the `tools/call` it belongs
//!   to, so that call is known;
//! - over stdio the protocol does not say. It is relayed when exactly one forwarded call of
//!   that upstream is in flight (then it can only be that call's); with none or several it
//!   is declined, since sending it to the wrong client would show one caller another's
//!   question.
//!
//! Declined means: elicitation is answered `{"action": "decline"}`, sampling gets a JSON-RPC
//! error saying why. A relay lasts no longer than its call: when the call ends (answered,
//! cancelled, timed out) the upstream's request is answered with an error. Each relay is
//! answered from a task of its own, so the session's reader never waits for a person or a
//! model; the log gets the upstream's name and the method, never the content.

use milpa::call_handle::{CallHandle, PeerError};
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, watch};

use crate::connection::CallError;

/// JSON-RPC "method not found": what a client that cannot sample answers.
const METHOD_NOT_FOUND: i64 = milpa_mcp::jsonrpc::ErrorCode::METHOD_NOT_FOUND.value();
/// JSON-RPC "internal error": the relay itself failed (the client went away, the call ended).
const INTERNAL_ERROR: i64 = milpa_mcp::jsonrpc::ErrorCode::INTERNAL_ERROR.value();

/// The capabilities the gateway declares to an upstream at `initialize`: it may ask for
/// sampling, elicitation (form and URL modes) and the roots, which are relayed or declined
/// per call.
/// Roots without `listChanged`: the clients' roots differ from call to call, and there is
/// no one list whose changes could be told.
pub(crate) fn declared_capabilities() -> Value {
    json!({"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {}})
}

/// Why a request tied to no call is refused.
const NO_CALL: &str = "no single forwarded call is waiting on this server, so there is no \
                       client to relay the request to";

/// A forwarded call a request from the upstream may be relayed to: its line to our client,
/// and a signal that it ended.
#[derive(Clone)]
pub(crate) struct CallTarget {
    pub(crate) handle: CallHandle,
    /// Closes (its sender is dropped) when the call is no longer waiting for its answer.
    pub(crate) ended: watch::Receiver<()>,
}

/// Whether `method` is a request from the upstream this module answers.
pub(crate) fn is_relayed(method: &str) -> bool {
    matches!(
        method,
        "sampling/createMessage" | "elicitation/create" | "roots/list"
    )
}

/// What to do with a request, given the client's declared capabilities.
#[derive(Debug, Clone, PartialEq)]
enum Decision {
    /// Send it to our client.
    Relay,
    /// Answer the upstream with this result, without asking anyone.
    Result(Value),
    /// Answer the upstream with this error.
    Error(i64, String),
}

/// Whether the client that declared `capabilities` (`None`: no client, or not known) may be
/// sent `method` with `params`, and if not, what the upstream is told.
fn decide(method: &str, params: &Value, capabilities: Option<&Value>) -> Decision {
    let declared = |name: &str| {
        capabilities
            .and_then(|c| c.get(name))
            .filter(|v| !v.is_null())
    };
    match method {
        "elicitation/create" => {
            let elicitation = declared("elicitation");
            let supported = match params.get("mode").and_then(Value::as_str) {
                None | Some("form") => match elicitation {
                    Some(Value::Object(modes)) => modes.is_empty() || modes.contains_key("form"),
                    _ => false,
                },
                Some("url") => elicitation
                    .and_then(|e| e.get("url"))
                    .is_some_and(|url| !url.is_null()),
                Some(_) => false,
            };
            if supported {
                Decision::Relay
            } else {
                Decision::Result(json!({"action": "decline"}))
            }
        }
        "sampling/createMessage" => match declared("sampling") {
            Some(_) => Decision::Relay,
            None => Decision::Error(
                METHOD_NOT_FOUND,
                "the client did not declare sampling".into(),
            ),
        },
        // The calling client's roots, as it lists them: an upstream outside any call (or
        // one whose caller has no roots) hears that there is no list for it.
        "roots/list" => match declared("roots") {
            Some(_) => Decision::Relay,
            None => Decision::Error(METHOD_NOT_FOUND, "the client did not declare roots".into()),
        },
        other => Decision::Error(
            METHOD_NOT_FOUND,
            format!("milpa does not relay `{other}` from upstream servers"),
        ),
    }
}

/// [`decide`], for a request that may have no call to be tied to (`call`: there is one),
/// logged: with no call, nothing can be relayed and a refusal says so.
fn judge(
    upstream: &str,
    method: &str,
    params: &Value,
    capabilities: Option<&Value>,
    call: bool,
    what: &'static str,
) -> Decision {
    let decision = match (decide(method, params, capabilities), call) {
        (Decision::Relay, false) => Decision::Error(METHOD_NOT_FOUND, NO_CALL.to_owned()),
        (Decision::Error(code, _), false) => Decision::Error(code, NO_CALL.to_owned()),
        (decision, _) => decision,
    };
    tracing::debug!(
        target: "milpa::upstream",
        upstream,
        method,
        call,
        relayed = decision == Decision::Relay,
        "{what}"
    );
    decision
}

/// Answers the upstream's request `id` (`method`, `params`) on behalf of `target` (`None`:
/// no call it can be tied to), from a task of its own.
pub(crate) fn answer(
    upstream: &str,
    id: Value,
    method: &str,
    params: Value,
    target: Option<CallTarget>,
    outgoing: &mpsc::UnboundedSender<String>,
) {
    let capabilities = target.as_ref().and_then(|t| t.handle.client_capabilities());
    let decision = judge(
        upstream,
        method,
        &params,
        capabilities.as_ref(),
        target.is_some(),
        "request from the upstream",
    );
    let reply = move |outcome: Result<Value, (i64, String)>| {
        let message = match outcome {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err((code, message)) => {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
            }
        };
        message.to_string()
    };
    let outcome = match (decision, target) {
        (Decision::Relay, Some(target)) => {
            spawn_relay(upstream, method, params, target, reply, outgoing);
            return;
        }
        (Decision::Result(result), _) => Ok(result),
        (Decision::Error(code, message), _) => Err((code, message)),
        // `judge` relays only with a call.
        (Decision::Relay, None) => Err((METHOD_NOT_FOUND, NO_CALL.to_owned())),
    };
    let _ = outgoing.send(reply(outcome));
}

/// 2026-07-28: the answers to an `input_required` result's `requests` (by key, each a
/// `method` and its `params`), decided as a request of the older revisions is: relayed to
/// the client of `call` one after the other, or answered without asking (a declined
/// elicitation). A request that can only be refused (no client to ask, a capability the
/// client did not declare) fails the whole request with that error, as the revision has
/// no way to answer one input with an error.
pub(crate) async fn gather(
    upstream: &str,
    requests: Map<String, Value>,
    call: Option<&CallHandle>,
) -> Result<Map<String, Value>, CallError> {
    let capabilities = call.and_then(CallHandle::client_capabilities);
    let mut answers = Map::new();
    for (key, mut request) in requests {
        let params = request.get_mut("params").map_or(Value::Null, Value::take);
        let method = request.get("method").and_then(Value::as_str).unwrap_or("");
        let decision = judge(
            upstream,
            method,
            &params,
            capabilities.as_ref(),
            call.is_some(),
            "input asked by the upstream",
        );
        let answer = match (decision, call) {
            (Decision::Relay, Some(handle)) => {
                handle.request(method, params).await.map_err(|error| {
                    let (code, message) = peer_error(&error);
                    CallError::Rpc { code, message }
                })?
            }
            (Decision::Result(result), _) => result,
            (Decision::Error(code, message), _) => return Err(CallError::Rpc { code, message }),
            // `judge` relays only with a call.
            (Decision::Relay, None) => {
                return Err(CallError::Rpc {
                    code: METHOD_NOT_FOUND,
                    message: NO_CALL.to_owned(),
                });
            }
        };
        answers.insert(key, answer);
    }
    Ok(answers)
}

/// Relays the request to the client behind `target` and answers the upstream with what
/// comes back, or with an error once the call ended.
fn spawn_relay(
    upstream: &str,
    method: &str,
    params: Value,
    target: CallTarget,
    reply: impl FnOnce(Result<Value, (i64, String)>) -> String + Send + 'static,
    outgoing: &mpsc::UnboundedSender<String>,
) {
    let outgoing = outgoing.clone();
    let upstream = upstream.to_owned();
    let method = method.to_owned();
    tokio::spawn(async move {
        let CallTarget { handle, mut ended } = target;
        let call_ended = async {
            // Nothing is ever sent: `changed` returns only once the sender is gone.
            while ended.changed().await.is_ok() {}
        };
        let outcome = tokio::select! {
            answer = handle.request(&method, params) => answer.map_err(|error| peer_error(&error)),
            () = call_ended => Err((
                INTERNAL_ERROR,
                "the call this request belongs to ended".to_owned(),
            )),
        };
        tracing::debug!(
            target: "milpa::upstream",
            upstream,
            method,
            answered = outcome.is_ok(),
            "relayed request done"
        );
        let _ = outgoing.send(reply(outcome));
    });
}

/// The client's error as it came (its code and message); a failure to reach the client
/// at all as an internal error.
fn peer_error(error: &PeerError) -> (i64, String) {
    (error.code.unwrap_or(INTERNAL_ERROR), error.message.clone())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use milpa::BoxFuture;
    use milpa::call_handle::{CallPeer, LogLevel};

    use super::*;

    /// A client that declared everything and never answers.
    struct Silent;

    impl CallPeer for Silent {
        fn progress(&self, _: f64, _: Option<f64>, _: Option<&str>) {}
        fn log(&self, _: LogLevel, _: Option<&str>, _: Value) {}
        fn request<'a>(&'a self, _: &'a str, _: Value) -> BoxFuture<'a, Result<Value, PeerError>> {
            Box::pin(std::future::pending())
        }
        fn is_cancelled(&self) -> bool {
            false
        }
        fn cancelled(&self) -> BoxFuture<'_, ()> {
            Box::pin(std::future::pending())
        }
        fn client_capabilities(&self) -> Option<Value> {
            Some(json!({"sampling": {}, "elicitation": {}}))
        }
    }

    /// A relay does not outlive its call: when the call ends, the upstream is answered.
    #[tokio::test]
    async fn a_relay_ends_with_its_call() {
        let (ended, ended_rx) = watch::channel(());
        let target = CallTarget {
            handle: CallHandle::new(Arc::new(Silent)),
            ended: ended_rx,
        };
        let (outgoing, mut sent) = mpsc::unbounded_channel();
        answer("up", json!(7), SAMPLING, json!({}), Some(target), &outgoing);
        tokio::task::yield_now().await;
        assert!(sent.try_recv().is_err(), "still waiting for the client");
        drop(ended);
        let reply: Value = serde_json::from_str(&sent.recv().await.unwrap()).unwrap();
        assert_eq!(
            reply,
            json!({"jsonrpc": "2.0", "id": 7, "error": {"code": INTERNAL_ERROR,
                   "message": "the call this request belongs to ended"}})
        );
    }

    /// Without a call to tie it to (stdio, several calls in flight), nobody is asked.
    #[tokio::test]
    async fn a_request_tied_to_no_call_is_declined() {
        let (outgoing, mut sent) = mpsc::unbounded_channel();
        answer(
            "up",
            json!(1),
            FORM,
            json!({"message": "?"}),
            None,
            &outgoing,
        );
        let reply: Value = serde_json::from_str(&sent.recv().await.unwrap()).unwrap();
        assert_eq!(reply["result"], json!({"action": "decline"}));
        answer("up", json!(2), SAMPLING, json!({}), None, &outgoing);
        let reply: Value = serde_json::from_str(&sent.recv().await.unwrap()).unwrap();
        assert_eq!(reply["error"]["message"], NO_CALL);
    }

    const FORM: &str = "elicitation/create";
    const SAMPLING: &str = "sampling/createMessage";

    #[test]
    fn elicitation_is_relayed_only_in_a_mode_the_client_declared() {
        let form = json!({"message": "Name?", "requestedSchema": {"type": "object"}});
        let url = json!({"mode": "url", "url": "http://127.0.0.1/x", "message": "Open"});
        let decline = Decision::Result(json!({"action": "decline"}));
        let cases = [
            (json!({"elicitation": {}}), &form, Decision::Relay),
            (json!({"elicitation": {"form": {}}}), &form, Decision::Relay),
            (json!({"elicitation": {"url": {}}}), &form, decline.clone()),
            (json!({"elicitation": {}}), &url, decline.clone()),
            (json!({"elicitation": {"url": {}}}), &url, Decision::Relay),
            (json!({"elicitation": null}), &form, decline.clone()),
            (json!({"sampling": {}}), &form, decline.clone()),
        ];
        for (capabilities, params, expected) in cases {
            assert_eq!(
                decide(FORM, params, Some(&capabilities)),
                expected,
                "{capabilities} {params}"
            );
        }
        let odd_mode = json!({"mode": "telepathy"});
        let all = json!({"elicitation": {"form": {}, "url": {}}});
        assert_eq!(decide(FORM, &odd_mode, Some(&all)), decline);
        assert_eq!(decide(FORM, &form, None), decline);
    }

    #[test]
    fn sampling_is_relayed_only_to_a_client_that_declared_it() {
        let params = json!({"messages": [], "maxTokens": 10});
        assert_eq!(
            decide(SAMPLING, &params, Some(&json!({"sampling": {}}))),
            Decision::Relay
        );
        let refused = Decision::Error(
            METHOD_NOT_FOUND,
            "the client did not declare sampling".into(),
        );
        assert_eq!(
            decide(SAMPLING, &params, Some(&json!({"elicitation": {}}))),
            refused
        );
        assert_eq!(decide(SAMPLING, &params, None), refused);
    }
}
