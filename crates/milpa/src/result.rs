//! [`ToolResult`]: the one shape every call returns, and [`ErrorCode`], what a refusal means.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::context::ToolContext;
use crate::json_write::{FieldVisitor, ObjectWriter, SerdeFields};

/// The meta key of a scope denial's needed scopes ([`ToolResult::required_scopes`]).
const REQUIRED_SCOPES_KEY: &str = "required_scopes";

/// What went wrong, as a stable string callers match on (`meta.code`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// `TOOL_NOT_FOUND`: no tool has that name.
    ToolNotFound,
    /// `VALIDATION_ERROR`: the arguments (or a confirmation token) were refused.
    ValidationError,
    /// `NOT_FOUND`: the tool looked for something that does not exist.
    NotFound,
    /// `UNAUTHORIZED`: the caller is not authenticated.
    Unauthorized,
    /// `FORBIDDEN`: the policy gate denied the call.
    Forbidden,
    /// `CONFIRMATION_REQUIRED`: the action needs a confirmation first.
    ConfirmationRequired,
    /// `TIMEOUT`: the tool ran past its hard timeout and was cancelled.
    Timeout,
    /// `INTERNAL_ERROR`: the tool failed or panicked.
    InternalError,
    /// `RATE_LIMITED`: the caller spent its budget for this tool.
    RateLimited,
    /// `CANCELLED`: the caller cancelled the call.
    Cancelled,
    /// `CONFIRMATION_DECLINED`: the person asked to confirm the action declined or
    /// cancelled it; nothing ran.
    ConfirmationDeclined,
    /// `RESULT_TOO_LARGE`: the tool's result is larger than the registry's cap
    /// ([`ToolRegistryBuilder::max_result_bytes`](crate::ToolRegistryBuilder::max_result_bytes)).
    ResultTooLarge,
    /// `UNAVAILABLE`: a collaborator the call needs (a rate limiter, a store) failed, so the
    /// call was refused rather than let through unchecked.
    Unavailable,
    /// `APPROVAL_PENDING`: the call is parked until a person approves it; nothing ran.
    /// Replay it with `confirm_token = <approval_id>` once approved.
    ApprovalPending,
    /// `UPSTREAM_UNAVAILABLE`: the upstream MCP server a gateway tool forwards to is down or
    /// unreachable; the rest of the server keeps serving.
    UpstreamUnavailable,
    /// Any other code a tool chose.
    Other(Box<str>),
}

impl ErrorCode {
    /// The wire string, e.g. `"FORBIDDEN"`.
    pub fn as_str(&self) -> &str {
        match self {
            ErrorCode::ToolNotFound => "TOOL_NOT_FOUND",
            ErrorCode::ValidationError => "VALIDATION_ERROR",
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::Unauthorized => "UNAUTHORIZED",
            ErrorCode::Forbidden => "FORBIDDEN",
            ErrorCode::ConfirmationRequired => "CONFIRMATION_REQUIRED",
            ErrorCode::Timeout => "TIMEOUT",
            ErrorCode::InternalError => "INTERNAL_ERROR",
            ErrorCode::RateLimited => "RATE_LIMITED",
            ErrorCode::Cancelled => "CANCELLED",
            ErrorCode::ConfirmationDeclined => "CONFIRMATION_DECLINED",
            ErrorCode::ResultTooLarge => "RESULT_TOO_LARGE",
            ErrorCode::Unavailable => "UNAVAILABLE",
            ErrorCode::ApprovalPending => "APPROVAL_PENDING",
            ErrorCode::UpstreamUnavailable => "UPSTREAM_UNAVAILABLE",
            ErrorCode::Other(code) => code,
        }
    }

    /// Parses a wire string; unknown codes become [`ErrorCode::Other`].
    pub fn parse(code: &str) -> ErrorCode {
        match code {
            "TOOL_NOT_FOUND" => ErrorCode::ToolNotFound,
            "VALIDATION_ERROR" => ErrorCode::ValidationError,
            "NOT_FOUND" => ErrorCode::NotFound,
            "UNAUTHORIZED" => ErrorCode::Unauthorized,
            "FORBIDDEN" => ErrorCode::Forbidden,
            "CONFIRMATION_REQUIRED" => ErrorCode::ConfirmationRequired,
            "TIMEOUT" => ErrorCode::Timeout,
            "INTERNAL_ERROR" => ErrorCode::InternalError,
            "RATE_LIMITED" => ErrorCode::RateLimited,
            "CANCELLED" => ErrorCode::Cancelled,
            "CONFIRMATION_DECLINED" => ErrorCode::ConfirmationDeclined,
            "RESULT_TOO_LARGE" => ErrorCode::ResultTooLarge,
            "UNAVAILABLE" => ErrorCode::Unavailable,
            "APPROVAL_PENDING" => ErrorCode::ApprovalPending,
            "UPSTREAM_UNAVAILABLE" => ErrorCode::UpstreamUnavailable,
            other => ErrorCode::Other(other.into()),
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ErrorCode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = Cow::<str>::deserialize(deserializer)?;
        Ok(ErrorCode::parse(&text))
    }
}

/// What the runtime adds to every result: which tool, how long, for which request.
///
/// Kept typed (not as JSON), holding the call's context by reference count, so stamping it
/// on a result costs two counter increments; it becomes JSON only when the result is
/// serialized.
#[derive(Debug, Clone)]
pub struct RuntimeMeta {
    tool: Arc<str>,
    took_ms: u64,
    ctx: ToolContext,
}

impl RuntimeMeta {
    /// The meta of a call of `tool` in `ctx` that took `took_ms`.
    pub fn new(tool: impl Into<Arc<str>>, took_ms: u64, ctx: &ToolContext) -> Self {
        RuntimeMeta {
            tool: tool.into(),
            took_ms,
            ctx: ctx.clone(),
        }
    }

    /// The tool name as called.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// Whole-pipeline time in milliseconds (truncated).
    pub fn took_ms(&self) -> u64 {
        self.took_ms
    }

    /// The context's request id.
    pub fn request_id(&self) -> &str {
        self.ctx.request_id()
    }

    /// The context's channel.
    pub fn channel(&self) -> &str {
        self.ctx.channel()
    }

    /// The context's principal as given (`None` when there is none).
    pub fn principal(&self) -> Option<&str> {
        self.ctx.raw_principal()
    }
}

impl PartialEq for RuntimeMeta {
    fn eq(&self, other: &Self) -> bool {
        self.tool == other.tool
            && self.took_ms == other.took_ms
            && self.request_id() == other.request_id()
            && self.channel() == other.channel()
            && self.principal() == other.principal()
    }
}

const RUNTIME_KEYS: [&str; 5] = ["tool", "took_ms", "request_id", "channel", "principal"];

/// A result's `meta`: runtime facts, the error code, and any other fields.
///
/// Serialized as one JSON object: `tool, took_ms, request_id, channel, principal` (when the
/// runtime set them), then `code`, then the other fields in insertion order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Meta {
    runtime: Option<RuntimeMeta>,
    code: Option<ErrorCode>,
    // Boxed and optional: most results have no extra fields, and a result is moved several
    // times per call, so every byte here is copied on the hot path.
    fields: Option<Box<Map<String, Value>>>,
}

static NO_FIELDS: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);

impl Meta {
    /// Empty meta (serializes as `{}`).
    pub fn new() -> Meta {
        Meta::default()
    }

    /// The error code, if any.
    pub fn code(&self) -> Option<&ErrorCode> {
        self.code.as_ref()
    }

    /// Sets the error code.
    pub fn set_code(&mut self, code: ErrorCode) {
        self.code = Some(code);
    }

    /// The runtime facts, once the registry has returned the result.
    pub fn runtime(&self) -> Option<&RuntimeMeta> {
        self.runtime.as_ref()
    }

    /// Sets the runtime facts.
    pub fn set_runtime(&mut self, runtime: RuntimeMeta) {
        self.runtime = Some(runtime);
    }

    /// One of the other fields (`type`, `pagination`, `retry_after_seconds`, …).
    #[inline]
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.fields.as_ref()?.get(key)
    }

    /// Sets one of the other fields (later values win, positions are kept). The keys `code`
    /// and the runtime keys are typed: use [`Meta::set_code`] for `code`.
    pub fn insert(&mut self, key: impl Into<String>, value: Value) {
        let key = key.into();
        if key == "code"
            && let Value::String(code) = &value
        {
            self.code = Some(ErrorCode::parse(code));
            return;
        }
        self.fields_mut().insert(key, value);
    }

    fn fields_mut(&mut self) -> &mut Map<String, Value> {
        self.fields.get_or_insert_with(Default::default)
    }

    /// The other fields, in insertion order.
    pub fn fields(&self) -> &Map<String, Value> {
        self.fields.as_deref().unwrap_or(&NO_FIELDS)
    }

    /// True when nothing is set.
    pub fn is_empty(&self) -> bool {
        self.runtime.is_none() && self.code.is_none() && self.fields().is_empty()
    }

    /// Appends the meta as a JSON object (the bytes `serde_json` writes for it), without
    /// the cost of `serde_json` for its fixed keys (both follow one list of keys).
    ///
    /// ```
    /// use milpa::ToolResult;
    /// use serde_json::json;
    ///
    /// let result = ToolResult::success(json!(1)).with_meta("page", json!(2));
    /// let mut out = Vec::new();
    /// result.meta.write_json(&mut out);
    /// assert_eq!(out, serde_json::to_vec(&result.meta).unwrap());
    /// ```
    pub fn write_json(&self, out: &mut Vec<u8>) {
        let mut fields = ObjectWriter::open(out);
        self.visit_fields(&mut fields);
        fields.close();
    }

    /// The meta's entries, in order: the one list both `Serialize` and `write_json` follow.
    #[inline]
    fn visit_fields(&self, fields: &mut impl FieldVisitor) {
        let [tool, took_ms, request_id, channel, principal] = RUNTIME_KEYS;
        if let Some(rt) = &self.runtime {
            fields.string(tool, rt.tool());
            fields.unsigned(took_ms, rt.took_ms);
            fields.string(request_id, rt.request_id());
            fields.string(channel, rt.channel());
            fields.optional_string(principal, rt.principal());
        }
        if let Some(code) = &self.code {
            fields.string("code", code.as_str());
        }
        for (name, value) in self.shown_fields() {
            fields.data_keyed_value(name, value);
        }
    }

    /// The fields as serialized: those a typed `code` or the runtime meta shadow are left out.
    fn shown_fields(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.fields().iter().filter(|(key, _)| {
            let shadowed = key.as_str() == "code" && self.code.is_some()
                || self.runtime.is_some() && RUNTIME_KEYS.contains(&key.as_str());
            !shadowed
        })
    }

    /// Everything as one JSON object, in serialization order.
    pub fn to_map(&self) -> Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        }
    }
}

impl Serialize for Meta {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut fields = SerdeFields::new(serializer.serialize_map(None)?);
        self.visit_fields(&mut fields);
        fields.end()
    }
}

impl<'de> Deserialize<'de> for Meta {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MetaVisitor;
        impl<'de> Visitor<'de> for MetaVisitor {
            type Value = Meta;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a meta object")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Meta, A::Error> {
                // PHP writes an empty map as `[]`; accept it.
                if seq.next_element::<Value>()?.is_some() {
                    return Err(serde::de::Error::custom("meta must be an object"));
                }
                Ok(Meta::new())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Meta, A::Error> {
                let mut map = Map::new();
                while let Some((k, v)) = access.next_entry::<String, Value>()? {
                    map.insert(k, v);
                }
                Ok(Meta::from_map(map))
            }
        }
        deserializer.deserialize_any(MetaVisitor)
    }
}

impl Meta {
    /// Reads meta back from its JSON object form.
    pub fn from_map(mut map: Map<String, Value>) -> Meta {
        let mut meta = Meta::new();
        let has_runtime = ["tool", "took_ms", "request_id", "channel"]
            .iter()
            .all(|k| map.contains_key(*k));
        if has_runtime {
            let text = |v: Option<Value>| -> String {
                match v {
                    Some(Value::String(s)) => s,
                    Some(other) => other.to_string(),
                    None => String::new(),
                }
            };
            let tool = text(map.shift_remove("tool"));
            let took_ms = map
                .shift_remove("took_ms")
                .and_then(|v| v.as_u64())
                .unwrap_or(0);
            let mut ctx = ToolContext::builder(text(map.shift_remove("channel")))
                .request_id(text(map.shift_remove("request_id")));
            if let Some(Value::String(p)) = map.shift_remove("principal") {
                ctx = ctx.principal(p);
            }
            meta.runtime = Some(RuntimeMeta::new(tool, took_ms, &ctx.build()));
        }
        if let Some(Value::String(code)) = map.get("code") {
            meta.code = Some(ErrorCode::parse(code));
            map.shift_remove("code");
        }
        if !map.is_empty() {
            meta.fields = Some(Box::new(map));
        }
        meta
    }
}

/// The uniform result of a tool call.
///
/// Serializes with exactly the keys `success, data, message, error, meta`, in that order.
/// Refusals carry their [`ErrorCode`] in `meta.code` and a human message in `error`.
///
/// ```
/// use milpa::{ErrorCode, ToolResult};
/// use serde_json::json;
///
/// let ok = ToolResult::success(json!({"id": 7})).with_message("Saved.");
/// assert_eq!(
///     serde_json::to_string(&ok).unwrap(),
///     r#"{"success":true,"data":{"id":7},"message":"Saved.","error":null,"meta":{}}"#
/// );
/// let denied = ToolResult::error_with_code(ErrorCode::Forbidden, "no");
/// assert_eq!(denied.code(), Some(&ErrorCode::Forbidden));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// Whether the call did what was asked.
    pub success: bool,
    /// The payload (`null` when there is none).
    #[serde(default)]
    pub data: Value,
    /// A human-readable message, if any.
    #[serde(default)]
    pub message: Option<String>,
    /// The error message of a failed call.
    #[serde(default)]
    pub error: Option<String>,
    /// Runtime facts, the error code, and result-type fields.
    #[serde(default)]
    pub meta: Meta,
}

impl ToolResult {
    /// A success carrying `data`.
    pub fn success(data: impl Into<Value>) -> ToolResult {
        ToolResult {
            success: true,
            data: data.into(),
            message: None,
            error: None,
            meta: Meta::new(),
        }
    }

    /// A failure with `error` as its message and `meta.type = "error"`.
    pub fn error(error: impl Into<String>) -> ToolResult {
        let mut meta = Meta::new();
        meta.fields_mut()
            .insert("type".into(), Value::from("error"));
        ToolResult {
            success: false,
            data: Value::Null,
            message: None,
            error: Some(error.into()),
            meta,
        }
    }

    /// A failure with a code in `meta.code`.
    pub fn error_with_code(code: ErrorCode, error: impl Into<String>) -> ToolResult {
        let mut result = ToolResult::error(error);
        result.meta.code = Some(code);
        result
    }

    /// `TOOL_NOT_FOUND`: `Tool not found: <name>`.
    pub fn tool_not_found(name: &str) -> ToolResult {
        Self::error_with_code(ErrorCode::ToolNotFound, format!("Tool not found: {name}"))
    }

    /// The serialized size of the result's caller-supplied parts (data, message, error, meta
    /// fields), or `None` once it passes `max`. Counted without serializing (see
    /// `json_size`); the runtime meta, a few short fields, is left out.
    #[inline]
    pub(crate) fn size_within(&self, max: usize) -> Option<usize> {
        let used = crate::json_size::within(&self.data, max)?;
        if self.message.is_none() && self.error.is_none() && self.meta.fields.is_none() {
            return Some(used);
        }
        self.texts_and_fields_within(used, max)
    }

    fn texts_and_fields_within(&self, mut used: usize, max: usize) -> Option<usize> {
        for text in [&self.message, &self.error].into_iter().flatten() {
            used += crate::json_size::string_within(text, max.checked_sub(used)?)?;
        }
        if let Some(fields) = &self.meta.fields {
            for (key, value) in fields.iter() {
                used += crate::json_size::string_within(key, max.checked_sub(used)?)?;
                used += crate::json_size::within(value, max.checked_sub(used)?)?;
            }
        }
        Some(used)
    }

    /// `UNAVAILABLE`: `what` (e.g. "rate limiter") failed with `cause`, so the call was
    /// refused: `The rate limiter is unavailable: <cause>`.
    pub fn unavailable(what: &str, cause: &dyn std::error::Error) -> ToolResult {
        Self::error_with_code(
            ErrorCode::Unavailable,
            format!("The {what} is unavailable: {cause}"),
        )
    }

    /// `VALIDATION_ERROR` with the given message.
    pub fn validation_error(message: impl Into<String>) -> ToolResult {
        Self::error_with_code(ErrorCode::ValidationError, message)
    }

    /// `FORBIDDEN` with the gate's reason.
    pub fn forbidden(reason: impl Into<String>) -> ToolResult {
        Self::error_with_code(ErrorCode::Forbidden, reason)
    }

    /// `INTERNAL_ERROR` with the failure's message.
    pub fn internal_error(message: impl Into<String>) -> ToolResult {
        Self::error_with_code(ErrorCode::InternalError, message)
    }

    /// `RATE_LIMITED` with `retry_after_seconds` in meta.
    pub fn rate_limited(reason: impl Into<String>, retry_after_seconds: Option<u64>) -> ToolResult {
        let mut result = Self::error_with_code(ErrorCode::RateLimited, reason);
        result
            .meta
            .fields_mut()
            .insert("retry_after_seconds".into(), json!(retry_after_seconds));
        result
    }

    /// `TIMEOUT`: the tool was cancelled at its hard timeout.
    pub fn timeout(message: impl Into<String>) -> ToolResult {
        Self::error_with_code(ErrorCode::Timeout, message)
    }

    /// A page of a list: `meta.type = "list"` and `meta.pagination`.
    pub fn paginated(
        items: Vec<Value>,
        page: u64,
        total_items: u64,
        limit: u64,
        message: Option<String>,
    ) -> ToolResult {
        let total_pages = if limit == 0 {
            0
        } else {
            total_items.div_ceil(limit)
        };
        let mut result = ToolResult::success(Value::Array(items));
        result.message = message;
        result
            .meta
            .fields_mut()
            .insert("type".into(), json!("list"));
        result.meta.fields_mut().insert(
            "pagination".into(),
            json!({
                "page": page,
                "total_pages": total_pages,
                "total_items": total_items,
                "limit": limit,
                "has_prev": page > 1,
                "has_next": page < total_pages,
            }),
        );
        result
    }

    /// One item of an entity, with the actions available on it.
    pub fn detail(
        item: impl Into<Value>,
        entity: impl Into<String>,
        message: Option<String>,
        actions: Vec<Value>,
    ) -> ToolResult {
        let mut result = ToolResult::success(item);
        result.message = message;
        result
            .meta
            .fields_mut()
            .insert("type".into(), json!("detail"));
        result
            .meta
            .fields_mut()
            .insert("entity".into(), Value::String(entity.into()));
        result
            .meta
            .fields_mut()
            .insert("actions".into(), Value::Array(actions));
        result
    }

    /// A success that asks for confirmation before an action happens.
    pub fn confirmation(
        message: impl Into<String>,
        details: impl Into<Value>,
        action: impl Into<String>,
        target: impl Into<String>,
        target_id: Value,
    ) -> ToolResult {
        let mut result = ToolResult::success(details).with_message(message);
        let fields = result.meta.fields_mut();
        fields.insert("type".into(), json!("confirmation"));
        fields.insert("requires_confirmation".into(), json!(true));
        fields.insert("action".into(), Value::String(action.into()));
        fields.insert("target".into(), Value::String(target.into()));
        fields.insert("target_id".into(), target_id);
        result
    }

    /// A failure because a rule or a listener blocked the action.
    pub fn blocked(reason: impl Into<String>, suggestion: Option<String>) -> ToolResult {
        let mut meta = Meta::new();
        meta.fields_mut().insert("type".into(), json!("blocked"));
        meta.fields_mut()
            .insert("blocked_by_rule".into(), json!(true));
        meta.fields_mut()
            .insert("suggestion".into(), json!(suggestion));
        ToolResult {
            success: false,
            data: Value::Null,
            message: None,
            error: Some(reason.into()),
            meta,
        }
    }

    /// The same result with `message` set.
    pub fn with_message(mut self, message: impl Into<String>) -> ToolResult {
        self.message = Some(message.into());
        self
    }

    /// The same result with one more meta field.
    pub fn with_meta(mut self, key: impl Into<String>, value: Value) -> ToolResult {
        self.meta.insert(key, value);
        self
    }

    /// The error code, if any.
    pub fn code(&self) -> Option<&ErrorCode> {
        self.meta.code()
    }

    /// `meta.type`, or `"generic"`.
    pub fn result_type(&self) -> &str {
        self.meta
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("generic")
    }

    /// True for a result built by [`ToolResult::blocked`].
    pub fn is_blocked(&self) -> bool {
        self.meta.get("blocked_by_rule") == Some(&Value::Bool(true))
    }

    /// `meta.pagination`, if any.
    pub fn pagination(&self) -> Option<&Value> {
        self.meta.get("pagination")
    }

    /// `meta.actions`, or an empty list.
    pub fn actions(&self) -> &[Value] {
        self.meta
            .get("actions")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// `data.confirm_token`, when the result asks for confirmation.
    pub fn confirm_token(&self) -> Option<&str> {
        self.data.get("confirm_token").and_then(Value::as_str)
    }

    /// The same result listing, in `meta.required_scopes`, every scope the call needs: what
    /// the `authorize` stage adds to a denial for a missing scope.
    pub fn with_required_scopes(self, needed: Vec<String>) -> ToolResult {
        let needed = needed.into_iter().map(Value::String).collect();
        self.with_meta(REQUIRED_SCOPES_KEY, Value::Array(needed))
    }

    /// Every scope the call needs, when this is a `FORBIDDEN` denial for a missing scope
    /// (see [`with_required_scopes`](Self::with_required_scopes)); `None` for any other
    /// result.
    ///
    /// ```
    /// use milpa::ToolResult;
    ///
    /// let denied = ToolResult::forbidden("no").with_required_scopes(vec!["notes:write".into()]);
    /// assert_eq!(denied.required_scopes(), Some(vec!["notes:write"]));
    /// assert_eq!(ToolResult::forbidden("no").required_scopes(), None);
    /// ```
    pub fn required_scopes(&self) -> Option<Vec<&str>> {
        if self.code() != Some(&ErrorCode::Forbidden) {
            return None;
        }
        let list = self.meta.get(REQUIRED_SCOPES_KEY)?.as_array()?;
        list.iter().map(Value::as_str).collect()
    }

    /// Whether this result asks the caller to confirm (see [`asks_for_confirmation`]).
    pub fn requires_confirmation(&self) -> bool {
        self.meta.get("requires_confirmation") == Some(&Value::Bool(true))
    }

    /// Pretty JSON (two-space indent).
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

/// Whether a serialized result asks for confirmation: `meta.requires_confirmation` or a
/// top-level `requires_confirmation` is exactly `true`. Deliberately not searched at depth,
/// so a plan that merely *describes* a confirmation is not asking for one.
pub fn asks_for_confirmation(payload: &Value) -> bool {
    let meta_asks = payload
        .get("meta")
        .and_then(|m| m.get("requires_confirmation"))
        == Some(&Value::Bool(true));
    meta_asks || payload.get("requires_confirmation") == Some(&Value::Bool(true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_meta_is_an_object() {
        let text = serde_json::to_string(&ToolResult::success(Value::Null)).unwrap();
        assert_eq!(
            text,
            r#"{"success":true,"data":null,"message":null,"error":null,"meta":{}}"#
        );
    }

    #[test]
    fn runtime_meta_comes_first_then_code_then_fields() {
        let mut result = ToolResult::error_with_code(ErrorCode::Forbidden, "no");
        let ctx = ToolContext::builder("mcp").request_id("r").build();
        result.meta.set_runtime(RuntimeMeta::new("t", 3, &ctx));
        let text = serde_json::to_string(&result.meta).unwrap();
        assert_eq!(
            text,
            r#"{"tool":"t","took_ms":3,"request_id":"r","channel":"mcp","principal":null,"code":"FORBIDDEN","type":"error"}"#
        );
        let back: ToolResult =
            serde_json::from_str(&serde_json::to_string(&result).unwrap()).unwrap();
        assert_eq!(back, result);
    }

    #[test]
    fn meta_written_by_hand_is_what_serde_writes() {
        let ctx = ToolContext::builder("mcp")
            .request_id("r\"1")
            .principal("alice")
            .build();
        let mut shadowing = Meta::new();
        shadowing.insert("took_ms", json!(99));
        shadowing.insert("code", json!("x"));
        shadowing.insert("ünï \n", json!({"a": [1, null]}));
        let mut cases = vec![
            ToolResult::success(json!(1)).meta,
            ToolResult::error_with_code(ErrorCode::RateLimited, "slow")
                .with_meta("retry_after_seconds", json!(3))
                .meta,
            ToolResult::paginated(vec![json!(1)], 1, 11, 5, None).meta,
            shadowing.clone(),
        ];
        for meta in cases.clone() {
            let mut with_runtime = meta;
            with_runtime.set_runtime(RuntimeMeta::new("t", 7, &ctx));
            cases.push(with_runtime);
        }
        let mut coded = shadowing;
        coded.code = Some(ErrorCode::Forbidden);
        cases.push(coded);
        for meta in &cases {
            let mut out = Vec::new();
            meta.write_json(&mut out);
            assert_eq!(
                String::from_utf8(out).unwrap(),
                serde_json::to_string(meta).unwrap()
            );
        }
    }

    #[test]
    fn pagination_with_zero_limit_does_not_divide_by_zero() {
        let r = ToolResult::paginated(vec![], 1, 10, 0, None);
        assert_eq!(r.pagination().unwrap()["total_pages"], 0);
        let r = ToolResult::paginated(vec![json!(1)], 1, 11, 5, None);
        assert_eq!(r.pagination().unwrap()["total_pages"], 3);
        assert_eq!(r.pagination().unwrap()["has_next"], true);
    }

    #[test]
    fn asks_for_confirmation_only_at_the_top() {
        assert!(asks_for_confirmation(
            &json!({"meta": {"requires_confirmation": true}})
        ));
        assert!(asks_for_confirmation(
            &json!({"requires_confirmation": true})
        ));
        assert!(!asks_for_confirmation(
            &json!({"plan": {"requires_confirmation": true}})
        ));
        assert!(!asks_for_confirmation(
            &json!({"requires_confirmation": "true"})
        ));
    }
}
