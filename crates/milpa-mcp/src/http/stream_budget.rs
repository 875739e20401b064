//! How many long-lived streams each class of caller may hold open: a session's `GET`
//! streams (standalone or resumed), 2026-07-28 `subscriptions/listen` streams, and the SSE
//! answers of `tools/call`.
//!
//! Each principal has its own budget ([`StreamLimits::per_principal`], 64 by default), and
//! all anonymous callers together share a much smaller one ([`StreamLimits::anonymous`],
//! 16), so anonymous callers holding every stream they may never hold a principal's. A
//! stream takes a [`StreamTicket`] before it opens and gives it back when its response
//! body is dropped (the stream ended or the client went away). Beyond the budget a `GET`
//! stream or a `subscriptions/listen` gets `429` (with the request's id where it has one),
//! and a `tools/call` that could have been answered on a stream is answered with JSON.
//!
//! Streams that only wait for notifications (`GET` standalone streams and
//! `subscriptions/listen`) also end after carrying nothing for
//! [`StreamLimits::idle_timeout`] (30 min; anonymous ones [`StreamLimits::anonymous_idle_timeout`],
//! 60 s); keep-alive comments do not count as carrying something. A call's stream ends
//! with its call.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::response::Response;
use hyper::body::{Frame, SizeHint};
use parking_lot::{Mutex, MutexGuard};

/// How many streams may be open and how long a quiet one lives.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StreamLimits {
    /// Streams one principal may hold open.
    pub per_principal: usize,
    /// Streams all anonymous callers together may hold open.
    pub anonymous: usize,
    /// How long a principal's notification stream lives carrying nothing.
    pub idle_timeout: Duration,
    /// How long an anonymous notification stream lives carrying nothing (never longer than
    /// `idle_timeout`).
    pub anonymous_idle_timeout: Duration,
}

impl Default for StreamLimits {
    fn default() -> Self {
        StreamLimits {
            per_principal: 64,
            anonymous: 16,
            idle_timeout: Duration::from_secs(30 * 60),
            anonymous_idle_timeout: Duration::from_secs(60),
        }
    }
}

#[derive(Default)]
struct Counts {
    anonymous: usize,
    per_principal: HashMap<String, usize>,
}

/// The open streams of one server, per class of caller.
pub(crate) struct StreamBudget {
    limits: StreamLimits,
    counts: Mutex<Counts>,
}

impl std::fmt::Debug for StreamBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamBudget")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl StreamBudget {
    /// No stream open yet.
    pub(crate) fn new(limits: StreamLimits) -> Arc<StreamBudget> {
        Arc::new(StreamBudget {
            limits,
            counts: Mutex::new(Counts::default()),
        })
    }

    fn counts(&self) -> MutexGuard<'_, Counts> {
        self.counts.lock()
    }

    /// A ticket for one more stream of `principal` (`None`: anonymous), unless its class
    /// holds all it may.
    pub(crate) fn open(self: &Arc<Self>, principal: Option<&str>) -> Option<StreamTicket> {
        let mut counts = self.counts();
        match principal {
            None => {
                if counts.anonymous >= self.limits.anonymous {
                    return None;
                }
                counts.anonymous += 1;
            }
            Some(principal) => {
                let held = counts
                    .per_principal
                    .entry(principal.to_owned())
                    .or_default();
                if *held >= self.limits.per_principal {
                    return None;
                }
                *held += 1;
            }
        }
        Some(StreamTicket {
            budget: Arc::clone(self),
            principal: principal.map(str::to_owned),
        })
    }

    /// How long a notification stream of this class may carry nothing.
    pub(crate) fn idle_timeout(&self, anonymous: bool) -> Duration {
        if anonymous {
            self.limits
                .anonymous_idle_timeout
                .min(self.limits.idle_timeout)
        } else {
            self.limits.idle_timeout
        }
    }

    /// Streams open now: anonymous ones, and those of every principal together.
    pub(crate) fn open_now_by_class(&self) -> (usize, usize) {
        let counts = self.counts();
        (counts.anonymous, counts.per_principal.values().sum())
    }

    /// Streams open now: all anonymous ones, and `principal`'s.
    #[cfg(test)]
    fn open_now(&self, principal: &str) -> (usize, usize) {
        let counts = self.counts();
        (
            counts.anonymous,
            counts.per_principal.get(principal).copied().unwrap_or(0),
        )
    }
}

/// One open stream's place in the budget, given back when dropped.
pub(crate) struct StreamTicket {
    budget: Arc<StreamBudget>,
    principal: Option<String>,
}

impl StreamTicket {
    /// `response` with this ticket held by its body, so the stream's place is given back
    /// when the body is dropped (the stream ended, or the client went away).
    pub(crate) fn hold(self, response: Response) -> Response {
        response.map(|body| {
            Body::new(Holding {
                body,
                _ticket: self,
            })
        })
    }
}

impl Drop for StreamTicket {
    fn drop(&mut self) {
        let mut counts = self.budget.counts();
        match &self.principal {
            None => counts.anonymous = counts.anonymous.saturating_sub(1),
            Some(principal) => {
                if let Some(held) = counts.per_principal.get_mut(principal) {
                    *held = held.saturating_sub(1);
                    if *held == 0 {
                        counts.per_principal.remove(principal);
                    }
                }
            }
        }
    }
}

/// A response body that holds a stream's ticket.
struct Holding {
    body: Body,
    _ticket: StreamTicket,
}

impl HttpBody for Holding {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
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

    fn budget(per_principal: usize, anonymous: usize) -> Arc<StreamBudget> {
        StreamBudget::new(StreamLimits {
            per_principal,
            anonymous,
            ..StreamLimits::default()
        })
    }

    #[test]
    fn each_principal_and_the_anonymous_callers_have_their_own_budget() {
        let budget = budget(2, 1);
        let anonymous = budget.open(None).expect("the anonymous stream");
        assert!(budget.open(None).is_none(), "anonymous callers are full");
        // Anonymous callers being full takes nothing from a principal.
        let a1 = budget.open(Some("alice")).unwrap();
        let _a2 = budget.open(Some("alice")).unwrap();
        assert!(budget.open(Some("alice")).is_none());
        let _b = budget.open(Some("bob")).expect("bob has his own");
        assert_eq!(budget.open_now("alice"), (1, 2));

        drop(a1);
        assert!(budget.open(Some("alice")).is_some());
        drop(anonymous);
        assert!(budget.open(None).is_some());
        assert_eq!(budget.open_now("carol"), (0, 0));
    }

    #[test]
    fn a_held_ticket_is_given_back_with_the_response_body() {
        let budget = budget(1, 1);
        let ticket = budget.open(Some("alice")).unwrap();
        let response = ticket.hold(Response::new(Body::from("data: x\n\n")));
        assert!(budget.open(Some("alice")).is_none());
        drop(response);
        assert_eq!(budget.open_now("alice"), (0, 0));
        assert!(budget.open(Some("alice")).is_some());
    }

    #[test]
    fn anonymous_streams_idle_out_sooner() {
        let budget = budget(1, 1);
        assert_eq!(budget.idle_timeout(true), Duration::from_secs(60));
        assert_eq!(budget.idle_timeout(false), Duration::from_secs(30 * 60));
    }
}
