//! The pipeline's clock: raw counter ticks, turned into durations only when one is needed.
//!
//! Reading the time three times per call (start, tool start, tool end) was a measurable
//! share of a trivial call with `std::time::Instant` (a vDSO call and `timespec`
//! arithmetic each time). `quanta` reads the CPU's invariant counter and scales it lazily.
//! The in-memory rate limiter times its charges on it too, for the same reason.

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

    /// The nanoseconds from `start` to `end` (zero if `end` is earlier): how long every tool
    /// ran, compared with its soft timeout.
    #[inline]
    pub(crate) fn nanos_between(&self, start: Tick, end: Tick) -> u64 {
        self.0.delta_as_nanos(start.0, end.0)
    }

    /// The whole milliseconds from `start` to `end` (every call's `took_ms`).
    #[inline]
    pub(crate) fn millis_between(&self, start: Tick, end: Tick) -> u64 {
        self.0.delta_as_nanos(start.0, end.0) / 1_000_000
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn measures_a_sleep() {
        let clock = PipelineClock::default();
        let start = clock.now();
        std::thread::sleep(Duration::from_millis(20));
        let end = clock.now();
        let nanos = clock.nanos_between(start, end);
        assert!((15_000_000..5_000_000_000).contains(&nanos), "{nanos} ns");
        assert_eq!(clock.millis_between(start, end), nanos / 1_000_000);
        assert_eq!(clock.nanos_between(end, start), 0);
        assert_eq!(clock.millis_between(end, start), 0);
    }
}
