//! Content blocks a tool returns itself (text, image, audio, embedded resource).
//!
//! # The convention
//!
//! By default a tool's [`ToolResult`] becomes one text block (see [`crate::mapping`]). A tool
//! that wants other blocks returns the result [`result`] builds:
//!
//! - `data` is `{"content": [block, …]}`, optionally with `"structuredContent": {…}`;
//! - `meta.mcp_content` is `true`.
//!
//! The meta flag makes the intent explicit, so a tool whose data merely *happens* to have a
//! `content` key is still rendered as JSON text. Other channels see ordinary data.
//!
//! ```
//! use milpa_mcp::content;
//!
//! let result = content::result([
//!     content::text("A red pixel:"),
//!     content::image("iVBORw0KGgo=", "image/png"),
//! ]);
//! assert!(result.success);
//! assert_eq!(result.meta.get(content::META_FLAG), Some(&serde_json::json!(true)));
//! assert_eq!(result.data["content"][1]["type"], "image");
//! ```

use milpa::ToolResult;
use serde_json::{Map, Value, json};

/// The meta field that marks a result as carrying its own content blocks.
pub const META_FLAG: &str = "mcp_content";

/// A text block.
pub fn text(text: impl Into<String>) -> Value {
    json!({"type": "text", "text": text.into()})
}

/// An image block: base64 `data` and its MIME type.
pub fn image(data_base64: impl Into<String>, mime_type: impl Into<String>) -> Value {
    json!({"type": "image", "data": data_base64.into(), "mimeType": mime_type.into()})
}

/// An audio block: base64 `data` and its MIME type.
pub fn audio(data_base64: impl Into<String>, mime_type: impl Into<String>) -> Value {
    json!({"type": "audio", "data": data_base64.into(), "mimeType": mime_type.into()})
}

/// An embedded text resource.
pub fn resource(
    uri: impl Into<String>,
    mime_type: impl Into<String>,
    text: impl Into<String>,
) -> Value {
    json!({"type": "resource", "resource": {
        "uri": uri.into(), "mimeType": mime_type.into(), "text": text.into()
    }})
}

/// An embedded binary resource (base64 `blob`).
pub fn resource_blob(
    uri: impl Into<String>,
    mime_type: impl Into<String>,
    blob_base64: impl Into<String>,
) -> Value {
    json!({"type": "resource", "resource": {
        "uri": uri.into(), "mimeType": mime_type.into(), "blob": blob_base64.into()
    }})
}

/// A link to a resource the client may fetch (protocol 2025-06-18 and later).
pub fn resource_link(uri: impl Into<String>, name: impl Into<String>) -> Value {
    json!({"type": "resource_link", "uri": uri.into(), "name": name.into()})
}

/// A successful result made of `blocks`.
pub fn result(blocks: impl IntoIterator<Item = Value>) -> ToolResult {
    build(true, blocks, None)
}

/// A successful result made of `blocks`, with structured content beside them.
pub fn result_with_structured(
    blocks: impl IntoIterator<Item = Value>,
    structured: Value,
) -> ToolResult {
    build(true, blocks, Some(structured))
}

/// A failed result (`isError: true`) made of `blocks`; `error` is what other channels show.
pub fn error_result(
    error: impl Into<String>,
    blocks: impl IntoIterator<Item = Value>,
) -> ToolResult {
    let mut result = build(false, blocks, None);
    result.error = Some(error.into());
    result
}

fn build(
    success: bool,
    blocks: impl IntoIterator<Item = Value>,
    structured: Option<Value>,
) -> ToolResult {
    let mut data = Map::new();
    data.insert("content".into(), Value::Array(blocks.into_iter().collect()));
    if let Some(structured) = structured {
        data.insert("structuredContent".into(), structured);
    }
    let mut result = ToolResult::success(Value::Object(data));
    result.success = success;
    result.with_meta(META_FLAG, Value::Bool(true))
}

/// The blocks of a result that follows the convention, if it does.
pub fn blocks_of(result: &ToolResult) -> Option<&Vec<Value>> {
    if result.meta.get(META_FLAG) != Some(&Value::Bool(true)) {
        return None;
    }
    result.data.get("content").and_then(Value::as_array)
}
