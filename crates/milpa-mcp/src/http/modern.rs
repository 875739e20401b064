//! `POST` of a 2026-07-28 message: no session, each request answered from itself.
//!
//! - The routing headers must match the body: `Mcp-Method` the method, `Mcp-Name` the
//!   `params.name` of `tools/call` and `prompts/get` (`params.uri` of `resources/read`),
//!   `MCP-Protocol-Version` the `_meta` protocol version; otherwise `400` with `-32020`.
//!   Header values are compared without surrounding whitespace (RFC 9110 §5.5).
//! - A routing header (`Mcp-Method`, `Mcp-Name`, `MCP-Protocol-Version`, any
//!   `Mcp-Param-<Name>`) sent more than once is refused with `-32020` naming it: only one
//!   value is checked against the body, and an intermediary may route on another.
//! - `Mcp-Param-<Name>` headers must match the arguments whose schema declares
//!   `x-mcp-header` (see [`check_param_headers`]).
//! - A notification gets `202`; a batch or a response gets `400` (the revision has neither
//!   batches nor server-to-client requests).
//! - Errors carry their status: `404` for an unknown method (`-32601`), `400` for a bad
//!   `_meta` (`-32602`), a header mismatch (`-32020`), an undeclared capability
//!   (`-32021`) and an unsupported version (`-32022`).
//! - `subscriptions/listen` opens a stream of tool-list changes (see [`listen`]), which
//!   counts against the caller's stream budget (`429` beyond, see
//!   [`super::stream_budget`]) and ends when quiet for the idle limit.
//! - A `tools/call` is answered with JSON when it ends before sending anything, and with
//!   an SSE stream (its progress and log messages, then the response) as soon as it sends
//!   a message first, when the client accepts `text/event-stream` and its stream budget
//!   has room (else with JSON). The client going away
//!   (the connection closed, the stream dropped) cancels the call.

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::FutureExt;
use serde_json::Value;
use tokio::sync::oneshot;

use super::HttpState;
use super::rejection::HttpRejection;
use super::stream::{CancelOnDrop, notification_sse, sse};
use super::stream_budget::StreamTicket;
use crate::jsonrpc::{
    self, ErrorObject, INVALID_PARAMS, INVALID_REQUEST, Incoming, METHOD_NOT_FOUND, Parsed,
    RequestId,
};
use crate::listener::json_body;
use crate::method::Method;
use crate::protocol::{
    HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION,
};
use crate::session::{
    CallCancel, CallFuture, Caller, Dispatch, Out, ReadParams, Reply, Route, Session, Subscription,
    header_mismatch,
};
use crate::session::{OutRx, out_channel};

const METHOD_HEADER: &str = "mcp-method";
const NAME_HEADER: &str = "mcp-name";
const VERSION_HEADER: &str = "mcp-protocol-version";
const PARAM_HEADER_PREFIX: &str = "mcp-param-";

/// The status a 2026-07-28 response travels with, from its error code (if any).
fn status_of(reply: &Reply) -> StatusCode {
    match reply.error_code() {
        None => StatusCode::OK,
        Some(METHOD_NOT_FOUND) => StatusCode::NOT_FOUND,
        Some(
            INVALID_PARAMS
            | INVALID_REQUEST
            | HEADER_MISMATCH
            | MISSING_REQUIRED_CLIENT_CAPABILITY
            | UNSUPPORTED_PROTOCOL_VERSION,
        ) => StatusCode::BAD_REQUEST,
        Some(_) => StatusCode::OK,
    }
}

fn reply(reply: Reply) -> Response {
    json_body(status_of(&reply), reply.to_json())
}

/// The error reply to request `id`.
fn refuse(id: &RequestId, error: ErrorObject) -> Response {
    reply(Reply::error(Some(id.clone()), error))
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .map(|v| v.to_str().map(str::trim).unwrap_or("\u{fffd}"))
}

/// The first routing header the request carries more than once, if any (lowercase, as
/// `HeaderMap` keeps names).
fn repeated_routing_header(headers: &HeaderMap) -> Option<&str> {
    headers
        .keys()
        .map(|name| name.as_str())
        .filter(|name| {
            [METHOD_HEADER, NAME_HEADER, VERSION_HEADER].contains(name)
                || name.starts_with(PARAM_HEADER_PREFIX)
        })
        .find(|name| headers.get_all(*name).iter().nth(1).is_some())
}

/// Refuses a request carrying a routing header more than once.
fn check_single_routing_headers(headers: &HeaderMap) -> Result<(), ErrorObject> {
    let Some(name) = repeated_routing_header(headers) else {
        return Ok(());
    };
    let shown = match name {
        METHOD_HEADER => "Mcp-Method".to_owned(),
        NAME_HEADER => "Mcp-Name".to_owned(),
        VERSION_HEADER => "MCP-Protocol-Version".to_owned(),
        param => format!(
            "Mcp-Param-{}",
            param.strip_prefix(PARAM_HEADER_PREFIX).unwrap_or(param)
        ),
    };
    Err(header_mismatch(format!(
        "Header mismatch: {shown} is sent more than once"
    )))
}

/// `Mcp-Method` and `Mcp-Name` against the body.
fn check_routing_headers(
    headers: &HeaderMap,
    method: &str,
    params: &ReadParams,
) -> Result<(), ErrorObject> {
    match header(headers, METHOD_HEADER) {
        Some(value) if value == method => {}
        Some(value) => {
            return Err(header_mismatch(format!(
                "Header mismatch: Mcp-Method ({value}) does not match the method ({method})"
            )));
        }
        None => return Err(header_mismatch("Header mismatch: Mcp-Method is required")),
    }
    let Some(field) = crate::protocol::routing_name_field(method) else {
        return Ok(());
    };
    let body = params.member_str(field);
    match (header(headers, NAME_HEADER), body) {
        (Some(value), Some(body)) if value == body => Ok(()),
        (Some(value), Some(body)) => Err(header_mismatch(format!(
            "Header mismatch: Mcp-Name ({value}) does not match params.{field} ({body})"
        ))),
        (None, Some(_)) => Err(header_mismatch(format!(
            "Header mismatch: Mcp-Name is required for {method}"
        ))),
        // No name in the body: the method's own validation answers.
        (_, None) => Ok(()),
    }
}

/// `Mcp-Param-<Name>` headers of a `tools/call`: every argument whose input-schema
/// property declares `x-mcp-header: <Name>` and has a value in the body must come with that
/// header, holding the same value (a string as is, other values as JSON text), either
/// literally or as `=?base64?<standard Base64>?=`; a malformed Base64 value is refused.
/// Intermediaries route on these headers, so a header that disagrees with the body is a
/// header mismatch (`-32020`).
fn check_param_headers(
    state: &HttpState,
    headers: &HeaderMap,
    params: &ReadParams,
) -> Result<(), ErrorObject> {
    let Some(tool) = params
        .name()
        .and_then(|name| state.shared.registry.get(name))
    else {
        return Ok(());
    };
    let Some(properties) = tool
        .input_schema()
        .get("properties")
        .and_then(Value::as_object)
    else {
        return Ok(());
    };
    for (property, schema) in properties {
        let Some(header_name) = schema.get("x-mcp-header").and_then(Value::as_str) else {
            continue;
        };
        let Some(value) = params
            .arguments()
            .and_then(|a| a.get(property))
            .filter(|v| !v.is_null())
        else {
            continue;
        };
        let expected = match value {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        let name = format!("{PARAM_HEADER_PREFIX}{}", header_name.to_ascii_lowercase());
        let Some(raw) = header(headers, &name) else {
            return Err(header_mismatch(format!(
                "Header mismatch: Mcp-Param-{header_name} is required with arguments.{property}"
            )));
        };
        let decoded = match raw
            .strip_prefix("=?base64?")
            .and_then(|rest| rest.strip_suffix("?="))
        {
            Some(encoded) => {
                use base64::Engine;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(encoded)
                    .map_err(|_| {
                        header_mismatch(format!(
                            "Header mismatch: Mcp-Param-{header_name} is not valid Base64"
                        ))
                    })?;
                String::from_utf8(bytes).map_err(|_| {
                    header_mismatch(format!(
                        "Header mismatch: Mcp-Param-{header_name} is not UTF-8"
                    ))
                })?
            }
            None => raw.to_owned(),
        };
        if decoded != expected {
            return Err(header_mismatch(format!(
                "Header mismatch: Mcp-Param-{header_name} does not match arguments.{property}"
            )));
        }
    }
    Ok(())
}

/// Answers one 2026-07-28 `POST` body. `read` is the request's params when telling the
/// revision apart read them already (see [`is_modern`]).
pub(super) async fn post(
    state: &HttpState,
    caller: &Caller,
    headers: &HeaderMap,
    parsed: Parsed,
    read: Option<ReadParams>,
    sse_ok: bool,
) -> Result<Response, HttpRejection> {
    let (id, method, params) = match parsed {
        Parsed::Single(Err(rejected)) => return Err(HttpRejection::Malformed(rejected)),
        Parsed::Single(Ok(Incoming::Request { id, method, params })) => (id, method, params),
        Parsed::Single(Ok(Incoming::Notification { .. })) => {
            return Ok(StatusCode::ACCEPTED.into_response());
        }
        Parsed::Single(Ok(Incoming::Response { .. })) | Parsed::Batch(_) => {
            return Ok(json_body(
                StatusCode::BAD_REQUEST,
                jsonrpc::error_response(
                    None,
                    &ErrorObject::new(
                        INVALID_REQUEST,
                        "Invalid Request: 2026-07-28 takes one request or notification per POST",
                    ),
                ),
            ));
        }
    };
    if let Err(error) = check_single_routing_headers(headers) {
        return Ok(refuse(&id, error));
    }
    // Read once for the header checks and the dispatch.
    let params = read.unwrap_or_else(|| ReadParams::read(&method, params));
    if let Err(error) = check_routing_headers(headers, &method, &params) {
        return Ok(refuse(&id, error));
    }
    if method == Method::ToolsCall.name()
        && let Err(error) = check_param_headers(state, headers, &params)
    {
        return Ok(refuse(&id, error));
    }
    let session = Session::modern(state.shared.clone());
    let (tx, rx) = out_channel();
    let dispatch = session.dispatch_stateless(
        id.clone(),
        &method,
        params,
        caller,
        Route::Channel(tx),
        Some(header(headers, VERSION_HEADER)),
    );
    match dispatch {
        Dispatch::Reply(answer) => Ok(reply(answer)),
        Dispatch::Listen(subscription) => Ok(listen(state, caller, id, subscription, sse_ok)),
        Dispatch::Call(call, cancel) => {
            // A call answered on a stream takes a place in the caller's stream budget;
            // without one it is answered with JSON.
            let ticket = sse_ok
                .then(|| state.streams.open(caller.principal.as_deref()))
                .flatten();
            Ok(run_call(state, call, cancel, rx, ticket).await)
        }
    }
}

/// `subscriptions/listen`: an SSE stream that carries the acknowledgement, then the
/// subscription's notifications (see [`Subscription`]), until the client closes it.
fn listen(
    state: &HttpState,
    caller: &Caller,
    id: RequestId,
    subscription: Subscription,
    sse_ok: bool,
) -> Response {
    if !sse_ok {
        return refuse(
            &id,
            ErrorObject::new(
                INVALID_REQUEST,
                "Invalid Request: subscriptions/listen answers with a stream; accept text/event-stream",
            ),
        );
    }
    let principal = caller.principal.as_deref();
    let Some(ticket) = state.streams.open(principal) else {
        return HttpRejection::TooManyStreams {
            id: Some(id),
            anonymous: principal.is_none(),
        }
        .into_response();
    };
    let (tx, rx) = out_channel();
    let listening = subscription.watch(&state.shared.registry);
    let acknowledgement = listening.acknowledgement();
    let _ = tx.send(Out::Msg(acknowledgement));
    tokio::spawn(listening.forward(tx, std::future::pending()));
    let idle = state.streams.idle_timeout(principal.is_none());
    ticket.hold(notification_sse(rx, idle))
}

/// Runs a call in a server call slot: JSON when it ends before sending a message, else
/// (when the client takes SSE and a stream `ticket` was had) a stream of its messages and
/// then its response.
async fn run_call(
    state: &HttpState,
    call: CallFuture,
    cancel: CallCancel,
    mut rx: OutRx,
    ticket: Option<StreamTicket>,
) -> Response {
    let sse_ok = ticket.is_some();
    // Dropped with this handler (the client went away) or with the SSE stream.
    let guard = CancelOnDrop::new(cancel);
    let slots = state.call_slots.clone();
    let mut call = call;
    // Most calls (sync tools, quick async ones) finish at their first poll: with a slot
    // free, they are answered here, without the task below and the wake-up of the handler
    // when it ends (one task hop and one cross-worker wake-up a call, seen with strace and
    // perf under bench_http at one connection).
    let mut permit = None;
    if let Ok(slot) = slots.clone().try_acquire_owned() {
        if let Some(answer) = (&mut call).now_or_never() {
            drop(slot);
            return ended(answer, &mut rx, ticket);
        }
        permit = Some(slot);
    }
    let (done_tx, mut done_rx) = oneshot::channel();
    tokio::spawn(async move {
        let answer = match permit {
            Some(_slot) => call.await,
            None => match slots.acquire_owned().await {
                Ok(_slot) => call.await,
                Err(_) => None,
            },
        };
        let _ = done_tx.send(answer);
    });
    let first = loop {
        tokio::select! {
            biased;
            // Ended: what it sent before ending (if it ended between two polls of this
            // loop) still goes first.
            done = &mut done_rx => return ended(done.ok().flatten(), &mut rx, ticket),
            message = rx.recv() => match message {
                Some(Out::Msg(message)) if sse_ok => break message,
                // Without SSE a call's messages have nowhere to go.
                Some(_) => {}
                None => {
                    return match done_rx.await {
                        Ok(Some(answer)) => reply(answer),
                        _ => StatusCode::ACCEPTED.into_response(),
                    };
                }
            },
        }
    };
    let (out, stream) = out_channel();
    let _ = out.send(Out::Msg(first));
    tokio::spawn(async move {
        loop {
            tokio::select! {
                biased;
                message = rx.recv() => match message {
                    Some(Out::Msg(message)) => {
                        if out.send(Out::Msg(message)).is_err() {
                            return;
                        }
                    }
                    Some(Out::Close | Out::Release) => {}
                    None => break,
                },
                done = &mut done_rx => {
                    while let Ok(Out::Msg(message)) = rx.try_recv() {
                        let _ = out.send(Out::Msg(message));
                    }
                    if let Ok(Some(answer)) = done {
                        let _ = out.send(Out::Msg(answer.to_json()));
                    }
                    let _ = out.send(Out::Close);
                    return;
                }
            }
        }
        if let Ok(Some(answer)) = done_rx.await {
            let _ = out.send(Out::Msg(answer.to_json()));
        }
        let _ = out.send(Out::Close);
    });
    let response = sse(stream, Some(guard));
    match ticket {
        Some(ticket) => ticket.hold(response),
        None => response,
    }
}

/// The response of a call that has ended: JSON when no message of it is waiting (or the
/// client takes no SSE), else an SSE stream of the waiting messages and then its response.
fn ended(answer: Option<Reply>, rx: &mut OutRx, ticket: Option<StreamTicket>) -> Response {
    let mut messages = Vec::new();
    while let Ok(out) = rx.try_recv() {
        if let Out::Msg(message) = out
            && ticket.is_some()
        {
            messages.push(message);
        }
    }
    let (Some(ticket), false) = (ticket, messages.is_empty()) else {
        return match answer {
            Some(answer) => reply(answer),
            None => StatusCode::ACCEPTED.into_response(),
        };
    };
    let (out, stream) = out_channel();
    for message in messages.into_iter().chain(answer.map(|a| a.to_json())) {
        let _ = out.send(Out::Msg(message));
    }
    let _ = out.send(Out::Close);
    ticket.hold(sse(stream, None))
}

/// Whether this `POST` speaks 2026-07-28: its `MCP-Protocol-Version` names that revision
/// (or one no revision knows, answered with `-32022`), or it came without a session and
/// its request carries a 2026-07-28 `_meta`. Telling the latter may read the request's
/// params: they come back with the answer, so the dispatch does not read them again.
pub(super) fn is_modern(headers: &HeaderMap, parsed: &Parsed) -> (bool, Option<ReadParams>) {
    if let Some(version) = header(headers, VERSION_HEADER)
        && crate::session::is_modern_version(version)
    {
        return (true, None);
    }
    if super::session_id(headers).is_some() {
        return (false, None);
    }
    let Parsed::Single(Ok(Incoming::Request { method, params, .. })) = parsed else {
        return (false, None);
    };
    if !ReadParams::mentions_stateless_meta(params.as_ref()) {
        return (false, None);
    }
    // A copy of the text, read here once.
    let read = ReadParams::read(method, params.clone());
    if read.is_stateless() {
        (true, Some(read))
    } else {
        (false, None)
    }
}
