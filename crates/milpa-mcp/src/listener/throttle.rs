//! A per-address throttle on failed credentials: bad bearer tokens on `/mcp`, and failed
//! sign-ins on the approvals page.
//!
//! Each client address has a fixed window that starts with its first failure: up to
//! [`ThrottleLimits::max_failures`] failures in it are refused as usual, and every further
//! failure until the window passes is refused as throttled (`429` with `Retry-After` the
//! rest of the window), after [`ThrottleLimits::delay`]. A *success* is never throttled:
//! the caller checks the credential first and asks the throttle only about failures, so an
//! attacker sharing an address with a rightful client (every local process on loopback)
//! cannot lock that client out. What the throttle buys is a slower attacker (each
//! throttled guess holds its connection for the delay, and connections are bounded) and a
//! client told to back off; tokens long enough not to be guessed remain the defence.
//!
//! The approvals page uses it more strictly: its sign-in form asks
//! [`FailureThrottle::retry_after`] *before* checking anything, so an address over its
//! budget is refused whatever it posts until the window ends (a person's sign-in is rare
//! and a browser can wait), and [`FailureThrottle::succeeded`] clears an address that
//! signed in.
//!
//! IPv6 addresses are counted by their /64 prefix, the block one host usually holds, so
//! one host cannot spread guesses over its 2^64 addresses. The table is bounded: when
//! full, records whose window has passed go first, then the one whose window started
//! earliest.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};

/// How many failures an address may have and for how long they count.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ThrottleLimits {
    /// Failures refused as usual in one window; the next ones are throttled.
    pub max_failures: u32,
    /// How long a window lasts, from an address's first failure in it.
    pub window: Duration,
    /// How long a throttled failure waits before it is answered.
    pub delay: Duration,
    /// Addresses remembered at once.
    pub max_addresses: usize,
}

impl Default for ThrottleLimits {
    fn default() -> Self {
        ThrottleLimits {
            max_failures: 10,
            window: Duration::from_secs(60),
            delay: Duration::from_millis(500),
            max_addresses: 10_000,
        }
    }
}

/// What the throttle made of one more failure from an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// Within the address's budget: refuse as usual.
    Counted,
    /// The budget was exceeded with this failure: refuse as throttled (and log it once).
    NowThrottled {
        /// Until the window passes.
        retry_after: Duration,
    },
    /// Over the budget already: refuse as throttled.
    StillThrottled {
        /// Until the window passes.
        retry_after: Duration,
    },
}

impl Failure {
    /// How long the client should wait, when throttled.
    pub(crate) fn retry_after(self) -> Option<Duration> {
        match self {
            Failure::Counted => None,
            Failure::NowThrottled { retry_after } | Failure::StillThrottled { retry_after } => {
                Some(retry_after)
            }
        }
    }
}

struct Record {
    started: Instant,
    failures: u32,
}

/// Counts failed credentials per client address (see the module documentation).
pub(crate) struct FailureThrottle {
    limits: ThrottleLimits,
    table: Mutex<HashMap<IpAddr, Record>>,
}

impl std::fmt::Debug for FailureThrottle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FailureThrottle")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl FailureThrottle {
    /// An empty throttle with `limits`.
    pub(crate) fn new(limits: ThrottleLimits) -> FailureThrottle {
        FailureThrottle {
            limits: ThrottleLimits {
                max_addresses: limits.max_addresses.max(1),
                ..limits
            },
            table: Mutex::new(HashMap::new()),
        }
    }

    /// Its limits.
    pub(crate) fn limits(&self) -> &ThrottleLimits {
        &self.limits
    }

    fn table(&self) -> MutexGuard<'_, HashMap<IpAddr, Record>> {
        self.table.lock()
    }

    // Only the approvals page uses this (an `http`-only build leaves it out).
    #[cfg(any(feature = "approvals-page", test))]
    /// How long `address` must wait, if its failures in the current window have used up
    /// its budget (the next failure would be throttled). Counts nothing.
    pub(crate) fn retry_after(&self, address: IpAddr) -> Option<Duration> {
        self.retry_after_at(address, Instant::now())
    }

    // Only the approvals page uses this (an `http`-only build leaves it out).
    #[cfg(any(feature = "approvals-page", test))]
    fn retry_after_at(&self, address: IpAddr, now: Instant) -> Option<Duration> {
        let limits = &self.limits;
        let table = self.table();
        let record = table.get(&bucket(address))?;
        let ends = record.started + limits.window;
        (record.failures >= limits.max_failures && now < ends).then(|| ends - now)
    }

    // Only the approvals page uses this (an `http`-only build leaves it out).
    #[cfg(any(feature = "approvals-page", test))]
    /// Forgets `address`'s failures (it proved itself, say by signing in).
    pub(crate) fn succeeded(&self, address: IpAddr) {
        self.table().remove(&bucket(address));
    }

    /// Counts one failure from `address` and says how to refuse it.
    pub(crate) fn failed(&self, address: IpAddr) -> Failure {
        self.failed_at(address, Instant::now())
    }

    fn failed_at(&self, address: IpAddr, now: Instant) -> Failure {
        let limits = &self.limits;
        let key = bucket(address);
        let mut table = self.table();
        if !table.contains_key(&key) && table.len() >= limits.max_addresses {
            table.retain(|_, r| now.saturating_duration_since(r.started) < limits.window);
            if table.len() >= limits.max_addresses
                && let Some(oldest) = table.iter().min_by_key(|(_, r)| r.started).map(|(k, _)| *k)
            {
                table.remove(&oldest);
            }
        }
        let record = table.entry(key).or_insert(Record {
            started: now,
            failures: 0,
        });
        if now.saturating_duration_since(record.started) >= limits.window {
            *record = Record {
                started: now,
                failures: 0,
            };
        }
        record.failures = record.failures.saturating_add(1);
        if record.failures <= limits.max_failures {
            return Failure::Counted;
        }
        let retry_after = (record.started + limits.window).saturating_duration_since(now);
        if record.failures == limits.max_failures + 1 {
            Failure::NowThrottled { retry_after }
        } else {
            Failure::StillThrottled { retry_after }
        }
    }
}

/// The key an address is counted under: itself for IPv4 (and IPv4-mapped IPv6), its /64
/// prefix for IPv6.
fn bucket(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V4(_) => address,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(Ipv6Addr::from(prefix))
            }
        },
    }
}

/// `Retry-After` seconds for `wait`: rounded up, at least 1.
pub(crate) fn retry_after_secs(wait: Duration) -> u64 {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    secs.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_failures: u32, max_addresses: usize) -> ThrottleLimits {
        ThrottleLimits {
            max_failures,
            window: Duration::from_secs(60),
            delay: Duration::ZERO,
            max_addresses,
        }
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn failures_past_the_budget_are_throttled_until_the_window_passes() {
        let throttle = FailureThrottle::new(limits(3, 10));
        let t0 = Instant::now();
        let a = ip("192.0.2.1");
        for _ in 0..3 {
            assert_eq!(throttle.failed_at(a, t0), Failure::Counted);
        }
        let later = t0 + Duration::from_secs(20);
        assert_eq!(
            throttle.failed_at(a, later),
            Failure::NowThrottled {
                retry_after: Duration::from_secs(40)
            }
        );
        assert_eq!(
            throttle.failed_at(a, later).retry_after(),
            Some(Duration::from_secs(40))
        );
        // Another address has its own budget.
        assert_eq!(throttle.failed_at(ip("192.0.2.2"), later), Failure::Counted);
        // A new window starts once this one has passed.
        assert_eq!(
            throttle.failed_at(a, t0 + Duration::from_secs(60)),
            Failure::Counted
        );
    }

    #[test]
    fn an_ipv6_host_is_counted_by_its_64_prefix() {
        let throttle = FailureThrottle::new(limits(1, 10));
        let t0 = Instant::now();
        assert_eq!(throttle.failed_at(ip("2001:db8::1"), t0), Failure::Counted);
        assert!(matches!(
            throttle.failed_at(ip("2001:db8::ffff:2"), t0),
            Failure::NowThrottled { .. }
        ));
        assert_eq!(
            throttle.failed_at(ip("2001:db8:0:1::1"), t0),
            Failure::Counted
        );
        // An IPv4-mapped address is the IPv4 one.
        assert_eq!(throttle.failed_at(ip("192.0.2.9"), t0), Failure::Counted);
        assert!(matches!(
            throttle.failed_at(ip("::ffff:192.0.2.9"), t0),
            Failure::NowThrottled { .. }
        ));
    }

    #[test]
    fn a_full_table_forgets_the_oldest_window_first() {
        let throttle = FailureThrottle::new(limits(1, 2));
        let t0 = Instant::now();
        let (a, b, c) = (ip("192.0.2.1"), ip("192.0.2.2"), ip("192.0.2.3"));
        throttle.failed_at(a, t0);
        throttle.failed_at(b, t0 + Duration::from_secs(1));
        throttle.failed_at(c, t0 + Duration::from_secs(2));
        assert_eq!(throttle.table().len(), 2);
        // `a` was forgotten (a fresh budget); `c` was kept.
        assert_eq!(
            throttle.failed_at(a, t0 + Duration::from_secs(3)),
            Failure::Counted
        );
        assert!(
            throttle
                .failed_at(c, t0 + Duration::from_secs(3))
                .retry_after()
                .is_some()
        );
    }

    #[test]
    fn an_address_over_its_budget_is_refused_until_the_window_ends() {
        let window = Duration::from_secs(300);
        let throttle = FailureThrottle::new(ThrottleLimits {
            window,
            ..limits(5, 10)
        });
        let (here, there) = (ip("127.0.0.1"), ip("10.0.0.2"));
        let t0 = Instant::now();
        for n in 0..5u32 {
            assert_eq!(throttle.retry_after_at(here, t0), None, "after {n}");
            throttle.failed_at(here, t0 + Duration::from_secs(u64::from(n)));
        }
        let wait = throttle.retry_after_at(here, t0 + Duration::from_secs(10));
        assert_eq!(wait, Some(window - Duration::from_secs(10)));
        assert_eq!(throttle.retry_after_at(there, t0), None, "per address");
        assert_eq!(throttle.retry_after_at(here, t0 + window), None);
        // A new window starts from nothing.
        throttle.failed_at(here, t0 + window);
        assert_eq!(throttle.retry_after_at(here, t0 + window), None);
    }

    #[test]
    fn a_success_clears_the_address() {
        let throttle = FailureThrottle::new(limits(5, 10));
        let here = ip("::1");
        for _ in 0..5 {
            throttle.failed(here);
        }
        assert!(throttle.retry_after(here).is_some());
        throttle.succeeded(here);
        assert!(throttle.retry_after(here).is_none());
    }

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        assert_eq!(retry_after_secs(Duration::from_millis(1500)), 2);
        assert_eq!(retry_after_secs(Duration::from_secs(40)), 40);
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
    }
}
