//! What a server offers besides tools: resources to read and prompts to get, each served
//! by a provider registered on the [`ToolRegistry`](crate::ToolRegistry) and governed
//! like a tool call.
//!
//! A read or a prompt request runs its own short pipeline ([`AccessStep::ORDER`]): the
//! same gate (channel policy, scopes, rules, the call policy), the same rate limiter and
//! the same audit trail as a call, in the same order. Nothing is read before the gate
//! allowed it, and every request, allowed or refused, leaves one audit record whose `kind`
//! says what it was.
//!
//! ```
//! use milpa::catalog::{CatalogError, Resource, ResourceContents, ResourceProvider};
//! use milpa::{Deferred, ToolContext, ToolRegistry};
//!
//! struct Notes;
//! impl ResourceProvider for Notes {
//!     fn resources(&self) -> Vec<Resource> {
//!         vec![Resource::new("docs://notes", "notes").with_scopes(["docs:read"])]
//!     }
//!     fn read<'a>(&'a self, uri: &'a str, _: &'a ToolContext)
//!         -> Deferred<'a, Result<Vec<ResourceContents>, CatalogError>> {
//!         Deferred::ready(Ok(vec![ResourceContents::text(uri, "text/plain", "buy milk")]))
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let mut registry = ToolRegistry::new();
//! registry.register_resources(Notes).unwrap();
//! let read = registry.read_resource("docs://notes", &ToolContext::cli()).await.unwrap();
//! assert_eq!(read[0].uri(), "docs://notes");
//! let reader = ToolContext::mcp("r1", Some("ana".into()), Vec::<String>::new());
//! let denied = registry.read_resource("docs://notes", &reader).await.unwrap_err();
//! assert_eq!(denied.message(), "Missing required scope for resource 'docs://notes'. Need one of: docs:read — context has: (none).");
//! # });
//! ```

mod access;
mod completion;
mod prompt;
mod resource;
mod uri_template;

use std::collections::HashMap;
use std::sync::Arc;

pub use access::{AccessRefusal, AccessStep};
pub(crate) use access::{get_prompt, read_resource};
pub(crate) use completion::complete;
pub use completion::{Completion, CompletionRef, MAX_COMPLETION_VALUES};
pub use prompt::{
    Prompt, PromptArgument, PromptContent, PromptMessage, PromptProvider, PromptReply, Role,
};
pub use resource::{Resource, ResourceContents, ResourceProvider, ResourceTemplate};
pub use uri_template::{UriTemplate, UriTemplateError};

/// Why a provider could not be registered, or a read or prompt failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    /// A resource template does not parse.
    #[error(transparent)]
    Template(#[from] UriTemplateError),
    /// Another provider offers this URI, template or prompt name already.
    #[error("already registered: {0}")]
    Duplicate(String),
    /// Nothing at this URI, or no prompt by this name.
    #[error("not found: {0}")]
    NotFound(String),
    /// The prompt's arguments were refused (a required one missing, a value out of range).
    #[error("{0}")]
    InvalidArguments(String),
    /// The provider failed.
    #[error("{message}")]
    Failed {
        /// What the caller is told.
        message: String,
        /// What went wrong underneath, for the log.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
}

impl CatalogError {
    /// The provider failed with `message`.
    pub fn failed(message: impl Into<String>) -> CatalogError {
        CatalogError::Failed {
            message: message.into(),
            source: None,
        }
    }

    /// The provider failed with `message` because of `source`.
    pub fn failed_with(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> CatalogError {
        CatalogError::Failed {
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }
}

/// Tells the servers of a registry that a resource changed: each session subscribed to
/// its URI sends `notifications/resources/updated`. Cheap to clone; give one to the
/// provider whose resources change (from [`ToolRegistry::resource_notifier`](crate::ToolRegistry::resource_notifier)).
#[derive(Debug, Clone)]
pub struct ResourceNotifier {
    sender: tokio::sync::broadcast::Sender<Arc<str>>,
}

impl ResourceNotifier {
    /// How many updates a slow listener may fall behind before it skips the oldest.
    const BACKLOG: usize = 256;

    fn new() -> ResourceNotifier {
        ResourceNotifier {
            sender: tokio::sync::broadcast::channel(Self::BACKLOG).0,
        }
    }

    /// The resource at `uri` changed.
    pub fn updated(&self, uri: &str) {
        // No listener is no error: nobody subscribed.
        let _ = self.sender.send(Arc::from(uri));
    }

    /// The URIs updated from now on.
    pub fn listen(&self) -> tokio::sync::broadcast::Receiver<Arc<str>> {
        self.sender.subscribe()
    }
}

/// The resources and prompts a registry serves, indexed for the requests.
pub(crate) struct Catalog {
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
    notifier: ResourceNotifier,
}

impl Default for Catalog {
    fn default() -> Self {
        Catalog {
            resource_providers: Vec::new(),
            resources: Vec::new(),
            by_uri: HashMap::new(),
            templates: Vec::new(),
            prompt_providers: Vec::new(),
            prompts: Vec::new(),
            by_name: HashMap::new(),
            notifier: ResourceNotifier::new(),
        }
    }
}

/// What a URI resolved to: who reads it, the name the gate and the audit see (the
/// resource's URI, or the template it matched) and the scopes it needs.
pub(crate) struct ResolvedResource<'a> {
    pub provider: &'a dyn ResourceProvider,
    pub name: &'a str,
    pub scopes: &'a [String],
}

impl Catalog {
    /// Adds a resource provider; a URI or template another provider offers is refused
    /// (and nothing of this provider is added).
    pub fn add_resources(
        &mut self,
        provider: Arc<dyn ResourceProvider>,
    ) -> Result<(), CatalogError> {
        let index = self.resource_providers.len();
        let resources = provider.resources();
        let templates = provider.templates();
        let mut seen = std::collections::HashSet::new();
        for resource in &resources {
            if self.by_uri.contains_key(resource.uri()) || !seen.insert(resource.uri()) {
                return Err(CatalogError::Duplicate(resource.uri().to_owned()));
            }
        }
        for template in &templates {
            let text = template.template().as_str();
            if self
                .templates
                .iter()
                .any(|(t, _)| t.template().as_str() == text)
                || !seen.insert(text)
            {
                return Err(CatalogError::Duplicate(text.to_owned()));
            }
        }
        for resource in resources {
            self.by_uri
                .insert(resource.uri().to_owned(), self.resources.len());
            self.resources.push((resource, index));
        }
        self.templates
            .extend(templates.into_iter().map(|template| (template, index)));
        self.resource_providers.push(provider);
        Ok(())
    }

    /// Adds a prompt provider; a name another provider offers is refused.
    pub fn add_prompts(&mut self, provider: Arc<dyn PromptProvider>) -> Result<(), CatalogError> {
        let index = self.prompt_providers.len();
        let prompts = provider.prompts();
        let mut seen = std::collections::HashSet::new();
        for prompt in &prompts {
            if self.by_name.contains_key(prompt.name()) || !seen.insert(prompt.name()) {
                return Err(CatalogError::Duplicate(prompt.name().to_owned()));
            }
        }
        for prompt in prompts {
            self.by_name
                .insert(prompt.name().to_owned(), self.prompts.len());
            self.prompts.push((prompt, index));
        }
        self.prompt_providers.push(provider);
        Ok(())
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

    /// Whether any resource or template is registered.
    pub fn has_resources(&self) -> bool {
        !self.resource_providers.is_empty()
    }

    /// Whether any prompt is registered.
    pub fn has_prompts(&self) -> bool {
        !self.prompt_providers.is_empty()
    }

    /// Who serves `uri`: a fixed resource first, then the first template that matches.
    pub fn resolve_resource(&self, uri: &str) -> Option<ResolvedResource<'_>> {
        if let Some(&at) = self.by_uri.get(uri) {
            let (resource, provider) = &self.resources[at];
            return Some(ResolvedResource {
                provider: self.resource_providers[*provider].as_ref(),
                name: resource.uri(),
                scopes: resource.scopes(),
            });
        }
        self.templates
            .iter()
            .find(|(template, _)| template.template().match_uri(uri).is_some())
            .map(|(template, provider)| ResolvedResource {
                provider: self.resource_providers[*provider].as_ref(),
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

    /// The handle that announces resource updates.
    pub fn notifier(&self) -> &ResourceNotifier {
        &self.notifier
    }

    /// The prompt `name`, and its provider.
    pub fn prompt(&self, name: &str) -> Option<(&Prompt, &dyn PromptProvider)> {
        let &at = self.by_name.get(name)?;
        let (prompt, provider) = &self.prompts[at];
        Some((prompt, self.prompt_providers[*provider].as_ref()))
    }
}
