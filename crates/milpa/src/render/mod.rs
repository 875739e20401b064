//! Rendering results for people: a [`ChannelRenderer`] per channel, picked by a
//! [`RendererRegistry`].
//!
//! Models and MCP clients read the [`ToolResult`] JSON; people read text. A host registers
//! one renderer per channel it serves (or uses [`RendererRegistry::with_builtins`]) and
//! renders every result through the registry, which picks the first renderer that supports
//! the context's channel, then the default renderer, then pretty JSON.
//!
//! ```
//! use milpa::render::{PlainRenderer, RendererRegistry, TerminalRenderer};
//! use milpa::{ToolContext, ToolResult};
//! use serde_json::json;
//!
//! let renderers = RendererRegistry::new()
//!     .with_renderer(TerminalRenderer::new(false))
//!     .with_default_renderer(PlainRenderer);
//! let result = ToolResult::success(json!({"id": 7})).with_message("Saved.");
//! assert_eq!(renderers.render(&result, Some(&ToolContext::cli())), "✓ Saved.\n  Id: 7\n");
//! assert_eq!(renderers.render(&result, None), "Saved.\n\n- Id: 7");
//! ```

mod plain;
mod registry;
mod terminal;

use serde_json::Value;

use crate::context::ToolContext;
use crate::result::ToolResult;

pub use plain::PlainRenderer;
pub use registry::RendererRegistry;
pub use terminal::TerminalRenderer;

/// Turns a result into text for one kind of channel.
pub trait ChannelRenderer: Send + Sync {
    /// Whether this renderer is meant for `channel` (`"default"` when there is no context).
    fn supports(&self, channel: &str) -> bool;

    /// The text for `result`. `ctx` is the caller's context, when there is one.
    fn render(&self, result: &ToolResult, ctx: Option<&ToolContext>) -> String;
}

/// A key as a label: `_` becomes a space and the first letter is upper-cased
/// (`created_at` → `Created at`).
pub(crate) fn label(key: &str) -> String {
    let spaced = key.replace('_', " ");
    let mut chars = spaced.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Compact JSON, non-ASCII left as is.
pub(crate) fn json_text(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// A scalar as text (strings without quotes); arrays and objects as compact JSON.
pub(crate) fn scalar_text(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(text) => text.clone(),
        Value::Bool(flag) => flag.to_string(),
        Value::Number(number) => number.to_string(),
        Value::Array(_) | Value::Object(_) => json_text(value),
    }
}

/// The id and display name of the `index`-th item of a list: `id` (else the 1-based
/// position) and the first of `nombre`, `name`, `title` (else `N/A`); a non-object item is
/// its own name.
pub(crate) fn item_id_and_name(index: usize, item: &Value) -> (String, String) {
    let id = match item.get("id") {
        Some(id) if !id.is_null() => scalar_text(id),
        _ => (index + 1).to_string(),
    };
    let name = if item.is_object() {
        ["nombre", "name", "title"]
            .iter()
            .filter_map(|key| item.get(*key))
            .find(|value| !value.is_null())
            .map_or_else(|| "N/A".to_owned(), scalar_text)
    } else {
        scalar_text(item)
    };
    (id, name)
}

/// `page`, `total_pages`, `total_items` of `meta.pagination`, as text.
pub(crate) fn pagination_numbers(result: &ToolResult) -> Option<[String; 3]> {
    let pagination = result.pagination()?.as_object()?;
    let field = |key: &str| pagination.get(key).map(scalar_text).unwrap_or_default();
    Some([field("page"), field("total_pages"), field("total_items")])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn labels_and_items() {
        assert_eq!(label("created_at"), "Created at");
        assert_eq!(label("ébc"), "Ébc");
        assert_eq!(label(""), "");
        assert_eq!(
            item_id_and_name(0, &json!({"title": "t", "name": null})),
            ("1".into(), "t".into())
        );
        assert_eq!(
            item_id_and_name(4, &json!({"id": "x9", "nombre": "n", "name": "m"})),
            ("x9".into(), "n".into())
        );
        assert_eq!(item_id_and_name(1, &json!({})), ("2".into(), "N/A".into()));
        assert_eq!(
            item_id_and_name(2, &json!("plain")),
            ("3".into(), "plain".into())
        );
    }
}
