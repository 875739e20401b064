//! [`RedisVerificationStore`]: verification requests in Redis, created and changed by Lua
//! scripts that check the revision atomically.

use std::sync::{Arc, LazyLock};

use milpa::verification::{
    VerificationRecord, VerificationStatus, VerificationStore, VerificationStoreError,
};
use milpa::{Deferred, StoreError};
use redis::Script;

use crate::store::Shared;

/// The create-unless-taken script (`scripts/verification_create.lua`).
static CREATE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/verification_create.lua")));

/// The compare-and-set script (`scripts/verification_cas.lua`).
static COMPARE_AND_SET: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/verification_cas.lua")));

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
        let existing: Option<String> = self
            .shared
            .link
            .run(|mut conn| async move {
                CREATE
                    .key(key)
                    .arg(body)
                    .arg(status)
                    .arg(retention)
                    .arg(revision)
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
        let swapped: i64 = self
            .shared
            .link
            .run(|mut conn| async move {
                COMPARE_AND_SET
                    .key(key)
                    .arg(expected_revision)
                    .arg(next_revision)
                    .arg(body)
                    .arg(status)
                    .arg(retention)
                    .invoke_async(&mut conn)
                    .await
            })
            .await?;
        Ok(swapped == 1)
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
}
