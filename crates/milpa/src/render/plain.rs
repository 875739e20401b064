//! [`PlainRenderer`]: plain text for any channel.

use serde_json::Value;

use crate::context::ToolContext;
use crate::render::{ChannelRenderer, item_id_and_name, label, pagination_numbers, scalar_text};
use crate::result::ToolResult;

/// Plain text without markup, for every channel (the usual default renderer).
///
/// * success: the message (or `Operation completed successfully.`), then, after a blank
///   line, the data: one `#<id>: <name>` line per item of a `list` result, one
///   `- <Label>: <value>` line per field of an object, one `- <value>` line per item of any
///   other list, or a scalar as is; then `Page p of tp (ti items total)` when paginated;
/// * failure: `Error: <error>`, and `Suggestion: <s>` after a blank line when a blocked
///   result has one.
///
/// Values: strings as is, `true`/`false`, `null` as nothing, arrays and objects as JSON.
/// Texts are not escaped: this renderer writes for channels that carry text to a program
/// or a chat, not to a terminal (use [`TerminalRenderer`](crate::render::TerminalRenderer)
/// there, which escapes control characters).
/// The original crashed on a non-`list` result whose data is a list, and showed nothing
/// for scalar data; both render here.
///
/// ```
/// use milpa::render::{ChannelRenderer, PlainRenderer};
/// use milpa::ToolResult;
/// use serde_json::json;
///
/// let text = PlainRenderer.render(&ToolResult::success(json!(["a", "b"])), None);
/// assert_eq!(text, "Operation completed successfully.\n\n- a\n- b");
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct PlainRenderer;

impl ChannelRenderer for PlainRenderer {
    fn supports(&self, _channel: &str) -> bool {
        true
    }

    fn render(&self, result: &ToolResult, _ctx: Option<&ToolContext>) -> String {
        if !result.success {
            let mut text = format!(
                "Error: {}",
                result.error.as_deref().unwrap_or("Unknown error")
            );
            if result.is_blocked()
                && let Some(Value::String(suggestion)) = result.meta.get("suggestion")
            {
                text.push_str("\n\nSuggestion: ");
                text.push_str(suggestion);
            }
            return text;
        }
        let mut text = result
            .message
            .clone()
            .unwrap_or_else(|| "Operation completed successfully.".to_owned());
        let lines = data_lines(result);
        if !lines.is_empty() {
            text.push_str("\n\n");
            text.push_str(&lines.join("\n"));
        }
        if let Some([page, total_pages, total_items]) = pagination_numbers(result) {
            text.push_str(&format!(
                "\n\nPage {page} of {total_pages} ({total_items} items total)"
            ));
        }
        text
    }
}

fn data_lines(result: &ToolResult) -> Vec<String> {
    match &result.data {
        Value::Array(items) if result.result_type() == "list" => items
            .iter()
            .enumerate()
            .map(|(index, item)| {
                let (id, name) = item_id_and_name(index, item);
                format!("#{id}: {name}")
            })
            .collect(),
        Value::Array(items) => items
            .iter()
            .map(|item| format!("- {}", scalar_text(item)))
            .collect(),
        Value::Object(fields) => fields
            .iter()
            .map(|(key, value)| format!("- {}: {}", label(key), scalar_text(value)))
            .collect(),
        Value::Null => Vec::new(),
        scalar => {
            let text = scalar_text(scalar);
            if text.is_empty() {
                Vec::new()
            } else {
                vec![text]
            }
        }
    }
}
