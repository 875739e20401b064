//! [`SqliteConfirmationStore`]: pending confirmations in the `milpa_confirmations` table.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use milpa::Deferred;
use milpa::confirm::{
    ConfirmationBinding, ConfirmationStore, PendingConfirmation, StoreError, unix_millis,
};
use rusqlite::{OptionalExtension, params};

use crate::error::unreadable;
use crate::shared::Shared;
use crate::writer::sql;

/// Expired tokens are deleted once every this many inserts (per process).
const SWEEP_EVERY: u64 = 256;

/// Confirmation tokens in the store's file, shared by every process that opens it.
///
/// Redemption is one statement: `DELETE … WHERE token = ? AND tool = ? AND principal IS ?
/// AND channel = ? AND expires_at_ms >= ? RETURNING …`. Of concurrent redemptions (from
/// any process) exactly one deletes the row; a presentation with another binding matches
/// nothing and leaves the token for its owner. An expired token is deleted when presented.
#[derive(Clone)]
pub struct SqliteConfirmationStore {
    shared: Arc<Shared>,
    inserts: Arc<AtomicU64>,
}

impl SqliteConfirmationStore {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        SqliteConfirmationStore {
            shared,
            inserts: Arc::new(AtomicU64::new(0)),
        }
    }
}

impl ConfirmationStore for SqliteConfirmationStore {
    fn insert<'a>(
        &'a self,
        token: String,
        pending: PendingConfirmation,
    ) -> Deferred<'a, Result<(), StoreError>> {
        let sweep = self.inserts.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1;
        let args = match serde_json::to_string(&pending.args) {
            Ok(args) => args,
            Err(error) => return Deferred::ready(Err(StoreError::backend(error))),
        };
        self.shared.writer.call(move |conn| {
            sql(conn
                .prepare_cached(
                    "INSERT OR REPLACE INTO milpa_confirmations
                     (token, tool, principal, channel, args, action_summary, expires_at_ms)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )
                .and_then(|mut insert| {
                    insert.execute(params![
                        token,
                        pending.binding.tool,
                        pending.binding.principal,
                        pending.binding.channel,
                        args,
                        pending.action_summary,
                        clamp_ms(pending.expires_at_ms),
                    ])
                }))?;
            if sweep {
                let now = clamp_ms(unix_millis(SystemTime::now()));
                sql(conn
                    .prepare_cached("DELETE FROM milpa_confirmations WHERE expires_at_ms < ?1")
                    .and_then(|mut delete| delete.execute([now])))?;
            }
            Ok(())
        })
    }

    fn consume<'a>(
        &'a self,
        token: &'a str,
        binding: &'a ConfirmationBinding,
        now_ms: u64,
    ) -> Deferred<'a, Result<Option<PendingConfirmation>, StoreError>> {
        let token = token.to_owned();
        let binding = binding.clone();
        let now = clamp_ms(now_ms);
        self.shared.writer.call(move |conn| {
            let found = sql(conn
                .prepare_cached(
                    "DELETE FROM milpa_confirmations
                     WHERE token = ?1 AND tool = ?2 AND principal IS ?3 AND channel = ?4
                       AND expires_at_ms >= ?5
                     RETURNING args, action_summary, expires_at_ms",
                )
                .and_then(|mut redeem| {
                    redeem
                        .query_row(
                            params![token, binding.tool, binding.principal, binding.channel, now],
                            |row| {
                                Ok((
                                    row.get::<_, String>(0)?,
                                    row.get::<_, String>(1)?,
                                    row.get::<_, i64>(2)?,
                                ))
                            },
                        )
                        .optional()
                }))?;
            let Some((args, action_summary, expires_at_ms)) = found else {
                // Unknown, foreign or expired: only an expired row goes.
                sql(conn
                    .prepare_cached(
                        "DELETE FROM milpa_confirmations WHERE token = ?1 AND expires_at_ms < ?2",
                    )
                    .and_then(|mut delete| delete.execute(params![token, now])))?;
                return Ok(None);
            };
            let args = serde_json::from_str(&args)
                .map_err(|error| unreadable("a pending confirmation's arguments", error))?;
            Ok(Some(PendingConfirmation {
                binding,
                args,
                action_summary,
                expires_at_ms: expires_at_ms as u64,
            }))
        })
    }

    fn peek<'a>(
        &'a self,
        token: &'a str,
        binding: &'a ConfirmationBinding,
        now_ms: u64,
    ) -> Deferred<'a, Result<Option<PendingConfirmation>, StoreError>> {
        let token = token.to_owned();
        let binding = binding.clone();
        let now = clamp_ms(now_ms);
        // Through the writer, like `consume`: it sees every insert this process committed.
        self.shared.writer.call(move |conn| {
            let found = sql(conn
                .prepare_cached(
                    "SELECT args, action_summary, expires_at_ms FROM milpa_confirmations
                     WHERE token = ?1 AND tool = ?2 AND principal IS ?3 AND channel = ?4
                       AND expires_at_ms >= ?5",
                )
                .and_then(|mut read| {
                    read.query_row(
                        params![token, binding.tool, binding.principal, binding.channel, now],
                        |row| {
                            Ok((
                                row.get::<_, String>(0)?,
                                row.get::<_, String>(1)?,
                                row.get::<_, i64>(2)?,
                            ))
                        },
                    )
                    .optional()
                }))?;
            let Some((args, action_summary, expires_at_ms)) = found else {
                return Ok(None);
            };
            let args = serde_json::from_str(&args)
                .map_err(|error| unreadable("a pending confirmation's arguments", error))?;
            Ok(Some(PendingConfirmation {
                binding,
                args,
                action_summary,
                expires_at_ms: expires_at_ms as u64,
            }))
        })
    }
}

/// Milliseconds as SQLite's signed integer (times past year 292 million saturate).
pub(crate) fn clamp_ms(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}
