//! [`LatencyHistogram`]: how long calls took, in fixed buckets, counted with atomics.

use std::sync::atomic::{AtomicU64, Ordering};

/// The upper bounds of the latency buckets, in milliseconds (the resolution of an audit
/// record's `took_ms`): from a call answered within the millisecond to one that ran five
/// minutes. Above the last, a call counts in the `+Inf` bucket only.
pub const LATENCY_BOUNDS_MS: [u64; 15] = [
    1, 5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 300_000,
];

/// Counts of calls by how long they took; an observation is two relaxed atomic additions.
#[derive(Debug, Default)]
pub(crate) struct Latency {
    /// Calls per bucket, not cumulative: `[i]` took at most `LATENCY_BOUNDS_MS[i]` and more
    /// than the bound before it; the last slot took more than every bound.
    buckets: [AtomicU64; LATENCY_BOUNDS_MS.len() + 1],
    sum_ms: AtomicU64,
}

impl Latency {
    /// One call that took `took_ms`.
    #[inline]
    pub(crate) fn observe(&self, took_ms: u64) {
        let slot = LATENCY_BOUNDS_MS.partition_point(|&bound| bound < took_ms);
        self.buckets[slot].fetch_add(1, Ordering::Relaxed);
        self.sum_ms.fetch_add(took_ms, Ordering::Relaxed);
    }

    /// The counts as they stand. Read bucket by bucket while calls may still count, so a
    /// call that ends during the read may be in the buckets and not yet in the sum (or the
    /// other way round); the count is always the buckets' total.
    pub(crate) fn read(&self) -> LatencyHistogram {
        let mut cumulative = 0;
        let mut buckets = Vec::with_capacity(LATENCY_BOUNDS_MS.len());
        for (slot, bound) in LATENCY_BOUNDS_MS.iter().enumerate() {
            cumulative += self.buckets[slot].load(Ordering::Relaxed);
            buckets.push((*bound, cumulative));
        }
        let count = cumulative + self.buckets[LATENCY_BOUNDS_MS.len()].load(Ordering::Relaxed);
        LatencyHistogram {
            buckets,
            count,
            sum_ms: self.sum_ms.load(Ordering::Relaxed),
        }
    }
}

/// A latency histogram read at one moment, in the cumulative shape Prometheus exposes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LatencyHistogram {
    /// Each bound of [`LATENCY_BOUNDS_MS`] with how many calls took at most that long.
    pub buckets: Vec<(u64, u64)>,
    /// How many calls in all (the `+Inf` bucket).
    pub count: u64,
    /// Their durations added up, in milliseconds.
    pub sum_ms: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_counts_in_its_bucket_and_every_wider_one() {
        let latency = Latency::default();
        for took in [0, 1, 2, 5, 999, 1_000, 1_001, 400_000] {
            latency.observe(took);
        }
        let read = latency.read();
        let at = |bound: u64| read.buckets.iter().find(|(b, _)| *b == bound).unwrap().1;
        // A bound is inclusive: 1 ms is in `le=0.001`, 5 in `le=0.005`, 1 000 in `le=1`.
        assert_eq!(at(1), 2);
        assert_eq!(at(5), 4);
        assert_eq!(at(500), 4);
        assert_eq!(at(1_000), 6);
        assert_eq!(at(2_500), 7);
        assert_eq!(at(300_000), 7, "400 s is past every bound");
        assert_eq!(read.count, 8);
        assert_eq!(read.sum_ms, 1 + 2 + 5 + 999 + 1_000 + 1_001 + 400_000);
        let counts: Vec<u64> = read.buckets.iter().map(|(_, c)| *c).collect();
        assert!(counts.is_sorted(), "cumulative: {counts:?}");
    }
}
