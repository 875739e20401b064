//! The Generic Cell Rate Algorithm, as plain arithmetic so every store computes the same.

use std::time::Duration;

use super::{Quota, RateDecision};

/// A key's state: its theoretical arrival time, in nanoseconds on the store's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GcraState {
    /// When the budget is fully refilled (nanoseconds); 0 for a fresh key.
    pub tat: u64,
}

/// GCRA for one quota.
///
/// Each token "costs" `window / max_tokens` of time. A key may run ahead of the clock by at
/// most one window, so a fresh key can spend `max_tokens` at once and then refills at one
/// token per interval.
#[derive(Debug, Clone, Copy)]
pub struct Gcra {
    interval: u64,
    window: u64,
}

impl Gcra {
    /// The algorithm for `quota`.
    pub fn new(quota: Quota) -> Gcra {
        let window = quota.window.as_nanos().min(u64::MAX as u128) as u64;
        let interval = window / u64::from(quota.max_tokens.max(1));
        Gcra {
            interval: interval.max(1),
            window,
        }
    }

    /// Tries to charge `cost` at time `now` (nanoseconds). Returns the decision and, when
    /// allowed, the new state to store.
    pub fn charge(
        &self,
        state: GcraState,
        now: u64,
        cost: u32,
    ) -> (RateDecision, Option<GcraState>) {
        let base = state.tat.max(now);
        let new_tat = base.saturating_add(self.interval.saturating_mul(u64::from(cost)));
        let allow_at = new_tat.saturating_sub(self.window);
        if allow_at > now {
            let retry_after = Duration::from_nanos(allow_at - now);
            return (RateDecision::Denied { retry_after }, None);
        }
        (
            RateDecision::Allowed {
                remaining: self.remaining(new_tat, now),
            },
            Some(GcraState { tat: new_tat }),
        )
    }

    /// Nanoseconds one token costs (`window / max_tokens`, at least 1).
    pub fn interval_nanos(&self) -> u64 {
        self.interval
    }

    /// The window in nanoseconds: how far a key may run ahead of the clock.
    pub fn window_nanos(&self) -> u64 {
        self.window
    }

    /// Whole tokens left at `now` for a key whose state is `tat` (what an allowed
    /// [`charge`](Self::charge) reports). Stores that charge in their own query language
    /// use it to answer exactly as this arithmetic does.
    pub fn remaining(&self, tat: u64, now: u64) -> u32 {
        let remaining = now.saturating_add(self.window).saturating_sub(tat) / self.interval;
        remaining.min(u64::from(u32::MAX)) as u32
    }

    /// Whether a stored state is fully refilled at `now` (and may be forgotten).
    pub fn is_idle(state: GcraState, now: u64) -> bool {
        state.tat <= now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    fn quota(max: u32, secs: u64) -> Gcra {
        Gcra::new(Quota::new(max, Duration::from_secs(secs)))
    }

    #[test]
    fn a_fresh_key_may_spend_its_whole_budget_then_refills_smoothly() {
        let gcra = quota(10, 10);
        let mut state = GcraState::default();
        let now = 100 * SEC;
        for spent in 1..=10 {
            let (decision, next) = gcra.charge(state, now, 1);
            assert_eq!(
                decision,
                RateDecision::Allowed {
                    remaining: 10 - spent
                }
            );
            state = next.unwrap();
        }
        let (decision, next) = gcra.charge(state, now, 1);
        assert_eq!(
            decision,
            RateDecision::Denied {
                retry_after: Duration::from_secs(1)
            }
        );
        assert!(next.is_none());
        let (decision, _) = gcra.charge(state, now + SEC, 1);
        assert_eq!(decision, RateDecision::Allowed { remaining: 0 });
    }

    #[test]
    fn a_cost_above_the_budget_is_always_denied() {
        let gcra = quota(4, 60);
        let (decision, _) = gcra.charge(GcraState::default(), 1000 * SEC, 5);
        assert!(matches!(decision, RateDecision::Denied { .. }));
    }
}
