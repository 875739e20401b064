//! The pipeline's clock: raw counter ticks, turned into durations only when one is needed.
//!
//! Reading the time three times per call (start, tool start, tool end) was a measurable
//! share of a trivial call with `std::time::Instant` (a vDSO call and `timespec`
//! arithmetic each time). `quanta` reads the CPU's invariant counter and scales it lazily.

use std::time::Duration;

/// A point in time on the pipeline's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tick(u64);

/// A calibrated, monotonic clock.
#[derive(Debug, Clone)]
pub(crate) struct PipelineClock(quanta::Clock);

impl Default for PipelineClock {
    fn default() -> Self {
        PipelineClock(quanta::Clock::new())
    }
}

impl PipelineClock {
    /// Now.
    #[inline]
    pub(crate) fn now(&self) -> Tick {
        Tick(self.0.raw())
    }

    // quanta answers zero when `end` is not after `start` (the test below pins it).

    /// The time from `start` to `end` (zero if `end` is earlier).
    #[inline]
    pub(crate) fn between(&self, start: Tick, end: Tick) -> Duration {
        self.0.delta(start.0, end.0)
    }

    /// `between(start, end).as_millis()`, without building the `Duration` (every call's
    /// `took_ms` is one).
    #[inline]
    pub(crate) fn millis_between(&self, start: Tick, end: Tick) -> u64 {
        self.0.delta_as_nanos(start.0, end.0) / 1_000_000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_a_sleep() {
        let clock = PipelineClock::default();
        let start = clock.now();
        std::thread::sleep(Duration::from_millis(20));
        let elapsed = clock.between(start, clock.now());
        assert!(
            elapsed >= Duration::from_millis(15) && elapsed < Duration::from_secs(5),
            "{elapsed:?}"
        );
        assert_eq!(clock.between(clock.now(), start), Duration::ZERO);
        let end = clock.now();
        assert_eq!(
            u128::from(clock.millis_between(start, end)),
            clock.between(start, end).as_millis()
        );
        assert_eq!(clock.millis_between(end, start), 0);
    }
}
