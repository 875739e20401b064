//! Resources: what a server offers to be read ([`Resource`], [`ResourceTemplate`]), what a
//! read returns ([`ResourceContents`]), and the [`ResourceProvider`] that serves them.

use base64::Engine as _;

use crate::catalog::{CatalogError, UriTemplate};
use crate::context::ToolContext;
use crate::deferred::Deferred;

/// One resource a provider lists: a fixed URI.
///
/// ```
/// use milpa::catalog::Resource;
///
/// let notes = Resource::new("docs://notes", "notes")
///     .with_mime_type("text/markdown")
///     .with_scopes(["docs:read"]);
/// assert_eq!(notes.scopes(), ["docs:read"]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    uri: String,
    name: String,
    title: Option<String>,
    description: Option<String>,
    mime_type: Option<String>,
    size: Option<u64>,
    scopes: Vec<String>,
}

impl Resource {
    /// A resource at `uri`, listed as `name`.
    pub fn new(uri: impl Into<String>, name: impl Into<String>) -> Resource {
        Resource {
            uri: uri.into(),
            name: name.into(),
            title: None,
            description: None,
            mime_type: None,
            size: None,
            scopes: Vec::new(),
        }
    }

    /// A human-readable title.
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// What the resource holds, for a model deciding whether to read it.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// Its MIME type.
    pub fn with_mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }

    /// Its size in bytes, when known.
    pub fn with_size(mut self, size: u64) -> Self {
        self.size = Some(size);
        self
    }

    /// The scopes a reader must hold one of (none: any caller the channel admits).
    pub fn with_scopes<S: Into<String>>(mut self, scopes: impl IntoIterator<Item = S>) -> Self {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// The URI.
    pub fn uri(&self) -> &str {
        &self.uri
    }
    /// The listed name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The title, if any.
    pub fn title(&self) -> Option<&str> {
        self.title.as_deref()
    }
    /// The description, if any.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }
    /// The MIME type, if any.
    pub fn mime_type(&self) -> Option<&str> {
        self.mime_type.as_deref()
    }
    /// The size in bytes, if known.
    pub fn size(&self) -> Option<u64> {
        self.size
    }
    /// The scopes a reader needs one of.
    pub fn scopes(&self) -> &[String] {
        &self.scopes
    }
}

/// A family of resources: every URI its [`UriTemplate`] matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceTemplate {
    template: UriTemplate,
    name: String,
    title: Option<String>,
    description: Option<String>,
    mime_type: Option<String>,
    scopes: Vec<String>,
}

impl ResourceTemplate {
    /// The resources `uri_template` matches, listed as `name`; an invalid template is
    /// refused.
    pub fn new(
        uri_template: &str,
        name: impl Into<String>,
    ) -> Result<ResourceTemplate, CatalogError> {
        Ok(ResourceTemplate {
            template: UriTemplate::parse(uri_template)?,
            name: name.into(),
            title: None,
            description: None,
            mime_type: None,
            scopes: Vec::new(),
        })
    }

    /// A human-readable title.
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// What the resources hold.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// Their MIME type.
    pub fn with_mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }

    /// The scopes a reader must hold one of.
    pub fn with_scopes<S: Into<String>>(mut self, scopes: impl IntoIterator<Item = S>) -> Self {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// The template.
    pub fn template(&self) -> &UriTemplate {
        &self.template
    }
    /// The listed name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The title, if any.
    pub fn title(&self) -> Option<&str> {
        self.title.as_deref()
    }
    /// The description, if any.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }
    /// The MIME type, if any.
    pub fn mime_type(&self) -> Option<&str> {
        self.mime_type.as_deref()
    }
    /// The scopes a reader needs one of.
    pub fn scopes(&self) -> &[String] {
        &self.scopes
    }
}

/// One piece of what a read returns: text, or bytes (kept base64-encoded, as they travel).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResourceContents {
    /// Text.
    Text {
        /// The URI this piece is of.
        uri: String,
        /// Its MIME type.
        mime_type: Option<String>,
        /// The text.
        text: String,
    },
    /// Bytes.
    Blob {
        /// The URI this piece is of.
        uri: String,
        /// Its MIME type.
        mime_type: Option<String>,
        /// The bytes, base64-encoded.
        blob: String,
    },
}

impl ResourceContents {
    /// Text at `uri`.
    pub fn text(uri: impl Into<String>, mime_type: &str, text: impl Into<String>) -> Self {
        ResourceContents::Text {
            uri: uri.into(),
            mime_type: Some(mime_type.to_owned()),
            text: text.into(),
        }
    }

    /// Bytes at `uri` (encoded here).
    pub fn blob(uri: impl Into<String>, mime_type: &str, bytes: &[u8]) -> Self {
        ResourceContents::Blob {
            uri: uri.into(),
            mime_type: Some(mime_type.to_owned()),
            blob: base64::engine::general_purpose::STANDARD.encode(bytes),
        }
    }

    /// The URI this piece is of.
    pub fn uri(&self) -> &str {
        match self {
            ResourceContents::Text { uri, .. } | ResourceContents::Blob { uri, .. } => uri,
        }
    }

    /// The bytes it takes on the wire, about (its text or base64 length).
    pub(crate) fn wire_len(&self) -> usize {
        match self {
            ResourceContents::Text { text, .. } => text.len(),
            ResourceContents::Blob { blob, .. } => blob.len(),
        }
    }
}

/// What serves resources: the listing, and the reads.
///
/// The registry reads [`resources`](Self::resources) and [`templates`](Self::templates)
/// when the provider is registered, and again each time
/// [`CatalogNotifier::lists_changed`](crate::catalog::CatalogNotifier::lists_changed) is
/// called: they decide which URIs reach [`read`](Self::read), and the scopes each needs. A read reaches the provider only after
/// the gates allowed it (see [`ToolRegistry::read_resource`](crate::ToolRegistry::read_resource)).
pub trait ResourceProvider: Send + Sync + 'static {
    /// The fixed resources.
    fn resources(&self) -> Vec<Resource>;

    /// The templates (none by default).
    fn templates(&self) -> Vec<ResourceTemplate> {
        Vec::new()
    }

    /// Reads `uri`: one of this provider's resources, or a URI one of its templates
    /// matches. A URI it cannot find after all is [`CatalogError::NotFound`].
    fn read<'a>(
        &'a self,
        uri: &'a str,
        ctx: &'a ToolContext,
    ) -> Deferred<'a, Result<Vec<ResourceContents>, CatalogError>>;

    /// Suggestions for `argument` of `template` (one of this provider's), given what the
    /// user typed so far (`value`). None by default.
    fn complete<'a>(
        &'a self,
        template: &'a str,
        argument: &'a str,
        value: &'a str,
    ) -> Deferred<'a, Vec<String>> {
        let _ = (template, argument, value);
        Deferred::ready(Vec::new())
    }

    /// A client subscribed to `uri` (one this provider serves): a provider whose updates
    /// come from elsewhere (a gateway's upstream server) asks to hear of them here, and
    /// announces each with [`CatalogNotifier::updated`](crate::catalog::CatalogNotifier::updated).
    /// Called for every subscription, so it must be cheap and must not wait. Nothing by
    /// default: a provider that changes its own resources announces them directly.
    fn subscribed(&self, uri: &str) {
        let _ = uri;
    }
}
