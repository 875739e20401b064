//! Why an upstream could not be started or its tools registered. Every message names the
//! upstream.

use milpa::RegistryError;

/// An upstream that could not be brought into service.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// Its configuration cannot work.
    #[error("upstream `{upstream}`: {message}")]
    Config {
        /// The upstream's name.
        upstream: String,
        /// What is wrong.
        message: String,
    },
    /// Its program could not be started.
    #[error("upstream `{upstream}`: could not start `{program}`: {source}")]
    Spawn {
        /// The upstream's name.
        upstream: String,
        /// The program.
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
        why: String,
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
    /// The registry refused one of its tools (a name or an input schema).
    #[error("upstream `{upstream}`: {source}")]
    Register {
        /// The upstream's name.
        upstream: String,
        /// Why.
        #[source]
        source: RegistryError,
    },
}
