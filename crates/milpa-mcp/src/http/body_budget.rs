//! What anonymous callers may make the server buffer, as a tower layer after the identity
//! layer (so the caller is known) and before any handler reads a body.
//!
//! - An anonymous `POST`'s body is limited to [`BodyBudget::anonymous_limit`]: 64 KiB by
//!   default when the `mcp` channel requires authentication (an anonymous caller can then
//!   run no tool, and every other request fits easily), else the usual message limit. A
//!   declared length over it gets `413` before anything is read; a chunked body is cut off
//!   at the limit while it is read (`413` too).
//! - All anonymous bodies being read at once may hold at most [`BodyBudget::total`] bytes
//!   (8 MiB by default). Each reserves its declared length (or the limit, for a chunked
//!   one) before a byte is read, and gives it back when its body has been read or dropped;
//!   a request that does not fit gets `503` with `Retry-After` and its body is never read.
//!
//! Authenticated callers are not counted here: their bodies are bounded by the message
//! limit, and they are few (the tokens in the manifest).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::Response;
use hyper::body::{Frame, SizeHint};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::rejection::HttpRejection;
use crate::session::Caller;

/// The largest body the handler may read for this request, when the layer sets one
/// smaller than the message limit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyLimit(pub usize);

/// The layer's limits and the bytes anonymous bodies hold now.
#[derive(Debug)]
pub(crate) struct BodyBudget {
    /// The largest body an anonymous caller may send.
    anonymous_limit: usize,
    /// Bytes all anonymous bodies being read may hold at once.
    total: usize,
    /// One permit per byte not reserved by an anonymous body being read.
    free: Arc<Semaphore>,
}

impl BodyBudget {
    /// A budget of `total` bytes, and `anonymous_limit` per body.
    pub(crate) fn new(anonymous_limit: usize, total: usize) -> BodyBudget {
        // Reservations are `u32`s (the semaphore's unit), so the total is too.
        let total = total.clamp(1, u32::MAX as usize);
        BodyBudget {
            anonymous_limit,
            total,
            free: Arc::new(Semaphore::new(total)),
        }
    }

    /// Reserves room for a body of `declared` bytes (`None`: not declared, so as large as
    /// the limit may be), or `None` when all anonymous bodies hold too much already. A
    /// body larger than the whole budget reserves all of it.
    fn reserve(&self, declared: Option<u64>) -> Option<OwnedSemaphorePermit> {
        let wanted = declared
            .unwrap_or(self.anonymous_limit as u64)
            .min(self.total as u64);
        // `total` fits a `u32`, so `wanted` does.
        let wanted = u32::try_from(wanted).unwrap_or(u32::MAX);
        self.free.clone().try_acquire_many_owned(wanted).ok()
    }
}

/// Applies the budget to anonymous `POST`s (see the module documentation).
pub(crate) async fn limit_anonymous_bodies(
    State(budget): State<Arc<BodyBudget>>,
    request: Request,
    next: Next,
) -> Result<Response, HttpRejection> {
    let anonymous = request
        .extensions()
        .get::<Caller>()
        .is_some_and(|caller| caller.principal.is_none());
    if request.method() != Method::POST || !anonymous {
        return Ok(next.run(request).await);
    }
    let limit = budget.anonymous_limit;
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(HttpRejection::PayloadTooLarge { limit });
    }
    let Some(permit) = budget.reserve(declared) else {
        tracing::debug!(target: "milpa_mcp", "anonymous body refused: the budget for anonymous bodies is in use");
        return Err(HttpRejection::AnonymousBodiesBusy);
    };
    let (mut parts, body) = request.into_parts();
    parts.extensions.insert(BodyLimit(limit));
    let body = Body::new(Reserved {
        body,
        permit: Some(permit),
    });
    Ok(next.run(Request::from_parts(parts, body)).await)
}

/// A body holding its reservation until it has been read to the end, failed, or dropped.
struct Reserved {
    body: Body,
    permit: Option<OwnedSemaphorePermit>,
}

impl HttpBody for Reserved {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
            self.permit = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[test]
    fn reservations_are_bounded_by_the_total() {
        let budget = BodyBudget::new(64, 100);
        let a = budget.reserve(Some(60)).expect("fits");
        // Undeclared: the limit is reserved.
        assert!(budget.reserve(None).is_none());
        let b = budget.reserve(Some(40)).expect("fits exactly");
        assert!(budget.reserve(Some(1)).is_none());
        drop(a);
        assert!(budget.reserve(None).is_none(), "60 free, 64 wanted");
        drop(b);
        assert!(budget.reserve(None).is_some());
        // Larger than the whole budget: takes all of it.
        let all = budget.reserve(Some(1_000)).expect("the whole budget");
        assert!(budget.reserve(Some(1)).is_none());
        drop(all);
        assert_eq!(budget.free.available_permits(), 100);
    }

    #[tokio::test]
    async fn a_read_body_gives_its_reservation_back() {
        let budget = BodyBudget::new(64, 64);
        let permit = budget.reserve(Some(64)).unwrap();
        let body = Body::new(Reserved {
            body: Body::from("hello"),
            permit: Some(permit),
        });
        assert_eq!(budget.free.available_permits(), 0);
        let bytes = body.collect().await.unwrap().to_bytes();
        assert_eq!(&bytes[..], b"hello");
        assert_eq!(budget.free.available_permits(), 64);

        // Dropped unread: given back too.
        let permit = budget.reserve(None).unwrap();
        drop(Reserved {
            body: Body::from("x"),
            permit: Some(permit),
        });
        assert_eq!(budget.free.available_permits(), 64);
    }
}
