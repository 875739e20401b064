//! # milpa-redis
//!
//! milpa's confirmation, verification and rate-limit stores on Redis, so that replicas of
//! one deployment share rate budgets, confirmation tokens and verification requests.
//!
//! Each state change is one Lua script, so it is atomic without locks or transactions:
//! GCRA consume (`scripts/gcra.lua`, on Redis's clock), binding-checked one-time token
//! redemption (`scripts/redeem.lua`), and verification create / compare-and-set
//! (`scripts/verification_create.lua`, `scripts/verification_cas.lua`), which also keep
//! the sorted sets the approval queue is listed from (`scripts/verification_list.lua`
//! reads them). Everything that expires has a TTL.
//!
//! Fails closed: when Redis cannot be reached every store call answers
//! [`StoreError::unavailable`](milpa::StoreError::unavailable) within the configured
//! timeouts, the pipeline refuses the call with `UNAVAILABLE` (and audits it), and the
//! connection comes back by itself when Redis does.

mod confirm;
mod connection;
mod keys;
mod options;
mod passkeys;
mod pins;
mod rate_limit;
mod shared;
mod store;
mod verification;

pub use confirm::RedisConfirmationStore;
pub use options::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_PREFIX, DEFAULT_RESPONSE_TIMEOUT,
    DEFAULT_VERIFICATION_RETENTION, RedisOptions,
};
pub use passkeys::RedisPasskeyStore;
pub use pins::RedisPinStore;
pub use rate_limit::{MAX_WINDOW, RedisRateLimiter};
pub use store::RedisStore;
pub use verification::RedisVerificationStore;
