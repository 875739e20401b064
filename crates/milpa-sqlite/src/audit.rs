//! The audit trail in the `milpa_audit` table: [`SqliteAuditSink`] appends,
//! [`SqliteAuditTrail`] reads back.

use std::sync::Arc;
use std::time::SystemTime;

use milpa::StoreError;
use milpa::audit::chain::{ChainBreak, ChainSummary, ChainVerifier};
use milpa::audit::trail::{AuditQuery, AuditTrail};
use milpa::audit::{AuditRecord, AuditSink};
use milpa::confirm::unix_millis;
use rusqlite::types::Value as SqlValue;

use crate::error::store_error;
use crate::shared::Shared;
use crate::writer::AuditEntry;

/// Appends every record, sealed onto the file's hash chain, through the store's writer.
///
/// `record` only serializes the record and queues it (it runs inline at the end of every
/// call); the writer seals and inserts it in its next group commit, after the store's
/// [`audit_linger`](crate::SqliteOptions::audit_linger) at most. [`flush`] returns once
/// everything queued is committed, and dropping the store's last handle does the same, so
/// a clean shutdown loses nothing. A crash of the process loses the records still queued
/// (those of the last linger at most); see the crate's durability notes.
///
/// [`flush`]: AuditSink::flush
#[derive(Clone)]
pub struct SqliteAuditSink {
    shared: Arc<Shared>,
}

impl SqliteAuditSink {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        SqliteAuditSink { shared }
    }
}

impl AuditSink for SqliteAuditSink {
    fn record(&self, record: &AuditRecord<'_>) {
        let entry = AuditEntry::new(record, unix_millis(SystemTime::now()));
        let queued = self.shared.writer.append_audit(entry);
        if !queued {
            // Counted with every other store failure (`StoreError::made`).
            let error = crate::error::writer_stopped();
            tracing::error!(target: "milpa::audit", %error, "an audit record could not be stored");
        }
    }

    fn flush(&self) {
        self.shared.writer.flush();
    }
}

/// Reads the trail back: filtered queries, newest first, and the chain check.
#[derive(Clone)]
pub struct SqliteAuditTrail {
    shared: Arc<Shared>,
}

impl SqliteAuditTrail {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        SqliteAuditTrail { shared }
    }
}

/// How many records `verify_reporting` checks between two reports of its progress.
const PROGRESS_EVERY: u64 = 256;

impl AuditTrail for SqliteAuditTrail {
    fn query(&self, query: &AuditQuery) -> Result<Vec<String>, StoreError> {
        let mut sql = String::from("SELECT line FROM milpa_audit WHERE 1 = 1");
        let mut values: Vec<SqlValue> = Vec::new();
        for (column, value) in [
            ("tool", &query.tool),
            ("principal", &query.principal),
            ("outcome", &query.outcome),
        ] {
            if let Some(value) = value {
                values.push(SqlValue::Text(value.clone()));
                sql.push_str(&format!(" AND {column} = ?{}", values.len()));
            }
        }
        if let Some(since) = query.since_ms {
            values.push(SqlValue::Integer(i64::try_from(since).unwrap_or(i64::MAX)));
            sql.push_str(&format!(" AND ts_ms >= ?{}", values.len()));
        }
        values.push(SqlValue::Integer(
            query
                .limit
                .map_or(-1, |limit| i64::try_from(limit).unwrap_or(i64::MAX)),
        ));
        sql.push_str(&format!(" ORDER BY seq DESC LIMIT ?{}", values.len()));
        self.shared.read(|conn| {
            let mut select = conn.prepare_cached(&sql).map_err(store_error)?;
            let rows = select
                .query_map(rusqlite::params_from_iter(values), |row| row.get(0))
                .map_err(store_error)?;
            rows.collect::<Result<Vec<String>, _>>()
                .map_err(store_error)
        })
    }

    fn verify(&self) -> Result<Result<ChainSummary, ChainBreak>, StoreError> {
        self.verify_reporting(&mut |_, _| {})
    }

    fn verify_reporting(
        &self,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Result<ChainSummary, ChainBreak>, StoreError> {
        // Its own connection and read transaction: one consistent snapshot of the whole
        // trail (counted, then streamed), without holding the shared read connection for
        // the duration.
        let mut conn = crate::connection::open(&self.shared.path)?;
        let tx = conn.transaction().map_err(store_error)?;
        let total: u64 = tx
            .query_row("SELECT count(*) FROM milpa_audit", [], |row| row.get(0))
            .map_err(store_error)?;
        progress(0, total);
        let mut select = tx
            .prepare("SELECT line FROM milpa_audit ORDER BY seq")
            .map_err(store_error)?;
        let mut rows = select.query([]).map_err(store_error)?;
        let mut verifier = ChainVerifier::new();
        let mut checked = 0u64;
        while let Some(row) = rows.next().map_err(store_error)? {
            let line = row
                .get_ref(0)
                .and_then(|value| value.as_str().map_err(Into::into))
                .map_err(store_error)?;
            if let Err(broken) = verifier.push(line) {
                return Ok(Err(broken));
            }
            checked += 1;
            if checked.is_multiple_of(PROGRESS_EVERY) {
                progress(checked, total);
            }
        }
        progress(checked, total);
        Ok(Ok(verifier.finish()))
    }
}
