//! The hand-off between the store's handles and its writer thread, with a linger for
//! audit records.
//!
//! A job (a token, a budget, an approval) has a caller waiting for its commit: the writer
//! is woken at once. An audit record has nobody waiting (the call is already answered
//! and never reads it back), so it never has to wake the writer at once:
//! - after each batch the writer *watches* for one linger before it sleeps for good:
//!   records queued meanwhile do not wake it, and are committed with the next job or at the
//!   watch's end;
//! - a record that finds the writer asleep wakes it, and the writer then waits up to the
//!   linger for more before it commits them all in one transaction.
//!
//! At a real agent's pace (a call every few milliseconds, each charging a budget) a call
//! then costs one wake-up of the writer, for its budget, instead of two: its record rides
//! with the next call's budget. Without jobs, records cost one wake-up and one commit per
//! linger. A job, a flush or the store's drop ends the wait at once, so nothing a caller
//! waits for is delayed, and a clean shutdown still loses nothing; a `kill -9` loses the
//! records of the last linger at most (each batch is one transaction: never a torn or
//! unchained record).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// What the writer is sent; only whether an item is an audit record matters here.
pub(crate) trait Urgency {
    /// True when someone waits for this item's commit (anything but an audit record).
    fn is_urgent(&self) -> bool;
}

/// The queue, shared by every sender and the writer thread.
pub(crate) struct WriteQueue<T> {
    /// A lock without poisoning: a panic while holding it leaves the queue itself
    /// consistent (pushes and drains are single calls).
    state: Mutex<State<T>>,
    wake: Condvar,
    linger: Duration,
}

struct State<T> {
    items: VecDeque<T>,
    /// An urgent item is queued: the writer takes everything without lingering.
    urgent: bool,
    /// The writer waits without a deadline: the next item must wake it.
    idle: bool,
    /// No more items: senders are gone (the store was dropped) or the writer stopped.
    closed: bool,
}

/// Why [`WriteQueue::take`] returned nothing: the queue is closed and empty.
#[derive(Debug)]
pub(crate) struct Closed;

impl<T: Urgency> WriteQueue<T> {
    /// An empty queue whose audit records wait up to `linger` (zero: never) for company.
    pub(crate) fn new(linger: Duration) -> WriteQueue<T> {
        WriteQueue {
            state: Mutex::new(State {
                items: VecDeque::new(),
                urgent: false,
                idle: false,
                closed: false,
            }),
            wake: Condvar::new(),
            linger,
        }
    }

    /// Queues `item`; false (and `item` dropped) when the queue is closed.
    pub(crate) fn push(&self, item: T) -> bool {
        let urgent = item.is_urgent();
        let mut state = self.state.lock();
        if state.closed {
            return false;
        }
        state.items.push_back(item);
        // Wake the writer when it sleeps without a deadline, or when it lingers and this
        // item must not wait (once: later urgent items find the flag set).
        let wake = state.idle || (urgent && !state.urgent) || self.linger.is_zero();
        state.urgent |= urgent;
        state.idle = false;
        drop(state);
        if wake {
            self.wake.notify_one();
        }
        true
    }

    /// Closes the queue: later pushes fail, and the writer takes what is queued without
    /// lingering, then [`Closed`].
    pub(crate) fn close(&self) {
        self.state.lock().closed = true;
        self.wake.notify_one();
    }

    /// Closes the queue and drops what is in it: the writer is gone (it panicked), so
    /// the callers waiting on those items hear that at once instead of never.
    pub(crate) fn abandon(&self) {
        let items = {
            let mut state = self.state.lock();
            state.closed = true;
            std::mem::take(&mut state.items)
        };
        drop(items);
    }

    /// The writer's side: blocks until there is something to commit, and moves up to
    /// `max` items into `into` (in the order they were pushed). Audit records alone are
    /// held for the linger: the one that started when this call did (the writer's watch
    /// after its last batch) or, when they found the writer asleep, the one they started.
    pub(crate) fn take(&self, into: &mut Vec<T>, max: usize) -> Result<(), Closed> {
        let mut state = self.state.lock();
        // The watch costs one timer expiry when the calls stop, and saves the wake-up of
        // the record after each batch (`milpa serve`, 500 calls at 100/s after 500 unpaced:
        // 140 futex calls before, 62 with it, by `strace -c -f`).
        let mut deadline: Option<Instant> =
            (!self.linger.is_zero()).then(|| Instant::now() + self.linger);
        loop {
            if !state.items.is_empty() {
                if state.urgent || state.closed || self.linger.is_zero() || state.items.len() >= max
                {
                    break;
                }
                let now = Instant::now();
                let until = *deadline.get_or_insert(now + self.linger);
                if now >= until {
                    break;
                }
                state.idle = false;
                // Timed out or woken: the loop looks at the queue again either way.
                let _timed_out = self.wake.wait_until(&mut state, until);
            } else if state.closed {
                return Err(Closed);
            } else if let Some(until) = deadline.filter(|until| Instant::now() < *until) {
                // Watching: a record queued now waits for `until` without waking us.
                state.idle = false;
                let _timed_out = self.wake.wait_until(&mut state, until);
            } else {
                deadline = None;
                state.idle = true;
                self.wake.wait(&mut state);
            }
        }
        let count = state.items.len().min(max);
        into.extend(state.items.drain(..count));
        state.urgent = state.items.iter().any(Urgency::is_urgent);
        state.idle = false;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[derive(Debug, PartialEq)]
    enum Item {
        Audit(u32),
        Job(u32),
    }

    impl Urgency for Item {
        fn is_urgent(&self) -> bool {
            matches!(self, Item::Job(_))
        }
    }

    #[test]
    fn a_job_is_taken_at_once_with_the_records_before_it() {
        let queue = WriteQueue::new(Duration::from_secs(3600));
        assert!(queue.push(Item::Audit(1)));
        assert!(queue.push(Item::Job(2)));
        let mut taken = Vec::new();
        assert!(queue.take(&mut taken, 100).is_ok());
        assert_eq!(taken, [Item::Audit(1), Item::Job(2)]);
    }

    #[test]
    fn a_job_pushed_while_records_linger_ends_the_linger() {
        let queue = Arc::new(WriteQueue::new(Duration::from_secs(3600)));
        assert!(queue.push(Item::Audit(1)));
        let writer = {
            let queue = Arc::clone(&queue);
            std::thread::spawn(move || {
                let mut taken = Vec::new();
                queue.take(&mut taken, 100).map(|()| taken).ok()
            })
        };
        // Whether the writer is already lingering or not yet waiting, the job gets the
        // batch taken; an hour-long linger would hang this test otherwise.
        std::thread::sleep(Duration::from_millis(20));
        assert!(queue.push(Item::Job(2)));
        let taken = writer.join().unwrap().expect("taken");
        assert_eq!(taken, [Item::Audit(1), Item::Job(2)]);
    }

    #[test]
    fn records_alone_wait_for_the_linger() {
        let linger = Duration::from_millis(30);
        let queue = WriteQueue::new(linger);
        let pushed = Instant::now();
        assert!(queue.push(Item::Audit(1)));
        assert!(queue.push(Item::Audit(2)));
        let mut taken = Vec::new();
        assert!(queue.take(&mut taken, 100).is_ok());
        assert!(pushed.elapsed() >= linger);
        assert_eq!(taken, [Item::Audit(1), Item::Audit(2)]);
    }

    #[test]
    fn a_record_queued_while_the_writer_watches_joins_the_watch_without_waking_it() {
        let linger = Duration::from_secs(1);
        let queue = Arc::new(WriteQueue::new(linger));
        let (batches, taken) = std::sync::mpsc::channel();
        let writer = {
            let queue = Arc::clone(&queue);
            std::thread::spawn(move || {
                for _ in 0..2 {
                    let mut batch = Vec::new();
                    queue.take(&mut batch, 100).expect("open");
                    batches.send((batch, Instant::now())).unwrap();
                }
            })
        };
        assert!(queue.push(Item::Job(1)));
        let (first, watch_from) = taken.recv().unwrap();
        assert_eq!(first, [Item::Job(1)]);
        std::thread::sleep(linger / 2);
        // The writer watches: it is not asleep for good, so this record wakes nobody.
        assert!(!queue.state.lock().idle, "watching, not idle");
        let pushed = Instant::now();
        assert!(queue.push(Item::Audit(2)));
        let (second, committed) = taken.recv().unwrap();
        writer.join().unwrap();
        assert_eq!(second, [Item::Audit(2)]);
        // Held to the watch's end, not to a linger of its own from when it was pushed.
        assert!(committed.duration_since(watch_from) >= linger);
        assert!(
            committed.duration_since(pushed) < linger,
            "waited {:?}",
            committed.duration_since(pushed)
        );
    }

    #[test]
    fn after_a_quiet_watch_the_writer_sleeps_until_woken() {
        let linger = Duration::from_millis(20);
        let queue = Arc::new(WriteQueue::new(linger));
        let writer = {
            let queue = Arc::clone(&queue);
            std::thread::spawn(move || {
                let mut batch = Vec::new();
                queue.take(&mut batch, 100).map(|()| batch).ok()
            })
        };
        std::thread::sleep(linger * 5);
        assert!(
            queue.state.lock().idle,
            "nothing came during the watch: asleep"
        );
        assert!(queue.push(Item::Job(1)));
        assert_eq!(writer.join().unwrap().expect("taken"), [Item::Job(1)]);
    }

    #[test]
    fn closing_hands_over_what_is_queued_then_ends() {
        let queue = WriteQueue::new(Duration::from_secs(3600));
        assert!(queue.push(Item::Audit(1)));
        queue.close();
        assert!(!queue.push(Item::Audit(2)), "closed: refused");
        let mut taken = Vec::new();
        assert!(queue.take(&mut taken, 100).is_ok());
        assert_eq!(taken, [Item::Audit(1)]);
        assert!(queue.take(&mut taken, 100).is_err());
    }

    #[test]
    fn an_abandoned_queue_drops_its_items_and_refuses_more() {
        let queue = WriteQueue::new(Duration::ZERO);
        let item = Arc::new(());
        struct Held(#[allow(dead_code)] Arc<()>);
        impl Urgency for Held {
            fn is_urgent(&self) -> bool {
                true
            }
        }
        assert!(queue.push(Held(Arc::clone(&item))));
        queue.abandon();
        assert_eq!(Arc::strong_count(&item), 1, "the queued item was dropped");
        assert!(!queue.push(Held(Arc::clone(&item))));
        let mut taken = Vec::new();
        assert!(queue.take(&mut taken, 10).is_err());
    }

    #[test]
    fn a_full_batch_is_taken_without_lingering() {
        let queue = WriteQueue::new(Duration::from_secs(3600));
        for n in 0..5 {
            assert!(queue.push(Item::Audit(n)));
        }
        let mut taken = Vec::new();
        assert!(queue.take(&mut taken, 3).is_ok());
        assert_eq!(taken, [Item::Audit(0), Item::Audit(1), Item::Audit(2)]);
    }
}
