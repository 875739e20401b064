//! The share of the connection slots anonymous callers may hold, as a tower layer after the
//! identity layer.
//!
//! Who a connection belongs to is known only once its first request's headers arrive, so
//! the accept loop admits every connection up to the cap and marks it
//! ([`ConnectionMark`]); this layer then counts a connection as anonymous from its first
//! anonymous request until it closes. Anonymous connections may fill all but
//! `reserved` slots (a quarter of them by default): an anonymous request on a connection
//! beyond that gets `503` with `Connection: close`, and the connection is closed once it
//! is answered, so the reserved slots stay for authenticated callers. A connection that
//! has not sent its headers yet is bounded by the header read timeout.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use parking_lot::Mutex;

use super::rejection::HttpRejection;
use crate::session::Caller;

/// How many connections anonymous callers hold now, of how many they may.
#[derive(Debug)]
pub(crate) struct ConnectionShare {
    max_anonymous: usize,
    anonymous: Mutex<usize>,
}

impl ConnectionShare {
    /// Anonymous callers may hold `max_anonymous` connections (at least one).
    pub(crate) fn new(max_anonymous: usize) -> Arc<ConnectionShare> {
        Arc::new(ConnectionShare {
            max_anonymous: max_anonymous.max(1),
            anonymous: Mutex::new(0),
        })
    }

    fn take(&self) -> bool {
        let mut held = self.anonymous.lock();
        if *held >= self.max_anonymous {
            return false;
        }
        *held += 1;
        true
    }

    fn give_back(&self) {
        let mut held = self.anonymous.lock();
        *held = held.saturating_sub(1);
    }
}

/// One connection's mark, in each of its requests' extensions; its anonymous place (if it
/// took one) is given back when the connection closes.
#[derive(Clone, Debug)]
pub(crate) struct ConnectionMark(Arc<Mark>);

#[derive(Debug)]
struct Mark {
    share: Arc<ConnectionShare>,
    anonymous: AtomicBool,
}

impl ConnectionMark {
    /// The mark of a new connection, not counted yet.
    pub(crate) fn new(share: Arc<ConnectionShare>) -> ConnectionMark {
        ConnectionMark(Arc::new(Mark {
            share,
            anonymous: AtomicBool::new(false),
        }))
    }

    /// Counts the connection as anonymous (once); `false` when anonymous callers hold all
    /// the connections they may.
    fn admit_anonymous(&self) -> bool {
        if self.0.anonymous.load(Ordering::Acquire) {
            return true;
        }
        if !self.0.share.take() {
            return false;
        }
        // Requests on one connection run one after another (HTTP/1.1), so no other
        // request of it took a place meanwhile.
        self.0.anonymous.store(true, Ordering::Release);
        true
    }
}

impl Drop for Mark {
    fn drop(&mut self) {
        if *self.anonymous.get_mut() {
            self.share.give_back();
        }
    }
}

/// Refuses an anonymous request on a connection beyond the anonymous share (see the module
/// documentation). Requests without a mark (a router served by the embedder) pass.
pub(crate) async fn limit_anonymous_connections(
    request: Request,
    next: Next,
) -> Result<Response, HttpRejection> {
    let anonymous = request
        .extensions()
        .get::<Caller>()
        .is_some_and(|caller| caller.principal.is_none());
    if anonymous
        && let Some(mark) = request.extensions().get::<ConnectionMark>()
        && !mark.admit_anonymous()
    {
        tracing::debug!(target: "milpa_mcp", "anonymous request refused: anonymous callers hold their share of the connections");
        return Err(HttpRejection::TooManyAnonymousConnections);
    }
    Ok(next.run(request).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anonymous_connections_hold_at_most_their_share_until_they_close() {
        let share = ConnectionShare::new(2);
        let (a, b, c) = (
            ConnectionMark::new(share.clone()),
            ConnectionMark::new(share.clone()),
            ConnectionMark::new(share.clone()),
        );
        assert!(a.admit_anonymous());
        // A connection's later anonymous requests take no second place.
        assert!(a.admit_anonymous());
        assert!(b.admit_anonymous());
        assert!(!c.admit_anonymous(), "beyond the share");
        // A request's copy of the mark going away does not give the place back...
        drop(a.clone());
        assert!(!c.admit_anonymous());
        // ...the connection closing does.
        drop(a);
        assert!(c.admit_anonymous());
        assert_eq!(*share.anonymous.lock(), 2);
        drop((b, c));
        assert_eq!(*share.anonymous.lock(), 0);
    }
}
