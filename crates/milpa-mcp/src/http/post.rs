//! `POST`: client messages (a request, a notification, a response, or a batch of them).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::FutureExt;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use milpa::generate_request_id;

use super::body_budget::BodyLimit;
use super::rejection::HttpRejection;
use super::sessions::{HttpSession, Lookup};
use super::stream::{CancelOnDrop, finished_sse, sse};
use super::{HttpState, SESSION_HEADER, session_id};
use crate::jsonrpc::{self, ErrorObject, Incoming, METHOD_NOT_FOUND, Parsed, RequestId};
use crate::listener::json_body;
use crate::method::{Era, Method};
use crate::session::out_channel;
use crate::session::{
    CallCancel, CallFuture, Caller, Dispatch, Out, ReadParams, Reply, Route, Session, batch_json,
};

/// Reads a body of at most `limit` bytes within `timeout`. The limit is enforced while
/// reading (a declared length over it is refused before reading anything), so no more
/// than `limit` bytes are ever buffered; the timeout bounds the whole body, not each
/// chunk, so a client dripping bytes cannot hold the connection.
///
/// Not `tower-http`'s layers: `RequestBodyLimitLayer` answers with its own plain-text
/// `413` (clients here get a JSON-RPC error), `RequestBodyTimeoutLayer` times each chunk
/// (a drip of one byte per period passes), and `TimeoutLayer` would also bound calls
/// answered with JSON, which may rightly run for minutes.
async fn read_body(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
    timeout: Duration,
) -> Result<Bytes, HttpRejection> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(HttpRejection::PayloadTooLarge { limit });
    }
    match tokio::time::timeout(timeout, Limited::new(body, limit).collect()).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(error)) if error.is::<LengthLimitError>() => {
            Err(HttpRejection::PayloadTooLarge { limit })
        }
        Ok(Err(_)) => Err(HttpRejection::BodyUnreadable),
        Err(_) => Err(HttpRejection::BodyTimeout { timeout }),
    }
}

fn accepts_event_stream(headers: &HeaderMap) -> bool {
    super::accepts(headers, "text/event-stream")
}

/// A call waiting for a slot. The session registered it when it was dispatched, and a
/// call future unregisters itself only once it has run; so when the wait is abandoned (the
/// client went away), the call is cancelled and polled once on its own, which ends it at
/// once without running the tool and makes the session forget it.
struct Queued {
    call: Option<CallFuture>,
    cancel: CallCancel,
}

impl Drop for Queued {
    fn drop(&mut self) {
        if let Some(call) = self.call.take() {
            self.cancel.cancel();
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(call);
            }
        }
    }
}

/// Runs `call` once its session and the server have a free call slot, so neither one
/// session nor all of them together run more calls at once than configured.
fn in_slots(
    state: &HttpState,
    session: &HttpSession,
    cancel: CallCancel,
    call: CallFuture,
) -> impl Future<Output = Option<Reply>> + Send + 'static {
    let session_slots = session.call_slots.clone();
    let server_slots = state.call_slots.clone();
    let mut queued = Queued {
        call: Some(call),
        cancel,
    };
    async move {
        // Session first: a session waiting for its own slot holds none of the server's.
        let _session = session_slots.acquire_owned().await.ok()?;
        let _server = server_slots.acquire_owned().await.ok()?;
        queued.call.take()?.await
    }
}

pub(crate) async fn post(
    State(state): State<Arc<HttpState>>,
    Extension(caller): Extension<Caller>,
    limit: Option<Extension<BodyLimit>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, HttpRejection> {
    // An anonymous caller's may be smaller (see `super::body_budget`).
    let limit = limit.map_or(state.shared.options.max_message_bytes, |l| {
        l.0.0.min(state.shared.options.max_message_bytes)
    });
    let bytes = read_body(&headers, body, limit, state.body_read_timeout).await?;
    let sse_ok = !state.json_response && accepts_event_stream(&headers);
    let lookup = || state.sessions.lookup(session_id(&headers), &caller);

    let parsed = jsonrpc::parse_limited(&bytes, state.shared.options.max_batch_len);
    if let (true, read) = super::modern::is_modern(&headers, &parsed) {
        return super::modern::post(&state, &caller, &headers, parsed, read, sse_ok).await;
    }
    match parsed {
        Parsed::Single(Err(rejected)) => Err(HttpRejection::Malformed(rejected)),
        Parsed::Single(Ok(Incoming::Request { id, method, params })) => {
            if method == "initialize" && session_id(&headers).is_none() {
                return initialize(&state, id, params, &caller);
            }
            let session = match lookup() {
                Lookup::Found(session) => session,
                Lookup::Unknown => return Err(HttpRejection::SessionNotFound),
                Lookup::Missing if method == "ping" => {
                    return Ok(json_body(
                        StatusCode::OK,
                        jsonrpc::response(&id, &serde_json::json!({})),
                    ));
                }
                Lookup::Missing if Method::served(&method, Era::Session).is_some() => {
                    return Err(HttpRejection::SessionRequired { id: Some(id) });
                }
                Lookup::Missing => {
                    return Ok(json_body(
                        StatusCode::OK,
                        jsonrpc::error_response(
                            Some(&id),
                            &ErrorObject::new(
                                METHOD_NOT_FOUND,
                                format!("Method not found: {method}"),
                            ),
                        ),
                    ));
                }
            };
            // A call answered on its own stream takes a place in the caller's stream
            // budget; without one it is answered with JSON.
            let ticket = (method == Method::ToolsCall.name() && sse_ok)
                .then(|| state.streams.open(caller.principal.as_deref()))
                .flatten();
            if let Some(ticket) = ticket {
                Ok(ticket.hold(streamed_call(
                    &state, &session, id, &method, params, &caller,
                )))
            } else {
                let dispatch = session.core.dispatch(
                    id.clone(),
                    &method,
                    ReadParams::Unread(params),
                    &caller,
                    Route::Standalone,
                );
                Ok(match dispatch {
                    Dispatch::Reply(reply) => json_body(StatusCode::OK, reply.to_json()),
                    Dispatch::Call(call, cancel) => {
                        match in_slots(&state, &session, cancel, call).await {
                            Some(reply) => json_body(StatusCode::OK, reply.to_json()),
                            None => StatusCode::ACCEPTED.into_response(),
                        }
                    }
                    // The session revisions have no subscriptions.
                    Dispatch::Listen(_) => StatusCode::ACCEPTED.into_response(),
                })
            }
        }
        Parsed::Single(Ok(Incoming::Notification { method, params })) => {
            match lookup() {
                Lookup::Found(session) => session.core.notify(&method, params),
                Lookup::Unknown => return Err(HttpRejection::SessionNotFound),
                Lookup::Missing => {}
            }
            Ok(StatusCode::ACCEPTED.into_response())
        }
        Parsed::Single(Ok(Incoming::Response { id, result })) => match lookup() {
            Lookup::Found(session) => {
                session.core.answer(&id, result);
                Ok(StatusCode::ACCEPTED.into_response())
            }
            Lookup::Unknown => Err(HttpRejection::SessionNotFound),
            Lookup::Missing => Err(HttpRejection::SessionRequired { id: None }),
        },
        Parsed::Batch(items) => {
            let session = match lookup() {
                Lookup::Found(session) => session,
                Lookup::Unknown => return Err(HttpRejection::SessionNotFound),
                Lookup::Missing => return Err(HttpRejection::SessionRequired { id: None }),
            };
            let mut replies = Vec::new();
            let mut calls = Vec::new();
            for item in items {
                let id = match &item {
                    Ok(Incoming::Request { id, .. }) => Some(id.clone()),
                    _ => None,
                };
                match (session.core.handle(item, &caller, &Route::Standalone), id) {
                    (Some(Dispatch::Reply(reply)), _) => replies.push(reply),
                    (Some(Dispatch::Call(call, cancel)), Some(_)) => {
                        calls.push(in_slots(&state, &session, cancel, call));
                    }
                    // Only requests start calls.
                    (Some(Dispatch::Call(..)), None)
                    | (Some(Dispatch::Listen(_)), _)
                    | (None, _) => {}
                }
            }
            replies.extend(
                futures_util::future::join_all(calls)
                    .await
                    .into_iter()
                    .flatten(),
            );
            Ok(if replies.is_empty() {
                StatusCode::ACCEPTED.into_response()
            } else {
                json_body(StatusCode::OK, batch_json(&replies))
            })
        }
    }
}

/// A `tools/call` answered on its own SSE stream: its messages, then its response. A
/// 2025-11-25 client gets a stream it can resume (see [`super::resume`]).
fn streamed_call(
    state: &HttpState,
    session: &HttpSession,
    id: RequestId,
    method: &str,
    params: Option<jsonrpc::Params>,
    caller: &Caller,
) -> Response {
    let (tx, rx) = out_channel();
    let resumable = session.core.protocol_version() == Some("2025-11-25");
    let route = if resumable {
        Route::Resumable(tx.clone())
    } else {
        Route::Channel(tx.clone())
    };
    let dispatch = session.core.dispatch(
        id.clone(),
        method,
        ReadParams::Unread(params),
        caller,
        route,
    );
    match dispatch {
        Dispatch::Reply(reply) => json_body(StatusCode::OK, reply.to_json()),
        // The session revisions have no subscriptions.
        Dispatch::Listen(_) => StatusCode::ACCEPTED.into_response(),
        Dispatch::Call(call, cancel) => {
            let mut call = Box::pin(in_slots(state, session, cancel.clone(), call));
            // Most calls (sync tools, quick async ones) finish at their first poll. Answered
            // here, their reply and the stream's end are ready before the response leaves
            // (a plain stream is built complete; a resumable one gets them queued), so hyper
            // writes headers, event and end in one `writev`. Spawned, the headers
            // went alone and the call paid a second write, a second wake-up of the client
            // and a wake-up of another worker (strace -c under bench_http, one connection).
            match (&mut call).now_or_never() {
                // A plain stream that is complete already: sent as it is (see `finished_sse`).
                Some(done) if !resumable => {
                    return finished_sse(rx, done.map(|reply| reply.to_json()));
                }
                Some(done) => {
                    if let Some(reply) = done {
                        let _ = tx.send(Out::Msg(reply.to_json()));
                    }
                    let _ = tx.send(Out::Close);
                }
                None => {
                    tokio::spawn(async move {
                        if let Some(reply) = call.await {
                            let _ = tx.send(Out::Msg(reply.to_json()));
                        }
                        let _ = tx.send(Out::Close);
                    });
                }
            }
            if resumable {
                session.streams.open(rx, cancel)
            } else {
                sse(rx, Some(CancelOnDrop::new(cancel)))
            }
        }
    }
}

fn initialize(
    state: &HttpState,
    id: RequestId,
    params: Option<jsonrpc::Params>,
    caller: &Caller,
) -> Result<Response, HttpRejection> {
    state.sessions.sweep();
    let session_id = generate_request_id();
    let core = Session::new(state.shared.clone(), Some(session_id.clone()));
    let reply = match core.dispatch(
        id.clone(),
        Method::Initialize.name(),
        ReadParams::Unread(params),
        caller,
        Route::Standalone,
    ) {
        Dispatch::Reply(reply) => reply.to_json(),
        Dispatch::Call(..) | Dispatch::Listen(_) => jsonrpc::error_response(
            Some(&id),
            &ErrorObject::new(jsonrpc::INTERNAL_ERROR, "initialize did not reply"),
        ),
    };
    if !core.is_initialized() {
        // Refused (bad params): no session.
        return Ok(json_body(StatusCode::OK, reply));
    }
    if let Err(refused) = state
        .sessions
        .insert(session_id.clone(), core.clone(), caller, &id)
    {
        core.shutdown();
        return Err(refused);
    }
    let mut response = json_body(StatusCode::OK, reply);
    if let Ok(value) = HeaderValue::from_str(&session_id) {
        response.headers_mut().insert(SESSION_HEADER, value);
    }
    Ok(response)
}
