//! A request read once: its params in the shape its method takes ([`ReadParams`]), then
//! the typed [`Request`] the dispatcher serves, one variant per method.
//!
//! The params are read at most once whatever asks about them first: telling the revisions
//! apart (stdio, and HTTP without a session), the HTTP routing headers, the 2026-07-28
//! `_meta`, and the method's own params all look at the same reading.

use milpa::LogLevel;
use serde::Deserialize;
use serde::de::{self, value::StrDeserializer};
use serde_json::Value;

use super::call_params::{CallParams, CallWire, RefusedCall, UnreadCall, read_call};
use super::catalog_params::{CompleteParams, PromptParams, UriParams, read_params};
use super::listen::Subscription;
use crate::jsonrpc::{ErrorObject, INVALID_PARAMS, Params};
use crate::method::Method;
use crate::protocol::META_PROTOCOL_VERSION;

/// A request's params, as far as they have been read.
#[derive(Debug)]
pub(crate) enum ReadParams {
    /// Not read yet: the text as it arrived.
    Unread(Option<Params>),
    /// Read as `tools/call` params (the hot path: straight into their own struct).
    Call(Result<Box<CallWire>, Box<UnreadCall>>),
    /// Read as a JSON value (every other method: none of them is hot).
    Value(Option<Value>),
}

impl ReadParams {
    /// Reads the params of a request for `method` (by its wire name).
    pub fn read(method: &str, params: Option<Params>) -> ReadParams {
        if method == Method::ToolsCall.name() {
            ReadParams::Call(read_call(params).map(Box::new))
        } else {
            ReadParams::Value(params.as_ref().map(Params::to_value))
        }
    }

    /// What a transport without a protocol-version header reads to tell the revisions
    /// apart: the params are read when their text mentions the 2026-07-28 `_meta` key
    /// (then [`ReadParams::is_stateless`] confirms it on the reading), and left unread
    /// otherwise, so the common (older-revision) request is not read here.
    pub fn for_era(method: &str, params: Option<Params>) -> ReadParams {
        if ReadParams::mentions_stateless_meta(params.as_ref()) {
            ReadParams::read(method, params)
        } else {
            ReadParams::Unread(params)
        }
    }

    /// Whether the text of `params` mentions the 2026-07-28 `_meta` key (without which a
    /// request is of a session revision; with it, it may be).
    pub fn mentions_stateless_meta(params: Option<&Params>) -> bool {
        params.is_some_and(|text| text.get().contains(META_PROTOCOL_VERSION))
    }

    /// Reads the params if they are not yet.
    pub fn read_now(self, method: &str) -> ReadParams {
        match self {
            ReadParams::Unread(params) => ReadParams::read(method, params),
            read => read,
        }
    }

    /// The params as a JSON value (`None`: no params, or not read as a value).
    fn value(&self) -> Option<&Value> {
        match self {
            ReadParams::Value(value) => value.as_ref(),
            ReadParams::Call(Err(unread)) => unread.value.as_ref(),
            ReadParams::Call(Ok(_)) | ReadParams::Unread(_) => None,
        }
    }

    /// `params.name` as a string, when the params were read.
    pub fn name(&self) -> Option<&str> {
        match self {
            ReadParams::Call(Ok(wire)) => wire.name(),
            read => read.member("name").and_then(Value::as_str),
        }
    }

    /// `params.arguments`, when the params were read.
    pub fn arguments(&self) -> Option<&Value> {
        match self {
            ReadParams::Call(Ok(wire)) => wire.arguments(),
            read => read.member("arguments"),
        }
    }

    /// `params._meta`, when the params were read.
    pub fn meta(&self) -> Option<&Value> {
        match self {
            ReadParams::Call(Ok(wire)) => wire.meta(),
            read => read.member("_meta"),
        }
    }

    /// A member of the params that is a string (`name` of a call included).
    pub fn member_str(&self, key: &str) -> Option<&str> {
        match self {
            ReadParams::Call(Ok(_)) if key == "name" => self.name(),
            read => read.member(key).and_then(Value::as_str),
        }
    }

    /// A member of params read as a value (a malformed `tools/call` included).
    pub fn member(&self, key: &str) -> Option<&Value> {
        self.value().and_then(|params| params.get(key))
    }

    /// Whether the params carry a 2026-07-28 `_meta` (its protocol version key): how a
    /// request tells its revision where no header does. Unread params carry none.
    pub fn is_stateless(&self) -> bool {
        self.meta()
            .and_then(|meta| meta.get(META_PROTOCOL_VERSION))
            .is_some()
    }

    /// `tools/call` params, checked.
    fn into_call(self) -> Result<CallParams, RefusedCall> {
        match self.read_now(Method::ToolsCall.name()) {
            ReadParams::Call(Ok(wire)) => wire.into_call(),
            ReadParams::Call(Err(unread)) => Err(unread.refused),
            // `read_now` reads `tools/call` params as a call.
            ReadParams::Value(_) | ReadParams::Unread(_) => Err(RefusedCall {
                name: None,
                error: Box::new(ErrorObject::new(
                    INVALID_PARAMS,
                    "Invalid params: tools/call needs an object with a name",
                )),
            }),
        }
    }

    /// The params of any other method as a JSON value.
    fn into_value(self, method: Method) -> Option<Value> {
        match self.read_now(method.name()) {
            ReadParams::Value(value) => value,
            ReadParams::Call(Err(unread)) => unread.value,
            ReadParams::Call(Ok(_)) | ReadParams::Unread(_) => None,
        }
    }
}

/// A request the dispatcher serves: one variant per method, holding its typed params.
#[derive(Debug)]
pub(crate) enum Request {
    /// `initialize`.
    Initialize(InitializeParams),
    /// `ping`.
    Ping,
    /// `tools/list`, from this cursor (`None`: the first page).
    ToolsList(Option<String>),
    /// `tools/call`.
    ToolsCall(Box<CallParams>),
    /// `logging/setLevel`.
    SetLogLevel(LogLevel),
    /// `server/discover`.
    ServerDiscover,
    /// `prompts/list`.
    PromptsList,
    /// `prompts/get`.
    PromptsGet(PromptParams),
    /// `resources/list`.
    ResourcesList,
    /// `resources/templates/list`.
    ResourceTemplatesList,
    /// `resources/read`.
    ResourcesRead(UriParams),
    /// `resources/subscribe`.
    ResourcesSubscribe(UriParams),
    /// `resources/unsubscribe`.
    ResourcesUnsubscribe(UriParams),
    /// `completion/complete`.
    Complete(CompleteParams),
    /// `subscriptions/listen`: the transport opens it.
    SubscriptionsListen(Subscription),
}

/// Why a request was refused before it was served.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// The error to answer.
    Error(ErrorObject),
    /// A `tools/call` refused before the registry saw it (it still leaves an audit record).
    Call(RefusedCall),
}

impl From<ErrorObject> for Refusal {
    fn from(error: ErrorObject) -> Refusal {
        Refusal::Error(error)
    }
}

/// `initialize` params.
#[derive(Debug)]
pub(crate) struct InitializeParams {
    /// `protocolVersion`.
    pub protocol_version: String,
    /// `capabilities` (an object; `{}` when absent).
    pub capabilities: Value,
    /// `clientInfo.name`, when given (for the log, and the approvals page).
    pub client_name: Option<std::sync::Arc<str>>,
}

fn invalid(message: &str) -> ErrorObject {
    ErrorObject::new(INVALID_PARAMS, message)
}

impl InitializeParams {
    fn read(params: Option<Value>) -> Result<InitializeParams, ErrorObject> {
        let mut params = match params {
            Some(Value::Object(map)) => map,
            _ => serde_json::Map::new(),
        };
        let Some(Value::String(protocol_version)) = params.remove("protocolVersion") else {
            return Err(invalid(
                "Invalid params: protocolVersion (a string) is required",
            ));
        };
        let capabilities = match params.remove("capabilities") {
            None | Some(Value::Null) => Value::Object(serde_json::Map::new()),
            Some(map @ Value::Object(_)) => map,
            Some(_) => return Err(invalid("Invalid params: capabilities must be an object")),
        };
        let client_name = crate::client_link::client_name(params.get("clientInfo"));
        Ok(InitializeParams {
            protocol_version,
            capabilities,
            client_name,
        })
    }
}

fn read_log_level(params: Option<&Value>) -> Result<LogLevel, ErrorObject> {
    params
        .and_then(|p| p.get("level"))
        // The name only (a derived enum would also take `{"info": null}`).
        .and_then(Value::as_str)
        .and_then(|name| LogLevel::deserialize(StrDeserializer::<de::value::Error>::new(name)).ok())
        .ok_or_else(|| {
            invalid(
                "Invalid params: level must be one of debug, info, notice, warning, error, critical, alert, emergency",
            )
        })
}

impl Request {
    /// Reads the request for `method` (one this session's revision serves, and may serve
    /// now) from its params. `id` names a subscription.
    pub fn read(
        method: Method,
        params: ReadParams,
        id: &crate::jsonrpc::RequestId,
    ) -> Result<Request, Refusal> {
        Ok(match method {
            Method::ToolsCall => {
                Request::ToolsCall(Box::new(params.into_call().map_err(Refusal::Call)?))
            }
            Method::Ping => Request::Ping,
            Method::ServerDiscover => Request::ServerDiscover,
            // One page holds every entry: a cursor can only be one this server never gave.
            Method::PromptsList | Method::ResourcesList | Method::ResourceTemplatesList => {
                if super::listing::read_cursor(params.into_value(method).as_ref())?.is_some() {
                    return Err(invalid("Invalid cursor").into());
                }
                match method {
                    Method::PromptsList => Request::PromptsList,
                    Method::ResourcesList => Request::ResourcesList,
                    _ => Request::ResourceTemplatesList,
                }
            }
            Method::PromptsGet => {
                Request::PromptsGet(read_params(method.name(), params.into_value(method))?)
            }
            Method::ResourcesRead => {
                Request::ResourcesRead(read_params(method.name(), params.into_value(method))?)
            }
            Method::ResourcesSubscribe => {
                Request::ResourcesSubscribe(read_params(method.name(), params.into_value(method))?)
            }
            Method::ResourcesUnsubscribe => Request::ResourcesUnsubscribe(read_params(
                method.name(),
                params.into_value(method),
            )?),
            Method::CompletionComplete => {
                Request::Complete(read_params(method.name(), params.into_value(method))?)
            }
            Method::Initialize => {
                Request::Initialize(InitializeParams::read(params.into_value(method))?)
            }
            Method::ToolsList => Request::ToolsList(super::listing::read_cursor(
                params.into_value(method).as_ref(),
            )?),
            Method::LoggingSetLevel => {
                Request::SetLogLevel(read_log_level(params.into_value(method).as_ref())?)
            }
            Method::SubscriptionsListen => Request::SubscriptionsListen(Subscription::new(
                id,
                params.into_value(method).as_ref(),
            )?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::{Incoming, Parsed, parse};

    fn params(text: &str) -> Option<Params> {
        let line = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{text}}}"#);
        let Parsed::Single(Ok(Incoming::Request { params, .. })) = parse(line.as_bytes()) else {
            panic!("not a request");
        };
        params
    }

    #[test]
    fn only_a_meta_protocol_version_makes_a_request_stateless() {
        let modern = ReadParams::for_era(
            "tools/call",
            params(
                r#"{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#,
            ),
        );
        assert!(modern.is_stateless());
        // Read once, as a call: what the dispatcher then takes.
        assert!(matches!(modern, ReadParams::Call(Ok(_))));
        assert_eq!(modern.name(), Some("x"));
        let mention = ReadParams::for_era(
            "tools/call",
            params(
                r#"{"name":"echo","arguments":{"text":"io.modelcontextprotocol/protocolVersion"}}"#,
            ),
        );
        assert!(!mention.is_stateless());
        assert_eq!(
            mention.arguments(),
            Some(&serde_json::json!({"text": "io.modelcontextprotocol/protocolVersion"}))
        );
        // Without the key the params are not read at all.
        let plain = ReadParams::for_era("tools/call", params(r#"{"name":"echo"}"#));
        assert!(matches!(plain, ReadParams::Unread(Some(_))));
        assert!(!plain.is_stateless());
        assert!(!ReadParams::for_era("tools/list", None).is_stateless());
        let listing = ReadParams::for_era(
            "tools/list",
            params(r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#),
        );
        assert!(listing.is_stateless());
    }

    /// A `tools/call` whose params are no call is still seen for what it names.
    #[test]
    fn malformed_calls_keep_their_params_as_a_value() {
        let read = ReadParams::read("tools/call", params(r#"[{"name":"x"}]"#));
        assert_eq!(read.name(), None);
        assert!(matches!(read, ReadParams::Call(Err(_))));
        let id = crate::jsonrpc::RequestId::Number(1);
        let Err(Refusal::Call(refused)) = Request::read(Method::ToolsCall, read, &id) else {
            panic!("a refused call");
        };
        assert_eq!(refused.error.code, INVALID_PARAMS);
        let read = ReadParams::read("tools/call", params(r#"{"name":"x","name":"y"}"#));
        assert_eq!(read.name(), Some("y"));
    }
}
