//! Failed sign-ins, counted per client address: after [`MAX_FAILURES`] within
//! [`WINDOW`], the address is refused (`429` with `Retry-After`) until the window ends,
//! whatever it posts, so a token cannot be guessed at speed. A sign-in that succeeds
//! clears its address. The table is bounded ([`MAX_ADDRESSES`]): expired entries go first,
//! then the oldest.
//!
//! The page's own minimal throttle; the HTTP layer may offer a shared one later.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Failures an address may have within [`WINDOW`] before it is refused.
pub(crate) const MAX_FAILURES: u32 = 5;

/// How long failures are counted (from an address's first one), and refused for.
pub(crate) const WINDOW: Duration = Duration::from_secs(300);

/// Addresses tracked at once.
pub(crate) const MAX_ADDRESSES: usize = 10_000;

struct Failures {
    count: u32,
    since: Instant,
}

/// The failure counts.
#[derive(Default)]
pub(crate) struct SignInThrottle {
    table: Mutex<HashMap<IpAddr, Failures>>,
}

impl SignInThrottle {
    /// How long `address` must wait before trying again, if it is refused now.
    pub(crate) fn retry_after(&self, address: IpAddr) -> Option<Duration> {
        self.retry_after_at(address, Instant::now())
    }

    fn retry_after_at(&self, address: IpAddr, now: Instant) -> Option<Duration> {
        let table = self.lock();
        let failures = table.get(&address)?;
        let ends = failures.since + WINDOW;
        (failures.count >= MAX_FAILURES && now < ends).then(|| ends - now)
    }

    /// Counts a failed sign-in from `address`.
    pub(crate) fn failed(&self, address: IpAddr) {
        self.failed_at(address, Instant::now());
    }

    fn failed_at(&self, address: IpAddr, now: Instant) {
        let mut table = self.lock();
        if !table.contains_key(&address) && table.len() >= MAX_ADDRESSES {
            table.retain(|_, f| now.saturating_duration_since(f.since) < WINDOW);
            if table.len() >= MAX_ADDRESSES
                && let Some(oldest) = table.iter().min_by_key(|(_, f)| f.since).map(|(a, _)| *a)
            {
                table.remove(&oldest);
            }
        }
        let entry = table.entry(address).or_insert(Failures {
            count: 0,
            since: now,
        });
        if now.saturating_duration_since(entry.since) >= WINDOW {
            *entry = Failures {
                count: 0,
                since: now,
            };
        }
        entry.count = entry.count.saturating_add(1);
    }

    /// Clears `address` after a sign-in that went through.
    pub(crate) fn succeeded(&self, address: IpAddr) {
        self.lock().remove(&address);
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<IpAddr, Failures>> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_refused_after_its_failures_until_the_window_ends() {
        let throttle = SignInThrottle::default();
        let (here, there): (IpAddr, IpAddr) =
            ("127.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let t0 = Instant::now();
        for n in 0..MAX_FAILURES {
            assert_eq!(throttle.retry_after_at(here, t0), None, "after {n}");
            throttle.failed_at(here, t0 + Duration::from_secs(u64::from(n)));
        }
        let wait = throttle.retry_after_at(here, t0 + Duration::from_secs(10));
        assert_eq!(wait, Some(WINDOW - Duration::from_secs(10)));
        assert_eq!(throttle.retry_after_at(there, t0), None, "per address");
        assert_eq!(throttle.retry_after_at(here, t0 + WINDOW), None);
        // A new window starts from nothing.
        throttle.failed_at(here, t0 + WINDOW);
        assert_eq!(throttle.retry_after_at(here, t0 + WINDOW), None);
    }

    #[test]
    fn a_success_clears_the_address() {
        let throttle = SignInThrottle::default();
        let here: IpAddr = "::1".parse().unwrap();
        for _ in 0..MAX_FAILURES {
            throttle.failed(here);
        }
        assert!(throttle.retry_after(here).is_some());
        throttle.succeeded(here);
        assert!(throttle.retry_after(here).is_none());
    }
}
