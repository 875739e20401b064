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

    /// Up to `limit` requests whose status is `pending`, oldest first (by `created_at_ms`,
    /// then id). This is the approval queue people read (`milpa approvals`, the
    /// `/approvals` page); expired parked calls are still listed here, the
    /// [`ApprovalQueue`](crate::approval::ApprovalQueue) filters them.
    fn list_pending<'a>(
        &'a self,
        limit: usize,
    ) -> Deferred<'a, Result<Vec<VerificationRecord>, VerificationStoreError>>;

    /// Up to `limit` requests whose status is final, most recently resolved first (by
    /// `resolved_at_ms`, then id): the "last decisions" people review.
    fn list_resolved<'a>(
        &'a self,
        limit: usize,
    ) -> Deferred<'a, Result<Vec<VerificationRecord>, VerificationStoreError>>;
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

    fn list_pending<'a>(
        &'a self,
        limit: usize,
    ) -> Deferred<'a, Result<Vec<VerificationRecord>, VerificationStoreError>> {
        let mut pending: Vec<VerificationRecord> = self
            .records
            .iter()
            .filter(|r| !r.status.is_final())
            .map(|r| r.value().clone())
            .collect();
        pending.sort_by(|a, b| (a.created_at_ms, &a.id).cmp(&(b.created_at_ms, &b.id)));
        pending.truncate(limit);
        Deferred::ready(Ok(pending))
    }

    fn list_resolved<'a>(
        &'a self,
        limit: usize,
    ) -> Deferred<'a, Result<Vec<VerificationRecord>, VerificationStoreError>> {
        let mut resolved: Vec<VerificationRecord> = self
            .records
            .iter()
            .filter(|r| r.status.is_final())
            .map(|r| r.value().clone())
            .collect();
        resolved.sort_by(|a, b| {
            (b.resolved_at_ms.unwrap_or(0), &b.id).cmp(&(a.resolved_at_ms.unwrap_or(0), &a.id))
        });
        resolved.truncate(limit);
        Deferred::ready(Ok(resolved))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verification::ApprovalPolicy;
    use serde_json::json;

    fn record(
        id: &str,
        created: u64,
        status: VerificationStatus,
        resolved: Option<u64>,
    ) -> VerificationRecord {
        VerificationRecord {
            id: id.into(),
            subject: "s".into(),
            policy: ApprovalPolicy::Single,
            required_grants: 1,
            requested_by: None,
            payload: json!({}),
            status,
            grants: Vec::new(),
            rejection: None,
            created_at_ms: created,
            resolved_at_ms: resolved,
            revision: 0,
        }
    }

    #[test]
    fn lists_pending_oldest_first_and_resolved_newest_first() {
        let store = InMemoryVerificationStore::new();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            store
                .create(record("b", 20, VerificationStatus::Pending, None))
                .await
                .unwrap();
            store
                .create(record("a", 30, VerificationStatus::Pending, None))
                .await
                .unwrap();
            store
                .create(record("c", 10, VerificationStatus::Pending, None))
                .await
                .unwrap();
            store
                .create(record("x", 1, VerificationStatus::Passed, Some(100)))
                .await
                .unwrap();
            store
                .create(record("y", 2, VerificationStatus::Failed, Some(200)))
                .await
                .unwrap();
            let pending: Vec<String> = store
                .list_pending(10)
                .await
                .unwrap()
                .into_iter()
                .map(|r| r.id)
                .collect();
            assert_eq!(pending, ["c", "b", "a"]);
            let first: Vec<String> = store
                .list_pending(2)
                .await
                .unwrap()
                .into_iter()
                .map(|r| r.id)
                .collect();
            assert_eq!(first, ["c", "b"]);
            let resolved: Vec<String> = store
                .list_resolved(10)
                .await
                .unwrap()
                .into_iter()
                .map(|r| r.id)
                .collect();
            assert_eq!(resolved, ["y", "x"]);
        });
    }
}
