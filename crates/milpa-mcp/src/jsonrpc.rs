//! JSON-RPC 2.0 framing: parsing incoming messages and serializing outgoing ones.
//!
//! Parsing is strict about what a message is (`"jsonrpc": "2.0"`, a string or integer id,
//! a string method) and forgiving about nothing else: anything that is not a request, a
//! notification or a response gets `-32600 Invalid Request`, text that is not JSON gets
//! `-32700 Parse error`. A parse failure never ends a connection.

use std::borrow::Cow;
use std::sync::Arc;

use serde::de::{DeserializeOwned, Deserializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

/// A JSON-RPC error code: the ones of JSON-RPC 2.0 and MCP are named
/// ([`ErrorCode::METHOD_NOT_FOUND`], [`ErrorCode::HEADER_MISMATCH`], …); a peer may send
/// any other integer, kept as it came ([`ErrorCode::new`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ErrorCode(i64);

impl ErrorCode {
    /// `-32700`: invalid JSON was received.
    pub const PARSE_ERROR: ErrorCode = ErrorCode(-32700);
    /// `-32600`: the JSON sent is not a valid request object.
    pub const INVALID_REQUEST: ErrorCode = ErrorCode(-32600);
    /// `-32601`: the method does not exist or is not available.
    pub const METHOD_NOT_FOUND: ErrorCode = ErrorCode(-32601);
    /// `-32602`: invalid method parameters.
    pub const INVALID_PARAMS: ErrorCode = ErrorCode(-32602);
    /// `-32603`: internal JSON-RPC error.
    pub const INTERNAL_ERROR: ErrorCode = ErrorCode(-32603);
    /// `-32000`: implementation-defined server error (transport-level refusals).
    pub const SERVER_ERROR: ErrorCode = ErrorCode(-32000);
    /// `-32001`: the HTTP session ended or never existed.
    pub const SESSION_NOT_FOUND: ErrorCode = ErrorCode(-32001);
    /// `-32002`: no resource at the URI asked for (the code the MCP specification gives).
    pub const RESOURCE_NOT_FOUND: ErrorCode = ErrorCode(-32002);
    /// `-32003`: the gate refused a resource read, a prompt or a completion (the error's
    /// `data.code` says why: `FORBIDDEN`, `RATE_LIMITED`, `UNAVAILABLE`).
    pub const ACCESS_REFUSED: ErrorCode = ErrorCode(-32003);
    /// `-32020` (2026-07-28): the HTTP headers (`Mcp-Method`, `Mcp-Name`,
    /// `MCP-Protocol-Version`) do not match the body.
    pub const HEADER_MISMATCH: ErrorCode = ErrorCode(-32020);
    /// `-32021` (2026-07-28): serving the request needs a capability the client did not
    /// declare.
    pub const MISSING_REQUIRED_CLIENT_CAPABILITY: ErrorCode = ErrorCode(-32021);
    /// `-32022` (2026-07-28): the request's protocol version is not one this server speaks.
    pub const UNSUPPORTED_PROTOCOL_VERSION: ErrorCode = ErrorCode(-32022);

    /// A code by its number (what a peer sent).
    pub const fn new(code: i64) -> ErrorCode {
        ErrorCode(code)
    }

    /// The number on the wire.
    pub const fn value(self) -> i64 {
        self.0
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl From<ErrorCode> for i64 {
    fn from(code: ErrorCode) -> i64 {
        code.0
    }
}

/// A code read from JSON equals the code it holds (`answer["error"]["code"] == code`).
impl PartialEq<ErrorCode> for Value {
    fn eq(&self, code: &ErrorCode) -> bool {
        self.as_i64() == Some(code.0)
    }
}

/// [`ErrorCode::PARSE_ERROR`].
pub const PARSE_ERROR: ErrorCode = ErrorCode::PARSE_ERROR;
/// [`ErrorCode::INVALID_REQUEST`].
pub const INVALID_REQUEST: ErrorCode = ErrorCode::INVALID_REQUEST;
/// [`ErrorCode::METHOD_NOT_FOUND`].
pub const METHOD_NOT_FOUND: ErrorCode = ErrorCode::METHOD_NOT_FOUND;
/// [`ErrorCode::INVALID_PARAMS`].
pub const INVALID_PARAMS: ErrorCode = ErrorCode::INVALID_PARAMS;
/// [`ErrorCode::INTERNAL_ERROR`].
pub const INTERNAL_ERROR: ErrorCode = ErrorCode::INTERNAL_ERROR;
/// [`ErrorCode::SERVER_ERROR`].
pub const SERVER_ERROR: ErrorCode = ErrorCode::SERVER_ERROR;

/// A JSON-RPC request id: a string or an integer (MCP forbids `null`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RequestId {
    /// An integer id.
    Number(i64),
    /// A string id.
    String(Arc<str>),
}

impl RequestId {
    /// Reads an id from JSON; `None` for anything but a string or an integer.
    pub fn from_value(value: &Value) -> Option<RequestId> {
        match value {
            Value::String(s) => Some(RequestId::String(Arc::from(s.as_str()))),
            Value::Number(n) => n.as_i64().map(RequestId::Number),
            _ => None,
        }
    }
}

impl Serialize for RequestId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            RequestId::Number(n) => serializer.serialize_i64(*n),
            RequestId::String(s) => serializer.serialize_str(s),
        }
    }
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    /// The error code.
    pub code: ErrorCode,
    /// A short description.
    pub message: String,
    /// Optional details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ErrorObject {
    /// An error with a code and a message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ErrorObject {
        ErrorObject {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// `-32602`, with this message.
    pub fn invalid_params(message: impl Into<String>) -> ErrorObject {
        ErrorObject::new(ErrorCode::INVALID_PARAMS, message)
    }

    /// `-32600`, with this message.
    pub fn invalid_request(message: impl Into<String>) -> ErrorObject {
        ErrorObject::new(ErrorCode::INVALID_REQUEST, message)
    }

    /// `-32601`, with this message.
    pub fn method_not_found(message: impl Into<String>) -> ErrorObject {
        ErrorObject::new(ErrorCode::METHOD_NOT_FOUND, message)
    }

    /// `-32603`, with this message.
    pub fn internal(message: impl Into<String>) -> ErrorObject {
        ErrorObject::new(ErrorCode::INTERNAL_ERROR, message)
    }

    /// `-32020` (2026-07-28): a header does not match the body.
    pub fn header_mismatch(message: impl Into<String>) -> ErrorObject {
        ErrorObject::new(ErrorCode::HEADER_MISMATCH, message)
    }
}

/// A message's `params`, kept as the JSON text that arrived (always an object or an array).
///
/// Each method reads its parameters into the shape it needs: `tools/call`, the hot path,
/// reads straight into its own struct, without first building a map of the whole object.
#[derive(Debug, Clone)]
pub struct Params(Box<RawValue>);

impl Params {
    /// The JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// The parameters as a JSON value.
    pub fn to_value(&self) -> Value {
        // The text was parsed once already, so this cannot fail.
        serde_json::from_str(self.0.get()).unwrap_or(Value::Null)
    }

    /// The parameters read into `T`.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_str(self.0.get())
    }
}

impl PartialEq for Params {
    fn eq(&self, other: &Params) -> bool {
        self.get() == other.get()
    }
}

/// The parameters as a JSON value (`None` stays `None`).
pub fn params_value(params: Option<Params>) -> Option<Value> {
    params.as_ref().map(Params::to_value)
}

/// One incoming message, classified.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Incoming {
    /// A request: it must be answered.
    Request {
        /// The id to answer with.
        id: RequestId,
        /// The method.
        method: String,
        /// The parameters, if any.
        params: Option<Params>,
    },
    /// A notification: never answered.
    Notification {
        /// The method.
        method: String,
        /// The parameters, if any.
        params: Option<Params>,
    },
    /// A response to a request this side sent.
    Response {
        /// The id of our request.
        id: RequestId,
        /// The result, or the error the peer sent.
        result: Result<Value, ErrorObject>,
    },
}

/// A message that could not be understood, with what to answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected {
    /// The id to answer with, when one could be read (else `null`).
    pub id: Option<RequestId>,
    /// The error to send.
    pub error: Box<ErrorObject>,
}

impl Rejected {
    fn invalid(id: Option<RequestId>, message: &str) -> Rejected {
        Rejected {
            id,
            error: Box::new(ErrorObject::new(INVALID_REQUEST, message)),
        }
    }
}

/// What one line (or HTTP body) held.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Parsed {
    /// One message (or why it was refused).
    Single(Result<Incoming, Rejected>),
    /// A batch (JSON array) of messages, each classified on its own.
    Batch(Vec<Result<Incoming, Rejected>>),
}

/// The wire shape, read in one pass, borrowing from the input where it can. `id`
/// distinguishes absent from `null`.
#[derive(Deserialize)]
struct RawMessage<'a> {
    #[serde(default, borrow)]
    jsonrpc: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "present")]
    id: Option<Value>,
    #[serde(default, borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "present")]
    result: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
}

fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

/// Default largest batch (JSON array of messages): 100 messages. Also reachable as
/// `protocol::DEFAULT_MAX_BATCH_LEN`, beside the other server limits.
pub const DEFAULT_MAX_BATCH_LEN: usize = 100;

/// Parses one frame: a single message or a batch of at most [`DEFAULT_MAX_BATCH_LEN`]
/// messages.
pub fn parse(bytes: &[u8]) -> Parsed {
    parse_limited(bytes, DEFAULT_MAX_BATCH_LEN)
}

/// Parses one frame: a single message or a batch of at most `max_batch_len` messages. A
/// larger batch is refused whole (one `-32600` error; none of its messages is classified),
/// so one frame cannot start an unbounded amount of work.
pub fn parse_limited(bytes: &[u8], max_batch_len: usize) -> Parsed {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace()).copied();
    if first == Some(b'[') {
        // Only the items' extents are read here (borrowed, not parsed into values).
        return match serde_json::from_slice::<Vec<&RawValue>>(bytes) {
            Ok(items) if items.is_empty() => {
                Parsed::Single(Err(Rejected::invalid(None, "Invalid Request: empty batch")))
            }
            Ok(items) if items.len() > max_batch_len => Parsed::Single(Err(Rejected::invalid(
                None,
                &format!("Invalid Request: batch too large (at most {max_batch_len} messages)"),
            ))),
            Ok(items) => Parsed::Batch(
                items
                    .into_iter()
                    .map(|item| parse_one(item.get().as_bytes()))
                    .collect(),
            ),
            Err(error) if error.is_syntax() || error.is_eof() => {
                Parsed::Single(Err(parse_error(&error)))
            }
            Err(_) => Parsed::Single(Err(Rejected::invalid(None, "Invalid Request"))),
        };
    }
    Parsed::Single(parse_one(bytes))
}

fn parse_one(bytes: &[u8]) -> Result<Incoming, Rejected> {
    match serde_json::from_slice::<RawMessage<'_>>(bytes) {
        Ok(raw) => classify(raw),
        Err(error) if error.is_syntax() || error.is_eof() => Err(parse_error(&error)),
        // Valid JSON of the wrong shape: say what is wrong, with the id when there is one.
        Err(error) => match serde_json::from_slice::<Value>(bytes) {
            Ok(value) if !value.is_object() => Err(Rejected::invalid(
                None,
                "Invalid Request: a message must be a JSON object",
            )),
            Ok(value) => {
                let id = value.get("id").and_then(RequestId::from_value);
                Err(Rejected::invalid(id, &format!("Invalid Request: {error}")))
            }
            Err(error) => Err(parse_error(&error)),
        },
    }
}

fn parse_error(error: &serde_json::Error) -> Rejected {
    Rejected {
        id: None,
        error: Box::new(ErrorObject::new(
            PARSE_ERROR,
            format!("Parse error: {error}"),
        )),
    }
}

fn classify(raw: RawMessage<'_>) -> Result<Incoming, Rejected> {
    let id = match &raw.id {
        None => None,
        Some(value) => match RequestId::from_value(value) {
            Some(id) => Some(id),
            None => {
                return Err(Rejected::invalid(
                    None,
                    "Invalid Request: id must be a string or an integer",
                ));
            }
        },
    };
    if raw.jsonrpc.as_deref() != Some("2.0") {
        return Err(Rejected::invalid(
            id,
            "Invalid Request: jsonrpc must be \"2.0\"",
        ));
    }
    let params = match raw.params {
        None => None,
        Some(params) if params.get().starts_with(['{', '[']) => Some(Params(params.to_owned())),
        Some(_) => {
            return Err(Rejected::invalid(
                id,
                "Invalid Request: params must be an object or an array",
            ));
        }
    };
    match (raw.method, id) {
        (Some(method), Some(id)) => Ok(Incoming::Request {
            id,
            method: method.into_owned(),
            params,
        }),
        (Some(method), None) => Ok(Incoming::Notification {
            method: method.into_owned(),
            params,
        }),
        (None, Some(id)) => match (raw.result, raw.error) {
            (Some(result), None) => Ok(Incoming::Response {
                id,
                result: Ok(result),
            }),
            (None, Some(error)) => match serde_json::from_value::<ErrorObject>(error) {
                Ok(error) => Ok(Incoming::Response {
                    id,
                    result: Err(error),
                }),
                Err(_) => Err(Rejected::invalid(
                    Some(id),
                    "Invalid Request: bad error object",
                )),
            },
            _ => Err(Rejected::invalid(
                Some(id),
                "Invalid Request: a message needs a method, or a result or an error",
            )),
        },
        (None, None) => Err(Rejected::invalid(
            None,
            "Invalid Request: a message needs a method, or an id with a result or an error",
        )),
    }
}

#[derive(Serialize)]
struct ResponseOut<'a, R: Serialize> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    result: R,
}

#[derive(Serialize)]
struct ErrorOut<'a> {
    jsonrpc: &'static str,
    id: Option<&'a RequestId>,
    error: &'a ErrorObject,
}

#[derive(Serialize)]
struct NotificationOut<'a, P: Serialize> {
    jsonrpc: &'static str,
    method: &'a str,
    params: P,
}

#[derive(Serialize)]
struct RequestOut<'a, P: Serialize> {
    jsonrpc: &'static str,
    id: u64,
    method: &'a str,
    params: P,
}

/// A success response, serialized.
pub fn response(id: &RequestId, result: &impl Serialize) -> String {
    let mut out = Vec::with_capacity(128);
    write_response(&mut out, id, result);
    into_string(out)
}

/// Appends a success response to `out` (what [`response`] gives); an unserializable
/// result becomes an `-32603` error response.
pub fn write_response(out: &mut Vec<u8>, id: &RequestId, result: &impl Serialize) {
    let start = out.len();
    let written = serde_json::to_writer(
        &mut *out,
        &ResponseOut {
            jsonrpc: "2.0",
            id,
            result,
        },
    );
    if let Err(error) = written {
        out.truncate(start);
        write_error_response(
            out,
            Some(id),
            &ErrorObject::new(INTERNAL_ERROR, error.to_string()),
        );
    }
}

/// The success response to a `tools/call`, serialized (the same bytes as [`response`]
/// with the [`CallResult`](crate::mapping::CallResult), written by hand: one is written
/// for every call).
pub fn call_response(id: &RequestId, result: &crate::mapping::CallResult<'_>) -> String {
    let mut out = Vec::with_capacity(384);
    write_call_response(&mut out, id, result);
    into_string(out)
}

/// Appends the success response to a `tools/call` to `out` (what [`call_response`] gives).
pub fn write_call_response(
    out: &mut Vec<u8>,
    id: &RequestId,
    result: &crate::mapping::CallResult<'_>,
) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    match id {
        RequestId::Number(n) => crate::mapping::write_json(out, n),
        RequestId::String(s) => crate::mapping::write_json(out, &**s),
    }
    out.extend_from_slice(b",\"result\":");
    result.write_json(out);
    out.push(b'}');
}

/// Text the writers above produced: only whole strings and ASCII punctuation.
fn into_string(out: Vec<u8>) -> String {
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// An error response, serialized (`id: null` when none is known).
pub fn error_response(id: Option<&RequestId>, error: &ErrorObject) -> String {
    let mut out = Vec::with_capacity(128);
    write_error_response(&mut out, id, error);
    into_string(out)
}

/// Appends an error response to `out` (what [`error_response`] gives).
pub fn write_error_response(out: &mut Vec<u8>, id: Option<&RequestId>, error: &ErrorObject) {
    // An `ErrorObject` always serializes (its `data` is a JSON value).
    let _ = serde_json::to_writer(
        out,
        &ErrorOut {
            jsonrpc: "2.0",
            id,
            error,
        },
    );
}

/// A notification, serialized.
pub fn notification(method: &str, params: &impl Serialize) -> String {
    serde_json::to_string(&NotificationOut {
        jsonrpc: "2.0",
        method,
        params,
    })
    .unwrap_or_default()
}

/// The responses to a batch, serialized as one JSON array (in the order given).
pub fn batch(replies: &[String]) -> String {
    let len = replies.iter().map(|r| r.len() + 1).sum::<usize>() + 1;
    let mut out = String::with_capacity(len);
    out.push('[');
    for (i, reply) in replies.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(reply);
    }
    out.push(']');
    out
}

/// A request from this side, serialized.
pub fn request(id: u64, method: &str, params: &impl Serialize) -> String {
    serde_json::to_string(&RequestOut {
        jsonrpc: "2.0",
        id,
        method,
        params,
    })
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn single(text: &str) -> Result<Incoming, Rejected> {
        match parse(text.as_bytes()) {
            Parsed::Single(r) => r,
            Parsed::Batch(_) => panic!("batch"),
        }
    }

    #[test]
    fn classifies_messages() {
        assert_eq!(
            single(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
            Ok(Incoming::Request {
                id: RequestId::Number(1),
                method: "ping".into(),
                params: None
            })
        );
        assert!(matches!(
            single(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Ok(Incoming::Notification { .. })
        ));
        assert!(matches!(
            single(r#"{"jsonrpc":"2.0","id":"a","result":{}}"#),
            Ok(Incoming::Response { result: Ok(_), .. })
        ));
        assert!(matches!(
            single(r#"{"jsonrpc":"2.0","id":"a","error":{"code":1,"message":"x"}}"#),
            Ok(Incoming::Response { result: Err(_), .. })
        ));
    }

    #[test]
    fn refuses_what_is_not_a_message() {
        let e = single("{not json").unwrap_err();
        assert_eq!(e.error.code, PARSE_ERROR);
        let e = single(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#).unwrap_err();
        assert_eq!((e.error.code, e.id), (INVALID_REQUEST, None));
        let e = single(r#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#).unwrap_err();
        assert_eq!(
            (e.error.code, e.id),
            (INVALID_REQUEST, Some(RequestId::Number(3)))
        );
        let e = single(r#"{"jsonrpc":"2.0","id":4,"method":5}"#).unwrap_err();
        assert_eq!(
            (e.error.code, e.id),
            (INVALID_REQUEST, Some(RequestId::Number(4)))
        );
        let e = single("42").unwrap_err();
        assert_eq!(e.error.code, INVALID_REQUEST);
        let e = single(r#"{"jsonrpc":"2.0","id":5}"#).unwrap_err();
        assert_eq!(e.id, Some(RequestId::Number(5)));
    }

    #[test]
    fn params_are_kept_as_sent_and_must_be_an_object_or_an_array() {
        let Ok(Incoming::Request { params, .. }) =
            single(r#"{"jsonrpc":"2.0","id":1,"method":"m","params": {"b":[1, 2],"a":"\u00e9"}}"#)
        else {
            panic!("a request");
        };
        let params = params.expect("params");
        assert_eq!(params.get(), r#"{"b":[1, 2],"a":"\u00e9"}"#);
        assert_eq!(params.to_value(), json!({"b": [1, 2], "a": "é"}));
        assert!(matches!(
            single(r#"{"jsonrpc":"2.0","id":1,"method":"m","params":null}"#),
            Ok(Incoming::Request { params: None, .. })
        ));
        let e = single(r#"{"jsonrpc":"2.0","id":2,"method":"m","params":"x"}"#).unwrap_err();
        assert_eq!(
            (e.error.code, e.id),
            (INVALID_REQUEST, Some(RequestId::Number(2)))
        );
        // Escaped strings in the envelope are read like any other.
        assert!(matches!(
            single(r#"{"jsonrpc":"2\u002e0","id":3,"method":"p\u0069ng"}"#),
            Ok(Incoming::Request { method, .. }) if method == "ping"
        ));
    }

    #[test]
    fn batches_are_split() {
        match parse(br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}, 3]"#) {
            Parsed::Batch(items) => {
                assert!(items[0].is_ok());
                assert!(items[1].is_err());
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn batches_over_the_limit_are_refused_whole() {
        let item = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        let batch = |n: usize| format!("[{}]", vec![item; n].join(","));
        assert!(matches!(
            parse_limited(batch(3).as_bytes(), 3),
            Parsed::Batch(items) if items.len() == 3
        ));
        match parse_limited(batch(4).as_bytes(), 3) {
            Parsed::Single(Err(rejected)) => {
                assert_eq!((rejected.error.code, rejected.id), (INVALID_REQUEST, None));
                assert_eq!(
                    rejected.error.message,
                    "Invalid Request: batch too large (at most 3 messages)"
                );
            }
            other => panic!("{other:?}"),
        }
        // The default limit applies to `parse`.
        let limit = DEFAULT_MAX_BATCH_LEN;
        assert!(matches!(parse(batch(limit).as_bytes()), Parsed::Batch(_)));
        assert!(matches!(
            parse(batch(limit + 1).as_bytes()),
            Parsed::Single(Err(_))
        ));
    }

    /// A code travels as its bare number, whether named or a peer's own, and compares
    /// with the number read back from JSON.
    #[test]
    fn error_codes_travel_as_their_numbers() {
        let peer: ErrorObject =
            serde_json::from_str(r#"{"code":-31999,"message":"theirs"}"#).unwrap();
        assert_eq!(peer.code, ErrorCode::new(-31999));
        assert_eq!(peer.code.value(), -31999);
        let text = error_response(None, &ErrorObject::header_mismatch("x"));
        assert_eq!(
            text,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32020,"message":"x"}}"#
        );
        let answer: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(answer["error"]["code"], ErrorCode::HEADER_MISMATCH);
        assert_ne!(answer["error"]["code"], ErrorCode::INVALID_PARAMS);
        assert_eq!(ErrorObject::invalid_params("p").code, INVALID_PARAMS);
        assert_eq!(ErrorObject::method_not_found("m").code.value(), -32601);
        assert_eq!(ErrorObject::invalid_request("r").code.value(), -32600);
        assert_eq!(ErrorObject::internal("i").code.value(), -32603);
    }

    #[test]
    fn serializes() {
        assert_eq!(
            response(&RequestId::String("x".into()), &json!({})),
            r#"{"jsonrpc":"2.0","id":"x","result":{}}"#
        );
        assert_eq!(
            error_response(None, &ErrorObject::new(PARSE_ERROR, "bad")),
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad"}}"#
        );
        let replies = [
            response(&RequestId::Number(1), &json!({})),
            error_response(None, &ErrorObject::new(PARSE_ERROR, "bad")),
        ];
        assert_eq!(batch(&replies), format!("[{}]", replies.join(",")));
        assert_eq!(
            batch(&replies[..1]),
            r#"[{"jsonrpc":"2.0","id":1,"result":{}}]"#
        );
    }
}
