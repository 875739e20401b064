//! How the runtime's types appear over MCP (DESIGN §6).
//!
//! - A [`ToolDefinition`] becomes a `tools/list` entry: `name`, `description`,
//!   `inputSchema` (as declared; `"type": "object"` added when missing), `outputSchema`
//!   when declared, `title` when given, `annotations` (`readOnlyHint` = not mutating,
//!   `destructiveHint` = mutating unless given; every other annotation given kept), and
//!   `_meta` when given (an upstream server's tools keep theirs).
//! - A [`ToolResult`] becomes a `tools/call` result: one text block rendered for the `mcp`
//!   channel (or the blocks the tool returned, see [`crate::content`]), `structuredContent`
//!   (`data` when it is an object, else `{"result": data}`, left out when `data` is null),
//!   `isError` = not success, and `_meta.milpa` = the result's meta.
//! - `structuredContent` always carries `data` whole (a declared output schema describes
//!   it); the text block repeats at most [`TEXT_COPY_LIMIT`] bytes of it, then says where
//!   the rest is, so a large result is not sent twice.
//! - Except for a *failed* result of a tool that declares an output schema: its data (an
//!   `APPROVAL_PENDING`'s `approval_id`, a refusal's `{field, message}`) does not match that
//!   schema, and clients check `structuredContent` against it even when `isError` is set
//!   (the TypeScript SDK's `callTool` throws). Such data goes to `_meta.milpa_data`.

use milpa::{ConfirmationTicket, ErrorCode, ToolDefinition, ToolResult, ToolSummary};
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::{Map, Value};

use crate::content;

/// The `tools/list` entry of a tool: its [`ToolSummary`] (whose schemas are normalized to
/// the `"type": "object"` MCP requires) without `version`, plus annotations.
pub fn tool_entry(definition: &ToolDefinition) -> Value {
    let summary = ToolSummary::from_definition(definition);
    let mut entry = Map::new();
    entry.insert("name".into(), Value::String(summary.name));
    entry.insert("description".into(), Value::String(summary.description));
    entry.insert("inputSchema".into(), summary.input_schema);
    if let Some(output) = summary.output_schema {
        entry.insert("outputSchema".into(), output);
    }
    let options = definition.options();
    if let Some(title) = &options.title {
        entry.insert("title".into(), Value::String(title.clone()));
    }
    let mutating = definition.is_mutating();
    let mut annotations = options.annotations.clone().unwrap_or_default();
    annotations.insert("readOnlyHint".into(), Value::Bool(!mutating));
    annotations
        .entry("destructiveHint")
        .or_insert(Value::Bool(mutating));
    entry.insert("annotations".into(), Value::Object(annotations));
    if !options.icons.is_empty() {
        entry.insert("icons".into(), Value::Array(options.icons.clone()));
    }
    if let Some(meta) = &options.meta {
        entry.insert("_meta".into(), Value::Object(meta.clone()));
    }
    Value::Object(entry)
}

/// The most bytes of `data` the text block repeats (64 KiB). `structuredContent` carries
/// `data` whole; without this cap a large result went out twice (1 MiB of NULs from a
/// command's stdout was a 12.6 MB message, each NUL escaped in both copies).
pub const TEXT_COPY_LIMIT: usize = 64 * 1024;

/// The text a result reads as on the `mcp` channel.
///
/// On success: `data` as compact JSON (a string as itself), after `message` when there is
/// one; past [`TEXT_COPY_LIMIT`] bytes it is cut (on a character boundary) and a marker
/// points to `structuredContent`. On failure: the error message (an `APPROVAL_PENDING`
/// one followed by the page where a person approves, when the result has an
/// `approve_url`; a `VALIDATION_ERROR` one followed by its message, the failures in the
/// schema's words, one a line). A confirmation request says how to confirm.
pub fn render_text(tool: &str, result: &ToolResult) -> String {
    if !result.success {
        let error = result
            .error
            .clone()
            .or_else(|| result.message.clone())
            .unwrap_or_else(|| "The call failed".to_owned());
        return match result.data.get("approve_url").and_then(Value::as_str) {
            Some(url) if result.code() == Some(&ErrorCode::ApprovalPending) => {
                format!("{error}\nA person can approve it at {url}")
            }
            _ => match (&result.message, result.code()) {
                // The arguments' failures in the schema's words follow the original's.
                (Some(words), Some(ErrorCode::ValidationError)) if result.error.is_some() => {
                    format!("{error}\n{words}")
                }
                _ => error,
            },
        };
    }
    if result.requires_confirmation()
        && let Some(token) = result.confirm_token()
    {
        // A confirmation result that did not come with its ticket (a caller that renders a
        // bare result): the same text, from the result's fields.
        let summary = result
            .data
            .get("action_summary")
            .and_then(Value::as_str)
            .unwrap_or(tool);
        let expires = result.data.get("expires_at").and_then(Value::as_str);
        return confirmation_instructions(tool, summary, token, expires);
    }
    let data = match &result.data {
        Value::String(s) => Some(text_copy(s.as_bytes(), s.len())),
        Value::Null if result.message.is_some() => None,
        other => Some(compact_json_copy(other)),
    };
    match (&result.message, data) {
        (Some(message), Some(data)) => format!("{message}\n{data}"),
        (Some(message), None) => message.clone(),
        (None, Some(data)) => data,
        (None, None) => String::new(),
    }
}

/// The text of a confirmation request: what to confirm and how to replay the ticket.
pub fn confirmation_text(ticket: &ConfirmationTicket) -> String {
    confirmation_instructions(
        ticket.tool(),
        ticket.summary(),
        ticket.token(),
        Some(&ticket.expires_at_text()),
    )
}

fn confirmation_instructions(
    tool: &str,
    summary: &str,
    token: &str,
    expires: Option<&str>,
) -> String {
    let expires = expires.map(|e| format!(" before {e}")).unwrap_or_default();
    format!(
        "Confirmation required: {summary}. Nothing was done yet. To proceed, call \
             {tool} again with the argument confirm_token = \"{token}\"{expires}."
    )
}

/// `bytes` (valid UTF-8 up to where it may have been cut), whole when `total` is within
/// [`TEXT_COPY_LIMIT`], else its first bytes up to the limit and a marker.
fn text_copy(bytes: &[u8], total: usize) -> String {
    if total <= TEXT_COPY_LIMIT {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    let head = &bytes[..TEXT_COPY_LIMIT.min(bytes.len())];
    // Cut on a character boundary.
    let head = match std::str::from_utf8(head) {
        Ok(text) => text,
        Err(error) => std::str::from_utf8(&head[..error.valid_up_to()]).unwrap_or_default(),
    };
    format!("{head}\n[cut at {TEXT_COPY_LIMIT} bytes: structuredContent has the whole result]")
}

/// `data` as compact JSON for the text block, serialized no further than needed to know
/// whether it passes [`TEXT_COPY_LIMIT`].
fn compact_json_copy(data: &Value) -> String {
    let mut out = BoundedBuf {
        bytes: Vec::new(),
        room: TEXT_COPY_LIMIT + 1,
    };
    let whole = serde_json::to_writer(&mut out, data).is_ok();
    let total = if whole { out.bytes.len() } else { usize::MAX };
    text_copy(&out.bytes, total)
}

/// A buffer that takes at most `room` bytes, then refuses (which stops serialization).
struct BoundedBuf {
    bytes: Vec<u8>,
    room: usize,
}

impl std::io::Write for BoundedBuf {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.room == 0 {
            return Err(std::io::Error::other("the text copy is full"));
        }
        let n = buf.len().min(self.room);
        self.bytes.extend_from_slice(&buf[..n]);
        self.room -= n;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The `tools/call` result of a [`ToolResult`].
pub fn call_result(tool: &str, result: &ToolResult) -> Value {
    serde_json::to_value(CallResult::new(tool, result)).unwrap_or(Value::Null)
}

/// A `tools/call` result that serializes straight from the [`ToolResult`], without an
/// intermediate JSON tree (what the server writes).
#[derive(Debug, Clone, Copy)]
pub struct CallResult<'a> {
    tool: &'a str,
    result: &'a ToolResult,
    confirmation: Option<&'a ConfirmationTicket>,
    output_schema: bool,
    result_type: bool,
}

impl<'a> CallResult<'a> {
    /// The result of a call of `tool` (a tool without an output schema).
    pub fn new(tool: &'a str, result: &'a ToolResult) -> Self {
        CallResult {
            tool,
            result,
            confirmation: None,
            output_schema: false,
            result_type: false,
        }
    }

    /// The ticket `result` was rendered from, when it is a confirmation: its text is then
    /// taken from the ticket ([`confirmation_text`]).
    pub fn with_confirmation(mut self, ticket: Option<&'a ConfirmationTicket>) -> Self {
        self.confirmation = ticket;
        self
    }

    /// The text block.
    fn text(&self) -> String {
        match self.confirmation {
            Some(ticket) => confirmation_text(ticket),
            None => render_text(self.tool, self.result),
        }
    }

    /// Whether the result carries `resultType: "complete"` (2026-07-28 requires it on every
    /// result; older revisions do not know the field).
    pub fn with_result_type(mut self, on: bool) -> Self {
        self.result_type = on;
        self
    }

    /// Whether the tool declares an output schema: a failed result's data then goes to
    /// `_meta.milpa_data` instead of `structuredContent` (see the module docs).
    pub fn with_output_schema(mut self, declared: bool) -> Self {
        self.output_schema = declared;
        self
    }

    /// Whether `data` stays out of `structuredContent` (and goes to `_meta.milpa_data`).
    fn data_in_meta(&self) -> bool {
        self.output_schema && !self.result.success && !self.result.data.is_null()
    }

    /// Appends the result as JSON: the bytes its `Serialize` gives, written by hand
    /// because one is written for every call.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        let result = self.result;
        out.push(b'{');
        if self.result_type {
            out.extend_from_slice(b"\"resultType\":\"complete\",");
        }
        if let Some(blocks) = content::blocks_of(result) {
            out.extend_from_slice(b"\"content\":");
            write_json(out, blocks);
            if let Some(structured) = result.data.get("structuredContent") {
                out.extend_from_slice(b",\"structuredContent\":");
                write_json(out, structured);
            }
        } else {
            out.extend_from_slice(b"\"content\":[{\"type\":\"text\",\"text\":");
            write_json(out, &self.text());
            out.extend_from_slice(b"}]");
            match &result.data {
                Value::Null => {}
                _ if self.data_in_meta() => {}
                Value::Object(_) => {
                    out.extend_from_slice(b",\"structuredContent\":");
                    write_json(out, &result.data);
                }
                other => {
                    out.extend_from_slice(b",\"structuredContent\":{\"result\":");
                    write_json(out, other);
                    out.push(b'}');
                }
            }
        }
        out.extend_from_slice(b",\"isError\":");
        out.extend_from_slice(if result.success { b"false" } else { b"true" });
        out.extend_from_slice(b",\"_meta\":{\"milpa\":");
        result.meta.write_json(out);
        if self.data_in_meta() && content::blocks_of(result).is_none() {
            out.extend_from_slice(b",\"milpa_data\":");
            write_json(out, &result.data);
        }
        out.extend_from_slice(b"}}");
    }
}

/// Appends `value` as JSON (what `serde_json` writes for it).
pub(crate) fn write_json(out: &mut Vec<u8>, value: &(impl Serialize + ?Sized)) {
    // Writing into a Vec cannot fail, and the values written here (JSON values, strings,
    // numbers) always serialize.
    let _ = serde_json::to_writer(out, value);
}

#[derive(Serialize)]
struct TextBlock<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

#[derive(Serialize)]
struct Wrapped<'a> {
    result: &'a Value,
}

#[derive(Serialize)]
struct MilpaMeta<'a> {
    milpa: &'a milpa::Meta,
    #[serde(skip_serializing_if = "Option::is_none")]
    milpa_data: Option<&'a Value>,
}

impl Serialize for CallResult<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let result = self.result;
        let mut map = serializer.serialize_map(None)?;
        if self.result_type {
            map.serialize_entry("resultType", "complete")?;
        }
        if let Some(blocks) = content::blocks_of(result) {
            map.serialize_entry("content", blocks)?;
            if let Some(structured) = result.data.get("structuredContent") {
                map.serialize_entry("structuredContent", structured)?;
            }
        } else {
            let text = self.text();
            map.serialize_entry(
                "content",
                &[TextBlock {
                    kind: "text",
                    text: &text,
                }],
            )?;
            match &result.data {
                Value::Null => {}
                _ if self.data_in_meta() => {}
                Value::Object(_) => map.serialize_entry("structuredContent", &result.data)?,
                other => map.serialize_entry("structuredContent", &Wrapped { result: other })?,
            }
        }
        map.serialize_entry("isError", &!result.success)?;
        let data_in_meta = self.data_in_meta() && content::blocks_of(result).is_none();
        map.serialize_entry(
            "_meta",
            &MilpaMeta {
                milpa: &result.meta,
                milpa_data: data_in_meta.then_some(&result.data),
            },
        )?;
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Both writers, checked against each other.
    fn written(answer: CallResult<'_>) -> Value {
        let mut out = Vec::new();
        answer.write_json(&mut out);
        let by_hand: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(by_hand, serde_json::to_value(answer).unwrap());
        by_hand
    }

    #[test]
    fn a_failed_result_of_a_tool_with_an_output_schema_keeps_its_data_out_of_structured_content() {
        let mut parked = ToolResult::error_with_code(ErrorCode::ApprovalPending, "Waiting.");
        parked.data = json!({"approval_id": "a1", "action_summary": "w()"});
        let v = written(CallResult::new("w", &parked).with_output_schema(true));
        assert!(v.get("structuredContent").is_none(), "{v}");
        assert_eq!(v["_meta"]["milpa_data"]["approval_id"], "a1");
        assert_eq!(v["_meta"]["milpa"]["code"], "APPROVAL_PENDING");
        assert_eq!(v["isError"], true);
        // Without a schema, or on success, nothing moves.
        let v = written(CallResult::new("w", &parked));
        assert_eq!(v["structuredContent"]["approval_id"], "a1");
        assert!(v["_meta"].get("milpa_data").is_none());
        let ok = ToolResult::success(json!({"written": 3}));
        let v = written(CallResult::new("w", &ok).with_output_schema(true));
        assert_eq!(v["structuredContent"], json!({"written": 3}));
        assert!(v["_meta"].get("milpa_data").is_none());
    }

    #[test]
    fn success_text_and_structure() {
        let r = ToolResult::success(json!({"a": 1})).with_message("Done.");
        let v = call_result("t", &r);
        assert_eq!(v["content"][0]["text"], "Done.\n{\"a\":1}");
        assert_eq!(v["structuredContent"], json!({"a": 1}));
        assert_eq!(v["isError"], false);

        let v = call_result("t", &ToolResult::success(json!("hi")));
        assert_eq!(v["content"][0]["text"], "hi");
        assert_eq!(v["structuredContent"], json!({"result": "hi"}));

        let v = call_result("t", &ToolResult::success(json!(3)));
        assert_eq!(v["structuredContent"], json!({"result": 3}));

        let v = call_result("t", &ToolResult::success(Value::Null));
        assert!(v.get("structuredContent").is_none());
    }

    #[test]
    fn the_text_block_repeats_a_bounded_copy_cut_on_a_character_boundary() {
        let small = ToolResult::success(json!({"a": "ü".repeat(10)}));
        assert_eq!(
            render_text("t", &small),
            serde_json::to_string(&small.data).unwrap()
        );
        // Just at the limit: whole.
        let at_limit = "x".repeat(TEXT_COPY_LIMIT);
        assert_eq!(
            render_text("t", &ToolResult::success(json!(at_limit))),
            at_limit
        );
        for data in [
            json!("é".repeat(TEXT_COPY_LIMIT)),
            json!(["é".repeat(TEXT_COPY_LIMIT)]),
        ] {
            let result = ToolResult::success(data.clone()).with_message("Done.");
            let text = render_text("t", &result);
            let (head, marker) = text.rsplit_once('\n').unwrap();
            assert_eq!(
                marker,
                "[cut at 65536 bytes: structuredContent has the whole result]"
            );
            assert!(head.len() <= "Done.\n".len() + TEXT_COPY_LIMIT);
            assert!(head.len() > TEXT_COPY_LIMIT - 2);
            // The structured copy is whole, in both writers.
            let v = call_result("t", &result);
            let mut out = Vec::new();
            CallResult::new("t", &result).write_json(&mut out);
            assert_eq!(serde_json::from_slice::<Value>(&out).unwrap(), v);
            let whole = if data.is_string() {
                &v["structuredContent"]["result"]
            } else {
                &v["structuredContent"]["result"][0]
            };
            assert_eq!(whole.as_str().unwrap().len(), 2 * TEXT_COPY_LIMIT);
        }
    }

    #[test]
    fn a_validation_error_reads_the_original_then_the_schemas_words() {
        let mut refused = ToolResult::validation_error("id: Expected integer, got string");
        refused.message = Some("'id' must be an integer ≥ 1 (got a string)".to_owned());
        assert_eq!(
            render_text("t", &refused),
            "id: Expected integer, got string\n'id' must be an integer ≥ 1 (got a string)"
        );
        // Another refusal with a message keeps the error alone, as before.
        let mut denied = ToolResult::forbidden("no");
        denied.message = Some("a note".to_owned());
        assert_eq!(render_text("t", &denied), "no");
        // A validation error without words (a bad token) is its message.
        let token = ToolResult::validation_error("Invalid or expired confirmation token");
        assert_eq!(
            render_text("t", &token),
            "Invalid or expired confirmation token"
        );
    }

    #[test]
    fn errors_carry_the_code() {
        let r = ToolResult::error_with_code(ErrorCode::Forbidden, "no");
        let v = call_result("t", &r);
        assert_eq!(v["content"][0]["text"], "no");
        assert_eq!(v["isError"], true);
        assert_eq!(v["_meta"]["milpa"]["code"], "FORBIDDEN");
        assert!(v.get("structuredContent").is_none());
    }

    #[test]
    fn own_blocks_pass_through() {
        let r = content::result([content::text("x"), content::audio("AA==", "audio/wav")]);
        let v = call_result("t", &r);
        assert_eq!(v["content"][1]["type"], "audio");
        assert!(v.get("structuredContent").is_none());
    }

    #[test]
    fn the_hand_written_response_is_what_serde_writes() {
        use crate::jsonrpc::{self, RequestId};
        use milpa::{RuntimeMeta, ToolContext};

        let ctx = ToolContext::mcp("r-1", Some("ali\"ce".into()), ["*"]);
        let results = vec![
            ToolResult::success(json!(3)),
            ToolResult::success(json!({"a": [1, "b\n"], "ü": null})).with_message("Done."),
            ToolResult::success(json!("plain \"text\"")),
            ToolResult::success(Value::Null).with_message("only a message"),
            ToolResult::success(Value::Null),
            ToolResult::error_with_code(milpa::ErrorCode::RateLimited, "slow\tdown")
                .with_meta("retry_after_seconds", json!(2)),
            ToolResult::confirmation("Delete?", json!({"id": 4}), "delete", "note", json!(4))
                .with_meta("confirm_token", json!("tok123")),
            content::result([content::text("x"), content::image("AA==", "image/png")]),
            content::result_with_structured([content::text("y")], json!({"k": 1})),
            content::error_result("bad", [content::text("z")]),
        ];
        for (i, mut result) in results.into_iter().enumerate() {
            if i % 2 == 0 {
                result
                    .meta
                    .set_runtime(RuntimeMeta::new("tool", i as u64, &ctx));
            }
            for id in [
                RequestId::Number(-7),
                RequestId::Number(42),
                RequestId::String("id \"x\"".into()),
            ] {
                let call = CallResult::new("notes.delete", &result);
                assert_eq!(
                    jsonrpc::call_response(&id, &call),
                    jsonrpc::response(&id, &call),
                    "case {i}"
                );
            }
        }
    }

    #[test]
    fn schemas_get_an_object_type() {
        let input_schema = |schema: Value| {
            let definition = ToolDefinition::builder("t")
                .input_schema(schema)
                .sync(|_, _| Value::Null);
            tool_entry(&definition)["inputSchema"].clone()
        };
        assert_eq!(input_schema(json!({})), json!({"type": "object"}));
        let typed = json!({"type": "object", "$defs": {}});
        assert_eq!(input_schema(typed.clone()), typed);
        // Added first, the rest kept in order.
        let untyped = input_schema(json!({"properties": {"a": {"type": "integer"}}}));
        assert_eq!(
            untyped.to_string(),
            r#"{"type":"object","properties":{"a":{"type":"integer"}}}"#
        );
    }
}
