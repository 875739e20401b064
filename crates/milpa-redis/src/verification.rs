//! [`RedisVerificationStore`]: verification requests in Redis, created and changed by Lua
//! scripts that check the revision atomically and keep the two indexes the approval
//! queue is listed from.

use std::collections::HashSet;
use std::sync::{Arc, LazyLock};

use milpa::verification::{
    VerificationRecord, VerificationStatus, VerificationStore, VerificationStoreError,
};
use milpa::{Deferred, StoreError};
use redis::Script;

use crate::shared::Shared;

/// The create-unless-taken script (`scripts/verification_create.lua`).
static CREATE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/verification_create.lua")));

/// The compare-and-set script (`scripts/verification_cas.lua`).
static COMPARE_AND_SET: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/verification_cas.lua")));

/// The read-what-a-list-found script (`scripts/verification_list.lua`).
static LIST: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/verification_list.lua")));

/// Ids read per page of a list. A script runs alone on Redis, so a page bounds how long
/// one script of a listing holds it, while a screen's worth of the approval queue still
/// takes one page.
const LIST_PAGE: usize = 128;

/// Where a request is filed: the index of its status, and its score there. Pending ones by
/// `created_at_ms`, resolved ones by `resolved_at_ms` (0 without one, as the in-memory
/// store sorts them). Scores are doubles: exact for times below 2^53 ms (year 287 396).
fn filing(record: &VerificationRecord) -> (&'static str, u64) {
    if record.status.is_final() {
        ("1", record.resolved_at_ms.unwrap_or(0))
    } else {
        ("0", record.created_at_ms)
    }
}

/// One of the two lists of the approval queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listing {
    /// Pending requests, oldest first: the pending index in ascending score order, where
    /// equal scores come in ascending id order (Redis orders equal scores by member).
    Pending,
    /// Resolved requests, most recently resolved first: the resolved index in descending
    /// order, equal scores in descending id order.
    Resolved,
}

/// Verification requests shared by every process using the same Redis (and prefix): one
/// replica opens a request, a person resolves it through another.
///
/// Each request is a hash (`revision`, `status`, `record` as JSON) kept for
/// [`RedisOptions::verification_retention`](crate::RedisOptions::verification_retention)
/// after its last change, pending or resolved. Every grant or reject is one
/// compare-and-set on the revision, so two approvers deciding at once never overwrite
/// each other: the [`HumanVerifier`](milpa::verification::HumanVerifier) rereads and
/// retries the one that lost, which is how `dual` and `quorum` requests count distinct
/// approvers across replicas.
///
/// The same scripts file each request's id in one of two sorted sets, atomically with the
/// change: pending requests by `created_at_ms`, resolved ones by `resolved_at_ms`. The
/// lists read an index in its order (two round trips: the ids, then one script reading
/// their records), and they drop the members whose request has expired. The resolved
/// index also drops, at every create and compare-and-set, the requests resolved longer
/// ago than the retention (by Redis's clock): they expired with their hash unless changed
/// since, and the newest-first list would never reach them.
#[derive(Debug, Clone)]
pub struct RedisVerificationStore {
    shared: Arc<Shared>,
}

impl RedisVerificationStore {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        RedisVerificationStore { shared }
    }

    fn retention_ms(&self) -> u64 {
        (self.shared.verification_retention.as_millis() as u64).max(1)
    }

    async fn create_record(
        &self,
        record: VerificationRecord,
    ) -> Result<(), VerificationStoreError> {
        let body = serde_json::to_string(&record).map_err(StoreError::backend)?;
        let key = self.shared.keys.verification(&record.id);
        let retention = self.retention_ms();
        let status = record.status.as_str();
        let revision = record.revision;
        let (resolved, score) = filing(&record);
        let keys = &self.shared.keys;
        let id = record.id.as_str();
        let existing: Option<String> = self
            .shared
            .link
            .run(|mut conn| async move {
                CREATE
                    .key(key)
                    .key(keys.pending_verifications())
                    .key(keys.resolved_verifications())
                    .arg(body)
                    .arg(status)
                    .arg(retention)
                    .arg(revision)
                    .arg(id)
                    .arg(resolved)
                    .arg(score)
                    .invoke_async(&mut conn)
                    .await
            })
            .await?;
        match existing {
            None => Ok(()),
            Some(status) => Err(VerificationStoreError::AlreadyExists {
                id: record.id,
                status: VerificationStatus::parse(&status).ok_or_else(|| {
                    StoreError::corrupt(format!("unknown verification status '{status}'"))
                })?,
            }),
        }
    }

    async fn read(&self, id: &str) -> Result<Option<VerificationRecord>, VerificationStoreError> {
        let key = self.shared.keys.verification(id);
        let body: Option<String> = self
            .shared
            .link
            .run(|mut conn| async move {
                redis::cmd("HGET")
                    .arg(key)
                    .arg("record")
                    .query_async(&mut conn)
                    .await
            })
            .await?;
        let record = body
            .map(|body| serde_json::from_str(&body).map_err(StoreError::corrupt))
            .transpose()?;
        Ok(record)
    }

    async fn swap(
        &self,
        expected_revision: u64,
        mut record: VerificationRecord,
    ) -> Result<bool, VerificationStoreError> {
        let Some(next_revision) = expected_revision.checked_add(1) else {
            return Ok(false);
        };
        record.revision = next_revision;
        let body = serde_json::to_string(&record).map_err(StoreError::backend)?;
        let key = self.shared.keys.verification(&record.id);
        let retention = self.retention_ms();
        let status = record.status.as_str();
        let (resolved, score) = filing(&record);
        let keys = &self.shared.keys;
        let swapped: i64 = self
            .shared
            .link
            .run(|mut conn| async move {
                COMPARE_AND_SET
                    .key(key)
                    .key(keys.pending_verifications())
                    .key(keys.resolved_verifications())
                    .arg(expected_revision)
                    .arg(next_revision)
                    .arg(body)
                    .arg(status)
                    .arg(retention)
                    .arg(&record.id)
                    .arg(resolved)
                    .arg(score)
                    .invoke_async(&mut conn)
                    .await
            })
            .await?;
        Ok(swapped == 1)
    }

    /// Up to `limit` requests of `listing`, in its order.
    ///
    /// Reads a page of ids, then their records in one script, which removes the members
    /// whose request expired; the next page starts after the live ones, until `limit` are
    /// found or the index ends. Every page either moves past live members or removes dead
    /// ones, so the loop ends; the whole listing runs under one deadline, as any other
    /// store call. A request changed meanwhile may be missed or met twice (a page boundary
    /// moved): it is listed once.
    async fn list(
        &self,
        listing: Listing,
        limit: usize,
    ) -> Result<Vec<VerificationRecord>, VerificationStoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let keys = &self.shared.keys;
        let (index, range, resolved) = match listing {
            Listing::Pending => (keys.pending_verifications(), "ZRANGE", "0"),
            Listing::Resolved => (keys.resolved_verifications(), "ZREVRANGE", "1"),
        };
        let bodies: Vec<String> = self
            .shared
            .link
            .run(|mut conn| async move {
                let mut bodies = Vec::new();
                let mut listed = HashSet::new();
                // Where the next page starts: past the live members read so far (the dead
                // ones were removed, so they no longer take a place).
                let mut position: i64 = 0;
                loop {
                    let page = (limit - bodies.len()).min(LIST_PAGE);
                    // ZRANGE's bounds are inclusive; past the end is the end.
                    let ids: Vec<String> = redis::cmd(range)
                        .arg(index)
                        .arg(position)
                        .arg(position.saturating_add(i64::try_from(page - 1).unwrap_or(i64::MAX)))
                        .query_async(&mut conn)
                        .await?;
                    if ids.is_empty() {
                        break;
                    }
                    let mut read = LIST.prepare_invoke();
                    read.key(index).arg(resolved);
                    for id in &ids {
                        read.key(keys.verification(id)).arg(id);
                    }
                    let found: Vec<Option<String>> = read.invoke_async(&mut conn).await?;
                    for (id, body) in ids.iter().zip(found) {
                        let Some(body) = body else { continue };
                        position = position.saturating_add(1);
                        if listed.insert(id.clone()) {
                            bodies.push(body);
                        }
                    }
                    if ids.len() < page || bodies.len() >= limit {
                        break;
                    }
                }
                Ok(bodies)
            })
            .await?;
        let records = bodies
            .iter()
            .map(|body| serde_json::from_str(body).map_err(StoreError::corrupt))
            .collect::<Result<_, _>>()?;
        Ok(records)
    }
}

impl VerificationStore for RedisVerificationStore {
    fn create<'a>(
        &'a self,
        record: VerificationRecord,
    ) -> Deferred<'a, Result<(), VerificationStoreError>> {
        Deferred::pending(self.create_record(record))
    }

    fn get<'a>(
        &'a self,
        id: &'a str,
    ) -> Deferred<'a, Result<Option<VerificationRecord>, VerificationStoreError>> {
        Deferred::pending(self.read(id))
    }

    fn compare_and_set<'a>(
        &'a self,
        expected_revision: u64,
        record: VerificationRecord,
    ) -> Deferred<'a, Result<bool, VerificationStoreError>> {
        Deferred::pending(self.swap(expected_revision, record))
    }

    fn list_pending<'a>(
        &'a self,
        limit: usize,
    ) -> Deferred<'a, Result<Vec<VerificationRecord>, VerificationStoreError>> {
        Deferred::pending(self.list(Listing::Pending, limit))
    }

    fn list_resolved<'a>(
        &'a self,
        limit: usize,
    ) -> Deferred<'a, Result<Vec<VerificationRecord>, VerificationStoreError>> {
        Deferred::pending(self.list(Listing::Resolved, limit))
    }
}
