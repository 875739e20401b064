//! [`RedisPasskeyStore`]: approvers' passkeys and enrolment tokens in Redis, shared by
//! every replica on one prefix.

use std::sync::{Arc, LazyLock};

use milpa::approval::passkeys::{PasskeyRecord, PasskeyStore};
use milpa::{Deferred, StoreError};
use redis::Script;

use crate::shared::Shared;

static ADD: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/passkey_add.lua")));
static UPDATE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/passkey_update.lua")));
static LIST: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/passkey_list.lua")));
static TAKE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/enrolment_take.lua")));

/// Passkeys in Redis: each credential a hash (`actor`, `public_credential`,
/// `created_at_ms`) under its id, and per actor a sorted set of credential ids by
/// enrolment time; all under the `{passkeys}` hash tag, so the scripts that touch both stay
/// in one cluster slot. Enrolment tokens are hashes (`actor`, `expires_at_ms`) under their
/// SHA-256, deleted by Redis at their expiry and by the one script that takes them. No
/// passkey expires: an approver keeps it until it is removed by hand.
#[derive(Debug, Clone)]
pub struct RedisPasskeyStore {
    shared: Arc<Shared>,
}

impl RedisPasskeyStore {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        RedisPasskeyStore { shared }
    }

    async fn list(&self, actor: &str) -> Result<Vec<PasskeyRecord>, StoreError> {
        let index = self.shared.keys.passkeys_of(actor);
        let prefix = self.shared.keys.passkey("");
        let flat: Vec<String> = self
            .shared
            .link
            .run(
                |mut conn| async move { LIST.key(index).arg(prefix).invoke_async(&mut conn).await },
            )
            .await?;
        flat.chunks_exact(3)
            .map(|row| {
                let created = row[2]
                    .parse::<u64>()
                    .map_err(|e| StoreError::corrupt(format!("a passkey's created_at_ms: {e}")))?;
                Ok(PasskeyRecord::new(actor, &row[0], &row[1], created))
            })
            .collect()
    }
}

impl PasskeyStore for RedisPasskeyStore {
    fn add<'a>(&'a self, record: PasskeyRecord) -> Deferred<'a, Result<bool, StoreError>> {
        Deferred::pending(async move {
            let key = self.shared.keys.passkey(&record.credential_id);
            let index = self.shared.keys.passkeys_of(&record.actor);
            let added: i64 = self
                .shared
                .link
                .run(|mut conn| async move {
                    ADD.key(key)
                        .key(index)
                        .arg(&record.actor)
                        .arg(&record.credential_id)
                        .arg(&record.public_credential)
                        .arg(record.created_at_ms)
                        .invoke_async(&mut conn)
                        .await
                })
                .await?;
            Ok(added == 1)
        })
    }

    fn for_actor<'a>(
        &'a self,
        actor: &'a str,
    ) -> Deferred<'a, Result<Vec<PasskeyRecord>, StoreError>> {
        Deferred::pending(self.list(actor))
    }

    fn update<'a>(
        &'a self,
        actor: &'a str,
        credential_id: &'a str,
        public_credential: &'a str,
    ) -> Deferred<'a, Result<bool, StoreError>> {
        Deferred::pending(async move {
            let key = self.shared.keys.passkey(credential_id);
            let updated: i64 = self
                .shared
                .link
                .run(|mut conn| async move {
                    UPDATE
                        .key(key)
                        .arg(actor)
                        .arg(public_credential)
                        .invoke_async(&mut conn)
                        .await
                })
                .await?;
            Ok(updated == 1)
        })
    }

    fn create_enrolment<'a>(
        &'a self,
        token_hash: &'a str,
        actor: &'a str,
        expires_at_ms: u64,
    ) -> Deferred<'a, Result<(), StoreError>> {
        Deferred::pending(async move {
            let key = self.shared.keys.enrolment(token_hash);
            self.shared
                .link
                .run(|mut conn| async move {
                    redis::pipe()
                        .atomic()
                        .cmd("HSET")
                        .arg(&key)
                        .arg("actor")
                        .arg(actor)
                        .arg("expires_at_ms")
                        .arg(expires_at_ms)
                        .ignore()
                        .cmd("PEXPIREAT")
                        .arg(&key)
                        .arg(expires_at_ms)
                        .ignore()
                        .query_async::<()>(&mut conn)
                        .await
                })
                .await
        })
    }

    fn peek_enrolment<'a>(
        &'a self,
        token_hash: &'a str,
        now_ms: u64,
    ) -> Deferred<'a, Result<Option<String>, StoreError>> {
        Deferred::pending(async move {
            let key = self.shared.keys.enrolment(token_hash);
            let (actor, expires): (Option<String>, Option<u64>) = self
                .shared
                .link
                .run(|mut conn| async move {
                    redis::cmd("HMGET")
                        .arg(&key)
                        .arg("actor")
                        .arg("expires_at_ms")
                        .query_async(&mut conn)
                        .await
                })
                .await?;
            Ok(actor.filter(|_| expires.is_some_and(|at| now_ms < at)))
        })
    }

    fn take_enrolment<'a>(
        &'a self,
        token_hash: &'a str,
        now_ms: u64,
    ) -> Deferred<'a, Result<Option<String>, StoreError>> {
        Deferred::pending(async move {
            let key = self.shared.keys.enrolment(token_hash);
            self.shared
                .link
                .run(|mut conn| async move {
                    TAKE.key(key).arg(now_ms).invoke_async(&mut conn).await
                })
                .await
        })
    }
}
