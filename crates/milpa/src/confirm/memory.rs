//! [`InMemoryConfirmationStore`]: pending confirmations in a concurrent map.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use dashmap::DashMap;

use super::{ConfirmationBinding, ConfirmationStore, PendingConfirmation, StoreError, unix_millis};
use crate::deferred::Deferred;

/// Pending confirmations kept in memory, per process (lost on restart).
#[derive(Debug, Default)]
pub struct InMemoryConfirmationStore {
    pending: DashMap<String, PendingConfirmation>,
    inserts: AtomicU64,
}

/// Expired tokens are swept once every this many inserts.
const SWEEP_EVERY: u64 = 256;

impl InMemoryConfirmationStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many tokens are pending (expired ones included until swept).
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Removes expired tokens.
    pub fn sweep(&self, now_ms: u64) {
        self.pending.retain(|_, p| p.expires_at_ms >= now_ms);
    }
}

impl ConfirmationStore for InMemoryConfirmationStore {
    fn insert<'a>(
        &'a self,
        token: String,
        pending: PendingConfirmation,
    ) -> Deferred<'a, Result<(), StoreError>> {
        self.pending.insert(token, pending);
        // Sweep now and then rather than on every insert: the map may be large.
        if self.inserts.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            self.sweep(unix_millis(SystemTime::now()));
        }
        Deferred::ready(Ok(()))
    }

    fn consume<'a>(
        &'a self,
        token: &'a str,
        binding: &'a ConfirmationBinding,
        now_ms: u64,
    ) -> Deferred<'a, Result<Option<PendingConfirmation>, StoreError>> {
        // `remove_if` holds the shard lock across the check, so exactly one redemption wins.
        let removed = self.pending.remove_if(token, |_, p| {
            p.expires_at_ms < now_ms || p.binding == *binding
        });
        let found = match removed {
            Some((_, pending)) if pending.expires_at_ms >= now_ms => Some(pending),
            _ => None,
        };
        Deferred::ready(Ok(found))
    }

    fn peek<'a>(
        &'a self,
        token: &'a str,
        binding: &'a ConfirmationBinding,
        now_ms: u64,
    ) -> Deferred<'a, Result<Option<PendingConfirmation>, StoreError>> {
        let found = self
            .pending
            .get(token)
            .filter(|p| p.expires_at_ms >= now_ms && p.binding == *binding)
            .map(|p| p.value().clone());
        Deferred::ready(Ok(found))
    }
}
