//! Server-sent event streams: a `tools/call`'s own stream (its messages, then its
//! response), and the streams that wait for notifications (a session's standalone `GET`
//! stream, a `subscriptions/listen`), which also end when quiet for too long.

use std::convert::Infallible;
use std::time::Duration;

use axum::http::{HeaderValue, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};

use tokio_util::sync::DropGuard;

use crate::session::OutRx;
use crate::session::{CallCancel, Out};

/// Cancels a call whose response stream went away before the response. It holds the
/// call's own cancel handle, not its request id: the stream also ends after the response,
/// when a new request may already run under the same id (it used to cancel that one).
pub(crate) struct CancelOnDrop(Option<DropGuard>);

impl CancelOnDrop {
    pub(crate) fn new(cancel: CallCancel) -> Self {
        CancelOnDrop(Some(cancel.drop_guard()))
    }

    /// The stream ends but the call runs on (it released the stream).
    pub(crate) fn disarm(&mut self) {
        if let Some(guard) = self.0.take() {
            guard.disarm();
        }
    }
}

struct StreamState {
    rx: OutRx,
    _guard: Option<CancelOnDrop>,
    idle: Option<Duration>,
}

/// An SSE response carrying what arrives on `rx` until [`Out::Close`]; `guard` (if any)
/// is dropped with the stream.
pub(crate) fn sse(rx: OutRx, guard: Option<CancelOnDrop>) -> Response {
    stream_response(StreamState {
        rx,
        _guard: guard,
        idle: None,
    })
}

/// The SSE response of a call that finished before its response was built (a sync tool, a
/// quick async one): what the call sent on `rx` meanwhile, then `reply`. The same events
/// [`sse`] would send, but the stream is complete: it waits on no channel and has no
/// keep-alive timer. Every timer is registered and cancelled under the Tokio time driver's
/// one lock, which two workers contended for on about every other call under `bench_http`
/// with 16 connections (perf, futex waits from the keep-alive's reset and drop).
pub(crate) fn finished_sse(mut rx: OutRx, reply: Option<String>) -> Response {
    let mut messages = Vec::new();
    while let Ok(out) = rx.try_recv() {
        match out {
            Out::Msg(message) => messages.push(message),
            Out::Close | Out::Release => break,
        }
    }
    messages.extend(reply);
    event_stream(Sse::new(futures_util::stream::iter(
        messages.into_iter().map(message_event),
    )))
}

/// [`sse`] for a stream that only waits for notifications: it also ends after `idle`
/// without a message (the keep-alive comments do not count).
pub(crate) fn notification_sse(rx: OutRx, idle: Duration) -> Response {
    stream_response(StreamState {
        rx,
        _guard: None,
        idle: Some(idle),
    })
}

fn stream_response(state: StreamState) -> Response {
    let stream = futures_util::stream::unfold(state, |mut state| async move {
        let next = match state.idle {
            Some(idle) => tokio::time::timeout(idle, state.rx.recv())
                .await
                .unwrap_or(None),
            None => state.rx.recv().await,
        };
        match next {
            Some(Out::Msg(message)) => Some((message_event(message), state)),
            Some(Out::Close | Out::Release) | None => None,
        }
    });
    event_stream(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// One JSON-RPC message as an SSE event.
fn message_event(message: String) -> Result<Event, Infallible> {
    Ok(Event::default().data(message))
}

/// `sse` as a response that no cache keeps.
fn event_stream(sse: impl IntoResponse) -> Response {
    let mut response = sse.into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}
