//! Where approvers' passkeys live: their public credentials and the one-time enrolment
//! tokens that let a person register one.
//!
//! An approver with a passkey decides only with it: every grant and reject on the
//! approvals page needs a WebAuthn assertion made at that moment, and no other channel
//! (the shell, a bearer token alone) decides for them. The store holds what a relying
//! party needs to check an assertion and nothing an authenticator keeps to itself: the
//! credential id and the credential's public part (the COSE public key, the signature
//! counter and flags, as the WebAuthn library serialises them). Enrolment tokens are kept
//! as their SHA-256 only, with the actor and an expiry, and are taken once.
//!
//! Implementations: [`InMemoryPasskeyStore`] here, SQLite in `milpa-sqlite`, Redis in
//! `milpa-redis`.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::{Mutex, MutexGuard};
use sha2::{Digest, Sha256};

use crate::deferred::Deferred;
use crate::store_error::StoreError;

/// How long an enrolment link stays good: ten minutes.
pub const ENROLMENT_TTL: Duration = Duration::from_secs(600);

/// One enrolled passkey: public material only.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PasskeyRecord {
    /// The approver it belongs to.
    pub actor: String,
    /// The credential id, base64url without padding (unique across actors).
    pub credential_id: String,
    /// The credential's public part as the relying party serialised it (JSON).
    pub public_credential: String,
    /// When it was enrolled, Unix milliseconds.
    pub created_at_ms: u64,
}

impl PasskeyRecord {
    /// A record for `actor`.
    pub fn new(
        actor: impl Into<String>,
        credential_id: impl Into<String>,
        public_credential: impl Into<String>,
        created_at_ms: u64,
    ) -> PasskeyRecord {
        PasskeyRecord {
            actor: actor.into(),
            credential_id: credential_id.into(),
            public_credential: public_credential.into(),
            created_at_ms,
        }
    }
}

/// The SHA-256 of an enrolment token, hex: what a store keeps instead of the token.
pub fn enrolment_token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Approvers' passkeys and pending enrolments.
pub trait PasskeyStore: Send + Sync + 'static {
    /// Stores a new passkey. `Ok(false)` (and nothing changes) when its credential id is
    /// already enrolled, for this actor or another.
    fn add<'a>(&'a self, record: PasskeyRecord) -> Deferred<'a, Result<bool, StoreError>>;

    /// The passkeys of `actor`, oldest first.
    fn for_actor<'a>(
        &'a self,
        actor: &'a str,
    ) -> Deferred<'a, Result<Vec<PasskeyRecord>, StoreError>>;

    /// Replaces the public part of `actor`'s credential `credential_id` (its signature
    /// counter moved on). `Ok(false)` when there is no such credential.
    fn update<'a>(
        &'a self,
        actor: &'a str,
        credential_id: &'a str,
        public_credential: &'a str,
    ) -> Deferred<'a, Result<bool, StoreError>>;

    /// Keeps an enrolment for `actor`, under `token_hash` ([`enrolment_token_hash`]), good
    /// until `expires_at_ms`.
    fn create_enrolment<'a>(
        &'a self,
        token_hash: &'a str,
        actor: &'a str,
        expires_at_ms: u64,
    ) -> Deferred<'a, Result<(), StoreError>>;

    /// The actor of the enrolment under `token_hash`, if it has not expired at `now_ms`,
    /// without using it up (the page shows who the link enrols).
    fn peek_enrolment<'a>(
        &'a self,
        token_hash: &'a str,
        now_ms: u64,
    ) -> Deferred<'a, Result<Option<String>, StoreError>>;

    /// Takes the enrolment under `token_hash`: its actor if it exists and has not expired
    /// at `now_ms`. Atomic: of two concurrent takes, at most one gets the actor; the
    /// enrolment is gone afterwards either way.
    fn take_enrolment<'a>(
        &'a self,
        token_hash: &'a str,
        now_ms: u64,
    ) -> Deferred<'a, Result<Option<String>, StoreError>>;
}

/// A [`PasskeyStore`] in this process's memory.
#[derive(Debug, Default)]
pub struct InMemoryPasskeyStore {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    passkeys: Vec<PasskeyRecord>,
    enrolments: HashMap<String, (String, u64)>,
}

impl InMemoryPasskeyStore {
    /// An empty store.
    pub fn new() -> InMemoryPasskeyStore {
        InMemoryPasskeyStore::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock()
    }
}

impl PasskeyStore for InMemoryPasskeyStore {
    fn add<'a>(&'a self, record: PasskeyRecord) -> Deferred<'a, Result<bool, StoreError>> {
        let mut inner = self.lock();
        if inner
            .passkeys
            .iter()
            .any(|p| p.credential_id == record.credential_id)
        {
            return Deferred::ready(Ok(false));
        }
        inner.passkeys.push(record);
        Deferred::ready(Ok(true))
    }

    fn for_actor<'a>(
        &'a self,
        actor: &'a str,
    ) -> Deferred<'a, Result<Vec<PasskeyRecord>, StoreError>> {
        let found = self
            .lock()
            .passkeys
            .iter()
            .filter(|p| p.actor == actor)
            .cloned()
            .collect();
        Deferred::ready(Ok(found))
    }

    fn update<'a>(
        &'a self,
        actor: &'a str,
        credential_id: &'a str,
        public_credential: &'a str,
    ) -> Deferred<'a, Result<bool, StoreError>> {
        let mut inner = self.lock();
        let found = inner
            .passkeys
            .iter_mut()
            .find(|p| p.actor == actor && p.credential_id == credential_id);
        Deferred::ready(Ok(match found {
            Some(record) => {
                record.public_credential = public_credential.to_owned();
                true
            }
            None => false,
        }))
    }

    fn create_enrolment<'a>(
        &'a self,
        token_hash: &'a str,
        actor: &'a str,
        expires_at_ms: u64,
    ) -> Deferred<'a, Result<(), StoreError>> {
        let mut inner = self.lock();
        inner
            .enrolments
            .insert(token_hash.to_owned(), (actor.to_owned(), expires_at_ms));
        Deferred::ready(Ok(()))
    }

    fn peek_enrolment<'a>(
        &'a self,
        token_hash: &'a str,
        now_ms: u64,
    ) -> Deferred<'a, Result<Option<String>, StoreError>> {
        let inner = self.lock();
        let actor = inner
            .enrolments
            .get(token_hash)
            .filter(|(_, expires)| now_ms < *expires)
            .map(|(actor, _)| actor.clone());
        Deferred::ready(Ok(actor))
    }

    fn take_enrolment<'a>(
        &'a self,
        token_hash: &'a str,
        now_ms: u64,
    ) -> Deferred<'a, Result<Option<String>, StoreError>> {
        let mut inner = self.lock();
        inner.enrolments.retain(|_, (_, expires)| now_ms < *expires);
        let actor = inner.enrolments.remove(token_hash).map(|(actor, _)| actor);
        Deferred::ready(Ok(actor))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on<T>(future: impl Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(future)
    }

    #[test]
    fn passkeys_are_kept_per_actor_and_credential_ids_are_unique() {
        let store = InMemoryPasskeyStore::new();
        block_on(async {
            let first = PasskeyRecord::new("alice", "cred-1", "{\"k\":1}", 10);
            assert!(store.add(first.clone()).await.unwrap());
            assert!(
                !store
                    .add(PasskeyRecord::new("bob", "cred-1", "{}", 11))
                    .await
                    .unwrap()
            );
            assert_eq!(store.for_actor("alice").await.unwrap(), vec![first]);
            assert!(store.for_actor("bob").await.unwrap().is_empty());
            assert!(store.update("alice", "cred-1", "{\"k\":2}").await.unwrap());
            assert!(!store.update("bob", "cred-1", "{}").await.unwrap());
            let updated = store.for_actor("alice").await.unwrap();
            assert_eq!(updated[0].public_credential, "{\"k\":2}");
        });
    }

    #[test]
    fn an_enrolment_is_taken_once_and_not_after_it_expires() {
        let store = InMemoryPasskeyStore::new();
        let hash = enrolment_token_hash("secret-token");
        assert_eq!(hash.len(), 64);
        assert_ne!(hash, "secret-token");
        block_on(async {
            store.create_enrolment(&hash, "alice", 1_000).await.unwrap();
            assert_eq!(
                store.peek_enrolment(&hash, 999).await.unwrap().as_deref(),
                Some("alice")
            );
            assert_eq!(store.peek_enrolment(&hash, 1_000).await.unwrap(), None);
            assert_eq!(
                store.take_enrolment(&hash, 999).await.unwrap().as_deref(),
                Some("alice")
            );
            assert_eq!(store.take_enrolment(&hash, 999).await.unwrap(), None);
            store.create_enrolment(&hash, "alice", 1_000).await.unwrap();
            assert_eq!(store.take_enrolment(&hash, 1_000).await.unwrap(), None);
        });
    }
}
