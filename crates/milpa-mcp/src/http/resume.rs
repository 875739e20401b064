//! Resumable `tools/call` streams for 2025-11-25 clients (SEP-1699, "SSE polling").
//!
//! A call's SSE response opens with a priming event: an event id and empty data, plus a
//! `retry` interval. Every later event has an id `<stream>-<seq>`. The call may close the
//! stream while it runs on ([`milpa::CallHandle::close_response_stream`]): the client then
//! reconnects with `GET` and `Last-Event-ID`, gets the events it missed and the rest of the
//! call, result included, on that `GET` stream.
//!
//! What a stream sent is kept for a replay, within bounds: the last [`KEPT_EVENTS`] events
//! of each stream, and the last [`KEPT_STREAMS`] streams of a session (finished ones go
//! first). A resume from before what is kept starts at the oldest kept event; the result is
//! the last event of a stream, so it is never the one lost.
//!
//! A client that goes away without the server closing the stream still cancels the call,
//! as on every other stream: only a stream the call released lets it run on.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use parking_lot::{Mutex, MutexGuard};
use tokio::sync::OwnedMutexGuard;

use super::stream::CancelOnDrop;
use crate::session::OutRx;
use crate::session::{CallCancel, Out};

/// Events kept per stream for a replay.
pub(crate) const KEPT_EVENTS: usize = 256;
/// Streams kept per session for a resume.
pub(crate) const KEPT_STREAMS: usize = 32;
/// How long a client waits before reconnecting to a closed stream (the `retry` field).
const RETRY: Duration = Duration::from_millis(500);
/// A comment line sent on a quiet stream, so idle-connection reapers leave it open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// One call's stream: what it sent (for a replay) and the channel the rest arrives on.
pub(crate) struct CallStream {
    id: u64,
    cancel: CallCancel,
    /// Held by the one reader delivering the stream, so a resume waits for the reader it
    /// replaces to end.
    inner: Arc<tokio::sync::Mutex<Sent>>,
}

struct Sent {
    rx: OutRx,
    /// `(seq, framed event)`, oldest first.
    kept: VecDeque<(u64, Bytes)>,
    next_seq: u64,
    /// The call's response went out (or its channel closed): nothing more comes.
    done: bool,
}

impl Sent {
    fn keep(&mut self, stream: u64, message: &str) -> Bytes {
        let seq = self.next_seq;
        self.next_seq += 1;
        let event = frame(&format!("{stream}-{seq}"), None, message);
        if self.kept.len() == KEPT_EVENTS {
            self.kept.pop_front();
        }
        self.kept.push_back((seq, event.clone()));
        event
    }
}

/// A session's resumable streams, newest last.
#[derive(Default)]
pub(crate) struct CallStreams {
    next_id: AtomicU64,
    streams: Mutex<VecDeque<Arc<CallStream>>>,
}

impl CallStreams {
    fn lock(&self) -> MutexGuard<'_, VecDeque<Arc<CallStream>>> {
        self.streams.lock()
    }

    /// The response of a call whose messages arrive on `rx`: a priming event, then the
    /// call's messages, each with an id a resume can name.
    pub(crate) fn open(&self, rx: OutRx, cancel: CallCancel) -> Response {
        let stream = Arc::new(CallStream {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            cancel,
            inner: Arc::new(tokio::sync::Mutex::new(Sent {
                rx,
                kept: VecDeque::new(),
                next_seq: 1,
                done: false,
            })),
        });
        let inner = Arc::clone(&stream.inner)
            .try_lock_owned()
            .unwrap_or_else(|_| unreachable!("a new stream has no reader"));
        let priming = frame(&format!("{}-0", stream.id), Some(RETRY), "");
        {
            let mut streams = self.lock();
            if streams.len() == KEPT_STREAMS {
                // Finished streams go first; else the oldest.
                let victim = streams
                    .iter()
                    .position(|s| s.inner.try_lock().is_ok_and(|sent| sent.done))
                    .unwrap_or(0);
                streams.remove(victim);
            }
            streams.push_back(Arc::clone(&stream));
        }
        let cancel = CancelOnDrop::new(stream.cancel.clone());
        respond(Reader::new(
            &stream,
            inner,
            VecDeque::from([priming]),
            cancel,
        ))
    }

    /// The rest of the stream `last_event_id` (`<stream>-<seq>`) belongs to, after that
    /// event; `None` when no kept stream has that id.
    pub(crate) async fn resume(&self, last_event_id: &str) -> Option<Response> {
        let (stream, seq) = last_event_id.split_once('-')?;
        let (stream, seq): (u64, u64) = (stream.parse().ok()?, seq.parse().ok()?);
        let stream = self.lock().iter().find(|s| s.id == stream).cloned()?;
        let inner = Arc::clone(&stream.inner).lock_owned().await;
        let replay = inner
            .kept
            .iter()
            .filter(|(kept, _)| *kept > seq)
            .map(|(_, event)| event.clone())
            .collect();
        let cancel = CancelOnDrop::new(stream.cancel.clone());
        Some(respond(Reader::new(&stream, inner, replay, cancel)))
    }
}

/// Delivers one stream: the replay first, then what arrives, until the call's response
/// went out or the call released the stream.
struct Reader {
    stream: u64,
    sent: OwnedMutexGuard<Sent>,
    replay: VecDeque<Bytes>,
    cancel: CancelOnDrop,
    ended: bool,
}

impl Reader {
    fn new(
        stream: &CallStream,
        sent: OwnedMutexGuard<Sent>,
        replay: VecDeque<Bytes>,
        cancel: CancelOnDrop,
    ) -> Reader {
        let ended = sent.done;
        Reader {
            stream: stream.id,
            sent,
            replay,
            cancel,
            ended,
        }
    }

    async fn next(mut self) -> Option<(Result<Bytes, Infallible>, Reader)> {
        if let Some(event) = self.replay.pop_front() {
            return Some((Ok(event), self));
        }
        if self.ended {
            return None;
        }
        match tokio::time::timeout(KEEP_ALIVE, self.sent.rx.recv()).await {
            Err(_) => Some((Ok(Bytes::from_static(b":\n\n")), self)),
            Ok(Some(Out::Msg(message))) => {
                let event = self.sent.keep(self.stream, &message);
                Some((Ok(event), self))
            }
            Ok(Some(Out::Release)) => {
                self.cancel.disarm();
                None
            }
            Ok(Some(Out::Close) | None) => {
                self.sent.done = true;
                None
            }
        }
    }
}

fn respond(reader: Reader) -> Response {
    let body = Body::from_stream(futures_util::stream::unfold(reader, Reader::next));
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// One SSE event, framed here rather than with axum's `Event` (checked against axum 0.8.9).
///
/// For the priming event, `Event::default().id("3-0").retry(500 ms).data("")` writes
/// `id: 3-0\nretry: 500\n\n`: its data writer returns before writing anything for an empty
/// string, so the six bytes `data:\n` are missing, and without a data line clients drop the
/// event and never see its id (the resume point). Events with data (`data: a\ndata: b\n`)
/// would come out the same, but axum's `Event` also keeps its bytes private (only its `Sse`
/// body writes them), while a replay needs each framed event kept as bytes.
fn frame(id: &str, retry: Option<Duration>, data: &str) -> Bytes {
    let mut event = String::with_capacity(data.len() + id.len() + 24);
    event.push_str("id: ");
    event.push_str(id);
    event.push('\n');
    if let Some(retry) = retry {
        event.push_str(&format!("retry: {}\n", retry.as_millis()));
    }
    if data.is_empty() {
        event.push_str("data:\n");
    }
    for line in data.lines() {
        event.push_str("data: ");
        event.push_str(line);
        event.push('\n');
    }
    event.push('\n');
    Bytes::from(event)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_frame_as_the_sse_format_says() {
        assert_eq!(
            frame("3-0", Some(RETRY), ""),
            "id: 3-0\nretry: 500\ndata:\n\n"
        );
        assert_eq!(
            frame("3-1", None, "{\"a\":1}"),
            "id: 3-1\ndata: {\"a\":1}\n\n"
        );
        assert_eq!(frame("3-2", None, "a\nb"), "id: 3-2\ndata: a\ndata: b\n\n");
    }

    #[test]
    fn a_stream_keeps_its_last_events_only() {
        let (_tx, rx) = crate::client_link::out_channel();
        let mut sent = Sent {
            rx,
            kept: VecDeque::new(),
            next_seq: 1,
            done: false,
        };
        for n in 0..(KEPT_EVENTS + 10) {
            sent.keep(7, &n.to_string());
        }
        assert_eq!(sent.kept.len(), KEPT_EVENTS);
        assert_eq!(sent.kept.front().map(|(seq, _)| *seq), Some(11));
        assert_eq!(
            sent.kept.back().map(|(_, e)| e.clone()),
            Some(frame(
                &format!("7-{}", KEPT_EVENTS + 10),
                None,
                &(KEPT_EVENTS + 9).to_string()
            ))
        );
    }
}
