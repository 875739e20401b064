//! [`RedisOptions`]: how a [`RedisStore`](crate::RedisStore) talks to Redis.

use std::time::Duration;

/// The key prefix when none is configured.
pub const DEFAULT_PREFIX: &str = "milpa:";

/// How long a command may wait for its reply when nothing else is configured.
pub const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(1);

/// How long opening a connection may take when nothing else is configured.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// How long a verification request is kept after its last change when nothing else is
/// configured: a week, long enough for a person to get to a pending request and for an
/// agent to read a resolved one back, short enough that abandoned requests do not pile up.
pub const DEFAULT_VERIFICATION_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// Settings of a [`RedisStore`](crate::RedisStore).
///
/// The two timeouts bound every store call: a call that needs a new connection and then a
/// reply fails with [`StoreError::unavailable`](milpa::StoreError::unavailable) after at
/// most `connect_timeout + response_timeout`, so a dead Redis refuses calls quickly instead
/// of holding them (and never lets them through).
///
/// ```
/// use std::time::Duration;
/// use milpa_redis::RedisOptions;
///
/// let options = RedisOptions::default()
///     .with_prefix("ops:")
///     .with_response_timeout(Duration::from_millis(250));
/// assert_eq!(options.prefix, "ops:");
/// assert_eq!(options.connect_timeout, Duration::from_secs(1));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisOptions {
    /// Put in front of every key, so several deployments (or other applications) can share
    /// one Redis database. Default `milpa:`.
    pub prefix: String,
    /// How long a command may wait for its reply.
    pub response_timeout: Duration,
    /// How long opening a connection may take.
    pub connect_timeout: Duration,
    /// How long a verification request is kept after its last change (its key's TTL).
    pub verification_retention: Duration,
}

impl Default for RedisOptions {
    fn default() -> Self {
        RedisOptions {
            prefix: DEFAULT_PREFIX.to_owned(),
            response_timeout: DEFAULT_RESPONSE_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            verification_retention: DEFAULT_VERIFICATION_RETENTION,
        }
    }
}

impl RedisOptions {
    /// Sets the key prefix.
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Sets how long a command may wait for its reply.
    pub fn with_response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// Sets how long opening a connection may take.
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets how long a verification request is kept after its last change.
    pub fn with_verification_retention(mut self, retention: Duration) -> Self {
        self.verification_retention = retention;
        self
    }
}
