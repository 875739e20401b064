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
mod index;
mod prompt;
mod resource;
mod uri_template;

pub use access::{AccessRefusal, AccessStep};
pub(crate) use access::{get_prompt, read_resource};
pub(crate) use completion::complete;
pub use completion::{Completion, CompletionRef, MAX_COMPLETION_VALUES};
pub(crate) use index::Catalog;
pub use index::{CatalogGenerations, CatalogNotifier, CatalogSnapshot};
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
