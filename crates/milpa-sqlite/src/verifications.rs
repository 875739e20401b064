//! [`SqliteVerificationStore`]: verification requests in the `milpa_verifications` table.

use std::sync::Arc;

use milpa::Deferred;
use milpa::verification::{
    VerificationRecord, VerificationStatus, VerificationStore, VerificationStoreError,
};
use rusqlite::{OptionalExtension, params};

use crate::error::{store_error, unreadable};
use crate::store::Shared;
use crate::writer::sql;

/// Verification requests in the store's file. `create` and `compare_and_set` run in the
/// writer's immediate transaction (`INSERT … ON CONFLICT DO NOTHING`, and `UPDATE … WHERE
/// id = ? AND revision = ?`), so of two concurrent transitions, in any processes, exactly
/// one wins. `get` reads through the store's read connection.
#[derive(Clone)]
pub struct SqliteVerificationStore {
    shared: Arc<Shared>,
}

impl SqliteVerificationStore {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        SqliteVerificationStore { shared }
    }
}

fn to_json(record: &VerificationRecord) -> Result<String, VerificationStoreError> {
    serde_json::to_string(record)
        .map_err(|error| VerificationStoreError::Backend(milpa::StoreError::backend(error)))
}

impl VerificationStore for SqliteVerificationStore {
    fn create<'a>(
        &'a self,
        mut record: VerificationRecord,
    ) -> Deferred<'a, Result<(), VerificationStoreError>> {
        record.revision = 0;
        let json = match to_json(&record) {
            Ok(json) => json,
            Err(error) => return Deferred::ready(Err(error)),
        };
        self.shared.writer.call(move |conn| {
            let inserted = sql(conn
                .prepare_cached(
                    "INSERT INTO milpa_verifications (id, revision, status, created_at_ms, record)
                     VALUES (?1, 0, ?2, ?3, ?4) ON CONFLICT (id) DO NOTHING",
                )
                .and_then(|mut insert| {
                    insert.execute(params![
                        record.id,
                        record.status.as_str(),
                        i64::try_from(record.created_at_ms).unwrap_or(i64::MAX),
                        json
                    ])
                }))?;
            if inserted == 1 {
                return Ok(());
            }
            let status: String = sql(conn
                .prepare_cached("SELECT status FROM milpa_verifications WHERE id = ?1")
                .and_then(|mut select| select.query_row([&record.id], |row| row.get(0))))?;
            let status = VerificationStatus::parse(&status)
                .ok_or_else(|| unreadable("a verification request's status", &status))?;
            Err(VerificationStoreError::AlreadyExists {
                id: record.id,
                status,
            })
        })
    }

    fn get<'a>(
        &'a self,
        id: &'a str,
    ) -> Deferred<'a, Result<Option<VerificationRecord>, VerificationStoreError>> {
        let found = self.shared.read(|conn| {
            conn.prepare_cached("SELECT revision, record FROM milpa_verifications WHERE id = ?1")
                .and_then(|mut select| {
                    select
                        .query_row([id], |row| {
                            Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
                        })
                        .optional()
                })
                .map_err(store_error)
        });
        let answer = found.map_err(VerificationStoreError::from).and_then(|row| {
            row.map(|(revision, json)| {
                let mut record: VerificationRecord = serde_json::from_str(&json)
                    .map_err(|error| unreadable("a verification request", error))?;
                // The column is what compare-and-set checks; the JSON copy follows it.
                record.revision = revision as u64;
                Ok(record)
            })
            .transpose()
        });
        Deferred::ready(answer)
    }

    fn compare_and_set<'a>(
        &'a self,
        expected_revision: u64,
        mut record: VerificationRecord,
    ) -> Deferred<'a, Result<bool, VerificationStoreError>> {
        record.revision = expected_revision + 1;
        let json = match to_json(&record) {
            Ok(json) => json,
            Err(error) => return Deferred::ready(Err(error)),
        };
        let Ok(expected) = i64::try_from(expected_revision) else {
            return Deferred::ready(Ok(false));
        };
        self.shared.writer.call(move |conn| {
            let updated = sql(conn
                .prepare_cached(
                    "UPDATE milpa_verifications SET revision = revision + 1, status = ?3, record = ?4
                     WHERE id = ?1 AND revision = ?2",
                )
                .and_then(|mut update| {
                    update.execute(params![record.id, expected, record.status.as_str(), json])
                }))?;
            Ok(updated == 1)
        })
    }
}
