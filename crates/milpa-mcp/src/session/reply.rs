//! [`Reply`]: the answer to one request, kept as a value until a transport writes it, so
//! a transport reads what it needs (the HTTP status follows the error code) from the value
//! rather than from the serialized text.

use milpa::{ConfirmationTicket, ToolResult};
use serde_json::Value;

use crate::jsonrpc::{self, ErrorObject, RequestId};
use crate::mapping;

/// The answer to one request: its id and what it answers.
#[derive(Debug)]
pub(crate) struct Reply {
    /// The request's id (`None`: a message refused before its id could be read).
    id: Option<RequestId>,
    body: ReplyBody,
}

/// What a [`Reply`] answers.
#[derive(Debug)]
enum ReplyBody {
    /// A result.
    Result(Value),
    /// An error.
    Error(Box<ErrorObject>),
    /// A `tools/call`'s result, written straight from the [`ToolResult`].
    Call(Box<CallAnswer>),
}

/// What a `tools/call` result is written from (see [`mapping::CallResult`]).
#[derive(Debug)]
struct CallAnswer {
    tool: String,
    result: ToolResult,
    /// The ticket `result` was rendered from, when it asks for a confirmation: the text
    /// block is then written from the ticket.
    confirmation: Option<ConfirmationTicket>,
    output_schema: bool,
    result_type: bool,
}

impl Reply {
    /// A success response.
    pub fn result(id: RequestId, result: Value) -> Reply {
        Reply {
            id: Some(id),
            body: ReplyBody::Result(result),
        }
    }

    /// An error response (`id: null` when `id` is `None`).
    pub fn error(id: Option<RequestId>, error: ErrorObject) -> Reply {
        Reply {
            id,
            body: ReplyBody::Error(Box::new(error)),
        }
    }

    /// The result of a call of `tool`: `output_schema` says whether the tool declares one,
    /// `result_type` whether the result carries `resultType` (2026-07-28).
    pub fn call(
        id: RequestId,
        tool: String,
        result: ToolResult,
        confirmation: Option<ConfirmationTicket>,
        output_schema: bool,
        result_type: bool,
    ) -> Reply {
        Reply {
            id: Some(id),
            body: ReplyBody::Call(Box::new(CallAnswer {
                tool,
                result,
                confirmation,
                output_schema,
                result_type,
            })),
        }
    }

    /// The JSON-RPC error code, when this answers with an error.
    pub fn error_code(&self) -> Option<crate::jsonrpc::ErrorCode> {
        match &self.body {
            ReplyBody::Error(error) => Some(error.code),
            ReplyBody::Result(_) | ReplyBody::Call(_) => None,
        }
    }

    /// Appends the response's JSON text to `out` (no newline).
    pub fn write_to(&self, out: &mut Vec<u8>) {
        match (&self.body, &self.id) {
            (ReplyBody::Result(value), Some(id)) => jsonrpc::write_response(out, id, value),
            (ReplyBody::Call(call), Some(id)) => {
                let answer = mapping::CallResult::new(&call.tool, &call.result)
                    .with_confirmation(call.confirmation.as_ref())
                    .with_output_schema(call.output_schema)
                    .with_result_type(call.result_type);
                jsonrpc::write_call_response(out, id, &answer);
            }
            (ReplyBody::Error(error), id) => jsonrpc::write_error_response(out, id.as_ref(), error),
            // Only errors are built without an id.
            (ReplyBody::Result(_) | ReplyBody::Call(_), None) => {}
        }
    }

    /// The response's JSON text.
    pub fn to_json(&self) -> String {
        let mut out = Vec::with_capacity(256);
        self.write_to(&mut out);
        // Only whole strings and ASCII punctuation were written.
        String::from_utf8(out)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }
}

/// The responses to a batch as one JSON array, in the order given.
pub(crate) fn write_batch(out: &mut Vec<u8>, replies: &[Reply]) {
    out.push(b'[');
    for (i, reply) in replies.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        reply.write_to(out);
    }
    out.push(b']');
}

/// [`write_batch`] as a string.
pub(crate) fn batch_json(replies: &[Reply]) -> String {
    let mut out = Vec::with_capacity(256 * replies.len());
    write_batch(&mut out, replies);
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::jsonrpc::{INVALID_PARAMS, METHOD_NOT_FOUND};

    /// A reply writes the bytes the serializers of `jsonrpc` give, and says its code
    /// without being serialized.
    #[test]
    fn replies_write_the_jsonrpc_bytes_and_know_their_code() {
        let id = RequestId::Number(3);
        let ok = Reply::result(id.clone(), json!({"b": 1, "a": [2]}));
        assert_eq!(
            ok.to_json(),
            jsonrpc::response(&id, &json!({"b": 1, "a": [2]}))
        );
        assert_eq!(ok.error_code(), None);
        let error = ErrorObject::new(METHOD_NOT_FOUND, "Method not found: x");
        let refused = Reply::error(Some(id.clone()), error.clone());
        assert_eq!(
            refused.to_json(),
            jsonrpc::error_response(Some(&id), &error)
        );
        assert_eq!(refused.error_code(), Some(METHOD_NOT_FOUND));
        let anonymous = Reply::error(None, ErrorObject::new(INVALID_PARAMS, "bad"));
        assert_eq!(
            anonymous.to_json(),
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32602,"message":"bad"}}"#
        );
        let result = ToolResult::success(json!({"sum": 3}));
        let call = Reply::call(id.clone(), "add".into(), result.clone(), None, false, true);
        let expected = jsonrpc::call_response(
            &id,
            &mapping::CallResult::new("add", &result).with_result_type(true),
        );
        assert_eq!(call.to_json(), expected);
        assert_eq!(
            batch_json(&[ok, anonymous]),
            format!(
                "[{},{}]",
                jsonrpc::response(&id, &json!({"b": 1, "a": [2]})),
                r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32602,"message":"bad"}}"#
            )
        );
    }
}
