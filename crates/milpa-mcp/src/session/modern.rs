//! The 2026-07-28 revision: stateless requests, answered beside the older revisions.
//!
//! There is no `initialize` and no session: every request carries its protocol version and
//! the client's capabilities in `params._meta` ([`RequestMeta`]), and is answered from
//! that alone. `server/discover` says what the server is; every result carries
//! `resultType`; the lists carry caching hints (`ttlMs`, `cacheScope`). `ping`,
//! `initialize` and `logging/setLevel` are unknown methods in this revision; a log message
//! goes out only when the request set a log level in its `_meta`.
//!
//! The tool list is the same for every caller (it is computed once per server, not
//! filtered by principal or scopes), so it and `server/discover` are `cacheScope:
//! "public"`; a list filtered per caller would have to say `"private"`.

use std::sync::Arc;

use milpa::LogLevel;
use serde::Deserialize;
use serde::de::{self, value::StrDeserializer};
use serde_json::{Map, Value, json};

use super::call_params::parse_call;
use super::client::{ClientInfo, Route};
use super::{Caller, Dispatch, Session, Shared};
use crate::jsonrpc::{self, ErrorObject, INVALID_PARAMS, METHOD_NOT_FOUND, Params, RequestId};
use crate::protocol::{
    self, ALL_VERSIONS, HEADER_MISMATCH, META_CLIENT_CAPABILITIES, META_LOG_LEVEL,
    META_PROTOCOL_VERSION, META_SERVER_INFO, MODERN_METHODS, MODERN_VERSION,
    UNSUPPORTED_PROTOCOL_VERSION,
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
}

impl RequestMeta {
    /// Reads the `_meta` of a request's params; `-32602` when it, its protocol version or
    /// its client capabilities are missing or malformed.
    pub fn read(params: Option<&Value>) -> Result<RequestMeta, ErrorObject> {
        let invalid =
            |what: &str| ErrorObject::new(INVALID_PARAMS, format!("Invalid params: {what}"));
        let Some(Value::Object(meta)) = params.and_then(|p| p.get("_meta")) else {
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
        })
    }

    /// Whether the request declared `capability` (a non-null member of its capabilities).
    pub fn declares(&self, capability: &str) -> bool {
        self.capabilities
            .get(capability)
            .is_some_and(|v| !v.is_null())
    }
}

/// Whether a request's params carry a 2026-07-28 `_meta` (its protocol version key): how
/// a transport without headers (stdio) tells the revisions apart, request by request.
pub(crate) fn is_modern_request(params: Option<&Params>) -> bool {
    modern_params(params).is_some()
}

/// The params of a 2026-07-28 request as a JSON value (what [`Session::dispatch_modern`]
/// reads), `None` when they carry no 2026-07-28 `_meta`.
pub(crate) fn modern_params(params: Option<&Params>) -> Option<Value> {
    // The substring test keeps the common (legacy) request from being parsed here; a
    // match is confirmed on the parsed `_meta`, so an argument that merely mentions the
    // key does not switch eras.
    let params = params.filter(|p| p.get().contains(META_PROTOCOL_VERSION))?;
    let value = params.to_value();
    value
        .get("_meta")
        .and_then(|m| m.get(META_PROTOCOL_VERSION))
        .is_some()
        .then_some(value)
}

/// The error for a header that does not match the body (HTTP).
pub(crate) fn header_mismatch(message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(HEADER_MISMATCH, message)
}

fn unsupported_version(requested: &str) -> ErrorObject {
    let mut error = ErrorObject::new(
        UNSUPPORTED_PROTOCOL_VERSION,
        format!("Unsupported protocol version: {requested}"),
    );
    error.data = Some(json!({"supported": ALL_VERSIONS, "requested": requested}));
    error
}

impl Shared {
    /// `_meta` of a 2026-07-28 result: who answered.
    fn result_meta(&self) -> Value {
        let options = &self.options;
        let mut info = Map::new();
        info.insert("name".into(), Value::String(options.name.clone()));
        info.insert("version".into(), Value::String(options.version.clone()));
        if let Some(title) = &options.title {
            info.insert("title".into(), Value::String(title.clone()));
        }
        json!({ META_SERVER_INFO: info })
    }

    /// Adds what every 2026-07-28 list result carries: `resultType`, the caching hints and
    /// the server's identity.
    fn cacheable(&self, mut result: Map<String, Value>) -> Value {
        result.insert("resultType".into(), json!("complete"));
        let ttl = u64::try_from(self.options.list_ttl.as_millis()).unwrap_or(u64::MAX);
        result.insert("ttlMs".into(), json!(ttl));
        result.insert("cacheScope".into(), json!("public"));
        result.insert("_meta".into(), self.result_meta());
        Value::Object(result)
    }

    fn discover(&self) -> Value {
        let mut result = Map::new();
        result.insert("supportedVersions".into(), json!(ALL_VERSIONS));
        result.insert(
            "capabilities".into(),
            json!({
                // Changes reach `subscriptions/listen` subscriptions.
                "tools": {"listChanged": true},
                "prompts": {"listChanged": false},
                "resources": {"listChanged": false, "subscribe": false},
            }),
        );
        if let Some(instructions) = &self.options.instructions {
            result.insert("instructions".into(), Value::String(instructions.clone()));
        }
        self.cacheable(result)
    }
}

impl Session {
    /// A session that serves 2026-07-28 requests: what the client declared comes with each
    /// request, so it starts declared, with no capabilities of its own.
    pub fn modern(shared: Arc<Shared>) -> Arc<Session> {
        let session = Session::new(shared, None);
        session.client.declare(ClientInfo {
            version: MODERN_VERSION,
            capabilities: json!({}),
        });
        session
    }

    /// Whether this session serves the 2026-07-28 revision.
    pub fn is_modern(&self) -> bool {
        self.client.protocol_version() == Some(MODERN_VERSION)
    }

    /// Handles one 2026-07-28 request. `value` is `params` as a JSON value (the caller
    /// may have read it already: each full parse of a request's parameters showed in
    /// `perf`). `version_header` is the HTTP `MCP-Protocol-Version` (`Some(None)` when the
    /// header is missing), `None` on transports without headers: on HTTP it must name the
    /// version the `_meta` does.
    #[allow(clippy::too_many_arguments)]
    pub fn dispatch_modern(
        self: &Arc<Self>,
        id: RequestId,
        method: &str,
        params: Option<Params>,
        value: Option<Value>,
        caller: &Caller,
        route: Route,
        version_header: Option<Option<&str>>,
    ) -> Dispatch {
        let reply = |result: Result<Value, ErrorObject>| {
            Dispatch::Reply(match result {
                Ok(value) => jsonrpc::response(&id, &value),
                Err(error) => jsonrpc::error_response(Some(&id), &error),
            })
        };
        let meta = match admit(value.as_ref(), version_header) {
            Ok(meta) => meta,
            Err(error) => return reply(Err(error)),
        };
        if !MODERN_METHODS.contains(&method) {
            return reply(Err(ErrorObject::new(
                METHOD_NOT_FOUND,
                format!("Method not found: {method}"),
            )));
        }
        let shared = &self.shared;
        match method {
            "server/discover" => reply(Ok(shared.discover())),
            "tools/list" => reply(
                shared
                    .listing()
                    .list(value.as_ref())
                    .map(|page| match page {
                        Value::Object(page) => shared.cacheable(page),
                        other => other,
                    }),
            ),
            "prompts/list" => reply(Ok(shared.cacheable(empty("prompts")))),
            "resources/list" => reply(Ok(shared.cacheable(empty("resources")))),
            "resources/templates/list" => reply(Ok(shared.cacheable(empty("resourceTemplates")))),
            "tools/call" => match parse_call(params) {
                Ok(mut call) => {
                    call.request = Some(Arc::new(meta));
                    self.start_call(id, call, caller, route)
                }
                Err(refused) => {
                    self.audit_refused_call(&refused, caller);
                    reply(Err(*refused.error))
                }
            },
            other => reply(Err(ErrorObject::new(
                METHOD_NOT_FOUND,
                format!("Method not found: {other}"),
            ))),
        }
    }
}

/// Admits a 2026-07-28 request: its `_meta` is well formed (`-32602`), the HTTP
/// `MCP-Protocol-Version` (`version_header`, `None` off HTTP) names the same version
/// (`-32020`), and that version is this revision (`-32022`).
pub(crate) fn admit(
    params: Option<&Value>,
    version_header: Option<Option<&str>>,
) -> Result<RequestMeta, ErrorObject> {
    let meta = RequestMeta::read(params)?;
    if let Some(header) = version_header
        && header.map(str::trim) != Some(meta.version.as_str())
    {
        return Err(header_mismatch(format!(
            "Header mismatch: MCP-Protocol-Version ({}) does not match _meta[\"{META_PROTOCOL_VERSION}\"] ({})",
            header.unwrap_or("missing"),
            meta.version
        )));
    }
    if meta.version != MODERN_VERSION {
        return Err(unsupported_version(&meta.version));
    }
    Ok(meta)
}

fn empty(key: &str) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert(key.into(), json!([]));
    map
}

/// Whether `version` is the 2026-07-28 revision or one no revision knows: a request that
/// names it is answered the 2026-07-28 way (an unknown one with `-32022`).
pub(crate) fn is_modern_version(version: &str) -> bool {
    !protocol::is_supported(version)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(text: &str) -> Params {
        let line = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{text}}}"#);
        let crate::jsonrpc::Parsed::Single(Ok(crate::jsonrpc::Incoming::Request {
            params: Some(params),
            ..
        })) = crate::jsonrpc::parse(line.as_bytes())
        else {
            panic!("not a request");
        };
        params
    }

    #[test]
    fn only_a_meta_protocol_version_makes_a_request_modern() {
        let modern = params(
            r#"{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#,
        );
        assert!(is_modern_request(Some(&modern)));
        // What the dispatch then reads: the params themselves.
        assert_eq!(modern_params(Some(&modern)), Some(modern.to_value()));
        let mention = params(
            r#"{"name":"echo","arguments":{"text":"io.modelcontextprotocol/protocolVersion"}}"#,
        );
        assert!(!is_modern_request(Some(&mention)));
        assert!(!is_modern_request(None));
    }
}
