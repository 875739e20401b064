//! Pinned definitions: what a tool or prompt an upstream server offers looked like the first
//! time milpa saw it, so that a later, different definition (a "rug pull": a description
//! that now tells the model to send secrets somewhere, a schema that now takes a path it
//! did not) is held for a person instead of served.
//!
//! A pin is keyed by a scope (whose definitions: the gateway uses the upstream's name,
//! with its server's name in front when it has one), a [`DefinitionKind`] and the name the
//! upstream gives it. It keeps the SHA-256 of the definition's canonical JSON
//! ([`definition_digest`]) and the definition itself, so a person deciding a change sees
//! what it was.
//!
//! Implementations: [`InMemoryPinStore`] here, SQLite in `milpa-sqlite`, Redis in
//! `milpa-redis`.

use std::collections::HashMap;
use std::fmt;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::deferred::Deferred;
use crate::store_error::StoreError;

/// What a pinned definition defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DefinitionKind {
    /// A tool (`tools/list` entry).
    Tool,
    /// A prompt (`prompts/list` entry).
    Prompt,
}

impl DefinitionKind {
    /// The wire name, `tool` or `prompt`.
    pub fn as_str(self) -> &'static str {
        match self {
            DefinitionKind::Tool => "tool",
            DefinitionKind::Prompt => "prompt",
        }
    }

    /// Parses `tool` or `prompt`.
    pub fn parse(text: &str) -> Option<DefinitionKind> {
        match text {
            "tool" => Some(DefinitionKind::Tool),
            "prompt" => Some(DefinitionKind::Prompt),
            _ => None,
        }
    }
}

impl fmt::Display for DefinitionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One pinned definition.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PinnedDefinition {
    /// Whose definitions (see the module docs).
    pub scope: String,
    /// A tool or a prompt.
    pub kind: DefinitionKind,
    /// The name the upstream gives it.
    pub name: String,
    /// [`definition_digest`] of `definition`.
    pub digest: String,
    /// The definition as it was pinned (the fields a digest covers).
    pub definition: Value,
    /// When it was pinned, Unix milliseconds.
    pub pinned_at_ms: u64,
}

impl PinnedDefinition {
    /// A pin of `definition` (its digest computed here).
    pub fn new(
        scope: impl Into<String>,
        kind: DefinitionKind,
        name: impl Into<String>,
        definition: Value,
        pinned_at_ms: u64,
    ) -> PinnedDefinition {
        PinnedDefinition {
            scope: scope.into(),
            kind,
            name: name.into(),
            digest: definition_digest(&definition),
            definition,
            pinned_at_ms,
        }
    }
}

/// The SHA-256 (hex) of `definition`'s canonical JSON: [`sorted_keys`], written without
/// whitespace. Upstreams may list the same definition with its keys in another order
/// (`serde_json` keeps the order it read), which must not read as a change.
pub fn definition_digest(definition: &Value) -> String {
    let canonical = serde_json::to_string(&sorted_keys(definition)).unwrap_or_default();
    hex::encode(Sha256::digest(canonical.as_bytes()))
}

/// `value` with the keys of every object in it sorted (arrays keep their order): the form
/// a definition is hashed in ([`definition_digest`]) and compared in for people (the diff
/// of a held change), so that both agree on what changed.
pub fn sorted_keys(value: &Value) -> Value {
    match value {
        Value::Object(fields) => {
            let mut entries: Vec<(&String, &Value)> = fields.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(key, value)| (key.clone(), sorted_keys(value)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted_keys).collect()),
        scalar => scalar.clone(),
    }
}

/// Where pinned definitions live.
pub trait PinStore: Send + Sync + 'static {
    /// The pin of `scope`'s `kind` named `name`, if there is one.
    fn get<'a>(
        &'a self,
        scope: &'a str,
        kind: DefinitionKind,
        name: &'a str,
    ) -> Deferred<'a, Result<Option<PinnedDefinition>, StoreError>>;

    /// Pins `pin` unless its key is pinned already: `Ok(None)` when it was pinned now,
    /// `Ok(Some(existing))` (and nothing changes) otherwise. Atomic: of two processes
    /// pinning one key at once, one pins and the other gets its pin back.
    fn pin_first<'a>(
        &'a self,
        pin: PinnedDefinition,
    ) -> Deferred<'a, Result<Option<PinnedDefinition>, StoreError>>;

    /// Replaces the pin under `pin`'s key (a person granted the change), or adds it.
    fn repin<'a>(&'a self, pin: PinnedDefinition) -> Deferred<'a, Result<(), StoreError>>;
}

type PinKey = (String, DefinitionKind, String);

/// A [`PinStore`] in this process's memory: every definition is new again after a
/// restart.
#[derive(Debug, Default)]
pub struct InMemoryPinStore {
    pins: Mutex<HashMap<PinKey, PinnedDefinition>>,
}

impl InMemoryPinStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}

fn key_of(pin: &PinnedDefinition) -> PinKey {
    (pin.scope.clone(), pin.kind, pin.name.clone())
}

impl PinStore for InMemoryPinStore {
    fn get<'a>(
        &'a self,
        scope: &'a str,
        kind: DefinitionKind,
        name: &'a str,
    ) -> Deferred<'a, Result<Option<PinnedDefinition>, StoreError>> {
        let key = (scope.to_owned(), kind, name.to_owned());
        Deferred::ready(Ok(self.pins.lock().get(&key).cloned()))
    }

    fn pin_first<'a>(
        &'a self,
        pin: PinnedDefinition,
    ) -> Deferred<'a, Result<Option<PinnedDefinition>, StoreError>> {
        let mut pins = self.pins.lock();
        let existing = match pins.entry(key_of(&pin)) {
            std::collections::hash_map::Entry::Occupied(existing) => Some(existing.get().clone()),
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(pin);
                None
            }
        };
        Deferred::ready(Ok(existing))
    }

    fn repin<'a>(&'a self, pin: PinnedDefinition) -> Deferred<'a, Result<(), StoreError>> {
        self.pins.lock().insert(key_of(&pin), pin);
        Deferred::ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_digest_ignores_key_order_and_whitespace_but_not_values() {
        let a: Value = serde_json::from_str(
            r#"{"name":"t","inputSchema":{"type":"object","b":1,"a":[2,{"y":1,"x":2}]}}"#,
        )
        .unwrap();
        let b: Value = serde_json::from_str(
            r#"{ "inputSchema": {"a": [2, {"x": 2, "y": 1}], "b": 1, "type": "object"}, "name": "t" }"#,
        )
        .unwrap();
        assert_eq!(definition_digest(&a), definition_digest(&b));
        let c = json!({"name": "t", "inputSchema": {"type": "object", "b": 2, "a": [2, {"x": 2, "y": 1}]}});
        assert_ne!(definition_digest(&a), definition_digest(&c));
        // Arrays keep their order: it can matter (`required`, enum order shown to a model).
        let d = json!({"name": "t", "inputSchema": {"type": "object", "b": 1, "a": [{"x": 2, "y": 1}, 2]}});
        assert_ne!(definition_digest(&a), definition_digest(&d));
        // Keys and strings are escaped, so a key cannot forge structure.
        assert_ne!(
            definition_digest(&json!({"a\":1,\"b": 2})),
            definition_digest(&json!({"a": 1, "b": 2}))
        );
        assert_eq!(definition_digest(&a).len(), 64);
    }

    #[tokio::test]
    async fn the_first_pin_stands_until_repinned() {
        let store = InMemoryPinStore::new();
        let first = PinnedDefinition::new("fs", DefinitionKind::Tool, "read", json!({"d": 1}), 1);
        assert_eq!(store.pin_first(first.clone()).await.unwrap(), None);
        let second = PinnedDefinition::new("fs", DefinitionKind::Tool, "read", json!({"d": 2}), 2);
        assert_eq!(
            store.pin_first(second.clone()).await.unwrap(),
            Some(first.clone())
        );
        assert_eq!(
            store.get("fs", DefinitionKind::Tool, "read").await.unwrap(),
            Some(first)
        );
        // Kinds and scopes are separate keys.
        assert_eq!(
            store
                .get("fs", DefinitionKind::Prompt, "read")
                .await
                .unwrap(),
            None
        );
        assert_eq!(
            store
                .get("git", DefinitionKind::Tool, "read")
                .await
                .unwrap(),
            None
        );
        store.repin(second.clone()).await.unwrap();
        assert_eq!(
            store.get("fs", DefinitionKind::Tool, "read").await.unwrap(),
            Some(second)
        );
    }
}
