//! Prompts: templates a server offers a person to start from ([`Prompt`]), what getting one
//! returns ([`PromptReply`]), and the [`PromptProvider`] that renders them.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::{Map, Value};

use crate::catalog::{CatalogError, ResourceContents};
use crate::context::ToolContext;
use crate::deferred::Deferred;

/// One prompt a provider lists.
///
/// ```
/// use milpa::catalog::{Prompt, PromptArgument};
///
/// let review = Prompt::new("review", "Reviews a change")
///     .with_argument(PromptArgument::required("diff").with_description("The change"));
/// assert_eq!(review.arguments()[0].name(), "diff");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    name: String,
    title: Option<String>,
    description: String,
    arguments: Vec<PromptArgument>,
    icons: Vec<Value>,
    meta: Option<Map<String, Value>>,
    scopes: Vec<String>,
    human_approval: bool,
}

impl Prompt {
    /// A prompt called `name`, described by `description`.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Prompt {
        Prompt {
            name: name.into(),
            title: None,
            description: description.into(),
            arguments: Vec::new(),
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

    /// Adds an argument (in listing order).
    pub fn with_argument(mut self, argument: PromptArgument) -> Self {
        self.arguments.push(argument);
        self
    }

    /// MCP `icons` (2025-11-25): objects with a `src` and optionally `mimeType`, `sizes`
    /// and `theme`, listed as given, in order.
    pub fn with_icons(mut self, icons: Vec<Value>) -> Self {
        self.icons = icons;
        self
    }

    /// A `_meta` object to list with the prompt, as given: milpa neither reads nor checks
    /// it. An empty object is none. (A prompt has no `annotations` in MCP.)
    pub fn with_meta(mut self, meta: Map<String, Value>) -> Self {
        self.meta = (!meta.is_empty()).then_some(meta);
        self
    }

    /// The scopes a caller must hold one of.
    pub fn with_scopes<S: Into<String>>(mut self, scopes: impl IntoIterator<Item = S>) -> Self {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// Whether each request waits for a person's approval (default `false`): a caller's first
    /// request is parked in the approval queue and refused `APPROVAL_PENDING`; once a
    /// person other than the caller grants it, the caller's next request of the same prompt with the same arguments
    /// goes through, once.
    pub fn with_human_approval(mut self, required: bool) -> Self {
        self.human_approval = required;
        self
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The title, if any.
    pub fn title(&self) -> Option<&str> {
        self.title.as_deref()
    }
    /// The description.
    pub fn description(&self) -> &str {
        &self.description
    }
    /// The arguments.
    pub fn arguments(&self) -> &[PromptArgument] {
        &self.arguments
    }
    /// The icons (none: empty).
    pub fn icons(&self) -> &[Value] {
        &self.icons
    }
    /// The `_meta` object, if any.
    pub fn meta(&self) -> Option<&Map<String, Value>> {
        self.meta.as_ref()
    }
    /// The scopes a caller needs one of.
    pub fn scopes(&self) -> &[String] {
        &self.scopes
    }
    /// Whether a request waits for a person's approval.
    pub fn requires_human_approval(&self) -> bool {
        self.human_approval
    }

    /// The arguments missing from `given` that are required, in order.
    pub(crate) fn missing<'a>(&'a self, given: &BTreeMap<String, String>) -> Vec<&'a str> {
        self.arguments
            .iter()
            .filter(|a| a.required && !given.contains_key(&a.name))
            .map(|a| a.name.as_str())
            .collect()
    }
}

/// One argument of a [`Prompt`] (a string).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptArgument {
    name: String,
    title: Option<String>,
    description: Option<String>,
    required: bool,
}

impl PromptArgument {
    /// An argument the caller must give.
    pub fn required(name: impl Into<String>) -> PromptArgument {
        PromptArgument {
            name: name.into(),
            title: None,
            description: None,
            required: true,
        }
    }

    /// An argument the caller may leave out.
    pub fn optional(name: impl Into<String>) -> PromptArgument {
        PromptArgument {
            required: false,
            ..PromptArgument::required(name)
        }
    }

    /// A human-readable title.
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// What the argument is for.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// The name.
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
    /// Whether it must be given.
    pub fn is_required(&self) -> bool {
        self.required
    }
}

/// Who a prompt message speaks as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Role {
    /// The person.
    User,
    /// The model.
    Assistant,
}

impl Role {
    /// The wire name: `user`, `assistant`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// What one prompt message holds.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PromptContent {
    /// Text.
    Text(String),
    /// An image, base64-encoded.
    Image {
        /// The bytes, base64-encoded.
        data: String,
        /// Its MIME type.
        mime_type: String,
    },
    /// Audio, base64-encoded.
    Audio {
        /// The bytes, base64-encoded.
        data: String,
        /// Its MIME type.
        mime_type: String,
    },
    /// A resource's contents, embedded.
    Resource(ResourceContents),
}

/// One message of a rendered prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptMessage {
    /// Who speaks.
    pub role: Role,
    /// What is said.
    pub content: PromptContent,
}

impl PromptMessage {
    /// The person says `text`.
    pub fn user(text: impl Into<String>) -> PromptMessage {
        PromptMessage {
            role: Role::User,
            content: PromptContent::Text(text.into()),
        }
    }

    /// The model says `text`.
    pub fn assistant(text: impl Into<String>) -> PromptMessage {
        PromptMessage {
            role: Role::Assistant,
            content: PromptContent::Text(text.into()),
        }
    }

    /// The person shows an image (encoded here).
    pub fn user_image(bytes: &[u8], mime_type: impl Into<String>) -> PromptMessage {
        PromptMessage {
            role: Role::User,
            content: PromptContent::Image {
                data: base64::engine::general_purpose::STANDARD.encode(bytes),
                mime_type: mime_type.into(),
            },
        }
    }

    /// The person embeds a resource's contents.
    pub fn user_resource(contents: ResourceContents) -> PromptMessage {
        PromptMessage {
            role: Role::User,
            content: PromptContent::Resource(contents),
        }
    }

    /// The bytes it takes on the wire, about.
    pub(crate) fn wire_len(&self) -> usize {
        match &self.content {
            PromptContent::Text(text) => text.len(),
            PromptContent::Image { data, .. } | PromptContent::Audio { data, .. } => data.len(),
            PromptContent::Resource(contents) => contents.wire_len(),
        }
    }
}

/// A rendered prompt.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PromptReply {
    /// A description of this rendering, if it differs from the prompt's.
    pub description: Option<String>,
    /// The messages, in order.
    pub messages: Vec<PromptMessage>,
}

impl PromptReply {
    /// A reply of these messages.
    pub fn new(messages: Vec<PromptMessage>) -> PromptReply {
        PromptReply {
            description: None,
            messages,
        }
    }
}

/// What serves prompts.
///
/// The registry reads [`prompts`](Self::prompts) when the provider is registered, and again
/// each time [`CatalogNotifier::lists_changed`](crate::catalog::CatalogNotifier::lists_changed)
/// is called. A request reaches [`get`](Self::get) only after the gates allowed it, and with every
/// required argument given (see [`ToolRegistry::get_prompt`](crate::ToolRegistry::get_prompt)).
pub trait PromptProvider: Send + Sync + 'static {
    /// The prompts.
    fn prompts(&self) -> Vec<Prompt>;

    /// Renders `name` (one of this provider's) with `arguments`.
    fn get<'a>(
        &'a self,
        name: &'a str,
        arguments: &'a BTreeMap<String, String>,
        ctx: &'a ToolContext,
    ) -> Deferred<'a, Result<PromptReply, CatalogError>>;

    /// Suggestions for `argument` of prompt `name`, given what the user typed so far
    /// (`value`). None by default.
    fn complete<'a>(
        &'a self,
        name: &'a str,
        argument: &'a str,
        value: &'a str,
    ) -> Deferred<'a, Vec<String>> {
        let _ = (name, argument, value);
        Deferred::ready(Vec::new())
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
    fn a_prompt_keeps_its_meta_and_icons_as_given() {
        let plain = Prompt::new("greet", "Greets someone");
        assert_eq!((plain.meta(), plain.icons()), (None, &[][..]));
        let meta = object(json!({"example.com/origin": "upstream", "n": [1, 2]}));
        let icon = json!({"src": "https://example.com/greet.png", "sizes": ["48x48"]});
        let prompt = plain
            .clone()
            .with_meta(meta.clone())
            .with_icons(vec![icon.clone()]);
        assert_eq!(prompt.meta(), Some(&meta));
        assert_eq!(prompt.icons(), [icon]);
        assert_ne!(prompt, plain, "they count in a comparison (a changed list)");
        assert_eq!(
            Prompt::new("greet", "Greets someone").with_meta(Map::new()),
            plain,
            "an empty _meta is none"
        );
    }
}
