//! `GET`: a session's standalone SSE stream, for messages not tied to a request (and for a
//! call's messages when its response is sent as JSON).

use std::sync::Arc;

use axum::Extension;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use tokio::sync::mpsc;

use super::rejection::HttpRejection;
use super::sessions::Lookup;
use super::stream::sse;
use super::{HttpState, accepts, session_id};
use crate::session::Caller;

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
    let (tx, rx) = mpsc::unbounded_channel();
    session.core.add_standalone(tx);
    Ok(sse(rx, None))
}
