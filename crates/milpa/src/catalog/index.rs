//! The catalog's lists (resources, templates, prompts) indexed for the requests, and the
//! swap that lets them change while the registry serves.
//!
//! Providers are fixed once the registry is shared; what they list is not. When a
//! provider's lists change it says so ([`CatalogNotifier::lists_changed`]), every provider's
//! lists are read again into a fresh [`CatalogIndex`], and the index is swapped in whole: a
//! request that resolved against the old index finishes with it, later ones see the new
//! one, and nothing ever sees half of a change.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use tokio::sync::{broadcast, watch};

use super::{CatalogError, Prompt, PromptProvider, Resource, ResourceProvider, ResourceTemplate};

/// How often each list changed since the registry was made: servers watch it
/// ([`ToolRegistry::catalog_changes`](crate::ToolRegistry::catalog_changes)) to send
/// `notifications/resources/list_changed` and `notifications/prompts/list_changed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct CatalogGenerations {
    /// Bumped when the resources or templates changed.
    pub resources: u64,
    /// Bumped when the prompts changed.
    pub prompts: u64,
}

/// The resources and prompts of a registry, with the providers that serve them.
pub(crate) struct Catalog {
    lists: Arc<Lists>,
    updates: broadcast::Sender<Arc<str>>,
}

/// What a [`CatalogNotifier`] reaches (weakly: a provider holding its notifier must not
/// keep the catalog, and so itself, alive).
struct Lists {
    index: ArcSwap<CatalogIndex>,
    /// Held while an index is rebuilt, so two rebuilds do not lose one another.
    swapping: Mutex<()>,
    generations: watch::Sender<CatalogGenerations>,
}

impl Default for Catalog {
    fn default() -> Self {
        Catalog {
            lists: Arc::new(Lists {
                index: ArcSwap::from_pointee(CatalogIndex::default()),
                swapping: Mutex::new(()),
                generations: watch::Sender::new(CatalogGenerations::default()),
            }),
            updates: broadcast::channel(CatalogNotifier::BACKLOG).0,
        }
    }
}

impl Catalog {
    /// Adds a resource provider; a URI or template another provider offers is refused
    /// (and nothing of this provider is added).
    pub fn add_resources(&self, provider: Arc<dyn ResourceProvider>) -> Result<(), CatalogError> {
        self.lists.rebuild(|resources, _| resources.push(provider))
    }

    /// Adds a prompt provider; a name another provider offers is refused.
    pub fn add_prompts(&self, provider: Arc<dyn PromptProvider>) -> Result<(), CatalogError> {
        self.lists.rebuild(|_, prompts| prompts.push(provider))
    }

    /// The lists as they stand now.
    pub fn snapshot(&self) -> Arc<CatalogIndex> {
        self.lists.index.load_full()
    }

    /// Reads every provider's lists again (see [`CatalogNotifier::lists_changed`]).
    pub fn refresh(&self) -> Result<(), CatalogError> {
        self.lists.refresh()
    }

    /// The generations of the lists, changed from now on.
    pub fn changes(&self) -> watch::Receiver<CatalogGenerations> {
        self.lists.generations.subscribe()
    }

    /// The handle providers use to announce changes.
    pub fn notifier(&self) -> CatalogNotifier {
        CatalogNotifier {
            updates: self.updates.clone(),
            lists: Arc::downgrade(&self.lists),
        }
    }
}

impl Lists {
    fn refresh(&self) -> Result<(), CatalogError> {
        self.rebuild(|_, _| {})
    }

    /// Reads the lists of the current providers, as `change` leaves them, into a new
    /// index; swaps it in and bumps the generation of each list that differs.
    fn rebuild(
        &self,
        change: impl FnOnce(&mut Vec<Arc<dyn ResourceProvider>>, &mut Vec<Arc<dyn PromptProvider>>),
    ) -> Result<(), CatalogError> {
        let _swapping = self.swapping.lock();
        let old = self.index.load_full();
        let mut resource_providers = old.resource_providers.clone();
        let mut prompt_providers = old.prompt_providers.clone();
        change(&mut resource_providers, &mut prompt_providers);
        let new = CatalogIndex::build(resource_providers, prompt_providers)?;
        let resources_changed = old.resources != new.resources || old.templates != new.templates;
        let prompts_changed = old.prompts != new.prompts;
        self.index.store(Arc::new(new));
        if resources_changed || prompts_changed {
            self.generations.send_modify(|generations| {
                generations.resources += u64::from(resources_changed);
                generations.prompts += u64::from(prompts_changed);
            });
        }
        Ok(())
    }
}

/// Tells the servers of a registry what changed in its catalog. Cheap to clone; give one
/// to the provider whose resources or prompts change (from
/// [`ToolRegistry::catalog_notifier`](crate::ToolRegistry::catalog_notifier)).
///
/// ```
/// use milpa::catalog::{CatalogError, Resource, ResourceContents, ResourceProvider};
/// use milpa::{Deferred, ToolContext, ToolRegistry};
/// use std::sync::{Arc, Mutex};
///
/// struct Notes(Arc<Mutex<Vec<String>>>);
/// impl ResourceProvider for Notes {
///     fn resources(&self) -> Vec<Resource> {
///         self.0.lock().unwrap().iter().map(|uri| Resource::new(uri.as_str(), "a note")).collect()
///     }
///     fn read<'a>(&'a self, uri: &'a str, _: &'a ToolContext)
///         -> Deferred<'a, Result<Vec<ResourceContents>, CatalogError>> {
///         Deferred::ready(Ok(vec![ResourceContents::text(uri, "text/plain", "…")]))
///     }
/// }
///
/// let notes = Arc::new(Mutex::new(vec!["notes://1".to_owned()]));
/// let mut registry = ToolRegistry::new();
/// registry.register_resources(Notes(Arc::clone(&notes))).unwrap();
/// let notifier = registry.catalog_notifier();
///
/// notes.lock().unwrap().push("notes://2".to_owned());
/// notifier.lists_changed().unwrap(); // sessions send notifications/resources/list_changed
/// assert_eq!(registry.catalog_snapshot().resources().count(), 2);
/// assert_eq!(registry.catalog_changes().borrow().resources, 2); // registered, then changed
/// ```
#[derive(Clone)]
pub struct CatalogNotifier {
    updates: broadcast::Sender<Arc<str>>,
    lists: Weak<Lists>,
}

impl std::fmt::Debug for CatalogNotifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatalogNotifier").finish_non_exhaustive()
    }
}

impl CatalogNotifier {
    /// How many updates a slow listener may fall behind before it skips the oldest.
    const BACKLOG: usize = 256;

    /// The resource at `uri` changed: each session subscribed to it sends
    /// `notifications/resources/updated`.
    pub fn updated(&self, uri: &str) {
        // No listener is no error: nobody subscribed.
        let _ = self.updates.send(Arc::from(uri));
    }

    /// The URIs updated from now on.
    pub fn listen(&self) -> broadcast::Receiver<Arc<str>> {
        self.updates.subscribe()
    }

    /// What some provider lists changed: every provider's [`resources`], [`templates`] and
    /// [`prompts`] are read again and swapped in at once, and each list that differs is
    /// announced (`notifications/resources/list_changed`, `notifications/prompts/list_changed`).
    ///
    /// All or nothing: when two providers now offer the same URI, template or prompt name,
    /// or a template does not parse, the lists stay as they were and the error says which.
    /// Call it without holding a lock the provider's listing takes. Does nothing once the
    /// registry is gone.
    ///
    /// [`resources`]: ResourceProvider::resources
    /// [`templates`]: ResourceProvider::templates
    /// [`prompts`]: PromptProvider::prompts
    pub fn lists_changed(&self) -> Result<(), CatalogError> {
        match self.lists.upgrade() {
            Some(lists) => lists.refresh(),
            None => Ok(()),
        }
    }
}

/// The lists at one moment, with the providers that serve them.
#[derive(Default)]
pub(crate) struct CatalogIndex {
    resource_providers: Vec<Arc<dyn ResourceProvider>>,
    /// Every fixed resource, in registration order, with its provider's index.
    resources: Vec<(Resource, usize)>,
    by_uri: HashMap<String, usize>,
    /// Every template, in registration order, with its provider's index.
    templates: Vec<(ResourceTemplate, usize)>,
    prompt_providers: Vec<Arc<dyn PromptProvider>>,
    /// Every prompt, in registration order, with its provider's index.
    prompts: Vec<(Prompt, usize)>,
    by_name: HashMap<String, usize>,
}

/// What a URI resolved to: who reads it, the name the gate and the audit see (the
/// resource's URI, or the template it matched) and the scopes it needs.
pub(crate) struct ResolvedResource<'a> {
    pub provider: &'a dyn ResourceProvider,
    /// Whether a read waits for a person's approval.
    pub human_approval: bool,
    pub name: &'a str,
    pub scopes: &'a [String],
}

impl CatalogIndex {
    /// Reads the lists of every provider; a URI, template or prompt name offered twice is
    /// refused.
    fn build(
        resource_providers: Vec<Arc<dyn ResourceProvider>>,
        prompt_providers: Vec<Arc<dyn PromptProvider>>,
    ) -> Result<CatalogIndex, CatalogError> {
        let mut index = CatalogIndex::default();
        let mut template_texts = HashSet::new();
        for (at, provider) in resource_providers.iter().enumerate() {
            for resource in provider.resources() {
                let uri = resource.uri().to_owned();
                if index
                    .by_uri
                    .insert(uri.clone(), index.resources.len())
                    .is_some()
                {
                    return Err(CatalogError::Duplicate(uri));
                }
                index.resources.push((resource, at));
            }
            for template in provider.templates() {
                let text = template.template().as_str().to_owned();
                if !template_texts.insert(text.clone()) {
                    return Err(CatalogError::Duplicate(text));
                }
                index.templates.push((template, at));
            }
        }
        for (at, provider) in prompt_providers.iter().enumerate() {
            for prompt in provider.prompts() {
                let name = prompt.name().to_owned();
                if index
                    .by_name
                    .insert(name.clone(), index.prompts.len())
                    .is_some()
                {
                    return Err(CatalogError::Duplicate(name));
                }
                index.prompts.push((prompt, at));
            }
        }
        index.resource_providers = resource_providers;
        index.prompt_providers = prompt_providers;
        Ok(index)
    }

    /// The fixed resources, in registration order.
    pub fn resources(&self) -> impl Iterator<Item = &Resource> {
        self.resources.iter().map(|(resource, _)| resource)
    }

    /// The templates, in registration order.
    pub fn templates(&self) -> impl Iterator<Item = &ResourceTemplate> {
        self.templates.iter().map(|(template, _)| template)
    }

    /// The prompts, in registration order.
    pub fn prompts(&self) -> impl Iterator<Item = &Prompt> {
        self.prompts.iter().map(|(prompt, _)| prompt)
    }

    /// Whether any resource provider is registered.
    pub fn has_resources(&self) -> bool {
        !self.resource_providers.is_empty()
    }

    /// Whether any prompt provider is registered.
    pub fn has_prompts(&self) -> bool {
        !self.prompt_providers.is_empty()
    }

    /// Who serves `uri`: a fixed resource first, then the first template that matches.
    pub fn resolve_resource(&self, uri: &str) -> Option<ResolvedResource<'_>> {
        if let Some(&at) = self.by_uri.get(uri) {
            let (resource, provider) = &self.resources[at];
            return Some(ResolvedResource {
                provider: self.resource_providers[*provider].as_ref(),
                human_approval: resource.requires_human_approval(),
                name: resource.uri(),
                scopes: resource.scopes(),
            });
        }
        self.templates
            .iter()
            .find(|(template, _)| template.template().match_uri(uri).is_some())
            .map(|(template, provider)| ResolvedResource {
                provider: self.resource_providers[*provider].as_ref(),
                human_approval: template.requires_human_approval(),
                name: template.template().as_str(),
                scopes: template.scopes(),
            })
    }

    /// The template written `text`, and its provider.
    pub fn template(&self, text: &str) -> Option<(&ResourceTemplate, &dyn ResourceProvider)> {
        self.templates
            .iter()
            .find(|(template, _)| template.template().as_str() == text)
            .map(|(template, provider)| (template, self.resource_providers[*provider].as_ref()))
    }

    /// The prompt `name`, and its provider.
    pub fn prompt(&self, name: &str) -> Option<(&Prompt, &dyn PromptProvider)> {
        let &at = self.by_name.get(name)?;
        let (prompt, provider) = &self.prompts[at];
        Some((prompt, self.prompt_providers[*provider].as_ref()))
    }
}

/// The resources, templates and prompts of a registry at one moment (from
/// [`ToolRegistry::catalog_snapshot`](crate::ToolRegistry::catalog_snapshot)): a later change
/// of the lists leaves it as it was. Cheap to clone.
#[derive(Clone)]
pub struct CatalogSnapshot {
    index: Arc<CatalogIndex>,
}

impl std::fmt::Debug for CatalogSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatalogSnapshot")
            .field("resources", &self.index.resources.len())
            .field("templates", &self.index.templates.len())
            .field("prompts", &self.index.prompts.len())
            .finish()
    }
}

impl CatalogSnapshot {
    pub(crate) fn new(index: Arc<CatalogIndex>) -> CatalogSnapshot {
        CatalogSnapshot { index }
    }

    /// The fixed resources, in registration order.
    pub fn resources(&self) -> impl Iterator<Item = &Resource> {
        self.index.resources()
    }

    /// The resource templates, in registration order.
    pub fn templates(&self) -> impl Iterator<Item = &ResourceTemplate> {
        self.index.templates()
    }

    /// The prompts, in registration order.
    pub fn prompts(&self) -> impl Iterator<Item = &Prompt> {
        self.index.prompts()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::ResourceContents;
    use crate::{Deferred, ToolContext};

    struct Listing(Arc<parking_lot::Mutex<Vec<&'static str>>>);

    impl ResourceProvider for Listing {
        fn resources(&self) -> Vec<Resource> {
            self.0
                .lock()
                .iter()
                .map(|uri| Resource::new(*uri, "r"))
                .collect()
        }
        fn read<'a>(
            &'a self,
            uri: &'a str,
            _: &'a ToolContext,
        ) -> Deferred<'a, Result<Vec<ResourceContents>, CatalogError>> {
            Deferred::ready(Ok(vec![ResourceContents::text(uri, "text/plain", "x")]))
        }
    }

    fn listing(uris: &[&'static str]) -> (Arc<parking_lot::Mutex<Vec<&'static str>>>, Listing) {
        let uris = Arc::new(parking_lot::Mutex::new(uris.to_vec()));
        (Arc::clone(&uris), Listing(uris))
    }

    #[test]
    fn a_refresh_that_changes_nothing_bumps_no_generation() {
        let catalog = Catalog::default();
        let (_, provider) = listing(&["a://1"]);
        catalog.add_resources(Arc::new(provider)).unwrap();
        let before = *catalog.changes().borrow();
        catalog.notifier().lists_changed().unwrap();
        assert_eq!(*catalog.changes().borrow(), before);
    }

    #[test]
    fn a_clash_after_a_change_keeps_the_old_lists() {
        let catalog = Catalog::default();
        let (first_uris, first) = listing(&["a://1"]);
        let (_, second) = listing(&["a://2"]);
        catalog.add_resources(Arc::new(first)).unwrap();
        catalog.add_resources(Arc::new(second)).unwrap();
        let before = *catalog.changes().borrow();

        first_uris.lock().push("a://2");
        let error = catalog.notifier().lists_changed().unwrap_err();
        assert!(matches!(&error, CatalogError::Duplicate(uri) if uri == "a://2"));
        let uris: Vec<_> = catalog
            .snapshot()
            .resources()
            .map(|r| r.uri().to_owned())
            .collect();
        assert_eq!(uris, ["a://1", "a://2"]);
        assert_eq!(*catalog.changes().borrow(), before);
    }

    #[test]
    fn a_request_keeps_the_index_it_resolved_against() {
        let catalog = Catalog::default();
        let (uris, provider) = listing(&["a://1"]);
        catalog.add_resources(Arc::new(provider)).unwrap();
        let held = catalog.snapshot();
        uris.lock().clear();
        catalog.refresh().unwrap();
        assert!(held.resolve_resource("a://1").is_some());
        assert!(catalog.snapshot().resolve_resource("a://1").is_none());
    }

    #[test]
    fn a_notifier_outliving_its_catalog_does_nothing() {
        let catalog = Catalog::default();
        let notifier = catalog.notifier();
        drop(catalog);
        notifier.lists_changed().unwrap();
        notifier.updated("a://1");
    }
}
