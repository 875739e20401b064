//! [`InMemoryRateLimiter`]: GCRA state in a concurrent map, for one process.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

use dashmap::DashMap;

use super::{Gcra, GcraState, Quota, RateDecision, RateKey, RateLimiter};
use crate::deferred::Deferred;
use crate::pipeline::clock::{PipelineClock, Tick};
use crate::store_error::StoreError;

/// After this many new keys, idle keys are swept so the map does not grow without bound.
const SWEEP_EVERY: u64 = 4096;

thread_local! {
    // Reused to spell keys without allocating on every call.
    static KEY_BUF: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Budgets kept in memory, per process. Charging is atomic per key.
#[derive(Debug)]
pub struct InMemoryRateLimiter {
    // The pipeline's clock (the CPU's counter): `Instant::elapsed` was 25 of the 66 ns a
    // charge took (a vDSO call and `timespec` arithmetic).
    clock: PipelineClock,
    /// When the limiter was made: charges are timed from it.
    epoch: Tick,
    // foldhash, not SipHash: every charged call hashes its key here, as every call does in
    // the registry's tool table (which made the same choice). It is seeded at random per
    // map, so keys a caller chooses (its principal, its address) cannot be aimed at one
    // bucket from outside the process.
    states: DashMap<Box<str>, GcraState, foldhash::fast::RandomState>,
    new_keys: AtomicU64,
}

impl Default for InMemoryRateLimiter {
    fn default() -> Self {
        Self::new()
    }
}

impl InMemoryRateLimiter {
    /// An empty limiter.
    pub fn new() -> Self {
        let clock = PipelineClock::default();
        InMemoryRateLimiter {
            epoch: clock.now(),
            clock,
            states: DashMap::with_hasher(foldhash::fast::RandomState::default()),
            new_keys: AtomicU64::new(0),
        }
    }

    fn now(&self) -> u64 {
        // Offset by a day so a fresh key's zero state is always in the past.
        self.clock.nanos_between(self.epoch, self.clock.now()) + 86_400_000_000_000
    }

    /// Charges synchronously (what [`RateLimiter::consume`] does).
    pub fn charge(&self, key: RateKey<'_>, cost: u32, quota: Quota) -> RateDecision {
        self.charge_at(key, cost, quota, self.now())
    }

    /// Charges at `now`, in nanoseconds on a clock the caller keeps (every call to one
    /// limiter must use the same clock). For tests and for comparing other limiters with
    /// this one at the same instants; [`charge`](Self::charge) uses the limiter's clock.
    pub fn charge_at(&self, key: RateKey<'_>, cost: u32, quota: Quota, now: u64) -> RateDecision {
        let gcra = Gcra::new(quota);
        KEY_BUF.with(|buf| {
            let mut buf = buf.borrow_mut();
            buf.clear();
            key.write_to(&mut buf);
            if let Some(mut state) = self.states.get_mut(buf.as_str()) {
                let (decision, next) = gcra.charge(*state, now, cost);
                if let Some(next) = next {
                    *state = next;
                }
                return decision;
            }
            let entry = self.states.entry(Box::from(buf.as_str())).or_default();
            let mut state = entry;
            let (decision, next) = gcra.charge(*state, now, cost);
            if let Some(next) = next {
                *state = next;
            }
            drop(state);
            if self.new_keys.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
                self.sweep();
            }
            decision
        })
    }

    /// Forgets keys whose budget is full again.
    pub fn sweep(&self) {
        let now = self.now();
        self.states.retain(|_, state| !Gcra::is_idle(*state, now));
    }

    /// How many keys are tracked.
    pub fn len(&self) -> usize {
        self.states.len()
    }

    /// Whether no key is tracked.
    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
    }
}

impl RateLimiter for InMemoryRateLimiter {
    fn consume<'a>(
        &'a self,
        key: RateKey<'a>,
        cost: u32,
        quota: Quota,
    ) -> Deferred<'a, Result<RateDecision, StoreError>> {
        Deferred::ready(Ok(self.charge(key, cost, quota)))
    }

    fn reset<'a>(&'a self, key: RateKey<'a>) -> Deferred<'a, Result<(), StoreError>> {
        self.states.remove(key.to_string().as_str());
        Deferred::ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const KEY: RateKey<'static> = RateKey {
        channel: "cli",
        principal: "ann",
        tool: "ping",
    };

    /// Whether one token charged to `key` is allowed.
    fn allowed(limiter: &InMemoryRateLimiter, key: RateKey<'_>, quota: Quota) -> bool {
        matches!(limiter.charge(key, 1, quota), RateDecision::Allowed { .. })
    }

    /// The limiter's clock (the CPU's counter) runs at real time: a spent budget says when
    /// it refills, and does refill then.
    #[test]
    fn a_spent_budget_refills_after_the_time_it_names() {
        let limiter = InMemoryRateLimiter::new();
        let quota = Quota::new(1, Duration::from_millis(200));
        assert!(matches!(
            limiter.charge(KEY, 1, quota),
            RateDecision::Allowed { remaining: 0 }
        ));
        let RateDecision::Denied { retry_after } = limiter.charge(KEY, 1, quota) else {
            panic!("a spent budget refuses");
        };
        assert!(
            retry_after > Duration::from_millis(100) && retry_after <= Duration::from_millis(200),
            "retry after {retry_after:?}"
        );
        std::thread::sleep(retry_after + Duration::from_millis(20));
        assert!(allowed(&limiter, KEY, quota));
    }

    #[test]
    fn keys_are_charged_apart_and_reset_alone() {
        let limiter = InMemoryRateLimiter::new();
        let quota = Quota::per_minute(1);
        let other = RateKey {
            principal: "bob",
            ..KEY
        };
        assert!(allowed(&limiter, KEY, quota));
        assert!(allowed(&limiter, other, quota));
        assert!(!allowed(&limiter, KEY, quota));
        assert_eq!(limiter.len(), 2);
        let reset = limiter.reset(KEY);
        assert!(matches!(reset, Deferred::Ready(Ok(()))));
        assert!(allowed(&limiter, KEY, quota));
        assert!(!allowed(&limiter, other, quota));
    }
}
