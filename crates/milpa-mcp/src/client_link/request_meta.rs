//! What a 2026-07-28 request declares in its `params._meta`: its protocol version, the
//! client's capabilities, its log level. The session reads it when it admits a request; a
//! call's [`Peer`](crate::peer::Peer) consults it for every request to the client and every
//! log message, so it lives here, below both.

use std::sync::Arc;

use milpa::LogLevel;
use serde::Deserialize;
use serde::de::{self, value::StrDeserializer};
use serde_json::Value;

use crate::jsonrpc::{ErrorObject, INVALID_PARAMS};
use crate::protocol::{
    META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL, META_PROTOCOL_VERSION,
};

/// What a 2026-07-28 request declared in its `_meta`.
#[derive(Debug, Clone)]
pub(crate) struct RequestMeta {
    /// `io.modelcontextprotocol/protocolVersion`.
    pub version: String,
    /// `io.modelcontextprotocol/clientCapabilities` (an object).
    pub capabilities: Value,
    /// `io.modelcontextprotocol/logLevel`, when set: log messages at or above it are sent.
    pub log_level: Option<LogLevel>,
    /// `io.modelcontextprotocol/clientInfo.name`, when given (see [`super::client_name`]).
    pub client_name: Option<Arc<str>>,
}

impl RequestMeta {
    /// Reads a request's `params._meta`; `-32602` when it, its protocol version or its
    /// client capabilities are missing or malformed.
    pub fn read(meta: Option<&Value>) -> Result<RequestMeta, ErrorObject> {
        let invalid =
            |what: &str| ErrorObject::new(INVALID_PARAMS, format!("Invalid params: {what}"));
        let Some(Value::Object(meta)) = meta else {
            return Err(invalid(
                "_meta (an object with the protocol version and client capabilities) is required",
            ));
        };
        let Some(Value::String(version)) = meta.get(META_PROTOCOL_VERSION) else {
            return Err(invalid(&format!(
                "_meta[\"{META_PROTOCOL_VERSION}\"] (a string) is required"
            )));
        };
        let Some(capabilities @ Value::Object(_)) = meta.get(META_CLIENT_CAPABILITIES) else {
            return Err(invalid(&format!(
                "_meta[\"{META_CLIENT_CAPABILITIES}\"] (an object) is required"
            )));
        };
        let log_level = match meta.get(META_LOG_LEVEL) {
            None | Some(Value::Null) => None,
            Some(Value::String(name)) => Some(
                LogLevel::deserialize(StrDeserializer::<de::value::Error>::new(name)).map_err(
                    |_| invalid(&format!("_meta[\"{META_LOG_LEVEL}\"] is not a log level")),
                )?,
            ),
            Some(_) => {
                return Err(invalid(&format!(
                    "_meta[\"{META_LOG_LEVEL}\"] is not a log level"
                )));
            }
        };
        Ok(RequestMeta {
            version: version.clone(),
            capabilities: capabilities.clone(),
            log_level,
            client_name: super::client_name(meta.get(META_CLIENT_INFO)),
        })
    }

    /// Whether the request declared `capability` (a non-null member of its capabilities).
    pub fn declares(&self, capability: &str) -> bool {
        self.capabilities
            .get(capability)
            .is_some_and(|v| !v.is_null())
    }
}
