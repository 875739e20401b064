//! What an upstream is: how to reach it, what its tools are called here, and how each of
//! them behaves in the pipeline (overrides by glob over the upstream's own tool names).

use std::time::Duration;

use milpa::policy::glob_matches;

/// How long an upstream tool call may run when no override says otherwise; it is also the
/// hard timeout, after which the call is cancelled upstream.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// One upstream MCP server.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct UpstreamConfig {
    /// The upstream's name: in messages, logs, listings and policies.
    pub name: String,
    /// How to reach it.
    pub transport: Transport,
    /// Put before each upstream tool's name (`None`: `"<name>__"`; `""` allowed).
    pub prefix: Option<String>,
    /// Overrides by glob over the upstream's own tool names, in order; every match
    /// applies, later ones win field by field.
    pub overrides: Vec<(String, ToolOverride)>,
}

impl UpstreamConfig {
    /// A stdio upstream: `command` (argv, never a shell) with no extra environment.
    pub fn stdio(name: impl Into<String>, command: Vec<String>) -> UpstreamConfig {
        UpstreamConfig {
            name: name.into(),
            transport: Transport::Stdio {
                command,
                env: Vec::new(),
            },
            prefix: None,
            overrides: Vec::new(),
        }
    }

    /// A Streamable HTTP upstream at `url`, with the bearer token in the environment
    /// variable `bearer_env` (when given).
    pub fn http(
        name: impl Into<String>,
        url: String,
        bearer_env: Option<String>,
    ) -> UpstreamConfig {
        UpstreamConfig {
            name: name.into(),
            transport: Transport::Http { url, bearer_env },
            prefix: None,
            overrides: Vec::new(),
        }
    }

    /// The prefix our names of its tools start with.
    pub fn prefix(&self) -> String {
        self.prefix
            .clone()
            .unwrap_or_else(|| format!("{}__", self.name))
    }

    /// The override for the upstream tool `tool`: every matching glob, in order.
    pub fn override_for(&self, tool: &str) -> ToolOverride {
        self.overrides
            .iter()
            .filter(|(glob, _)| glob_matches(glob, tool))
            .fold(ToolOverride::default(), |merged, (_, over)| {
                merged.then(over)
            })
    }
}

/// How an upstream is reached.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Transport {
    /// A child process speaking newline-delimited JSON-RPC on stdin/stdout.
    Stdio {
        /// The argv: the program, then its arguments.
        command: Vec<String>,
        /// Variables set in the child's environment, besides `PATH`, `HOME` and `LANG`
        /// (everything else of milpa's environment is withheld).
        env: Vec<(String, String)>,
    },
    /// A Streamable HTTP server (`http://` or `https://`).
    Http {
        /// The MCP endpoint, e.g. `http://127.0.0.1:9000/mcp` or
        /// `https://tools.example.com/mcp`.
        url: String,
        /// The environment variable (of milpa's own environment) holding its bearer
        /// token; read at each launch, never kept in the configuration.
        bearer_env: Option<String>,
    },
}

/// Who confirms a call of an upstream tool first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Confirm {
    /// Nobody: the call is forwarded at once.
    No,
    /// The caller, with a one-time token.
    Caller,
    /// A person other than the caller (the call is parked until approved).
    Human,
}

/// Changes to how an upstream tool behaves here; `None` keeps what the upstream says (or
/// the default).
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct ToolOverride {
    /// Whether the tool changes state (default: unless the upstream says `readOnlyHint`).
    pub mutating: Option<bool>,
    /// Who confirms a call first (default: nobody).
    pub confirm: Option<Confirm>,
    /// Scopes of which the caller needs one (default: none).
    pub scopes: Option<Vec<String>>,
    /// Soft and hard timeout (default [`DEFAULT_CALL_TIMEOUT`]).
    pub timeout: Option<Duration>,
    /// Leave the tool out (default: listed).
    pub hide: Option<bool>,
}

impl ToolOverride {
    /// `self`, with every field `later` sets replaced.
    fn then(self, later: &ToolOverride) -> ToolOverride {
        ToolOverride {
            mutating: later.mutating.or(self.mutating),
            confirm: later.confirm.or(self.confirm),
            scopes: later.scopes.clone().or(self.scopes),
            timeout: later.timeout.or(self.timeout),
            hide: later.hide.or(self.hide),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_merge_in_order_and_prefix_defaults_to_the_name() {
        let mut config = UpstreamConfig::stdio("fs", vec!["server".into()]);
        assert_eq!(config.prefix(), "fs__");
        config.prefix = Some(String::new());
        assert_eq!(config.prefix(), "");
        config.overrides = vec![
            (
                "*".into(),
                ToolOverride {
                    scopes: Some(vec!["fs:read".into()]),
                    mutating: Some(false),
                    ..ToolOverride::default()
                },
            ),
            (
                "write_*".into(),
                ToolOverride {
                    mutating: Some(true),
                    confirm: Some(Confirm::Human),
                    ..ToolOverride::default()
                },
            ),
        ];
        let write = config.override_for("write_file");
        assert_eq!(write.mutating, Some(true));
        assert_eq!(write.confirm, Some(Confirm::Human));
        assert_eq!(write.scopes, Some(vec!["fs:read".to_owned()]));
        let read = config.override_for("read_file");
        assert_eq!(read.mutating, Some(false));
        assert_eq!(read.confirm, None);
    }
}
