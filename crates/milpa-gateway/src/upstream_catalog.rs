//! An upstream's resources and prompts, served as ours through the registry's catalog
//! (see [`milpa::catalog`]): every read, prompt and completion runs the registry's gates
//! (channel policy, rules, the call policy such as Cedar, rate limits, audit) before it is
//! forwarded as `resources/read`, `prompts/get` or `completion/complete`.
//!
//! - The lists are discovered when the upstream starts (only what it declared at
//!   `initialize`), again when it says they changed (`notifications/resources/list_changed`,
//!   `notifications/prompts/list_changed`) and after each restart.
//! - Resource URIs are never rewritten. Prompt names take the upstream's tool prefix (none in
//!   front of a single server), so two upstreams' prompts do not collide. Everything else
//!   an entry says is listed as the upstream gave it, `annotations`, `icons` and `_meta`
//!   included (one of them that is not an object, or an icon that is not, is left out).
//! - A URI, template or prompt name another provider of the registry serves already (a
//!   local one, or an upstream that listed it first) is left out with an error in the log;
//!   the first keeps it.
//! - A client's `resources/subscribe` of one of its URIs is asked of the upstream once per
//!   session with it (again after a restart); its `notifications/resources/updated` of a URI
//!   it serves reaches the subscribed clients.
//! - An entry the upstream lists in a shape we cannot read (no URI, a template that does
//!   not parse) is left out with a warning; a list it fails to give is empty until the next
//!   discovery.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Weak};

use milpa::approval::pins::DefinitionKind;
use milpa::catalog::{
    CatalogError, CatalogNotifier, CatalogSnapshot, Prompt, PromptArgument, PromptContent,
    PromptMessage, PromptProvider, PromptReply, Resource, ResourceContents, ResourceProvider,
    ResourceTemplate, Role,
};
use milpa::{Deferred, ToolContext, ToolRegistry};
use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::sync::Notify;

use crate::config::{CatalogOverride, DEFAULT_CALL_TIMEOUT, UpstreamConfig, catalog_override_for};
use crate::connection::{CallError, CatalogListener, Connection};
use crate::pinning::PinGate;
use crate::upstream_link::UpstreamLink;

/// JSON-RPC codes an upstream answers an unknown resource with: `-32002` up to 2025-11-25,
/// `-32602` ("invalid params") from 2026-07-28.
const RESOURCE_NOT_FOUND: [i64; 2] = [-32002, -32602];

/// What the upstream declared it serves besides tools, at `initialize`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Offers {
    logging: bool,
    resources: bool,
    subscribe: bool,
    prompts: bool,
    completions: bool,
    /// Which of its lists it announces changes of (`listChanged`): tools, resources,
    /// prompts.
    list_changes: [bool; 3],
}

impl Offers {
    /// Read from the `capabilities` of its `initialize` answer (absent or malformed
    /// capabilities offer nothing).
    pub(crate) fn from_capabilities(capabilities: Option<&Value>) -> Offers {
        #[derive(Deserialize, Default)]
        struct Capabilities {
            logging: Option<Value>,
            tools: Option<ListCapability>,
            resources: Option<ResourcesCapability>,
            prompts: Option<ListCapability>,
            completions: Option<Value>,
        }
        #[derive(Deserialize, Default)]
        #[serde(rename_all = "camelCase")]
        struct ResourcesCapability {
            #[serde(default)]
            subscribe: bool,
            #[serde(default)]
            list_changed: bool,
        }
        #[derive(Deserialize, Default)]
        #[serde(rename_all = "camelCase")]
        struct ListCapability {
            #[serde(default)]
            list_changed: bool,
        }
        let declared: Capabilities = capabilities
            .and_then(|value| Capabilities::deserialize(value).ok())
            .unwrap_or_default();
        Offers {
            logging: declared.logging.is_some_and(|l| !l.is_null()),
            resources: declared.resources.is_some(),
            subscribe: declared.resources.as_ref().is_some_and(|r| r.subscribe),
            prompts: declared.prompts.is_some(),
            completions: declared.completions.is_some_and(|c| !c.is_null()),
            list_changes: [
                declared.tools.as_ref().is_some_and(|t| t.list_changed),
                declared.resources.as_ref().is_some_and(|r| r.list_changed),
                declared.prompts.as_ref().is_some_and(|p| p.list_changed),
            ],
        }
    }

    /// Whether it tells of a resource's updates (`resources/subscribe`, or in 2026-07-28
    /// `resourceSubscriptions` in `subscriptions/listen`).
    pub(crate) fn subscribe(&self) -> bool {
        self.subscribe
    }

    /// The filter of a `subscriptions/listen` for every list whose changes it announces
    /// (empty when none).
    pub(crate) fn list_changes(&self) -> Map<String, Value> {
        [
            "toolsListChanged",
            "resourcesListChanged",
            "promptsListChanged",
        ]
        .into_iter()
        .zip(self.list_changes)
        .filter(|(_, announced)| *announced)
        .map(|(key, _)| (key.to_owned(), Value::Bool(true)))
        .collect()
    }

    /// Whether it takes `logging/setLevel`.
    pub(crate) fn logging(&self) -> bool {
        self.logging
    }
}

/// The upstream's lists as we serve them.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct CatalogLists {
    resources: Vec<Resource>,
    templates: Vec<ResourceTemplate>,
    prompts: Vec<Prompt>,
    /// Our name of each prompt, and the upstream's.
    remote_prompts: HashMap<String, String>,
}

impl CatalogLists {
    /// Whether `uri` is one of these resources, or one of these templates matches it.
    fn serves(&self, uri: &str) -> bool {
        self.resources.iter().any(|r| r.uri() == uri)
            || self
                .templates
                .iter()
                .any(|t| t.template().match_uri(uri).is_some())
    }

    /// These lists without what another provider of `others` serves (`mine` are the lists
    /// served until now, which are ours) or what comes twice; each left out is logged.
    fn without_taken(self, others: &CatalogSnapshot, mine: &CatalogLists, upstream: &str) -> Self {
        let taken_uris: HashSet<&str> = others
            .resources()
            .map(Resource::uri)
            .filter(|uri| !mine.resources.iter().any(|r| r.uri() == *uri))
            .collect();
        let taken_templates: HashSet<&str> = others
            .templates()
            .map(|t| t.template().as_str())
            .filter(|text| {
                !mine
                    .templates
                    .iter()
                    .any(|t| t.template().as_str() == *text)
            })
            .collect();
        let taken_prompts: HashSet<&str> = others
            .prompts()
            .map(Prompt::name)
            .filter(|name| !mine.prompts.iter().any(|p| p.name() == *name))
            .collect();
        let refused = |what: &str, name: &str| {
            tracing::error!(
                target: "milpa::upstream",
                upstream,
                "its {what} '{name}' is served already (by a local provider or another upstream); left out"
            );
        };
        let mut seen = HashSet::new();
        let resources = self
            .resources
            .into_iter()
            .filter(|r| {
                let free = !taken_uris.contains(r.uri()) && seen.insert(r.uri().to_owned());
                if !free {
                    refused("resource", r.uri());
                }
                free
            })
            .collect();
        let mut seen = HashSet::new();
        let templates = self
            .templates
            .into_iter()
            .filter(|t| {
                let text = t.template().as_str();
                let free = !taken_templates.contains(text) && seen.insert(text.to_owned());
                if !free {
                    refused("resource template", text);
                }
                free
            })
            .collect();
        let mut seen = HashSet::new();
        let prompts: Vec<Prompt> = self
            .prompts
            .into_iter()
            .filter(|p| {
                let free = !taken_prompts.contains(p.name()) && seen.insert(p.name().to_owned());
                if !free {
                    refused("prompt", p.name());
                }
                free
            })
            .collect();
        let mut remote_prompts = self.remote_prompts;
        remote_prompts.retain(|ours, _| prompts.iter().any(|p| p.name() == ours));
        CatalogLists {
            resources,
            templates,
            prompts,
            remote_prompts,
        }
    }
}

/// One publication at a time, across every upstream of the process: what one leaves out
/// depends on what the others serve.
static PUBLISHING: Mutex<()> = parking_lot::const_mutex(());

/// An upstream's resources and prompts: its lists, the upstream they are asked of, and
/// where their news goes.
pub(crate) struct UpstreamCatalog {
    upstream: Arc<str>,
    /// The upstream itself, for its session now (weak: the upstream holds its catalog).
    link: Weak<dyn UpstreamLink>,
    /// Put in front of its prompt names.
    prefix: String,
    /// By glob over its URIs and template texts: hidden, or scoped.
    resource_overrides: Vec<(String, CatalogOverride)>,
    /// By glob over its prompt names.
    prompt_overrides: Vec<(String, CatalogOverride)>,
    offers: Mutex<Offers>,
    lists: Mutex<CatalogLists>,
    /// Told when it says its lists changed (or a held prompt was granted).
    pub(crate) changed: Arc<Notify>,
    /// Its pin gate, when its prompts are pinned (see [`crate::pinning`]).
    pins: Option<Arc<PinGate>>,
    /// The registry it is served in: where its lists are announced.
    registry: Mutex<Option<Weak<ToolRegistry>>>,
    notifier: Mutex<Option<CatalogNotifier>>,
    /// The URIs clients subscribed to: asked of every new session with it.
    watched: Mutex<HashSet<String>>,
}

impl UpstreamCatalog {
    pub(crate) fn new(
        config: &UpstreamConfig,
        link: Weak<dyn UpstreamLink>,
        pins: Option<Arc<PinGate>>,
    ) -> UpstreamCatalog {
        UpstreamCatalog {
            upstream: Arc::from(config.name.as_str()),
            link,
            prefix: config.prefix(),
            resource_overrides: config.resource_overrides.clone(),
            prompt_overrides: config.prompt_overrides.clone(),
            offers: Mutex::default(),
            lists: Mutex::default(),
            changed: Arc::new(Notify::new()),
            pins,
            registry: Mutex::new(None),
            notifier: Mutex::new(None),
            watched: Mutex::default(),
        }
    }

    /// The upstream started a session on `connection`, declaring `offers` at `initialize`:
    /// the session is asked for every subscribed URI again.
    pub(crate) fn started(&self, connection: &Arc<Connection>, offers: Offers) {
        *self.offers.lock() = offers;
        let uris: Vec<String> = self.watched.lock().iter().cloned().collect();
        if offers.subscribe && !uris.is_empty() {
            let (connection, upstream) = (Arc::clone(connection), Arc::clone(&self.upstream));
            tokio::spawn(async move {
                for uri in uris {
                    subscribe(&connection, &upstream, &uri).await;
                }
            });
        }
    }

    /// What it declared at `initialize` (of its current session).
    pub(crate) fn offers(&self) -> Offers {
        *self.offers.lock()
    }

    /// Its lists as `connection` gives them now (what `offers` says it serves), overrides
    /// applied (hidden ones left out, scopes set); a list it fails to give is empty, with a
    /// warning.
    pub(crate) async fn discover(&self, connection: &Connection, offers: Offers) -> CatalogLists {
        let mut lists = CatalogLists::default();
        if offers.resources {
            for entry in self.listed(connection, "resources/list", "resources").await {
                match resource_of(entry) {
                    Ok(resource) => {
                        let over = catalog_override_for(&self.resource_overrides, resource.uri());
                        if over.hide != Some(true) {
                            lists.resources.push(
                                resource
                                    .with_scopes(over.scopes.unwrap_or_default())
                                    .with_human_approval(over.human_approval == Some(true)),
                            );
                        }
                    }
                    Err(why) => self.skipped("resource", &why),
                }
            }
            let templates = self
                .listed(connection, "resources/templates/list", "resourceTemplates")
                .await;
            for entry in templates {
                match template_of(entry) {
                    Ok(template) => {
                        let text = template.template().as_str().to_owned();
                        let over = catalog_override_for(&self.resource_overrides, &text);
                        if over.hide != Some(true) {
                            lists.templates.push(
                                template
                                    .with_scopes(over.scopes.unwrap_or_default())
                                    .with_human_approval(over.human_approval == Some(true)),
                            );
                        }
                    }
                    Err(why) => self.skipped("resource template", &why),
                }
            }
        }
        if offers.prompts {
            let mut entries = self.listed(connection, "prompts/list", "prompts").await;
            if let Some(gate) = &self.pins {
                let hidden = |name: &str| {
                    catalog_override_for(&self.prompt_overrides, name).hide == Some(true)
                };
                entries = gate
                    .admit(DefinitionKind::Prompt, entries, hidden, &self.changed)
                    .await;
            }
            for entry in entries {
                match prompt_of(entry, &self.prefix) {
                    Ok((prompt, remote)) => {
                        let over = catalog_override_for(&self.prompt_overrides, &remote);
                        if over.hide != Some(true) {
                            let prompt = prompt
                                .with_scopes(over.scopes.unwrap_or_default())
                                .with_human_approval(over.human_approval == Some(true));
                            lists
                                .remote_prompts
                                .insert(prompt.name().to_owned(), remote);
                            lists.prompts.push(prompt);
                        }
                    }
                    Err(why) => self.skipped("prompt", &why),
                }
            }
        }
        lists
    }

    async fn listed(&self, connection: &Connection, method: &str, key: &str) -> Vec<Value> {
        match connection.list_all(method, key).await {
            Ok(entries) => entries,
            Err(error) => {
                tracing::warn!(
                    target: "milpa::upstream",
                    upstream = %self.upstream,
                    "{method} failed ({error}); served as empty"
                );
                Vec::new()
            }
        }
    }

    fn skipped(&self, what: &str, why: &str) {
        tracing::warn!(
            target: "milpa::upstream",
            upstream = %self.upstream,
            "a listed {what} was left out: {why}"
        );
    }

    /// Takes `lists` as its lists, without what others serve already, and announces them
    /// in the registry it is served in (when they changed).
    pub(crate) fn publish(&self, lists: CatalogLists) {
        let _one = PUBLISHING.lock();
        let registry = self.registry.lock().as_ref().and_then(Weak::upgrade);
        let Some(registry) = registry else {
            *self.lists.lock() = lists;
            return;
        };
        let mine = self.lists.lock().clone();
        let kept = lists.without_taken(&registry.catalog_snapshot(), &mine, &self.upstream);
        if kept == mine {
            return;
        }
        *self.lists.lock() = kept;
        if let Err(error) = registry.refresh_catalog() {
            tracing::error!(
                target: "milpa::upstream",
                upstream = %self.upstream,
                "its resources and prompts could not be served: {error}"
            );
        }
    }

    /// Serves its resources and prompts from `registry` (once per registry): the lists it
    /// has now, then every later one.
    pub(crate) fn serve_in(self: &Arc<Self>, registry: &Arc<ToolRegistry>) {
        let lists = {
            let mut followed = self.registry.lock();
            if followed
                .as_ref()
                .is_some_and(|weak| weak.ptr_eq(&Arc::downgrade(registry)))
            {
                return;
            }
            *followed = Some(Arc::downgrade(registry));
            *self.notifier.lock() = Some(registry.catalog_notifier());
            std::mem::take(&mut *self.lists.lock())
        };
        // Attached empty (nothing of it can collide), then its lists published, filtered.
        let weak = Arc::downgrade(self);
        let attached = registry
            .attach_resources(Arc::new(UpstreamResources(weak.clone())))
            .and_then(|()| registry.attach_prompts(Arc::new(UpstreamPrompts(weak))));
        if let Err(error) = attached {
            tracing::error!(
                target: "milpa::upstream",
                upstream = %self.upstream,
                "its resources and prompts could not be served: {error}"
            );
        }
        self.publish(lists);
    }

    /// The upstream's session now, or why there is none (it is down, or gone).
    fn connection(&self) -> Result<Arc<Connection>, CallError> {
        match self.link.upgrade() {
            Some(upstream) => upstream.connection(),
            None => Err(CallError::unavailable(format!(
                "upstream '{}' is gone",
                self.upstream
            ))),
        }
    }

    /// Asks the upstream `method` with `params`, within the default call timeout.
    async fn ask(&self, method: &str, params: Value) -> Result<Value, CallError> {
        let connection = self.connection()?;
        match tokio::time::timeout(
            DEFAULT_CALL_TIMEOUT,
            connection.request(method, params, None),
        )
        .await
        {
            Ok(answer) => answer,
            Err(_) => Err(CallError::unavailable(format!(
                "{method} got no answer within {} s",
                DEFAULT_CALL_TIMEOUT.as_secs()
            ))),
        }
    }

    /// What a failed request is for the caller: `uri` (or the prompt) not found when the
    /// upstream says so, else a failure naming the upstream (the error kept as its cause).
    fn failure(&self, what: &str, error: CallError) -> CatalogError {
        match error {
            CallError::Rpc { code, .. } if RESOURCE_NOT_FOUND.contains(&code) => {
                CatalogError::NotFound(what.to_owned())
            }
            error => CatalogError::Failed {
                message: format!(
                    "upstream '{}' could not serve {what}: {error}",
                    self.upstream
                ),
                source: Some(Box::new(error)),
            },
        }
    }

    /// Suggestions the upstream gives for `reference`'s `argument`; none when it does not
    /// complete, or fails to (logged).
    async fn complete(&self, reference: Value, argument: &str, value: &str) -> Vec<String> {
        #[derive(Deserialize)]
        struct Answer {
            completion: Suggestions,
        }
        #[derive(Deserialize)]
        struct Suggestions {
            values: Vec<String>,
        }
        if !self.offers.lock().completions {
            return Vec::new();
        }
        let params = json!({"ref": reference, "argument": {"name": argument, "value": value}});
        let answer = self
            .ask("completion/complete", params)
            .await
            .and_then(|answer| {
                Answer::deserialize(answer)
                    .map_err(|e| CallError::unavailable(format!("an unreadable completion: {e}")))
            });
        match answer {
            Ok(answer) => answer.completion.values,
            Err(error) => {
                tracing::debug!(
                    target: "milpa::upstream",
                    upstream = %self.upstream,
                    "completion/complete failed: {error}"
                );
                Vec::new()
            }
        }
    }
}

impl CatalogListener for UpstreamCatalog {
    fn lists_changed(&self) {
        self.changed.notify_one();
    }

    fn updated(&self, uri: &str) {
        // Only news of what it serves: an upstream does not speak for another's URIs.
        if self.lists.lock().serves(uri)
            && let Some(notifier) = self.notifier.lock().as_ref()
        {
            notifier.updated(uri);
        }
    }
}

/// Asks the upstream to tell of `uri`'s updates (2026-07-28: through its
/// `subscriptions/listen`); a refusal is logged.
async fn subscribe(connection: &Connection, upstream: &str, uri: &str) {
    if connection.is_stateless() {
        connection.subscribe_resource(uri);
        return;
    }
    let asked = tokio::time::timeout(
        DEFAULT_CALL_TIMEOUT,
        connection.request("resources/subscribe", json!({"uri": uri}), None),
    )
    .await;
    if let Ok(Err(error)) = asked {
        tracing::warn!(target: "milpa::upstream", upstream, uri, "resources/subscribe failed: {error}");
    }
}

/// The upstream's resources as a provider of the registry.
struct UpstreamResources(Weak<UpstreamCatalog>);

impl ResourceProvider for UpstreamResources {
    fn resources(&self) -> Vec<Resource> {
        self.0
            .upgrade()
            .map(|catalog| catalog.lists.lock().resources.clone())
            .unwrap_or_default()
    }

    fn templates(&self) -> Vec<ResourceTemplate> {
        self.0
            .upgrade()
            .map(|catalog| catalog.lists.lock().templates.clone())
            .unwrap_or_default()
    }

    fn read<'a>(
        &'a self,
        uri: &'a str,
        _ctx: &'a ToolContext,
    ) -> Deferred<'a, Result<Vec<ResourceContents>, CatalogError>> {
        Deferred::pending(async move {
            let catalog = self.0.upgrade().ok_or_else(gone)?;
            let answer = catalog
                .ask("resources/read", json!({"uri": uri}))
                .await
                .map_err(|error| catalog.failure(uri, error))?;
            contents_of(answer).map_err(|why| unreadable(&catalog.upstream, "resources/read", why))
        })
    }

    fn complete<'a>(
        &'a self,
        template: &'a str,
        argument: &'a str,
        value: &'a str,
    ) -> Deferred<'a, Vec<String>> {
        Deferred::pending(async move {
            match self.0.upgrade() {
                Some(catalog) => {
                    let reference = json!({"type": "ref/resource", "uri": template});
                    catalog.complete(reference, argument, value).await
                }
                None => Vec::new(),
            }
        })
    }

    fn subscribed(&self, uri: &str) {
        let Some(catalog) = self.0.upgrade() else {
            return;
        };
        if !catalog.watched.lock().insert(uri.to_owned()) || !catalog.offers.lock().subscribe {
            return;
        }
        let (Ok(connection), Ok(runtime)) =
            (catalog.connection(), tokio::runtime::Handle::try_current())
        else {
            // Asked when it next starts (see `started`).
            return;
        };
        let (upstream, uri) = (Arc::clone(&catalog.upstream), uri.to_owned());
        runtime.spawn(async move { subscribe(&connection, &upstream, &uri).await });
    }
}

/// The upstream's prompts as a provider of the registry.
struct UpstreamPrompts(Weak<UpstreamCatalog>);

impl PromptProvider for UpstreamPrompts {
    fn prompts(&self) -> Vec<Prompt> {
        self.0
            .upgrade()
            .map(|catalog| catalog.lists.lock().prompts.clone())
            .unwrap_or_default()
    }

    fn get<'a>(
        &'a self,
        name: &'a str,
        arguments: &'a BTreeMap<String, String>,
        _ctx: &'a ToolContext,
    ) -> Deferred<'a, Result<PromptReply, CatalogError>> {
        Deferred::pending(async move {
            let catalog = self.0.upgrade().ok_or_else(gone)?;
            let remote = catalog.lists.lock().remote_prompts.get(name).cloned();
            let remote = remote.ok_or_else(|| CatalogError::NotFound(name.to_owned()))?;
            let answer = catalog
                .ask(
                    "prompts/get",
                    json!({"name": remote, "arguments": arguments}),
                )
                .await
                .map_err(|error| catalog.failure(name, error))?;
            reply_of(answer).map_err(|why| unreadable(&catalog.upstream, "prompts/get", why))
        })
    }

    fn complete<'a>(
        &'a self,
        name: &'a str,
        argument: &'a str,
        value: &'a str,
    ) -> Deferred<'a, Vec<String>> {
        Deferred::pending(async move {
            let Some(catalog) = self.0.upgrade() else {
                return Vec::new();
            };
            let remote = catalog.lists.lock().remote_prompts.get(name).cloned();
            match remote {
                Some(remote) => {
                    let reference = json!({"type": "ref/prompt", "name": remote});
                    catalog.complete(reference, argument, value).await
                }
                None => Vec::new(),
            }
        })
    }
}

/// The upstream is gone (its [`Upstream`](crate::Upstream) was dropped).
fn gone() -> CatalogError {
    CatalogError::failed("the upstream server is gone")
}

/// The upstream answered `method` with something we cannot read.
fn unreadable(upstream: &str, method: &str, why: serde_json::Error) -> CatalogError {
    CatalogError::Failed {
        message: format!(
            "upstream '{upstream}' answered {method} with an unreadable result: {why}"
        ),
        source: Some(Box::new(why)),
    }
}

/// What an entry carries for the client besides its names, kept as the upstream gave it:
/// `annotations` and `_meta` when they are objects, the `icons` that are objects. Anything
/// else in their place is ignored, not an error.
#[derive(Deserialize, Default)]
struct WireGiven {
    #[serde(default, deserialize_with = "object_or_none")]
    annotations: Option<Map<String, Value>>,
    #[serde(default, deserialize_with = "objects_or_none")]
    icons: Vec<Value>,
    #[serde(default, rename = "_meta", deserialize_with = "object_or_none")]
    meta: Option<Map<String, Value>>,
}

fn object_or_none<'de, D>(deserializer: D) -> Result<Option<Map<String, Value>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    Ok(match Value::deserialize(deserializer)? {
        Value::Object(map) => Some(map),
        _ => None,
    })
}

fn objects_or_none<'de, D>(deserializer: D) -> Result<Vec<Value>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    Ok(match Value::deserialize(deserializer)? {
        Value::Array(items) => items.into_iter().filter(Value::is_object).collect(),
        _ => Vec::new(),
    })
}

/// A `resources/list` entry as the upstream sends it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireResource {
    uri: String,
    name: Option<String>,
    title: Option<String>,
    description: Option<String>,
    mime_type: Option<String>,
    size: Option<u64>,
    #[serde(flatten)]
    given: WireGiven,
}

fn resource_of(entry: Value) -> Result<Resource, String> {
    let wire = WireResource::deserialize(entry).map_err(|e| e.to_string())?;
    let mut resource = Resource::new(wire.uri.as_str(), wire.name.unwrap_or(wire.uri.clone()));
    if let Some(title) = wire.title {
        resource = resource.with_title(title);
    }
    if let Some(description) = wire.description {
        resource = resource.with_description(description);
    }
    if let Some(mime_type) = wire.mime_type {
        resource = resource.with_mime_type(mime_type);
    }
    if let Some(size) = wire.size {
        resource = resource.with_size(size);
    }
    let WireGiven {
        annotations,
        icons,
        meta,
    } = wire.given;
    if let Some(annotations) = annotations {
        resource = resource.with_annotations(annotations);
    }
    if let Some(meta) = meta {
        resource = resource.with_meta(meta);
    }
    Ok(resource.with_icons(icons))
}

/// A `resources/templates/list` entry as the upstream sends it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireTemplate {
    uri_template: String,
    name: Option<String>,
    title: Option<String>,
    description: Option<String>,
    mime_type: Option<String>,
    #[serde(flatten)]
    given: WireGiven,
}

fn template_of(entry: Value) -> Result<ResourceTemplate, String> {
    let wire = WireTemplate::deserialize(entry).map_err(|e| e.to_string())?;
    let name = wire.name.unwrap_or_else(|| wire.uri_template.clone());
    let mut template = ResourceTemplate::new(&wire.uri_template, name)
        .map_err(|e| format!("{}: {e}", wire.uri_template))?;
    if let Some(title) = wire.title {
        template = template.with_title(title);
    }
    if let Some(description) = wire.description {
        template = template.with_description(description);
    }
    if let Some(mime_type) = wire.mime_type {
        template = template.with_mime_type(mime_type);
    }
    let WireGiven {
        annotations,
        icons,
        meta,
    } = wire.given;
    if let Some(annotations) = annotations {
        template = template.with_annotations(annotations);
    }
    if let Some(meta) = meta {
        template = template.with_meta(meta);
    }
    Ok(template.with_icons(icons))
}

/// A `prompts/list` entry as the upstream sends it.
#[derive(Deserialize)]
struct WirePrompt {
    name: String,
    title: Option<String>,
    description: Option<String>,
    #[serde(default)]
    arguments: Vec<WireArgument>,
    /// Prompts have no `annotations` in MCP: whatever comes under that name is ignored.
    #[serde(flatten)]
    given: WireGiven,
}

#[derive(Deserialize)]
struct WireArgument {
    name: String,
    title: Option<String>,
    description: Option<String>,
    #[serde(default)]
    required: bool,
}

/// The prompt under our name (`prefix` in front), and the upstream's name of it.
fn prompt_of(entry: Value, prefix: &str) -> Result<(Prompt, String), String> {
    let wire = WirePrompt::deserialize(entry).map_err(|e| e.to_string())?;
    let mut prompt = Prompt::new(
        format!("{prefix}{}", wire.name),
        wire.description.unwrap_or_default(),
    );
    if let Some(title) = wire.title {
        prompt = prompt.with_title(title);
    }
    for argument in wire.arguments {
        let mut ours = if argument.required {
            PromptArgument::required(argument.name)
        } else {
            PromptArgument::optional(argument.name)
        };
        if let Some(title) = argument.title {
            ours = ours.with_title(title);
        }
        if let Some(description) = argument.description {
            ours = ours.with_description(description);
        }
        prompt = prompt.with_argument(ours);
    }
    if let Some(meta) = wire.given.meta {
        prompt = prompt.with_meta(meta);
    }
    Ok((prompt.with_icons(wire.given.icons), wire.name))
}

/// One piece of a read, or of a prompt's embedded resource, as the upstream sends it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireContents {
    uri: String,
    mime_type: Option<String>,
    text: Option<String>,
    blob: Option<String>,
}

impl WireContents {
    fn into_contents(self) -> Result<ResourceContents, serde_json::Error> {
        match (self.text, self.blob) {
            (Some(text), None) => Ok(ResourceContents::Text {
                uri: self.uri,
                mime_type: self.mime_type,
                text,
            }),
            (None, Some(blob)) => Ok(ResourceContents::Blob {
                uri: self.uri,
                mime_type: self.mime_type,
                blob,
            }),
            _ => Err(serde::de::Error::custom(format!(
                "the contents of {} have neither text nor blob, or both",
                self.uri
            ))),
        }
    }
}

/// The contents of a `resources/read` answer.
fn contents_of(answer: Value) -> Result<Vec<ResourceContents>, serde_json::Error> {
    #[derive(Deserialize)]
    struct Read {
        contents: Vec<WireContents>,
    }
    Read::deserialize(answer)?
        .contents
        .into_iter()
        .map(WireContents::into_contents)
        .collect()
}

/// A `prompts/get` answer.
fn reply_of(answer: Value) -> Result<PromptReply, serde_json::Error> {
    #[derive(Deserialize)]
    struct Reply {
        description: Option<String>,
        messages: Vec<WireMessage>,
    }
    #[derive(Deserialize)]
    struct WireMessage {
        role: WireRole,
        content: WireContent,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum WireRole {
        User,
        Assistant,
    }
    #[derive(Deserialize)]
    #[serde(tag = "type", rename_all = "lowercase")]
    enum WireContent {
        Text {
            text: String,
        },
        Image {
            data: String,
            #[serde(rename = "mimeType")]
            mime_type: String,
        },
        Audio {
            data: String,
            #[serde(rename = "mimeType")]
            mime_type: String,
        },
        Resource {
            resource: WireContents,
        },
    }
    let reply = Reply::deserialize(answer)?;
    let mut messages = Vec::with_capacity(reply.messages.len());
    for message in reply.messages {
        let role = match message.role {
            WireRole::User => Role::User,
            WireRole::Assistant => Role::Assistant,
        };
        let content = match message.content {
            WireContent::Text { text } => PromptContent::Text(text),
            WireContent::Image { data, mime_type } => PromptContent::Image { data, mime_type },
            WireContent::Audio { data, mime_type } => PromptContent::Audio { data, mime_type },
            WireContent::Resource { resource } => {
                PromptContent::Resource(resource.into_contents()?)
            }
        };
        messages.push(PromptMessage { role, content });
    }
    let mut ours = PromptReply::new(messages);
    ours.description = reply.description;
    Ok(ours)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offers_come_from_the_declared_capabilities() {
        let offers = Offers::from_capabilities(Some(&json!({
            "logging": {},
            "resources": {"subscribe": true, "listChanged": true},
            "prompts": {},
            "tools": {}
        })));
        assert_eq!(
            offers,
            Offers {
                logging: true,
                resources: true,
                subscribe: true,
                prompts: true,
                completions: false,
                list_changes: [false, true, false],
            }
        );
        assert_eq!(
            offers.list_changes(),
            json!({"resourcesListChanged": true})
                .as_object()
                .cloned()
                .unwrap()
        );
        assert!(offers.subscribe());
        assert_eq!(Offers::from_capabilities(None), Offers::default());
        assert_eq!(
            Offers::from_capabilities(Some(&json!({"resources": 3}))),
            Offers::default(),
            "a malformed capability offers nothing"
        );
    }

    #[test]
    fn listed_entries_keep_what_the_upstream_said() {
        let resource = resource_of(json!({
            "uri": "memo://a", "name": "a", "title": "A", "description": "first",
            "mimeType": "text/plain", "size": 3
        }))
        .unwrap();
        assert_eq!(
            resource,
            Resource::new("memo://a", "a")
                .with_title("A")
                .with_description("first")
                .with_mime_type("text/plain")
                .with_size(3)
        );
        assert!(resource_of(json!({"name": "no uri"})).is_err());
        assert!(template_of(json!({"uriTemplate": "memo://{unclosed", "name": "x"})).is_err());
        let (prompt, remote) = prompt_of(
            json!({"name": "greet", "arguments": [{"name": "who", "required": true}]}),
            "up__",
        )
        .unwrap();
        assert_eq!((prompt.name(), remote.as_str()), ("up__greet", "greet"));
        assert!(prompt.arguments()[0].is_required());
    }

    #[test]
    fn annotations_icons_and_meta_are_kept_as_given_and_others_ignored() {
        let object = |value: Value| value.as_object().unwrap().clone();
        let annotations = json!({"audience": ["user"], "priority": 0.5,
                                 "lastModified": "2025-01-12T15:00:58Z", "x-extra": [1]});
        let meta = json!({"example.com/origin": "up", "nested": {"n": 1}});
        let icon = json!({"src": "https://example.com/a.png", "sizes": ["48x48"], "theme": "dark"});
        let resource = resource_of(json!({
            "uri": "memo://a", "name": "a", "annotations": annotations,
            "icons": [icon, "not an icon"], "_meta": meta
        }))
        .unwrap();
        assert_eq!(
            resource,
            Resource::new("memo://a", "a")
                .with_annotations(object(annotations.clone()))
                .with_icons(vec![icon.clone()])
                .with_meta(object(meta.clone()))
        );
        let template = template_of(json!({
            "uriTemplate": "memo://notes/{id}", "name": "note",
            "annotations": {"priority": 1}, "_meta": meta
        }))
        .unwrap();
        assert_eq!(
            template.annotations(),
            Some(&object(json!({"priority": 1})))
        );
        assert_eq!(template.meta(), Some(&object(meta.clone())));
        let (prompt, _) = prompt_of(
            json!({"name": "greet", "_meta": meta, "icons": [icon], "annotations": {"x": 1}}),
            "",
        )
        .unwrap();
        assert_eq!(prompt.meta(), Some(&object(meta)));
        assert_eq!(prompt.icons(), [icon]);

        // In the wrong shape they are left out; the entry is kept.
        for wrong in [json!("user"), json!([1]), json!(3), Value::Null] {
            let resource = resource_of(json!({
                "uri": "memo://b", "annotations": wrong, "_meta": wrong, "icons": wrong
            }))
            .unwrap_or_else(|why| panic!("{wrong}: {why}"));
            assert_eq!(resource, Resource::new("memo://b", "memo://b"), "{wrong}");
            let template = template_of(
                json!({"uriTemplate": "memo://{x}", "annotations": wrong, "_meta": wrong}),
            )
            .unwrap();
            assert_eq!((template.annotations(), template.meta()), (None, None));
            let (prompt, _) = prompt_of(json!({"name": "p", "_meta": wrong}), "").unwrap();
            assert_eq!(prompt.meta(), None, "{wrong}");
        }
    }

    #[test]
    fn a_read_and_a_prompt_answer_become_ours() {
        let contents = contents_of(json!({"contents": [
            {"uri": "memo://a", "mimeType": "text/plain", "text": "hi"},
            {"uri": "memo://b", "blob": "AAE="}
        ]}))
        .unwrap();
        assert_eq!(
            contents[0],
            ResourceContents::text("memo://a", "text/plain", "hi")
        );
        assert_eq!(
            contents[1],
            ResourceContents::Blob {
                uri: "memo://b".into(),
                mime_type: None,
                blob: "AAE=".into()
            }
        );
        assert!(contents_of(json!({"contents": [{"uri": "memo://c"}]})).is_err());
        let reply = reply_of(json!({"description": "d", "messages": [
            {"role": "user", "content": {"type": "text", "text": "hello"}},
            {"role": "assistant", "content": {"type": "image", "data": "AA==", "mimeType": "image/png"}}
        ]}))
        .unwrap();
        assert_eq!(reply.description.as_deref(), Some("d"));
        assert_eq!(reply.messages[0], PromptMessage::user("hello"));
        assert_eq!(reply.messages[1].role, Role::Assistant);
        assert!(
            reply_of(
                json!({"messages": [{"role": "system", "content": {"type": "text", "text": "x"}}]})
            )
            .is_err()
        );
    }

    #[test]
    fn what_another_provider_serves_is_left_out_and_ours_is_kept() {
        struct Local;
        impl ResourceProvider for Local {
            fn resources(&self) -> Vec<Resource> {
                vec![Resource::new("memo://taken", "taken")]
            }
            fn read<'a>(
                &'a self,
                _: &'a str,
                _: &'a ToolContext,
            ) -> Deferred<'a, Result<Vec<ResourceContents>, CatalogError>> {
                Deferred::ready(Ok(Vec::new()))
            }
        }
        let mut registry = ToolRegistry::new();
        registry.register_resources(Local).unwrap();
        let mut config = UpstreamConfig::stdio("up", vec!["server".into()]);
        config.prefix = Some(String::new());
        // No upstream behind it: the lists are all this test asks of the catalog.
        struct Offline(UpstreamConfig);
        impl UpstreamLink for Offline {
            fn config(&self) -> &UpstreamConfig {
                &self.0
            }
            fn connection(&self) -> Result<Arc<Connection>, CallError> {
                Err(CallError::unavailable("offline"))
            }
        }
        let catalog = Arc::new(UpstreamCatalog::new(&config, Weak::<Offline>::new(), None));
        let registry = Arc::new(registry);
        catalog.serve_in(&registry);
        let lists = CatalogLists {
            resources: vec![
                Resource::new("memo://taken", "theirs"),
                Resource::new("memo://mine", "mine"),
                Resource::new("memo://mine", "twice"),
            ],
            ..CatalogLists::default()
        };
        catalog.publish(lists.clone());
        let served: Vec<_> = registry
            .catalog_snapshot()
            .resources()
            .map(|r| (r.uri().to_owned(), r.name().to_owned()))
            .collect();
        assert_eq!(
            served,
            [
                ("memo://taken".to_owned(), "taken".to_owned()),
                ("memo://mine".to_owned(), "mine".to_owned())
            ]
        );
        // Published again (a rediscovery), its own URI stays its own.
        catalog.publish(lists);
        assert_eq!(registry.catalog_snapshot().resources().count(), 2);
        assert!(catalog.lists.lock().serves("memo://mine"));
        assert!(!catalog.lists.lock().serves("memo://taken"));
    }
}
