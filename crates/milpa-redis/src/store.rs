//! [`RedisStore`]: one connection to Redis and the stores built on it.

use std::sync::Arc;

use milpa::StoreError;
use milpa::confirm::ConfirmationStore;
use milpa::rate_limit::RateLimiter;
use milpa::verification::VerificationStore;

use crate::confirm::RedisConfirmationStore;
use crate::connection::Link;
use crate::keys::KeySpace;
use crate::options::RedisOptions;
use crate::rate_limit::RedisRateLimiter;
use crate::shared::Shared;
use crate::verification::RedisVerificationStore;

/// How many random bytes a new shared secret has.
const SECRET_LEN: usize = 32;

/// The confirmation, verification and rate-limit stores on one Redis.
///
/// Cheap to clone: every clone, and every store it hands out, shares one multiplexed
/// connection that reconnects by itself. While Redis is unreachable each store call fails
/// with [`StoreError::unavailable`] within `connect_timeout + response_timeout`, and the
/// pipeline refuses the call with `UNAVAILABLE`; once Redis is back the same store works
/// again, nothing to rebuild.
///
/// ```no_run
/// # async fn run() -> Result<(), milpa::StoreError> {
/// use milpa::ToolRegistry;
/// use milpa_redis::{RedisOptions, RedisStore};
///
/// let store = RedisStore::connect("redis://127.0.0.1:6379", RedisOptions::default()).await?;
/// let registry = ToolRegistry::builder()
///     .rate_limiter(store.rate_limiter())
///     .confirmation_store(store.confirmations())
///     .build();
/// # drop(registry);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct RedisStore {
    shared: Arc<Shared>,
}

impl RedisStore {
    /// Connects to the Redis at `url` (`redis://[:password@]host:port[/db]`).
    ///
    /// Fails with [`StoreError::unavailable`] naming the server's address when nothing
    /// answers there within the timeouts, and with a backend error when `url` is not a
    /// Redis URL, so a misconfigured deployment stops at start rather than at its first call.
    pub async fn connect(url: &str, options: RedisOptions) -> Result<RedisStore, StoreError> {
        let link = Link::connect(url, &options).await?;
        Ok(RedisStore {
            shared: Arc::new(Shared {
                link,
                keys: KeySpace::new(&options.prefix),
                verification_retention: options.verification_retention,
            }),
        })
    }

    /// Pending confirmations, shared between replicas.
    pub fn confirmations(&self) -> Arc<dyn ConfirmationStore> {
        Arc::new(self.confirmation_store())
    }

    /// Verification requests, shared between replicas.
    pub fn verifications(&self) -> Arc<dyn VerificationStore> {
        Arc::new(self.verification_store())
    }

    /// Approvers' passkeys and enrolment tokens, shared between replicas.
    pub fn passkeys(&self) -> Arc<dyn milpa::approval::passkeys::PasskeyStore> {
        Arc::new(self.passkey_store())
    }

    /// [`passkeys`](Self::passkeys) as its concrete type.
    pub fn passkey_store(&self) -> crate::RedisPasskeyStore {
        crate::RedisPasskeyStore::new(Arc::clone(&self.shared))
    }

    /// Pinned tool and prompt definitions, shared between replicas.
    pub fn pins(&self) -> Arc<dyn milpa::approval::pins::PinStore> {
        Arc::new(self.pin_store())
    }

    /// [`pins`](Self::pins) as its concrete type.
    pub fn pin_store(&self) -> crate::RedisPinStore {
        crate::RedisPinStore::new(Arc::clone(&self.shared))
    }

    /// Rate budgets, shared between replicas.
    pub fn rate_limiter(&self) -> Arc<dyn RateLimiter> {
        Arc::new(self.redis_rate_limiter())
    }

    /// The secret called `name`, shared by every replica on this Redis (and prefix): 32
    /// random bytes stored on first use (`SET … NX`, so of replicas starting together the
    /// first write wins and all read it back), with no expiry.
    ///
    /// Fails with [`StoreError::unavailable`] when Redis does not answer, and as corrupt
    /// when the key holds fewer than 32 bytes.
    pub async fn shared_secret(&self, name: &str) -> Result<Vec<u8>, StoreError> {
        let key = self.shared.keys.secret(name);
        let fresh: [u8; SECRET_LEN] = rand::random();
        let value: Vec<u8> = self
            .shared
            .link
            .run(|mut conn| async move {
                let (value,): (Vec<u8>,) = redis::pipe()
                    .atomic()
                    .cmd("SET")
                    .arg(&key)
                    .arg(&fresh[..])
                    .arg("NX")
                    .ignore()
                    .cmd("GET")
                    .arg(&key)
                    .query_async(&mut conn)
                    .await?;
                Ok(value)
            })
            .await?;
        if value.len() < SECRET_LEN {
            return Err(StoreError::corrupt(format!(
                "the shared secret {name} has {} bytes, fewer than {SECRET_LEN}",
                value.len()
            )));
        }
        Ok(value)
    }

    /// Whether Redis answers now (`PING`, within the connection's deadline): what a
    /// readiness probe asks. Fails with [`StoreError::unavailable`] when it does not.
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.shared
            .link
            .run(|mut conn| async move {
                let _: String = redis::cmd("PING").query_async(&mut conn).await?;
                Ok(())
            })
            .await
    }

    /// [`confirmations`](Self::confirmations) as its concrete type.
    pub fn confirmation_store(&self) -> RedisConfirmationStore {
        RedisConfirmationStore::new(self.shared.clone())
    }

    /// [`verifications`](Self::verifications) as its concrete type.
    pub fn verification_store(&self) -> RedisVerificationStore {
        RedisVerificationStore::new(self.shared.clone())
    }

    /// [`rate_limiter`](Self::rate_limiter) as its concrete type (which can also charge at
    /// a given time, see [`RedisRateLimiter::consume_at`]).
    pub fn redis_rate_limiter(&self) -> RedisRateLimiter {
        RedisRateLimiter::new(self.shared.clone())
    }
}
