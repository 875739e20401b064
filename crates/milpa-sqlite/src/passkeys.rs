//! [`SqlitePasskeyStore`]: approvers' passkeys in `milpa_passkeys` and enrolment tokens
//! (their SHA-256) in `milpa_passkey_enrolments` (schema version 4).

use std::sync::Arc;

use milpa::approval::passkeys::{PasskeyRecord, PasskeyStore};
use milpa::{Deferred, StoreError};
use rusqlite::{OptionalExtension, params};

use crate::error::store_error;
use crate::shared::Shared;
use crate::writer::sql;

/// Passkeys in the store's file, shared by every process on it. Writes run in the writer's
/// transaction (`INSERT … ON CONFLICT DO NOTHING` for a new credential; taking an enrolment
/// is one `DELETE … RETURNING`, so of two processes taking one token at most one gets it);
/// reads go through the read connection.
#[derive(Clone)]
pub struct SqlitePasskeyStore {
    shared: Arc<Shared>,
}

impl SqlitePasskeyStore {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        SqlitePasskeyStore { shared }
    }
}

fn millis(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

impl PasskeyStore for SqlitePasskeyStore {
    fn add<'a>(&'a self, record: PasskeyRecord) -> Deferred<'a, Result<bool, StoreError>> {
        self.shared.writer.call(move |conn| {
            let inserted = sql(conn
                .prepare_cached(
                    "INSERT INTO milpa_passkeys (credential_id, actor, public_credential, created_at_ms)
                     VALUES (?1, ?2, ?3, ?4) ON CONFLICT (credential_id) DO NOTHING",
                )
                .and_then(|mut insert| {
                    insert.execute(params![
                        record.credential_id,
                        record.actor,
                        record.public_credential,
                        millis(record.created_at_ms)
                    ])
                }))?;
            Ok(inserted == 1)
        })
    }

    fn for_actor<'a>(
        &'a self,
        actor: &'a str,
    ) -> Deferred<'a, Result<Vec<PasskeyRecord>, StoreError>> {
        Deferred::ready(self.shared.read(|conn| {
            let mut select = conn
                .prepare_cached(
                    "SELECT credential_id, public_credential, created_at_ms FROM milpa_passkeys
                     WHERE actor = ?1 ORDER BY created_at_ms, credential_id",
                )
                .map_err(store_error)?;
            let rows = select
                .query_map([actor], |row| {
                    Ok(PasskeyRecord::new(
                        actor,
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        u64::try_from(row.get::<_, i64>(2)?).unwrap_or(0),
                    ))
                })
                .map_err(store_error)?;
            rows.map(|row| row.map_err(store_error)).collect()
        }))
    }

    fn update<'a>(
        &'a self,
        actor: &'a str,
        credential_id: &'a str,
        public_credential: &'a str,
    ) -> Deferred<'a, Result<bool, StoreError>> {
        let (actor, credential_id, public_credential) = (
            actor.to_owned(),
            credential_id.to_owned(),
            public_credential.to_owned(),
        );
        self.shared.writer.call(move |conn| {
            let updated = sql(conn
                .prepare_cached(
                    "UPDATE milpa_passkeys SET public_credential = ?3
                     WHERE credential_id = ?2 AND actor = ?1",
                )
                .and_then(|mut update| {
                    update.execute(params![actor, credential_id, public_credential])
                }))?;
            Ok(updated == 1)
        })
    }

    fn create_enrolment<'a>(
        &'a self,
        token_hash: &'a str,
        actor: &'a str,
        expires_at_ms: u64,
    ) -> Deferred<'a, Result<(), StoreError>> {
        let (token_hash, actor) = (token_hash.to_owned(), actor.to_owned());
        self.shared.writer.call(move |conn| {
            sql(conn
                .prepare_cached(
                    "INSERT OR REPLACE INTO milpa_passkey_enrolments (token_hash, actor, expires_at_ms)
                     VALUES (?1, ?2, ?3)",
                )
                .and_then(|mut insert| {
                    insert.execute(params![token_hash, actor, millis(expires_at_ms)])
                }))?;
            Ok(())
        })
    }

    fn peek_enrolment<'a>(
        &'a self,
        token_hash: &'a str,
        now_ms: u64,
    ) -> Deferred<'a, Result<Option<String>, StoreError>> {
        Deferred::ready(self.shared.read(|conn| {
            conn.prepare_cached(
                "SELECT actor FROM milpa_passkey_enrolments
                 WHERE token_hash = ?1 AND expires_at_ms > ?2",
            )
            .and_then(|mut select| {
                select
                    .query_row(params![token_hash, millis(now_ms)], |row| row.get(0))
                    .optional()
            })
            .map_err(store_error)
        }))
    }

    fn take_enrolment<'a>(
        &'a self,
        token_hash: &'a str,
        now_ms: u64,
    ) -> Deferred<'a, Result<Option<String>, StoreError>> {
        let token_hash = token_hash.to_owned();
        self.shared.writer.call(move |conn| {
            let now = millis(now_ms);
            sql(conn
                .prepare_cached("DELETE FROM milpa_passkey_enrolments WHERE expires_at_ms <= ?1")
                .and_then(|mut sweep| sweep.execute([now])))?;
            sql(conn
                .prepare_cached(
                    "DELETE FROM milpa_passkey_enrolments WHERE token_hash = ?1 RETURNING actor",
                )
                .and_then(|mut take| take.query_row([&token_hash], |row| row.get(0)).optional()))
        })
    }
}
