//! `tools/call` parameters: parsed and checked before anything runs.

use serde_json::{Map, Value};

use crate::jsonrpc::{ErrorObject, INVALID_PARAMS, Params};
use crate::trace_context::TraceParent;

/// A `tools/call` that can be run.
#[derive(Debug)]
pub(crate) struct CallParams {
    pub name: String,
    pub arguments: Value,
    pub progress_token: Option<Value>,
    /// 2026-07-28: the request's `_meta` declarations (set by the modern dispatcher).
    pub request: Option<std::sync::Arc<super::RequestMeta>>,
    /// 2026-07-28 retry: the client's answers to the `input_required` result.
    pub input_responses: Option<Value>,
    /// 2026-07-28 retry: the `requestState` echoed back.
    pub request_state: Option<String>,
    /// `_meta.traceparent` / `tracestate`: the parent of the call's span.
    pub trace_parent: TraceParent,
}

/// A `tools/call` refused before it reached the registry: the JSON-RPC error to answer,
/// and the tool name when the request had one (for the audit record).
#[derive(Debug)]
pub(crate) struct RefusedCall {
    pub name: Option<String>,
    pub error: Box<ErrorObject>,
}

/// `tools/call` parameters as they arrive, read in one pass ([`read_call`]); checked by
/// [`CallWire::into_call`]. The transports read `name` and `arguments` from it (HTTP
/// routing headers) and the 2026-07-28 dispatcher its `_meta`, so the text is parsed once.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct CallWire {
    #[serde(default)]
    name: Option<Value>,
    #[serde(default)]
    arguments: Option<Value>,
    #[serde(default, rename = "_meta")]
    meta: Option<Value>,
    #[serde(default, rename = "inputResponses")]
    input_responses: Option<Value>,
    #[serde(default, rename = "requestState")]
    request_state: Option<Value>,
}

/// `tools/call` params that could not be read as one ([`read_call`]): the refusal to
/// answer (once the request got that far), and the params as a JSON value when they are
/// one (what the HTTP header checks and the 2026-07-28 `_meta` are read from then).
#[derive(Debug)]
pub(crate) struct UnreadCall {
    pub refused: RefusedCall,
    pub value: Option<Value>,
}

fn refused(name: Option<String>, message: String) -> RefusedCall {
    RefusedCall {
        name,
        error: Box::new(ErrorObject::new(INVALID_PARAMS, message)),
    }
}

/// Reads `tools/call` params in one pass; an object is required.
pub(crate) fn read_call(params: Option<Params>) -> Result<CallWire, Box<UnreadCall>> {
    let needs_object = |value: Option<Value>| {
        Box::new(UnreadCall {
            refused: refused(
                None,
                "Invalid params: tools/call needs an object with a name".to_owned(),
            ),
            value,
        })
    };
    let Some(params) = params else {
        return Err(needs_object(None));
    };
    if !params.get().starts_with('{') {
        return Err(needs_object(Some(params.to_value())));
    }
    params.parse().map_err(|error| {
        Box::new(UnreadCall {
            refused: refused(None, format!("Invalid params: {error}")),
            // Only a malformed call pays for a second reading.
            value: Some(params.to_value()),
        })
    })
}

/// Reads and checks `tools/call` params.
#[cfg(test)]
pub(crate) fn parse_call(params: Option<Params>) -> Result<CallParams, RefusedCall> {
    read_call(params)
        .map_err(|unread| unread.refused)?
        .into_call()
}

impl CallWire {
    /// `params.name`, when it is a string.
    pub fn name(&self) -> Option<&str> {
        self.name.as_ref().and_then(Value::as_str)
    }

    /// `params.arguments`, as sent.
    pub fn arguments(&self) -> Option<&Value> {
        self.arguments.as_ref()
    }

    /// `params._meta`, as sent.
    pub fn meta(&self) -> Option<&Value> {
        self.meta.as_ref()
    }

    /// The call these params ask for, or why it cannot run.
    pub fn into_call(self) -> Result<CallParams, RefusedCall> {
        let wire = self;
        let name = match wire.name {
            Some(Value::String(name)) => name,
            _ => {
                return Err(refused(
                    None,
                    "Invalid params: name (a string) is required".to_owned(),
                ));
            }
        };
        let arguments = match wire.arguments {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(args @ Value::Object(_)) => args,
            Some(_) => {
                return Err(refused(
                    Some(name),
                    "Invalid params: arguments must be an object".to_owned(),
                ));
            }
        };
        let progress_token = wire
            .meta
            .as_ref()
            .and_then(|m| m.get("progressToken"))
            .filter(|t| t.is_string() || t.is_number())
            .cloned();
        let trace_parent = TraceParent::from_meta(wire.meta.as_ref());
        Ok(CallParams {
            name,
            arguments,
            progress_token,
            request: None,
            input_responses: wire.input_responses.and_then(answers_only),
            request_state: match wire.request_state {
                Some(Value::String(state)) => Some(state),
                _ => None,
            },
            trace_parent,
        })
    }
}

/// `inputResponses` keeps only what can be an answer: every answer (an elicitation's, a
/// sampling's, a roots listing's) is an object, so an entry that is not one is dropped, and
/// the tool asks for it again in a new `input_required` round (SEP-2322: validate, never
/// take a malformed answer as given).
fn answers_only(responses: Value) -> Option<Value> {
    let Value::Object(mut responses) = responses else {
        return None;
    };
    responses.retain(|_, answer| answer.is_object());
    Some(Value::Object(responses))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(params: &str) -> Result<CallParams, RefusedCall> {
        let line = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{params}}}"#);
        let crate::jsonrpc::Parsed::Single(Ok(crate::jsonrpc::Incoming::Request {
            params, ..
        })) = crate::jsonrpc::parse(line.as_bytes())
        else {
            panic!("not a request: {line}");
        };
        parse_call(params)
    }

    #[test]
    fn refusals_keep_the_name_when_there_was_one() {
        let refused = parse(r#"{"name":"add","arguments":5}"#).unwrap_err();
        assert_eq!(refused.name.as_deref(), Some("add"));
        assert_eq!(refused.error.code, INVALID_PARAMS);
        for params in [r#"{"name":7}"#, r#"{"arguments":{}}"#, "[1]"] {
            let refused = parse(params).unwrap_err();
            assert_eq!(refused.name, None, "{params}");
            assert_eq!(refused.error.code, INVALID_PARAMS, "{params}");
        }
        let call = parse(r#"{"name":"add","_meta":{"progressToken":"p"}}"#).unwrap();
        assert_eq!(call.arguments, serde_json::json!({}));
        assert_eq!(call.progress_token, Some(serde_json::json!("p")));
    }

    #[test]
    fn input_responses_keep_only_answers_that_are_objects() {
        let call =
            parse(r#"{"name":"t","inputResponses":{"user_name":12345,"ok":{"action":"accept"}}}"#)
                .unwrap();
        assert_eq!(
            call.input_responses,
            Some(serde_json::json!({"ok": {"action": "accept"}}))
        );
        let call = parse(r#"{"name":"t","inputResponses":null}"#).unwrap();
        assert_eq!(call.input_responses, None);
    }
}
