//! [`SqliteVerificationStore`]: verification requests in the `milpa_verifications` table.

use std::sync::Arc;

use milpa::verification::{
    VerificationRecord, VerificationStatus, VerificationStore, VerificationStoreError,
};
use milpa::{Deferred, StoreError};
use rusqlite::{OptionalExtension, params};

use crate::error::{store_error, unreadable};
use crate::shared::Shared;
use crate::writer::sql;

/// Verification requests in the store's file. `create` and `compare_and_set` run in the
/// writer's immediate transaction (`INSERT … ON CONFLICT DO NOTHING`, and `UPDATE … WHERE
/// id = ? AND revision = ?`), so of two concurrent transitions, in any processes, exactly
/// one wins. `get` and the two lists read through the store's read connection, each list
/// walking an index in its order and stopping at its limit: `list_pending` the
/// `(status, created_at_ms)` index, `list_resolved` the partial index of resolved requests
/// by `resolved_at_ms` (schema version 2).
#[derive(Clone)]
pub struct SqliteVerificationStore {
    shared: Arc<Shared>,
}

impl SqliteVerificationStore {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        SqliteVerificationStore { shared }
    }

    /// Runs one of the list queries (`LIST_PENDING`, `LIST_RESOLVED`) for up to `limit` rows.
    fn list(
        &self,
        query: &str,
        limit: usize,
    ) -> Result<Vec<VerificationRecord>, VerificationStoreError> {
        // SQLite reads a negative LIMIT as "no limit"; a larger one than i64 holds is that.
        let limit = i64::try_from(limit).unwrap_or(-1);
        let records = self.shared.read(|conn| {
            let mut select = conn.prepare_cached(query).map_err(store_error)?;
            let rows = select
                .query_map([limit], |row| {
                    Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
                })
                .map_err(store_error)?;
            rows.map(|row| {
                let (revision, json) = row.map_err(store_error)?;
                record_from_row(revision, &json)
            })
            .collect()
        })?;
        Ok(records)
    }
}

/// The pending requests, oldest first (ties by id), as
/// [`InMemoryVerificationStore`](milpa::verification::InMemoryVerificationStore) orders them;
/// served by the `milpa_verifications_status` index (its entries end with the key, `id`).
const LIST_PENDING: &str = "SELECT revision, record FROM milpa_verifications
     WHERE status = 'pending'
     ORDER BY created_at_ms, id
     LIMIT ?1";

/// The resolved requests, most recently resolved first (ties by id, descending); served by
/// the `milpa_verifications_resolved` partial index, whose `WHERE` and key this repeats
/// word for word (SQLite only uses a partial or expression index when they match).
const LIST_RESOLVED: &str = "SELECT revision, record FROM milpa_verifications
     WHERE status <> 'pending'
     ORDER BY coalesce(resolved_at_ms, 0) DESC, id DESC
     LIMIT ?1";

/// A time in ms as SQLite stores it (an `INTEGER` is an `i64`); times past year 292 million
/// saturate.
fn millis(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// A stored row (the revision column and the JSON record) as the record it is.
fn record_from_row(revision: i64, json: &str) -> Result<VerificationRecord, StoreError> {
    let mut record: VerificationRecord =
        serde_json::from_str(json).map_err(|error| unreadable("a verification request", error))?;
    // The column is what compare-and-set checks; the JSON copy follows it.
    record.revision = revision as u64;
    Ok(record)
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
                    "INSERT INTO milpa_verifications
                         (id, revision, status, created_at_ms, resolved_at_ms, record)
                     VALUES (?1, 0, ?2, ?3, ?4, ?5) ON CONFLICT (id) DO NOTHING",
                )
                .and_then(|mut insert| {
                    insert.execute(params![
                        record.id,
                        record.status.as_str(),
                        millis(record.created_at_ms),
                        record.resolved_at_ms.map(millis),
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
        let answer = found.and_then(|row| {
            row.map(|(revision, json)| record_from_row(revision, &json))
                .transpose()
        });
        Deferred::ready(answer.map_err(VerificationStoreError::from))
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
                    "UPDATE milpa_verifications
                     SET revision = revision + 1, status = ?3, resolved_at_ms = ?4, record = ?5
                     WHERE id = ?1 AND revision = ?2",
                )
                .and_then(|mut update| {
                    update.execute(params![
                        record.id,
                        expected,
                        record.status.as_str(),
                        record.resolved_at_ms.map(millis),
                        json
                    ])
                }))?;
            Ok(updated == 1)
        })
    }

    fn list_pending<'a>(
        &'a self,
        limit: usize,
    ) -> Deferred<'a, Result<Vec<VerificationRecord>, VerificationStoreError>> {
        Deferred::ready(self.list(LIST_PENDING, limit))
    }

    fn list_resolved<'a>(
        &'a self,
        limit: usize,
    ) -> Deferred<'a, Result<Vec<VerificationRecord>, VerificationStoreError>> {
        Deferred::ready(self.list(LIST_RESOLVED, limit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SqliteStore;

    /// The plan SQLite picks for `query`, one step per line.
    fn plan(store: &SqliteStore, query: &str) -> String {
        let conn = store.open_connection().unwrap();
        let mut explain = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {query}"))
            .unwrap();
        let steps = explain
            .query_map([10_i64], |row| row.get::<_, String>(3))
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        steps.join("\n")
    }

    #[test]
    fn each_list_walks_its_index_without_sorting() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("state.db")).unwrap();
        let pending = plan(&store, LIST_PENDING);
        assert!(
            pending.contains("USING INDEX milpa_verifications_status"),
            "{pending}"
        );
        let resolved = plan(&store, LIST_RESOLVED);
        assert!(
            resolved.contains("USING INDEX milpa_verifications_resolved"),
            "{resolved}"
        );
        for plan in [pending, resolved] {
            assert!(!plan.contains("TEMP B-TREE"), "sorts: {plan}");
        }
    }
}
