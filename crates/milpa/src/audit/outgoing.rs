//! What leaves milpa: the result a caller gets back (over MCP, the CLI, a library call) has
//! every secret argument value of its call scrubbed from its texts, as the audit record
//! has. A failing command's stderr that echoes its `password` argument, a tool that
//! returns its token in a message, a text content block quoting a key: all reach the caller
//! with [`REDACTED_IN_TEXT`](super::REDACTED_IN_TEXT) in the secret's place.
//!
//! Scrubbed: `error`, `message`, and every string inside `data` at any depth (text content
//! blocks are strings inside `data`). Left alone: object keys, `meta` (the runtime's own
//! facts), and the binary payloads of media blocks (`data` of an `image`/`audio` block,
//! `blob` of a resource), whose base64 would be corrupted by a replacement and cannot quote
//! a text secret readably anyway.

use std::borrow::Cow;

use serde_json::Value;

use super::Redactor;
use crate::result::ToolResult;

/// Replaces every one of `secrets` (from [`Redactor::argument_secrets`]) in the texts of
/// `result`. Does nothing when `secrets` is empty.
pub(crate) fn scrub_result(result: &mut ToolResult, secrets: &[Cow<'_, str>]) {
    if secrets.is_empty() {
        return;
    }
    for text in [&mut result.error, &mut result.message]
        .into_iter()
        .flatten()
    {
        scrub_string(text, secrets);
    }
    scrub_value(&mut result.data, secrets);
}

/// Whether `result` could quote one of `args`' secrets at all: secrets sit under the keys of
/// an object (at any depth), and only texts can quote them. Asked before the secrets are
/// looked for, since looking means asking the redactor about every argument key: for
/// `{"a": 2, "b": 3}` answered with a number, that was about 950 of the call's 4 400
/// instructions (callgrind, one in-process call), for nothing.
#[inline]
pub(crate) fn may_quote_secrets(args: &Value, result: &ToolResult) -> bool {
    let keyed = match args {
        Value::Object(map) => !map.is_empty(),
        Value::Array(items) => !items.is_empty(),
        _ => false,
    };
    keyed && (result.error.is_some() || result.message.is_some() || holds_text(&result.data))
}

/// Whether `value` is or holds a string (object keys aside).
fn holds_text(value: &Value) -> bool {
    match value {
        Value::String(_) => true,
        Value::Array(items) => items.iter().any(holds_text),
        Value::Object(map) => map.values().any(holds_text),
        _ => false,
    }
}

fn scrub_string(text: &mut String, secrets: &[Cow<'_, str>]) {
    if let Cow::Owned(clean) = Redactor::scrub_secrets(text, secrets) {
        *text = clean;
    }
}

fn scrub_value(value: &mut Value, secrets: &[Cow<'_, str>]) {
    match value {
        Value::String(text) => scrub_string(text, secrets),
        Value::Array(items) => items.iter_mut().for_each(|v| scrub_value(v, secrets)),
        Value::Object(map) => {
            let media = matches!(
                map.get("type").and_then(Value::as_str),
                Some("image" | "audio")
            );
            for (key, v) in map.iter_mut() {
                let payload = (media && key == "data") || key == "blob";
                if !(payload && v.is_string()) {
                    scrub_value(v, secrets);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_text_of_a_result_is_scrubbed_and_media_payloads_kept() {
        let args = json!({"user": "ann", "password": "hunter22", "pin": 1234});
        let secrets = Redactor::default().argument_secrets(&args);
        assert_eq!(secrets, ["hunter22", "1234"]);
        let mut result = ToolResult::error("login hunter22 failed").with_message("pin 1234");
        result.data = json!({
            "content": [
                {"type": "text", "text": "echo hunter22"},
                {"type": "image", "data": "aHVudGVyMjI=hunter22", "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "x:hunter22", "blob": "hunter22"}},
            ],
            "deep": [["ann:hunter22"], 1234],
        });
        scrub_result(&mut result, &secrets);
        assert_eq!(result.error.as_deref(), Some("login [REDACTED] failed"));
        assert_eq!(result.message.as_deref(), Some("pin [REDACTED]"));
        assert_eq!(
            result.data,
            json!({
                "content": [
                    {"type": "text", "text": "echo [REDACTED]"},
                    {"type": "image", "data": "aHVudGVyMjI=hunter22", "mimeType": "image/png"},
                    {"type": "resource", "resource": {"uri": "x:[REDACTED]", "blob": "hunter22"}},
                ],
                // Numbers are not texts: a number in data stays a number.
                "deep": [["ann:[REDACTED]"], 1234],
            })
        );
    }

    #[test]
    fn only_texts_after_keyed_arguments_are_looked_at() {
        let args = json!({"password": "hunter22"});
        let number = ToolResult::success(json!({"sum": [5, 6.5, null, true]}));
        assert!(!may_quote_secrets(&args, &number));
        assert!(!may_quote_secrets(
            &json!("hunter22"),
            &ToolResult::error("hunter22")
        ));
        assert!(!may_quote_secrets(
            &json!({}),
            &ToolResult::error("hunter22")
        ));
        let nested = ToolResult::success(json!({"rows": [[1, "hunter22"]]}));
        assert!(may_quote_secrets(&args, &nested));
        assert!(may_quote_secrets(&json!([{"password": "x"}]), &nested));
        assert!(may_quote_secrets(&args, &ToolResult::error("failed")));
        assert!(may_quote_secrets(
            &args,
            &ToolResult::success(json!(1)).with_message("m")
        ));
    }

    #[test]
    fn no_secret_keys_means_no_secrets() {
        let args = json!({"text": "hunter22", "list": ["a", "b"], "n": 5});
        assert!(Redactor::default().argument_secrets(&args).is_empty());
    }
}
