//! Server-sent event streams: a `tools/call`'s own stream (its messages, then its
//! response) and a session's standalone `GET` stream.

use std::convert::Infallible;
use std::sync::Arc;

use axum::http::{HeaderValue, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;

use crate::jsonrpc::RequestId;
use crate::session::{Out, Session};

/// Cancels a call whose response stream went away before the response.
pub(crate) struct CancelOnDrop {
    /// The call's session.
    pub session: Arc<Session>,
    /// The call's request id.
    pub id: RequestId,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.session.cancel(&self.id);
    }
}

struct StreamState {
    rx: mpsc::UnboundedReceiver<Out>,
    _guard: Option<CancelOnDrop>,
}

/// An SSE response carrying what arrives on `rx` until [`Out::Close`]; `guard` (if any)
/// is dropped with the stream.
pub(crate) fn sse(rx: mpsc::UnboundedReceiver<Out>, guard: Option<CancelOnDrop>) -> Response {
    let state = StreamState { rx, _guard: guard };
    let stream = futures_util::stream::unfold(state, |mut state| async move {
        match state.rx.recv().await {
            Some(Out::Msg(message)) => {
                Some((Ok::<_, Infallible>(Event::default().data(message)), state))
            }
            Some(Out::Close) | None => None,
        }
    });
    let mut response = Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}
