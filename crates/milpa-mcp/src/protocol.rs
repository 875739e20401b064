//! MCP constants: protocol versions, `_meta` keys, error codes, server options (the
//! methods are `method::Method`).

use std::time::Duration;

use milpa::LogLevel;

pub use crate::jsonrpc::DEFAULT_MAX_BATCH_LEN;

/// The protocol versions this server speaks, newest (preferred) first.
pub const SUPPORTED_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The stateless revision: no `initialize`, no session; every request carries its protocol
/// version and the client's capabilities in `_meta` (see [`META_PROTOCOL_VERSION`]).
pub const MODERN_VERSION: &str = "2026-07-28";

/// Every version this server speaks, newest first: what `server/discover` lists and what an
/// unsupported-version error offers.
pub const ALL_VERSIONS: [&str; 5] = [
    MODERN_VERSION,
    "2025-11-25",
    "2025-06-18",
    "2025-03-26",
    "2024-11-05",
];

/// `_meta` key of a 2026-07-28 request: the protocol version it speaks.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key of a 2026-07-28 request: what the client can do (`ClientCapabilities`).
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key of a 2026-07-28 request: the client software (`Implementation`: `name`,
/// `version`), self-reported; the approvals page shows its `name`.
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key of a 2026-07-28 request: the lowest log level the client wants to be sent
/// (absent: no log messages).
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// `_meta` key of a 2026-07-28 result: who answered (`Implementation`).
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// 2026-07-28 over HTTP: the field of `params` that the `Mcp-Name` header mirrors for
/// `method` (`name` for a tool call or a prompt, `uri` for a read), if it has one. The
/// server checks the header against it; the gateway's client sets the header from it.
/// The method names and their fields live in one place (the crate's method type); this
/// takes a name as it came off the wire.
pub fn routing_name_field(method: &str) -> Option<&'static str> {
    crate::method::Method::from_name(method).and_then(crate::method::Method::routing_name_field)
}

/// 2026-07-28: the `params._meta` key under which a tool names the `inputRequests` key of a
/// request it sends the client through its call handle (`"user_name"`); taken out before
/// the request reaches the client. Without it a request is keyed `<method>#<n>` in asking
/// order. Over 2026-07-28 such a request ends the round with an `input_required` result,
/// and the tool runs again on the retry, where the same request gets the client's answer.
pub const INPUT_KEY_META: &str = "milpa/inputKey";

/// [`ErrorCode::HEADER_MISMATCH`](crate::jsonrpc::ErrorCode::HEADER_MISMATCH).
pub const HEADER_MISMATCH: crate::jsonrpc::ErrorCode = crate::jsonrpc::ErrorCode::HEADER_MISMATCH;
/// [`ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY`](crate::jsonrpc::ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY).
pub const MISSING_REQUIRED_CLIENT_CAPABILITY: crate::jsonrpc::ErrorCode =
    crate::jsonrpc::ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY;
/// [`ErrorCode::UNSUPPORTED_PROTOCOL_VERSION`](crate::jsonrpc::ErrorCode::UNSUPPORTED_PROTOCOL_VERSION).
pub const UNSUPPORTED_PROTOCOL_VERSION: crate::jsonrpc::ErrorCode =
    crate::jsonrpc::ErrorCode::UNSUPPORTED_PROTOCOL_VERSION;

/// The version offered when the client asks for one we do not speak.
pub const LATEST_VERSION: &str = SUPPORTED_VERSIONS[0];

/// Whether `version` is one this server speaks.
pub fn is_supported(version: &str) -> bool {
    SUPPORTED_VERSIONS.contains(&version)
}

/// The version to answer `initialize` with: the client's when we speak it, else our latest.
pub fn negotiate(requested: &str) -> &'static str {
    SUPPORTED_VERSIONS
        .iter()
        .find(|v| **v == requested)
        .copied()
        .unwrap_or(LATEST_VERSION)
}

/// A secret key; its `Debug` shows nothing of it, so options can be logged.
#[derive(Clone)]
pub struct StateSecret(std::sync::Arc<[u8]>);

impl StateSecret {
    /// A key from these bytes (use at least 32 random bytes).
    pub fn new(bytes: impl Into<Vec<u8>>) -> StateSecret {
        StateSecret(bytes.into().into())
    }

    /// 32 random bytes.
    pub fn random() -> StateSecret {
        StateSecret::new(rand::random::<[u8; 32]>().to_vec())
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for StateSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateSecret(..)")
    }
}

/// Default largest message (a stdio line or an HTTP body): 4 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// How an MCP server behaves, whatever its transport.
///
/// ```
/// use milpa_mcp::ServerOptions;
///
/// let mut options = ServerOptions::default();
/// options.name = "notes".into();
/// options.elicitation_confirmation = false; // always use the confirm_token round trip
/// assert_eq!(options.max_message_bytes, 4 * 1024 * 1024);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerOptions {
    /// `serverInfo.name` (default `milpa`).
    pub name: String,
    /// `serverInfo.version` (default: this crate's version).
    pub version: String,
    /// `serverInfo.title`, if any.
    pub title: Option<String>,
    /// `instructions` returned by `initialize`, if any.
    pub instructions: Option<String>,
    /// Tools per `tools/list` page (default 100).
    pub page_size: usize,
    /// Largest stdio line or HTTP body accepted (default 4 MiB). Larger ones are refused
    /// with an error and the server keeps serving.
    pub max_message_bytes: usize,
    /// Ask clients that declared elicitation to confirm actions through
    /// `elicitation/create` (default `true`). Turn it off when an elicitation "accept" is
    /// not good enough: it is the client's word, not proof that a person saw the question.
    pub elicitation_confirmation: bool,
    /// Log messages below this level are not sent until the client calls
    /// `logging/setLevel` (default `info`; `None` sends nothing until then).
    pub default_log_level: Option<LogLevel>,
    /// After `notifications/cancelled`, how long a call may still run (to notice the
    /// cancellation through its call handle) before it is dropped (default: at once).
    pub cancel_grace: Duration,
    /// How long a tool waits for the client to answer a request it sent (sampling,
    /// elicitation) before giving up (default 10 minutes; `None` waits as long as the call).
    pub client_request_timeout: Option<Duration>,
    /// Calls one connection (stdio) or one session (HTTP) may run at once (default 256).
    /// Further calls queue; stdio stops reading new input while four times as many wait.
    pub max_in_flight: usize,
    /// Most messages one batch (JSON array) may hold (default 100). A larger batch is
    /// refused whole with one `-32600` error and none of its messages runs.
    pub max_batch_len: usize,
    /// 2026-07-28: the key that seals the `requestState` of `input_required` results
    /// (HMAC-SHA-256). Give every replica behind one endpoint the same one; without it a
    /// random key is drawn at start, and a state only opens on the server that sealed it.
    pub state_secret: Option<StateSecret>,
    /// 2026-07-28: how long a client may cache `server/discover` and the lists
    /// (`ttlMs`, default 5 minutes). The tool list is fixed for the server's life.
    pub list_ttl: Duration,
    /// stdio (and [`serve_io`](crate::serve_io)): after answering, poll the input for a
    /// few microseconds before parking the thread, while that pays (default `true`). It
    /// saves a thread wake-up per call for a client that sends its next message at once,
    /// and backs off by itself when the client is slower (an agent's pace): see the
    /// stdio module's `spin`. Turn it off on a machine whose cores are all busy; the
    /// environment variable [`STDIO_SPIN_ENV`](crate::STDIO_SPIN_ENV) set to `0` does too.
    pub spin_before_park: bool,
    /// List every tool, resource and prompt to every caller (default `false`: a listing
    /// leaves out what the caller could never use, see [`milpa::Listed`]).
    pub list_all: bool,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            name: "milpa".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            title: None,
            instructions: None,
            page_size: 100,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            elicitation_confirmation: true,
            default_log_level: Some(LogLevel::Info),
            cancel_grace: Duration::ZERO,
            client_request_timeout: Some(Duration::from_secs(600)),
            max_in_flight: 256,
            max_batch_len: DEFAULT_MAX_BATCH_LEN,
            state_secret: None,
            list_ttl: Duration::from_secs(300),
            spin_before_park: true,
            list_all: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_prefers_the_clients_version() {
        assert_eq!(negotiate("2024-11-05"), "2024-11-05");
        assert_eq!(negotiate("2025-06-18"), "2025-06-18");
        assert_eq!(negotiate("1999-01-01"), LATEST_VERSION);
    }

    /// Log levels travel by their `milpa::LogLevel` serde names (`logging/setLevel`,
    /// `notifications/message`) and are filtered by their order: pin both.
    #[test]
    fn levels_round_trip_by_name_and_are_ordered() {
        use serde::Deserialize;
        use serde::de::value::{Error, StrDeserializer};

        let levels = [
            (LogLevel::Debug, "debug"),
            (LogLevel::Info, "info"),
            (LogLevel::Notice, "notice"),
            (LogLevel::Warning, "warning"),
            (LogLevel::Error, "error"),
            (LogLevel::Critical, "critical"),
            (LogLevel::Alert, "alert"),
            (LogLevel::Emergency, "emergency"),
        ];
        let parse = |name: &str| LogLevel::deserialize(StrDeserializer::<Error>::new(name)).ok();
        for (rank, (level, name)) in levels.into_iter().enumerate() {
            assert_eq!(serde_json::to_value(level).unwrap(), name);
            assert_eq!(parse(name), Some(level));
            assert_eq!(level as usize, rank);
        }
        assert!(levels.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(parse("verbose"), None);
        assert_eq!(parse("Info"), None);
    }
}
