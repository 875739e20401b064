//! The params of the resource, prompt and completion methods, read once into their types.

use std::collections::BTreeMap;
use std::sync::Arc;

use milpa::catalog::CompletionRef;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::client_link::RequestMeta;
use crate::jsonrpc::{ErrorObject, INVALID_PARAMS};

/// `resources/read`, `resources/subscribe` and `resources/unsubscribe`: `{uri}`.
#[derive(Debug, Deserialize)]
pub(crate) struct UriParams {
    pub uri: String,
}

/// `prompts/get`: `{name, arguments?}`, every argument a string; on 2026-07-28 also the
/// `inputResponses` and `requestState` of a retry, and what the request declared.
#[derive(Debug, Deserialize)]
pub(crate) struct PromptParams {
    pub name: String,
    #[serde(default)]
    pub arguments: Option<BTreeMap<String, String>>,
    #[serde(default, rename = "inputResponses")]
    pub input_responses: Option<Map<String, Value>>,
    #[serde(default, rename = "requestState")]
    pub request_state: Option<String>,
    /// 2026-07-28: the request's `_meta` (set by the dispatcher, never read from params).
    #[serde(skip)]
    pub request: Option<Arc<RequestMeta>>,
}

/// `completion/complete`: `{ref, argument: {name, value}}`.
#[derive(Debug, Deserialize)]
pub(crate) struct CompleteParams {
    #[serde(rename = "ref")]
    pub reference: CompleteTarget,
    pub argument: CompleteArgument,
}

/// What `completion/complete` completes.
#[derive(Debug, Deserialize)]
#[serde(tag = "type")]
pub(crate) enum CompleteTarget {
    /// An argument of a prompt.
    #[serde(rename = "ref/prompt")]
    Prompt { name: String },
    /// A variable of a resource template.
    #[serde(rename = "ref/resource")]
    Resource { uri: String },
}

impl CompleteTarget {
    /// The core's reference.
    pub fn as_ref(&self) -> CompletionRef<'_> {
        match self {
            CompleteTarget::Prompt { name } => CompletionRef::Prompt(name),
            CompleteTarget::Resource { uri } => CompletionRef::ResourceTemplate(uri),
        }
    }
}

/// The argument being completed, and what was typed so far.
#[derive(Debug, Deserialize)]
pub(crate) struct CompleteArgument {
    pub name: String,
    pub value: String,
}

/// Reads the params of `method` as `T`: a missing, malformed or mistyped member is
/// `-32602` naming the method and what serde found wrong.
pub(crate) fn read_params<T: for<'de> Deserialize<'de>>(
    method: &str,
    params: Option<Value>,
) -> Result<T, ErrorObject> {
    let params = params.unwrap_or(Value::Object(serde_json::Map::new()));
    serde_json::from_value(params).map_err(|error| {
        ErrorObject::new(
            INVALID_PARAMS,
            format!("Invalid params for {method}: {error}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn params_are_read_into_their_types() {
        let read: UriParams = read_params("resources/read", Some(json!({"uri": "a://b"}))).unwrap();
        assert_eq!(read.uri, "a://b");
        let missing = read_params::<UriParams>("resources/read", None).unwrap_err();
        assert_eq!(missing.code, INVALID_PARAMS);
        assert_eq!(
            missing.message,
            "Invalid params for resources/read: missing field `uri`"
        );
        let prompt: PromptParams = read_params(
            "prompts/get",
            Some(json!({"name": "p", "arguments": {"a": "1"}})),
        )
        .unwrap();
        assert_eq!(prompt.arguments.unwrap()["a"], "1");
        let not_text = read_params::<PromptParams>(
            "prompts/get",
            Some(json!({"name": "p", "arguments": {"a": 1}})),
        );
        assert!(not_text.is_err());
        let complete: CompleteParams = read_params(
            "completion/complete",
            Some(json!({"ref": {"type": "ref/resource", "uri": "t://{id}"}, "argument": {"name": "id", "value": "1"}})),
        )
        .unwrap();
        assert_eq!(
            complete.reference.as_ref(),
            CompletionRef::ResourceTemplate("t://{id}")
        );
        let unknown = read_params::<CompleteParams>(
            "completion/complete",
            Some(
                json!({"ref": {"type": "ref/tool", "name": "x"}, "argument": {"name": "a", "value": ""}}),
            ),
        );
        assert!(unknown.is_err());
    }
}
