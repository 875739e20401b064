//! Rug-pull protection: the first definition seen of each upstream tool and prompt is
//! pinned in the store ([`milpa::approval::pins`]); a later, different one is neither
//! listed nor callable until a person grants the change through the approvals queue.
//!
//! What a pin covers is what a model reads or a call is checked against: a tool's name,
//! title, description, input and output schemas and annotations; a prompt's name, title,
//! description and arguments. `_meta` is left out (servers put volatile facts there).
//!
//! The flow, each time an upstream's tools or prompts are listed (at start, after a
//! restart, when it says its list changed):
//!
//! 1. A definition never seen is pinned and served.
//! 2. One that matches its pin is served.
//! 3. One that does not is held: the registry opens (and audits, `definition_held`) one
//!    approval per change, the same id however often the change is seen
//!    ([`DefinitionChange::approval_id`]), and a task waits for the decision.
//! 4. When that approval is granted (on the page, or with `milpa approvals grant` in another
//!    process), the upstream's list is read again: the granted definition is pinned and
//!    served, and clients are told the list changed. A rejected change stays held for as
//!    long as the upstream offers that definition.
//!
//! A store that cannot be read fails closed: the definition is not served, and the log says
//! why.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

use milpa::ToolRegistry;
use milpa::approval::pins::{DefinitionKind, PinStore, PinnedDefinition};
use milpa::approval::{ApprovalQueue, ApprovalState, DefinitionChange};
use milpa::confirm::unix_millis;
use parking_lot::Mutex;
use serde_json::{Map, Value};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// How often a held change's waiter re-reads the store for a decision made by another
/// process (decisions in this process wake it at once). A change may wait for days: this
/// keeps the reads rare.
const DECISION_POLL: Duration = Duration::from_secs(2);

/// The pins of every upstream a registry serves: where they are stored, and the registry
/// whose approvals queue holds changes (and whose audit records them).
///
/// ```no_run
/// # fn run(registry: std::sync::Arc<milpa::ToolRegistry>) {
/// use std::sync::Arc;
/// use milpa::approval::pins::InMemoryPinStore;
/// use milpa_gateway::{DefinitionPins, Upstream, UpstreamConfig};
///
/// let pins = DefinitionPins::new(Arc::new(InMemoryPinStore::new()), &registry);
/// let config = UpstreamConfig::stdio("fs", vec!["mcp-server-filesystem".into(), "/srv".into()]);
/// let upstream = Upstream::spawn_pinned(config, &pins);
/// upstream.follow_tool_list(&registry);
/// # }
/// ```
#[derive(Clone)]
pub struct DefinitionPins {
    store: Arc<dyn PinStore>,
    /// Weak: the registry holds the upstream's tools, which hold the upstream.
    registry: Weak<ToolRegistry>,
}

impl std::fmt::Debug for DefinitionPins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DefinitionPins").finish_non_exhaustive()
    }
}

impl DefinitionPins {
    /// Pins kept in `store`, changes held in `registry`'s approvals queue.
    pub fn new(store: Arc<dyn PinStore>, registry: &Arc<ToolRegistry>) -> DefinitionPins {
        DefinitionPins {
            store,
            registry: Arc::downgrade(registry),
        }
    }
}

/// One upstream's pin gate: its scope in the store, and the waiters of its held changes.
pub(crate) struct PinGate {
    pins: DefinitionPins,
    upstream: String,
    scope: String,
    prefix: String,
    /// One waiter per held change, by approval id; aborted with the gate.
    waiters: Mutex<HashMap<String, JoinHandle<()>>>,
    /// What its last lists held back, by kind and the upstream's name: the approval ids.
    held: Mutex<BTreeMap<(DefinitionKind, String), Option<String>>>,
}

/// A tool or prompt of an upstream held back because its definition changed since it was
/// pinned (see [`Upstream::held`](crate::Upstream::held)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HeldDefinition {
    /// A tool or a prompt.
    pub kind: DefinitionKind,
    /// The upstream's name of it.
    pub name: String,
    /// The approval a person decides; `None` when none could be opened (the store did
    /// not answer: it is held all the same).
    pub approval_id: Option<String>,
}

impl Drop for PinGate {
    fn drop(&mut self) {
        for (_, waiter) in self.waiters.lock().drain() {
            waiter.abort();
        }
    }
}

/// What the gate says of one definition.
enum Verdict {
    Serve,
    /// Held, under this approval when one could be opened.
    Hold(Option<String>),
}

impl PinGate {
    /// The gate of the upstream `upstream`, whose names clients see with `prefix`.
    pub(crate) fn new(pins: DefinitionPins, upstream: &str, prefix: String) -> PinGate {
        // Servers sharing one store each keep their own pins.
        let server = pins
            .registry
            .upgrade()
            .and_then(|registry| registry.approvals().server().map(str::to_owned));
        let scope = match server {
            Some(server) => format!("{server}/{upstream}"),
            None => upstream.to_owned(),
        };
        PinGate {
            pins,
            upstream: upstream.to_owned(),
            scope,
            prefix,
            waiters: Mutex::new(HashMap::new()),
            held: Mutex::new(BTreeMap::new()),
        }
    }

    /// `entries` (a list's entries of `kind`) without the ones held; `relist` is told when
    /// a held one is granted. `hidden` says which names an override hides: those are
    /// neither pinned nor held (they are never served).
    pub(crate) async fn admit(
        &self,
        kind: DefinitionKind,
        entries: Vec<Value>,
        hidden: impl Fn(&str) -> bool,
        relist: &Arc<Notify>,
    ) -> Vec<Value> {
        let mut served = Vec::with_capacity(entries.len());
        let mut held = Vec::new();
        let mut seen = HashSet::new();
        for entry in entries {
            let name = match entry.get("name").and_then(Value::as_str) {
                Some(name) if !hidden(name) && seen.insert(name.to_owned()) => name.to_owned(),
                // Nameless entries, and a name's second entry in one list, are skipped (and
                // logged) by the listing itself; a second entry is no change of the first.
                _ => {
                    served.push(entry);
                    continue;
                }
            };
            match self.judge(kind, &name, &entry, relist).await {
                Verdict::Serve => served.push(entry),
                Verdict::Hold(approval) => held.push((name, approval)),
            }
        }
        let mut now_held = self.held.lock();
        now_held.retain(|(held_kind, _), _| *held_kind != kind);
        now_held.extend(
            held.into_iter()
                .map(|(name, approval)| ((kind, name), approval)),
        );
        served
    }

    /// What its last lists held back, tools first, by name.
    pub(crate) fn held(&self) -> Vec<HeldDefinition> {
        self.held
            .lock()
            .iter()
            .map(|((kind, name), approval_id)| HeldDefinition {
                kind: *kind,
                name: name.clone(),
                approval_id: approval_id.clone(),
            })
            .collect()
    }

    async fn judge(
        &self,
        kind: DefinitionKind,
        name: &str,
        entry: &Value,
        relist: &Arc<Notify>,
    ) -> Verdict {
        let upstream = &self.upstream;
        let definition = pinned_fields(kind, entry);
        let pin = PinnedDefinition::new(&self.scope, kind, name, definition, now_ms());
        // A read first: every listing judges every definition, and a pinned one (the usual
        // case) then costs no write (with SQLite, no turn of the writer thread).
        let standing = match self.pins.store.get(&self.scope, kind, name).await {
            Ok(Some(existing)) => Ok(Some(existing)),
            Ok(None) => self.pins.store.pin_first(pin.clone()).await,
            Err(error) => Err(error),
        };
        let existing = match standing {
            Ok(None) => {
                tracing::debug!(target: "milpa::upstream", "upstream '{upstream}': pinned {kind} '{name}'");
                return Verdict::Serve;
            }
            Ok(Some(existing)) if existing.digest == pin.digest => return Verdict::Serve,
            Ok(Some(existing)) => existing,
            Err(error) => {
                tracing::error!(
                    target: "milpa::upstream",
                    "upstream '{upstream}': {kind} '{name}' is not served: its pin could not be read ({error})"
                );
                return Verdict::Hold(None);
            }
        };
        let served_as = format!("{}{name}", self.prefix);
        let change = DefinitionChange::new(&existing, &self.upstream, served_as, pin.definition);
        let Some(registry) = self.pins.registry.upgrade() else {
            return Verdict::Hold(None);
        };
        let (approval, opened) = match registry.hold_definition_change(change.clone()).await {
            Ok(held) => held,
            Err(error) => {
                tracing::error!(
                    target: "milpa::upstream",
                    "upstream '{upstream}': {kind} '{name}' changed and is not served: its approval could not be opened ({error})"
                );
                return Verdict::Hold(None);
            }
        };
        match approval.state(now_ms()) {
            ApprovalState::Granted | ApprovalState::Executed | ApprovalState::Waived => {
                match self.pins.store.repin(change.granted_pin(now_ms())).await {
                    Ok(()) => {
                        let by = approval.decided_by().map_or("", |(who, _)| who);
                        tracing::info!(
                            target: "milpa::upstream",
                                    "upstream '{upstream}': {kind} '{name}': its changed definition was granted by {by} ({}) and is pinned now",
                            approval.id()
                        );
                        Verdict::Serve
                    }
                    Err(error) => {
                        tracing::error!(
                            target: "milpa::upstream",
                                    "upstream '{upstream}': {kind} '{name}': the granted change could not be pinned ({error}); still held"
                        );
                        Verdict::Hold(Some(approval.id().to_owned()))
                    }
                }
            }
            ApprovalState::Rejected => {
                tracing::debug!(
                    target: "milpa::upstream",
                    "upstream '{upstream}': {kind} '{name}': its changed definition was rejected ({}); still held",
                    approval.id()
                );
                Verdict::Hold(Some(approval.id().to_owned()))
            }
            _ => {
                if opened {
                    tracing::warn!(
                        target: "milpa::upstream",
                            "upstream '{upstream}': {kind} '{name}' changed since it was pinned; held until a person approves it: milpa approvals show {}",
                        approval.id()
                    );
                }
                self.wait_for(approval.id(), registry.approvals(), relist);
                Verdict::Hold(Some(approval.id().to_owned()))
            }
        }
    }

    /// Has a task wait for approval `id`'s decision and tell `relist` when it is granted
    /// (at most one task per approval).
    fn wait_for(&self, id: &str, approvals: &Arc<ApprovalQueue>, relist: &Arc<Notify>) {
        let mut waiters = self.waiters.lock();
        waiters.retain(|_, waiter| !waiter.is_finished());
        if waiters.contains_key(id) {
            return;
        }
        let (approvals, relist, key) = (Arc::clone(approvals), Arc::clone(relist), id.to_owned());
        let id = key.clone();
        let waiter = tokio::spawn(async move {
            match approvals
                .wait_for_decision_polling(&id, DECISION_POLL)
                .await
            {
                Ok(approval)
                    if matches!(
                        approval.state(now_ms()),
                        ApprovalState::Granted | ApprovalState::Executed | ApprovalState::Waived
                    ) =>
                {
                    relist.notify_one();
                }
                Ok(_) => {}
                Err(error) => tracing::warn!(
                    target: "milpa::upstream",
                    "waiting for the decision on {id} failed ({error})"
                ),
            }
        });
        waiters.insert(key, waiter);
    }
}

/// The fields of a `kind` list entry that its pin covers, as the upstream sent them.
pub(crate) fn pinned_fields(kind: DefinitionKind, entry: &Value) -> Value {
    let fields: &[&str] = match kind {
        DefinitionKind::Tool => &[
            "name",
            "title",
            "description",
            "inputSchema",
            "outputSchema",
            "annotations",
        ],
        _ => &["name", "title", "description", "arguments"],
    };
    let mut pinned = Map::new();
    for field in fields {
        if let Some(value) = entry.get(*field) {
            pinned.insert((*field).to_owned(), value.clone());
        }
    }
    Value::Object(pinned)
}

fn now_ms() -> u64 {
    unix_millis(SystemTime::now())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_pin_covers_what_a_model_reads_and_not_meta() {
        let tool = json!({
            "name": "read", "title": "Read", "description": "Reads",
            "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true},
            "_meta": {"build": 7}, "icons": []
        });
        assert_eq!(
            pinned_fields(DefinitionKind::Tool, &tool),
            json!({"name": "read", "title": "Read", "description": "Reads",
                   "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}})
        );
        let prompt = json!({"name": "greet", "arguments": [{"name": "who"}], "_meta": {}});
        assert_eq!(
            pinned_fields(DefinitionKind::Prompt, &prompt),
            json!({"name": "greet", "arguments": [{"name": "who"}]})
        );
    }
}
