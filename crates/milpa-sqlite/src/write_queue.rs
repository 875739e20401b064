//! The hand-off between the store's handles and its writer thread, with a linger for
//! audit records.
//!
//! A job (a token, a budget, an approval) has a caller waiting for its commit: the writer
//! is woken at once. An audit record has nobody waiting (the call is already answered
//! and never reads it back), so a record that finds the writer idle wakes it, and the
//! writer then waits up to the linger for more before it commits them all in one
//! transaction; records queued meanwhile do not wake it again. At a real agent's pace
//! (a call every few milliseconds) that turns one thread wake-up and one commit per call
//! into one per linger. A job, a flush or the store's drop ends the linger at once, so
//! nothing a caller waits for is delayed, and a clean shutdown still loses nothing; a
//! `kill -9` loses the records of the last linger at most (each batch is one
//! transaction: never a torn or unchained record).
//!
//! After committing a batch of records the writer does not go to sleep at once: it waits
//! one more linger, on a timer, for the next records. At a steady pace those find it
//! waiting and need not wake it, so a batch costs the writer one wake-up (its timer)
//! instead of two (the first record's, then the timer's); only a linger with no record at
//! all puts it back to sleep until the next one. Measured with `bench_paced` on `milpa
//! serve` (100 calls a second, 25 ms linger), the first wake-up was half the writer's
//! wake-ups.

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
    /// The writer's last batch was records that lingered: it waits one more linger for
    /// the next ones (without being woken) before it goes idle.
    watching: bool,
    /// Pushes that woke the writer.
    #[cfg(test)]
    wakes: u64,
    /// No more items: senders are gone (the store was dropped) or the writer stopped.
    closed: bool,
}

/// Why [`WriteQueue::take`] returned nothing: the queue is closed and empty.
pub(crate) struct Closed;

impl<T: Urgency> WriteQueue<T> {
    /// An empty queue whose audit records wait up to `linger` (zero: never) for company.
    pub(crate) fn new(linger: Duration) -> WriteQueue<T> {
        WriteQueue {
            state: Mutex::new(State {
                items: VecDeque::new(),
                urgent: false,
                idle: false,
                watching: false,
                #[cfg(test)]
                wakes: 0,
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
        #[cfg(test)]
        {
            state.wakes += u64::from(wake);
        }
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
    /// held until the linger that started with the first of them has passed.
    pub(crate) fn take(&self, into: &mut Vec<T>, max: usize) -> Result<(), Closed> {
        let mut state = self.state.lock();
        let mut deadline: Option<Instant> = None;
        let mut watching = std::mem::take(&mut state.watching);
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
            } else if watching {
                // Records came at a steady pace: wait for the next on a timer. The ones
                // that come meanwhile do not wake the writer (it is not idle) and are
                // taken when this linger ends, so none waits longer than one linger.
                let now = Instant::now();
                let until = *deadline.get_or_insert(now + self.linger);
                if now >= until {
                    watching = false;
                    deadline = None;
                    continue;
                }
                state.idle = false;
                let _timed_out = self.wake.wait_until(&mut state, until);
            } else {
                state.idle = true;
                self.wake.wait(&mut state);
            }
        }
        // A batch of records that waited out their linger (nothing urgent, not closing,
        // not cut at `max`): the next ones are likely on their way.
        state.watching =
            !state.urgent && !state.closed && !self.linger.is_zero() && state.items.len() <= max;
        let count = state.items.len().min(max);
        into.extend(state.items.drain(..count));
        state.urgent = state.items.iter().any(Urgency::is_urgent);
        state.idle = false;
        Ok(())
    }

    /// How many times a push has woken the writer (for the tests of the wake-up rule).
    #[cfg(test)]
    fn wakes(&self) -> u64 {
        self.state.lock().wakes
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

    /// At a steady pace, records after the first batch find the writer waiting on its
    /// timer: they do not wake it, and still wait one linger at most.
    #[test]
    fn records_at_a_steady_pace_wake_the_writer_once() {
        let linger = Duration::from_millis(40);
        let queue = Arc::new(WriteQueue::new(linger));
        let writer = {
            let queue = Arc::clone(&queue);
            std::thread::spawn(move || {
                let mut batches = Vec::new();
                let mut taken = Vec::new();
                while queue.take(&mut taken, 100).is_ok() {
                    batches.push((Instant::now(), std::mem::take(&mut taken)));
                }
                batches
            })
        };
        let mut pushed = Vec::new();
        for n in 0..12 {
            pushed.push(Instant::now());
            assert!(queue.push(Item::Audit(n)));
            std::thread::sleep(Duration::from_millis(15));
        }
        let wakes = queue.wakes();
        queue.close();
        let batches = writer.join().unwrap();
        let all: Vec<_> = batches.iter().flat_map(|(_, items)| items).collect();
        let expected: Vec<Item> = (0..12).map(Item::Audit).collect();
        assert_eq!(all, expected.iter().collect::<Vec<_>>());
        // The first record found the writer idle; the others came while it watched (a
        // slow machine may let it fall idle once). Waking per batch would be four or more.
        assert!(wakes <= 2, "{wakes} wake-ups for twelve records");
        // Every record, except those the close handed over, waited one linger at most
        // (plus the scheduler's slack).
        for (n, at) in pushed.iter().enumerate() {
            let (taken_at, _) = batches
                .iter()
                .find(|(_, items)| items.contains(&Item::Audit(n as u32)))
                .unwrap();
            assert!(
                taken_at.duration_since(*at) < linger + Duration::from_millis(200),
                "record {n} waited {:?}",
                taken_at.duration_since(*at)
            );
        }
    }

    /// A linger with no record at all puts the writer to sleep: the next record wakes it.
    #[test]
    fn a_quiet_linger_puts_the_writer_to_sleep() {
        let linger = Duration::from_millis(10);
        let queue = Arc::new(WriteQueue::new(linger));
        let writer = {
            let queue = Arc::clone(&queue);
            std::thread::spawn(move || {
                let mut taken = Vec::new();
                while queue.take(&mut taken, 100).is_ok() {}
                taken
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(queue.push(Item::Audit(1)));
        std::thread::sleep(Duration::from_millis(200));
        assert!(queue.push(Item::Audit(2)));
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(queue.wakes(), 2, "each record after a quiet linger woke it");
        queue.close();
        assert_eq!(writer.join().unwrap(), [Item::Audit(1), Item::Audit(2)]);
    }
}
