//! [`RedisRateLimiter`]: GCRA budgets in Redis, charged by one Lua script.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use milpa::rate_limit::{Quota, RateDecision, RateKey, RateLimiter};
use milpa::{Deferred, StoreError};
use redis::Script;

use crate::shared::Shared;

/// The GCRA consume script (`scripts/gcra.lua`).
static GCRA: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/gcra.lua")));

/// The longest window the script computes exactly: Lua numbers are doubles, exact for
/// integers below 2^53 nanoseconds (about 104 days).
pub const MAX_WINDOW: Duration = Duration::from_nanos(1 << 53);

/// Budgets shared by every process using the same Redis (and prefix).
///
/// One key per `channel:principal:tool`, holding the GCRA theoretical arrival time in
/// nanoseconds since the Unix epoch, with a TTL of the time until the budget is full again
/// (a full budget is the same as no key). The decision is the one
/// [`Gcra::charge`](milpa::rate_limit::Gcra::charge) makes, on Redis's clock (`TIME`), so
/// replicas with skewed clocks still share one budget.
#[derive(Debug, Clone)]
pub struct RedisRateLimiter {
    shared: Arc<Shared>,
}

impl RedisRateLimiter {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        RedisRateLimiter { shared }
    }

    /// Charges `cost` tokens to `key` under `quota` as [`RateLimiter::consume`] does, but at
    /// the time `now_ns` (nanoseconds since the Unix epoch) instead of Redis's clock.
    ///
    /// For checking the arithmetic against [`Gcra`](milpa::rate_limit::Gcra) on a chosen
    /// clock, and for tools that replay traffic; production calls go through
    /// [`RateLimiter::consume`], where all replicas use the one clock they agree on.
    pub async fn consume_at(
        &self,
        key: RateKey<'_>,
        cost: u32,
        quota: Quota,
        now_ns: u64,
    ) -> Result<RateDecision, StoreError> {
        self.charge(key, cost, quota, Some(now_ns)).await
    }

    async fn charge(
        &self,
        key: RateKey<'_>,
        cost: u32,
        quota: Quota,
        now_ns: Option<u64>,
    ) -> Result<RateDecision, StoreError> {
        // The same interval and window as `Gcra::new`; the reference-model test holds the
        // two to the same decisions.
        if quota.window > MAX_WINDOW {
            return Err(StoreError::backend(format!(
                "the Redis rate limiter computes windows up to {} days; '{key}' has a {} s window",
                MAX_WINDOW.as_secs() / 86_400,
                quota.window.as_secs()
            )));
        }
        let window = quota.window.as_nanos() as u64;
        let interval = (window / u64::from(quota.max_tokens.max(1))).max(1);
        let cost_ns = interval.saturating_mul(u64::from(cost));
        let redis_key = self.shared.keys.rate(key);
        let now = now_ns.map(|now| now.to_string()).unwrap_or_default();
        let (allowed, amount): (i64, i64) = self
            .shared
            .link
            .run(|mut conn| async move {
                GCRA.key(redis_key)
                    .arg(interval)
                    .arg(window)
                    .arg(cost_ns)
                    .arg(now)
                    .invoke_async(&mut conn)
                    .await
            })
            .await?;
        let amount = u64::try_from(amount).map_err(|_| {
            StoreError::corrupt(format!(
                "the GCRA script answered a negative amount ({amount})"
            ))
        })?;
        Ok(match allowed {
            1 => RateDecision::Allowed {
                remaining: amount.min(u64::from(u32::MAX)) as u32,
            },
            _ => RateDecision::Denied {
                retry_after: Duration::from_nanos(amount),
            },
        })
    }
}

impl RateLimiter for RedisRateLimiter {
    fn consume<'a>(
        &'a self,
        key: RateKey<'a>,
        cost: u32,
        quota: Quota,
    ) -> Deferred<'a, Result<RateDecision, StoreError>> {
        Deferred::pending(self.charge(key, cost, quota, None))
    }

    fn reset<'a>(&'a self, key: RateKey<'a>) -> Deferred<'a, Result<(), StoreError>> {
        let redis_key = self.shared.keys.rate(key);
        Deferred::pending(self.shared.link.run(|mut conn| async move {
            redis::cmd("DEL").arg(redis_key).exec_async(&mut conn).await
        }))
    }
}
