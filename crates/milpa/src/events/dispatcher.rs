//! [`Dispatcher`]: runs listeners by priority; a failing listener never stops the others.

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::{ArcSwap, Guard};

use crate::events::event::Event;
use crate::events::pattern::EventPattern;

/// A listener's failure; it is logged and the remaining listeners still run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerError(pub String);

impl fmt::Display for ListenerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a listener closure may return: `()` or a `Result` with a displayable error.
pub trait ListenerOutcome {
    /// `Err` when the listener failed.
    fn into_result(self) -> Result<(), ListenerError>;
}

impl ListenerOutcome for () {
    fn into_result(self) -> Result<(), ListenerError> {
        Ok(())
    }
}

impl<E: fmt::Display> ListenerOutcome for Result<(), E> {
    fn into_result(self) -> Result<(), ListenerError> {
        self.map_err(|e| ListenerError(e.to_string()))
    }
}

/// Reacts to events. Listeners run inline, on the caller's task: keep them quick and hand
/// slow work to a task of your own.
pub trait Listener: Send + Sync + 'static {
    /// Handles one event.
    fn on_event(&self, event: &Event<'_>) -> Result<(), ListenerError>;
}

impl<F, R> Listener for F
where
    F: Fn(&Event<'_>) -> R + Send + Sync + 'static,
    R: ListenerOutcome,
{
    fn on_event(&self, event: &Event<'_>) -> Result<(), ListenerError> {
        self(event).into_result()
    }
}

#[derive(Clone)]
struct Subscription {
    pattern: EventPattern,
    priority: i32,
    seq: u64,
    listener: Arc<dyn Listener>,
}

/// Dispatches events to subscribed listeners.
///
/// Listeners run in descending priority; among equals, exact-name subscriptions before
/// wildcard ones, then in subscription order. A listener that returns an error or panics is
/// logged (target `milpa::events`) and the rest still run. For `tool.executing`, dispatch
/// stops after the listener that stopped the [`InterceptionSlot`](crate::InterceptionSlot).
///
/// ```
/// use milpa::events::{Dispatcher, Event};
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
///
/// let seen = Arc::new(AtomicUsize::new(0));
/// let dispatcher = Dispatcher::new();
/// let counter = seen.clone();
/// dispatcher.subscribe("app.*", 0, move |_: &Event<'_>| { counter.fetch_add(1, Ordering::SeqCst); });
/// dispatcher.dispatch(&Event::Custom { name: "app.started", payload: &serde_json::Value::Null });
/// assert_eq!(seen.load(Ordering::SeqCst), 1);
/// ```
#[derive(Default)]
pub struct Dispatcher {
    // Copy-on-write: dispatch runs on a snapshot without holding any lock, so a listener
    // may subscribe another without deadlocking. Read through `ArcSwap`: with a lock and
    // an `Arc` clone, taking the snapshot was four locked instructions per event (two
    // events a call), against one or two here. Subscribing is a read-copy-update
    // (`ArcSwap::rcu`), so two subscriptions at once do not lose one another.
    subscriptions: ArcSwap<Vec<Subscription>>,
    next_seq: AtomicU64,
}

impl fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let patterns = self.registered_patterns();
        f.debug_struct("Dispatcher")
            .field("patterns", &patterns)
            .finish()
    }
}

impl Dispatcher {
    /// A dispatcher without listeners.
    pub fn new() -> Self {
        Self::default()
    }

    fn snapshot(&self) -> Guard<Arc<Vec<Subscription>>> {
        self.subscriptions.load()
    }

    /// Subscribes `listener` to an event name or pattern (see [`EventPattern`]).
    pub fn subscribe(&self, pattern: &str, priority: i32, listener: impl Listener) {
        self.subscribe_arc(pattern, priority, Arc::new(listener));
    }

    /// Subscribes a shared listener.
    pub fn subscribe_arc(&self, pattern: &str, priority: i32, listener: Arc<dyn Listener>) {
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        let added = Subscription {
            pattern: EventPattern::new(pattern),
            priority,
            seq,
            listener,
        };
        self.subscriptions.rcu(|subs| {
            let mut subs = Vec::clone(subs);
            subs.push(added.clone());
            subs.sort_by_key(|s| {
                (
                    std::cmp::Reverse(s.priority),
                    s.pattern.is_wildcard(),
                    s.seq,
                )
            });
            subs
        });
    }

    /// Whether any listener would receive an event named `name`.
    pub fn has_subscribers(&self, name: &str) -> bool {
        self.snapshot().iter().any(|s| s.pattern.matches(name))
    }

    /// How many listeners would receive an event named `name`.
    pub fn subscriber_count(&self, name: &str) -> usize {
        self.snapshot()
            .iter()
            .filter(|s| s.pattern.matches(name))
            .count()
    }

    /// The names and patterns subscribed, in subscription order.
    pub fn registered_patterns(&self) -> Vec<String> {
        let mut subs: Vec<(u64, String)> = self
            .snapshot()
            .iter()
            .map(|s| (s.seq, s.pattern.as_str().to_owned()))
            .collect();
        subs.sort();
        let mut seen = std::collections::HashSet::new();
        subs.into_iter()
            .map(|(_, p)| p)
            .filter(|p| seen.insert(p.clone()))
            .collect()
    }

    /// Runs every matching listener in order.
    pub fn dispatch(&self, event: &Event<'_>) {
        let subs = self.snapshot();
        let name = event.name();
        for sub in subs.iter().filter(|s| s.pattern.matches(name)) {
            let outcome = catch_unwind(AssertUnwindSafe(|| sub.listener.on_event(event)));
            let failure = match outcome {
                Ok(Ok(())) => None,
                Ok(Err(error)) => Some(error.0),
                Err(panic) => Some(crate::pipeline::panic_message(panic.as_ref())),
            };
            if let Some(message) = failure {
                tracing::error!(
                    target: "milpa::events",
                    event = name,
                    "[EventDispatcher] Handler error for {name}: {message}"
                );
            }
            if event.slot().is_some_and(|slot| slot.is_stopped()) {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn priority_then_exact_then_subscription_order_and_failures_do_not_stop_the_rest() {
        let order = Arc::new(Mutex::new(Vec::new()));
        let d = Dispatcher::new();
        for (pattern, priority, label) in [
            ("a.*", 0, "wild0"),
            ("a.b", 0, "exact0"),
            ("a.b", 10, "exact10"),
            ("*.b", 10, "wild10"),
        ] {
            let order = order.clone();
            d.subscribe(pattern, priority, move |_: &Event<'_>| {
                order.lock().unwrap().push(label)
            });
        }
        d.subscribe("a.b", 5, |_: &Event<'_>| -> Result<(), String> {
            Err("boom".into())
        });
        d.subscribe("a.b", 4, |_: &Event<'_>| -> () { panic!("kaboom") });
        d.dispatch(&Event::Custom {
            name: "a.b",
            payload: &serde_json::Value::Null,
        });
        assert_eq!(
            *order.lock().unwrap(),
            ["exact10", "wild10", "exact0", "wild0"]
        );
        assert_eq!(d.registered_patterns(), ["a.*", "a.b", "*.b"]);
    }

    /// A listener may subscribe another while an event is dispatched: the dispatch runs on
    /// the subscriptions as they were when it began, and the new listener hears the next
    /// event. Subscriptions added from several threads at once are all kept.
    #[test]
    fn a_listener_subscribes_another_during_a_dispatch() {
        let d = Arc::new(Dispatcher::new());
        let heard = Arc::new(Mutex::new(Vec::new()));
        let (dispatcher, log) = (Arc::downgrade(&d), heard.clone());
        d.subscribe("a", 0, move |_: &Event<'_>| {
            log.lock().unwrap().push("first");
            let log = log.clone();
            if let Some(d) = dispatcher.upgrade() {
                d.subscribe("a", 0, move |_: &Event<'_>| {
                    log.lock().unwrap().push("added")
                });
            }
        });
        let event = Event::Custom {
            name: "a",
            payload: &serde_json::Value::Null,
        };
        d.dispatch(&event);
        assert_eq!(*heard.lock().unwrap(), ["first"]);
        d.dispatch(&event);
        assert_eq!(*heard.lock().unwrap(), ["first", "first", "added"]);

        let threads: Vec<_> = (0..4)
            .map(|_| {
                let d = Arc::clone(&d);
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        d.subscribe("b", 0, |_: &Event<'_>| {});
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(d.subscriber_count("b"), 200);
    }
}
