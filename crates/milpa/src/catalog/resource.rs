//! Resources: what a server offers to be read ([`Resource`], [`ResourceTemplate`]), what a
//! read returns ([`ResourceContents`]), and the [`ResourceProvider`] that serves them.

use base64::Engine as _;
use serde_json::{Map, Value};

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
    annotations: Option<Map<String, Value>>,
    icons: Vec<Value>,
    meta: Option<Map<String, Value>>,
    scopes: Vec<String>,
    human_approval: bool,
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
            annotations: None,
            icons: Vec::new(),
            meta: None,
            scopes: Vec::new(),
            human_approval: false,
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

    /// MCP `annotations` for the client (`audience`, `priority`, `lastModified`, or any
    /// other key), listed as given: milpa neither reads nor checks them. An empty object
    /// is none.
    pub fn with_annotations(mut self, annotations: Map<String, Value>) -> Self {
        self.annotations = (!annotations.is_empty()).then_some(annotations);
        self
    }

    /// MCP `icons` (2025-11-25): objects with a `src` and optionally `mimeType`, `sizes`
    /// and `theme`, listed as given, in order.
    pub fn with_icons(mut self, icons: Vec<Value>) -> Self {
        self.icons = icons;
        self
    }

    /// A `_meta` object to list with the resource, as given. An empty object is none.
    pub fn with_meta(mut self, meta: Map<String, Value>) -> Self {
        self.meta = (!meta.is_empty()).then_some(meta);
        self
    }

    /// The scopes a reader must hold one of (none: any caller the channel admits).
    pub fn with_scopes<S: Into<String>>(mut self, scopes: impl IntoIterator<Item = S>) -> Self {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// Whether each read waits for a person's approval (default `false`): the first read
    /// of a caller is parked in the approval queue and refused `APPROVAL_PENDING`; once a
    /// person other than the caller grants it, the caller's next read of the same URI
    /// goes through, once.
    pub fn with_human_approval(mut self, required: bool) -> Self {
        self.human_approval = required;
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
    /// The annotations, if any.
    pub fn annotations(&self) -> Option<&Map<String, Value>> {
        self.annotations.as_ref()
    }
    /// The icons (none: empty).
    pub fn icons(&self) -> &[Value] {
        &self.icons
    }
    /// The `_meta` object, if any.
    pub fn meta(&self) -> Option<&Map<String, Value>> {
        self.meta.as_ref()
    }
    /// The scopes a reader needs one of.
    pub fn scopes(&self) -> &[String] {
        &self.scopes
    }
    /// Whether a read waits for a person's approval.
    pub fn requires_human_approval(&self) -> bool {
        self.human_approval
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
    annotations: Option<Map<String, Value>>,
    icons: Vec<Value>,
    meta: Option<Map<String, Value>>,
    scopes: Vec<String>,
    human_approval: bool,
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
            annotations: None,
            icons: Vec::new(),
            meta: None,
            scopes: Vec::new(),
            human_approval: false,
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

    /// MCP `annotations` for the client (`audience`, `priority`, `lastModified`, or any
    /// other key), listed as given: milpa neither reads nor checks them. An empty object
    /// is none.
    pub fn with_annotations(mut self, annotations: Map<String, Value>) -> Self {
        self.annotations = (!annotations.is_empty()).then_some(annotations);
        self
    }

    /// MCP `icons` (2025-11-25), listed as given, in order (see [`Resource::with_icons`]).
    pub fn with_icons(mut self, icons: Vec<Value>) -> Self {
        self.icons = icons;
        self
    }

    /// A `_meta` object to list with the template, as given. An empty object is none.
    pub fn with_meta(mut self, meta: Map<String, Value>) -> Self {
        self.meta = (!meta.is_empty()).then_some(meta);
        self
    }

    /// The scopes a reader must hold one of.
    pub fn with_scopes<S: Into<String>>(mut self, scopes: impl IntoIterator<Item = S>) -> Self {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// Whether each read waits for a person's approval (default `false`): the first read
    /// of a caller is parked in the approval queue and refused `APPROVAL_PENDING`; once a
    /// person other than the caller grants it, the caller's next read of the same URI
    /// goes through, once.
    pub fn with_human_approval(mut self, required: bool) -> Self {
        self.human_approval = required;
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
    /// The annotations, if any.
    pub fn annotations(&self) -> Option<&Map<String, Value>> {
        self.annotations.as_ref()
    }
    /// The icons (none: empty).
    pub fn icons(&self) -> &[Value] {
        &self.icons
    }
    /// The `_meta` object, if any.
    pub fn meta(&self) -> Option<&Map<String, Value>> {
        self.meta.as_ref()
    }
    /// The scopes a reader needs one of.
    pub fn scopes(&self) -> &[String] {
        &self.scopes
    }
    /// Whether a read waits for a person's approval.
    pub fn requires_human_approval(&self) -> bool {
        self.human_approval
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    #[test]
    fn a_resource_keeps_its_annotations_meta_and_icons_as_given() {
        let plain = Resource::new("memo://a", "a");
        assert_eq!(
            (plain.annotations(), plain.meta(), plain.icons()),
            (None, None, &[][..])
        );
        let annotations = object(json!({
            "audience": ["user", "assistant"],
            "priority": 0.5,
            "lastModified": "2025-01-12T15:00:58Z",
            "x-other": true
        }));
        let meta = object(json!({"example.com/origin": "upstream"}));
        let icon = json!({"src": "data:image/png;base64,AA==", "mimeType": "image/png"});
        let resource = plain
            .clone()
            .with_annotations(annotations.clone())
            .with_meta(meta.clone())
            .with_icons(vec![icon.clone()]);
        assert_eq!(resource.annotations(), Some(&annotations));
        assert_eq!(resource.meta(), Some(&meta));
        assert_eq!(resource.icons(), [icon]);
        assert_ne!(
            resource, plain,
            "they count in a comparison (a changed list)"
        );
        let emptied = plain
            .clone()
            .with_annotations(Map::new())
            .with_meta(Map::new());
        assert_eq!(emptied, plain, "an empty object is none");
    }

    #[test]
    fn a_template_keeps_its_annotations_meta_and_icons_as_given() {
        let plain = ResourceTemplate::new("memo://notes/{id}", "note").unwrap();
        assert_eq!(
            (plain.annotations(), plain.meta(), plain.icons()),
            (None, None, &[][..])
        );
        let annotations = object(json!({"audience": ["assistant"], "priority": 1}));
        let meta = object(json!({"example.com/kind": "notes"}));
        let template = plain
            .clone()
            .with_annotations(annotations.clone())
            .with_meta(meta.clone())
            .with_icons(vec![json!({"src": "https://example.com/n.svg"})]);
        assert_eq!(template.annotations(), Some(&annotations));
        assert_eq!(template.meta(), Some(&meta));
        assert_eq!(template.icons().len(), 1);
        assert_eq!(plain.clone().with_annotations(Map::new()), plain);
    }
}
