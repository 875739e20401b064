//! [`VerificationStore`]: where verification requests live between the two calls.

use dashmap::DashMap;
use dashmap::mapref::entry::Entry;

use crate::deferred::Deferred;
use crate::store_error::StoreError;
use crate::verification::{VerificationRecord, VerificationStatus};

/// Why a store could not do what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerificationStoreError {
    /// [`VerificationStore::create`] found a request with that id.
    #[error("Verification request '{id}' already exists (status: {status}).")]
    AlreadyExists {
        /// The id.
        id: String,
        /// The existing request's status.
        status: VerificationStatus,
    },
    /// The backend failed (a database error); nothing was changed.
    #[error("verification store: {0}")]
    Backend(#[from] StoreError),
}

/// Where verification requests live.
///
/// Deliberately small so that durable backends (SQLite, Redis) are easy to write: create,
/// read, and one compare-and-set that replaces a record only if nobody changed it since it
/// was read. The [`HumanVerifier`](crate::verification::HumanVerifier) does all the policy
/// (who may grant, how many grants) on top of these three, retrying when a compare-and-set
/// loses a race.
///
/// In-memory stores answer with [`Deferred::ready`] (no allocation); network-backed ones
/// with [`Deferred::pending`].
pub trait VerificationStore: Send + Sync + 'static {
    /// Stores a new request. Must fail with
    /// [`VerificationStoreError::AlreadyExists`] (and change nothing) when the id is taken,
    /// atomically: of two concurrent creates with one id, exactly one succeeds.
    fn create<'a>(
        &'a self,
        record: VerificationRecord,
    ) -> Deferred<'a, Result<(), VerificationStoreError>>;

    /// The request with that id, if any.
    fn get<'a>(
        &'a self,
        id: &'a str,
    ) -> Deferred<'a, Result<Option<VerificationRecord>, VerificationStoreError>>;

    /// Replaces the request `record.id` with `record` if, and only if, its stored
    /// `revision` still equals `expected_revision`; the stored copy then gets revision
    /// `expected_revision + 1` (whatever `record.revision` says). Returns `false` (and
    /// changes nothing) when the revision moved on or the request does not exist.
    fn compare_and_set<'a>(
        &'a self,
        expected_revision: u64,
        record: VerificationRecord,
    ) -> Deferred<'a, Result<bool, VerificationStoreError>>;
}

/// A [`VerificationStore`] in process memory: requests are lost on restart, and not shared
/// between processes. Fine for tests and single-process hosts; use a durable store otherwise.
#[derive(Debug, Default)]
pub struct InMemoryVerificationStore {
    records: DashMap<String, VerificationRecord>,
}

impl InMemoryVerificationStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many requests it holds (resolved ones included).
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether it holds no request.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

impl VerificationStore for InMemoryVerificationStore {
    fn create<'a>(
        &'a self,
        record: VerificationRecord,
    ) -> Deferred<'a, Result<(), VerificationStoreError>> {
        let outcome = match self.records.entry(record.id.clone()) {
            Entry::Occupied(existing) => Err(VerificationStoreError::AlreadyExists {
                id: record.id,
                status: existing.get().status,
            }),
            Entry::Vacant(slot) => {
                slot.insert(record);
                Ok(())
            }
        };
        Deferred::ready(outcome)
    }

    fn get<'a>(
        &'a self,
        id: &'a str,
    ) -> Deferred<'a, Result<Option<VerificationRecord>, VerificationStoreError>> {
        Deferred::ready(Ok(self.records.get(id).map(|r| r.value().clone())))
    }

    fn compare_and_set<'a>(
        &'a self,
        expected_revision: u64,
        mut record: VerificationRecord,
    ) -> Deferred<'a, Result<bool, VerificationStoreError>> {
        let swapped = match self.records.get_mut(&record.id) {
            Some(mut stored) if stored.revision == expected_revision => {
                record.revision = expected_revision + 1;
                *stored = record;
                true
            }
            _ => false,
        };
        Deferred::ready(Ok(swapped))
    }
}
