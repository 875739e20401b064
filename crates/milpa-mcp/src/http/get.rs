//! `GET`: a session's standalone SSE stream, for messages not tied to a request (and for a
//! call's messages when its response is sent as JSON); or, with `Last-Event-ID`, the rest
//! of a call's stream the server closed (see [`super::resume`]). Each counts against the
//! caller's stream budget (see [`super::stream_budget`]).

use std::sync::Arc;

use axum::Extension;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;

use super::rejection::HttpRejection;
use super::sessions::Lookup;
use super::stream::notification_sse;
use super::{HttpState, accepts, session_id};
use crate::session::Caller;
use crate::session::out_channel;

const LAST_EVENT_ID: &str = "last-event-id";

pub(crate) async fn get(
    State(state): State<Arc<HttpState>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
) -> Result<Response, HttpRejection> {
    if !accepts(&headers, "text/event-stream") {
        return Err(HttpRejection::NotAcceptable);
    }
    let session = match state.sessions.lookup(session_id(&headers), &caller) {
        Lookup::Found(session) => session,
        Lookup::Unknown => return Err(HttpRejection::SessionNotFound),
        Lookup::Missing => return Err(HttpRejection::SessionRequired { id: None }),
    };
    let principal = caller.principal.as_deref();
    let Some(ticket) = state.streams.open(principal) else {
        return Err(HttpRejection::TooManyStreams {
            id: None,
            anonymous: principal.is_none(),
        });
    };
    // An id no kept stream has (or that the standalone stream gave) opens the standalone
    // stream: nothing of another stream is ever replayed.
    if let Some(last) = headers.get(LAST_EVENT_ID).and_then(|v| v.to_str().ok())
        && let Some(resumed) = session.streams.resume(last).await
    {
        return Ok(ticket.hold(resumed));
    }
    let (tx, rx) = out_channel();
    session.core.add_standalone(tx);
    let idle = state.streams.idle_timeout(principal.is_none());
    Ok(ticket.hold(notification_sse(rx, idle)))
}
