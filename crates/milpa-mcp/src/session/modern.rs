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

use serde_json::{Map, Value, json};

use super::Shared;
use crate::client_link::RequestMeta;
use crate::jsonrpc::ErrorObject;
use crate::protocol::{
    self, ALL_VERSIONS, META_PROTOCOL_VERSION, META_SERVER_INFO, MODERN_VERSION,
    UNSUPPORTED_PROTOCOL_VERSION,
};

/// The error for a header that does not match the body (HTTP).
pub(crate) fn header_mismatch(message: impl Into<String>) -> ErrorObject {
    ErrorObject::header_mismatch(message)
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

    /// Adds what every 2026-07-28 list result carries: `resultType`, the caching hints
    /// (`cacheScope` `public` when the result is the same for every caller, else `private`)
    /// and the server's identity.
    pub(super) fn cacheable(&self, mut result: Map<String, Value>, public: bool) -> Value {
        result.insert("resultType".into(), json!("complete"));
        let ttl = u64::try_from(self.options.list_ttl.as_millis()).unwrap_or(u64::MAX);
        result.insert("ttlMs".into(), json!(ttl));
        let scope = if public { "public" } else { "private" };
        result.insert("cacheScope".into(), json!(scope));
        result.insert("_meta".into(), self.result_meta());
        Value::Object(result)
    }

    pub(super) fn discover(&self) -> Value {
        let mut result = Map::new();
        result.insert("supportedVersions".into(), json!(ALL_VERSIONS));
        result.insert(
            "capabilities".into(),
            json!({
                // Changes reach `subscriptions/listen` subscriptions.
                "tools": {"listChanged": true},
                "prompts": {"listChanged": true},
                // Updates reach a `subscriptions/listen` that names the resource.
                "resources": {"listChanged": true, "subscribe": true},
                "completions": {},
            }),
        );
        if let Some(instructions) = super::initialize::instructions(&self.options, &self.registry) {
            result.insert("instructions".into(), Value::String(instructions));
        }
        self.cacheable(result, true)
    }
}

/// Admits a 2026-07-28 request: its `_meta` (`params._meta`) is well formed (`-32602`), the HTTP
/// `MCP-Protocol-Version` (`version_header`, `None` off HTTP) names the same version
/// (`-32020`), and that version is this revision (`-32022`).
pub(crate) fn admit(
    meta: Option<&Value>,
    version_header: Option<Option<&str>>,
) -> Result<RequestMeta, ErrorObject> {
    let meta = RequestMeta::read(meta)?;
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

/// Whether `version` is the 2026-07-28 revision or one no revision knows: a request that
/// names it is answered the 2026-07-28 way (an unknown one with `-32022`).
pub(crate) fn is_modern_version(version: &str) -> bool {
    !protocol::is_supported(version)
}
