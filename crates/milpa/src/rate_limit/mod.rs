//! Rate limiting: the [`RateLimiter`] seam, the GCRA arithmetic, and an in-memory limiter.
//!
//! Every call is charged against the key `channel:principal:tool` (5 tokens for a mutating
//! tool, 1 otherwise). The algorithm is GCRA: a budget of `max_tokens` per `window` that
//! refills smoothly, instead of the original's fixed window, which let a caller spend twice
//! its budget across a window boundary.

mod caller;
mod gcra;
mod memory;

use std::fmt;
use std::time::Duration;

use crate::deferred::Deferred;
use crate::store_error::StoreError;

pub(crate) use caller::CallerBudget;
pub use gcra::{Gcra, GcraState};
pub use memory::InMemoryRateLimiter;

/// Tokens charged for a mutating tool.
pub const COST_MUTATING: u32 = 5;
/// Tokens charged for a read-only tool.
pub const COST_READ: u32 = 1;

/// A budget: at most `max_tokens` per `window`, refilling continuously.
///
/// Built with [`Quota::new`] or [`Quota::per_minute`]: `#[non_exhaustive]`, so that a later
/// knob (a separate burst, say) is not a breaking change; the fields stay readable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Quota {
    /// Tokens available in a full window (the burst).
    pub max_tokens: u32,
    /// How long a full budget takes to refill.
    pub window: Duration,
}

impl Quota {
    /// 100 tokens per 60 seconds, the original's default.
    pub const DEFAULT: Quota = Quota::per_minute(100);

    /// `max_tokens` per `window`.
    pub const fn new(max_tokens: u32, window: Duration) -> Quota {
        Quota { max_tokens, window }
    }

    /// `max_tokens` per minute, the window most budgets are stated in.
    pub const fn per_minute(max_tokens: u32) -> Quota {
        Quota::new(max_tokens, Duration::from_secs(60))
    }
}

impl Default for Quota {
    fn default() -> Self {
        Quota::DEFAULT
    }
}

/// Whose budget a call spends: `channel:principal:tool` (anonymous → empty principal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateKey<'a> {
    /// The call's channel.
    pub channel: &'a str,
    /// The caller (`""` when anonymous).
    pub principal: &'a str,
    /// The tool's name.
    pub tool: &'a str,
}

impl RateKey<'_> {
    /// Appends `channel:principal:tool` to `buf`.
    pub fn write_to(&self, buf: &mut String) {
        buf.reserve(self.channel.len() + self.principal.len() + self.tool.len() + 2);
        buf.push_str(self.channel);
        buf.push(':');
        buf.push_str(self.principal);
        buf.push(':');
        buf.push_str(self.tool);
    }
}

impl fmt::Display for RateKey<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.channel, self.principal, self.tool)
    }
}

/// A limiter's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RateDecision {
    /// Charged; this many whole tokens remain.
    Allowed {
        /// Tokens still available right now.
        remaining: u32,
    },
    /// Not charged; the cost fits again after this long.
    Denied {
        /// How long until the call would be allowed.
        retry_after: Duration,
    },
}

/// A store of budgets. Implementations must charge atomically: two concurrent calls never
/// both spend the last token.
pub trait RateLimiter: Send + Sync + 'static {
    /// Charges `cost` tokens to `key` under `quota`, or refuses without charging. Fails when
    /// the backend does; the pipeline then refuses the call (`UNAVAILABLE`), it never lets
    /// an uncharged call through.
    fn consume<'a>(
        &'a self,
        key: RateKey<'a>,
        cost: u32,
        quota: Quota,
    ) -> Deferred<'a, Result<RateDecision, StoreError>>;

    /// Forgets everything spent by `key`.
    fn reset<'a>(&'a self, key: RateKey<'a>) -> Deferred<'a, Result<(), StoreError>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_minute_is_a_sixty_second_window() {
        assert_eq!(Quota::per_minute(7), Quota::new(7, Duration::from_secs(60)));
        assert_eq!(Quota::default(), Quota::per_minute(100));
    }
}
