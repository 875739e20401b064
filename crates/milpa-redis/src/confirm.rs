//! [`RedisConfirmationStore`]: pending confirmations in Redis, redeemed by one Lua script.

use std::sync::{Arc, LazyLock};

use milpa::confirm::{ConfirmationBinding, ConfirmationStore, PendingConfirmation};
use milpa::{Deferred, StoreError};
use redis::Script;

use crate::shared::Shared;

/// The binding-checked redemption script (`scripts/redeem.lua`).
static REDEEM: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/redeem.lua")));

/// Pending confirmations shared by every process using the same Redis (and prefix): a
/// token minted by one replica can be redeemed on another, exactly once.
///
/// Each token is a hash (`binding`, `expires_at_ms`, `pending`) that Redis deletes at its
/// expiry (`PEXPIREAT`). The expiry check itself is the script's, on the caller's clock
/// (`now_ms`), as the trait asks; the TTL only makes sure nothing outlives it.
#[derive(Debug, Clone)]
pub struct RedisConfirmationStore {
    shared: Arc<Shared>,
}

impl RedisConfirmationStore {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        RedisConfirmationStore { shared }
    }

    async fn insert_pending(
        &self,
        token: String,
        pending: PendingConfirmation,
    ) -> Result<(), StoreError> {
        let binding = binding_text(&pending.binding)?;
        let body = serde_json::to_string(&pending).map_err(StoreError::backend)?;
        let key = self.shared.keys.confirmation(&token);
        // Valid up to and including `expires_at_ms`, so gone one millisecond later.
        let expire_at = pending.expires_at_ms.saturating_add(1);
        self.shared
            .link
            .run(|mut conn| async move {
                redis::pipe()
                    .atomic()
                    .cmd("HSET")
                    .arg(&key)
                    .arg("binding")
                    .arg(binding)
                    .arg("expires_at_ms")
                    .arg(pending.expires_at_ms)
                    .arg("pending")
                    .arg(body)
                    .ignore()
                    .cmd("PEXPIREAT")
                    .arg(&key)
                    .arg(expire_at)
                    .ignore()
                    .exec_async(&mut conn)
                    .await
            })
            .await
    }

    async fn redeem(
        &self,
        token: &str,
        binding: &ConfirmationBinding,
        now_ms: u64,
    ) -> Result<Option<PendingConfirmation>, StoreError> {
        let presented = binding_text(binding)?;
        let key = self.shared.keys.confirmation(token);
        let body: Option<String> = self
            .shared
            .link
            .run(|mut conn| async move {
                REDEEM
                    .key(key)
                    .arg(presented)
                    .arg(now_ms)
                    .invoke_async(&mut conn)
                    .await
            })
            .await?;
        body.map(|body| serde_json::from_str(&body).map_err(StoreError::corrupt))
            .transpose()
    }

    /// Reads the token's hash without changing it; the binding and expiry are checked here,
    /// as the script checks them.
    async fn read_pending(
        &self,
        token: &str,
        binding: &ConfirmationBinding,
        now_ms: u64,
    ) -> Result<Option<PendingConfirmation>, StoreError> {
        let presented = binding_text(binding)?;
        let key = self.shared.keys.confirmation(token);
        let (stored, expires_at_ms, body): (Option<String>, Option<u64>, Option<String>) = self
            .shared
            .link
            .run(|mut conn| async move {
                redis::cmd("HMGET")
                    .arg(key)
                    .arg("binding")
                    .arg("expires_at_ms")
                    .arg("pending")
                    .query_async(&mut conn)
                    .await
            })
            .await?;
        match (stored, expires_at_ms, body) {
            (Some(stored), Some(expires), Some(body))
                if stored == presented && expires >= now_ms =>
            {
                serde_json::from_str(&body)
                    .map(Some)
                    .map_err(StoreError::corrupt)
            }
            _ => Ok(None),
        }
    }
}

/// The binding as the script compares it: its JSON, which serde writes the same way (field
/// order, escapes) every time for equal bindings.
fn binding_text(binding: &ConfirmationBinding) -> Result<String, StoreError> {
    serde_json::to_string(binding).map_err(StoreError::backend)
}

impl ConfirmationStore for RedisConfirmationStore {
    fn insert<'a>(
        &'a self,
        token: String,
        pending: PendingConfirmation,
    ) -> Deferred<'a, Result<(), StoreError>> {
        Deferred::pending(self.insert_pending(token, pending))
    }

    fn consume<'a>(
        &'a self,
        token: &'a str,
        binding: &'a ConfirmationBinding,
        now_ms: u64,
    ) -> Deferred<'a, Result<Option<PendingConfirmation>, StoreError>> {
        Deferred::pending(self.redeem(token, binding, now_ms))
    }

    fn peek<'a>(
        &'a self,
        token: &'a str,
        binding: &'a ConfirmationBinding,
        now_ms: u64,
    ) -> Deferred<'a, Result<Option<PendingConfirmation>, StoreError>> {
        Deferred::pending(self.read_pending(token, binding, now_ms))
    }
}
