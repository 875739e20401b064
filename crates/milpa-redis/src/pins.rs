//! [`RedisPinStore`]: pinned tool and prompt definitions in Redis, shared by every replica
//! on one prefix.

use std::sync::{Arc, LazyLock};

use milpa::approval::pins::{DefinitionKind, PinStore, PinnedDefinition};
use milpa::{Deferred, StoreError};
use redis::Script;

use crate::shared::Shared;

static PIN_FIRST: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/pin_first.lua")));

/// A pin's fields as Redis hands them back: `digest`, `definition`, `pinned_at_ms`, each
/// missing when the hash lacks it.
type Fields = (Option<String>, Option<String>, Option<String>);

/// Pinned definitions in Redis: each pin a hash (`digest`, `definition` as JSON text,
/// `pinned_at_ms`) under a key of its scope, kind and name. `pin_first` is one script
/// (pin unless the key exists, else read the standing pin back), so of replicas pinning one
/// key at once exactly one pins; `repin` is a plain `HSET` over the same fields. No pin
/// expires: a definition stays pinned until a person grants a change.
#[derive(Debug, Clone)]
pub struct RedisPinStore {
    shared: Arc<Shared>,
}

impl RedisPinStore {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        RedisPinStore { shared }
    }
}

/// The pin of one key from its hash's fields: `None` when the hash is not there, corrupt
/// when it is there but not whole or does not parse.
fn pin_from(
    scope: &str,
    kind: DefinitionKind,
    name: &str,
    fields: Fields,
) -> Result<Option<PinnedDefinition>, StoreError> {
    let (digest, definition, pinned_at_ms) = match fields {
        (None, None, None) => return Ok(None),
        (Some(digest), Some(definition), Some(pinned_at_ms)) => (digest, definition, pinned_at_ms),
        _ => {
            return Err(StoreError::corrupt(format!(
                "the pin of {scope}'s {kind} {name} lacks a field"
            )));
        }
    };
    let definition = serde_json::from_str(&definition)
        .map_err(|e| StoreError::corrupt(format!("a pinned definition: {e}")))?;
    let pinned_at_ms = pinned_at_ms
        .parse::<u64>()
        .map_err(|e| StoreError::corrupt(format!("a pin's pinned_at_ms: {e}")))?;
    let mut pin = PinnedDefinition::new(scope, kind, name, definition, pinned_at_ms);
    // The digest taken when it was pinned is the one changes are compared against, even
    // should the JSON not round-trip bit for bit (a float's last digit).
    pin.digest = digest;
    Ok(Some(pin))
}

fn definition_json(pin: &PinnedDefinition) -> Result<String, StoreError> {
    serde_json::to_string(&pin.definition).map_err(StoreError::backend)
}

impl PinStore for RedisPinStore {
    fn get<'a>(
        &'a self,
        scope: &'a str,
        kind: DefinitionKind,
        name: &'a str,
    ) -> Deferred<'a, Result<Option<PinnedDefinition>, StoreError>> {
        Deferred::pending(async move {
            let key = self.shared.keys.pin(scope, kind, name);
            let fields: Fields = self
                .shared
                .link
                .run(|mut conn| async move {
                    redis::cmd("HMGET")
                        .arg(&key)
                        .arg("digest")
                        .arg("definition")
                        .arg("pinned_at_ms")
                        .query_async(&mut conn)
                        .await
                })
                .await?;
            pin_from(scope, kind, name, fields)
        })
    }

    fn pin_first<'a>(
        &'a self,
        pin: PinnedDefinition,
    ) -> Deferred<'a, Result<Option<PinnedDefinition>, StoreError>> {
        Deferred::pending(async move {
            let key = self.shared.keys.pin(&pin.scope, pin.kind, &pin.name);
            let definition = definition_json(&pin)?;
            let (digest, pinned_at_ms) = (&pin.digest, pin.pinned_at_ms);
            let standing: Option<Fields> = self
                .shared
                .link
                .run(|mut conn| async move {
                    PIN_FIRST
                        .key(key)
                        .arg(digest)
                        .arg(definition)
                        .arg(pinned_at_ms)
                        .invoke_async(&mut conn)
                        .await
                })
                .await?;
            match standing {
                None => Ok(None),
                Some(fields) => pin_from(&pin.scope, pin.kind, &pin.name, fields)?
                    .map(Some)
                    .ok_or_else(|| StoreError::corrupt("a standing pin has no fields")),
            }
        })
    }

    fn repin<'a>(&'a self, pin: PinnedDefinition) -> Deferred<'a, Result<(), StoreError>> {
        Deferred::pending(async move {
            let key = self.shared.keys.pin(&pin.scope, pin.kind, &pin.name);
            let definition = definition_json(&pin)?;
            self.shared
                .link
                .run(|mut conn| async move {
                    redis::cmd("HSET")
                        .arg(&key)
                        .arg("digest")
                        .arg(&pin.digest)
                        .arg("definition")
                        .arg(definition)
                        .arg("pinned_at_ms")
                        .arg(pin.pinned_at_ms)
                        .query_async::<()>(&mut conn)
                        .await
                })
                .await
        })
    }
}
