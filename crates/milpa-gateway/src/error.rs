//! Why an upstream could not be started or its tools registered. Every message names the
//! upstream; every failure that has a cause keeps it as its [`source`](std::error::Error::source).

use milpa::RegistryError;

use crate::connection::CallError;

/// An upstream that could not be brought into service, or one of its tools that is not
/// served.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// Its configuration cannot work.
    #[error("upstream `{upstream}`: {problem}")]
    Config {
        /// The upstream's name.
        upstream: String,
        /// What is wrong.
        #[source]
        problem: ConfigProblem,
    },
    /// Its program could not be started.
    #[error("upstream `{upstream}`: could not start `{program}`: {source}")]
    Spawn {
        /// The upstream's name.
        upstream: String,
        /// The program (the command as configured, when it was given as written).
        program: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The MCP handshake or the discovery of its tools failed.
    #[error("upstream `{upstream}`: {why}")]
    Handshake {
        /// The upstream's name.
        upstream: String,
        /// What failed.
        #[source]
        why: HandshakeFailure,
    },
    /// One of its tools would take the name of a tool that exists already.
    #[error(
        "upstream `{upstream}`: its tool `{remote}` would be registered as `{tool}`, \
         which is already {existing}; set another `prefix` or `hide` one of them"
    )]
    Collision {
        /// The upstream's name.
        upstream: String,
        /// The tool's name upstream.
        remote: String,
        /// The name it would have here.
        tool: String,
        /// What holds the name already.
        existing: String,
    },
    /// The registry refused one of its tools (a name that is invalid or too long, an input
    /// schema that does not compile): that tool is not served, the others are.
    #[error("upstream `{upstream}`: its tool `{remote}` is not served: {source}")]
    Register {
        /// The upstream's name.
        upstream: String,
        /// The tool's name upstream.
        remote: String,
        /// Why.
        #[source]
        source: RegistryError,
    },
}

/// What is wrong with an upstream's configuration (see [`GatewayError::Config`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigProblem {
    /// A stdio upstream without a program to run.
    #[error("the command is empty")]
    EmptyCommand,
    /// An HTTP upstream's URL does not parse.
    #[error("`{url}` is not a URL ({source})")]
    NotAUrl {
        /// The URL as configured.
        url: String,
        /// Why it does not parse.
        #[source]
        source: hyper::http::uri::InvalidUri,
    },
    /// An HTTP upstream's URL has a scheme other than `http` and `https`.
    #[error("`{url}`: only http:// and https:// upstreams are supported")]
    UnsupportedScheme {
        /// The URL as configured.
        url: String,
    },
    /// An `https://` upstream on a host without trusted root certificates.
    #[error(
        "no trusted root certificates for https:// ({source}); \
         SSL_CERT_FILE or SSL_CERT_DIR can name them"
    )]
    NoTrustedRoots {
        /// Why none could be loaded.
        #[source]
        source: std::io::Error,
    },
    /// A configured header that cannot be sent: its name is not a header name, its value
    /// not a header value, or it is one the gateway sets itself. The value is never shown.
    #[error("the header `{name}` cannot be sent: {why}")]
    BadHeader {
        /// The header's name, as configured.
        name: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The variable that should hold the bearer token is not set (or not Unicode).
    #[error("the variable `{variable}` (bearer_env) is not set")]
    BearerUnset {
        /// The variable's name.
        variable: String,
        /// What reading it said.
        #[source]
        source: std::env::VarError,
    },
}

/// Why the MCP handshake or the discovery of an upstream's tools failed (see
/// [`GatewayError::Handshake`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HandshakeFailure {
    /// The child's standard input or output could not be taken.
    #[error("its standard input and output could not be opened")]
    NoStdio,
    /// `server/discover` failed, or did not list 2026-07-28, for an upstream configured
    /// to speak only that revision.
    #[error("server/discover failed (the upstream is set to speak 2026-07-28 only): {0}")]
    Discover(#[source] CallError),
    /// `initialize` (or `notifications/initialized`) failed.
    #[error("initialize failed: {0}")]
    Initialize(#[source] CallError),
    /// Starting (launch, `initialize`, `tools/list`) took longer than its start timeout.
    #[error(
        "it did not finish starting within {} s (start_timeout_seconds)",
        .0.as_secs()
    )]
    TimedOut(std::time::Duration),
    /// `tools/list` failed (or timed out).
    #[error("tools/list failed: {0}")]
    ToolList(#[source] CallError),
}
