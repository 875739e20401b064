//! What an upstream is: how to reach it, what its tools are called here, and how each of
//! them behaves in the pipeline (overrides by glob over the upstream's own tool names).

use std::time::Duration;

use milpa::policy::glob_matches;

use crate::revision::ProtocolChoice;

/// How long an upstream tool call may run when no override says otherwise; it is also the
/// hard timeout, after which the call is cancelled upstream.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// How long an upstream may take to start (launch, `initialize`, and the discovery of its
/// tools) when its configuration does not say: long enough for `npx -y` to download a
/// server the first time on a slow line.
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(120);

/// The largest message an upstream may send when its configuration does not say (a line
/// on a stdio server's output, an event or a JSON answer from an HTTP server).
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// One upstream MCP server. Its `Debug` shows no command, URL, variable or header value
/// (they may hold secrets read from the environment): only what [`label`](Self::label)
/// shows.
#[derive(Clone, PartialEq)]
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
    /// Overrides by glob over its resource URIs and template texts, merged like
    /// [`overrides`](Self::overrides).
    pub resource_overrides: Vec<(String, CatalogOverride)>,
    /// Overrides by glob over its own prompt names, merged like
    /// [`overrides`](Self::overrides).
    pub prompt_overrides: Vec<(String, CatalogOverride)>,
    /// How long a start may take (launch, handshake and discovery) before it counts as
    /// failed (default [`DEFAULT_START_TIMEOUT`]).
    pub start_timeout: Duration,
    /// How the upstream is shown in logs and messages (its command or URL as configured,
    /// with `${VAR}` unexpanded, so no secret shows); `None`: built from the transport.
    pub shown: Option<String>,
    /// The largest message it may send (default [`DEFAULT_MAX_MESSAGE_BYTES`]): a stdio
    /// line over it resets the session (its calls fail `UPSTREAM_UNAVAILABLE` and the
    /// server is started again); an HTTP answer or event over it fails that exchange.
    pub max_message_bytes: usize,
    /// Whether its tools' and prompts' definitions are pinned, a changed one held for a
    /// person (default `true`; see [`DefinitionPins`](crate::DefinitionPins)). Only an
    /// upstream started with [`Upstream::spawn_pinned`](crate::Upstream::spawn_pinned) is
    /// pinned.
    pub pin: bool,
    /// Which revisions of the protocol to speak to it (default
    /// [`ProtocolChoice::Discover`]: 2026-07-28 when it offers it).
    pub protocol: ProtocolChoice,
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
            resource_overrides: Vec::new(),
            prompt_overrides: Vec::new(),
            start_timeout: DEFAULT_START_TIMEOUT,
            shown: None,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            pin: true,
            protocol: ProtocolChoice::Discover,
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
            transport: Transport::Http {
                url,
                bearer_env,
                headers: Vec::new(),
            },
            prefix: None,
            overrides: Vec::new(),
            resource_overrides: Vec::new(),
            prompt_overrides: Vec::new(),
            start_timeout: DEFAULT_START_TIMEOUT,
            shown: None,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            pin: true,
            protocol: ProtocolChoice::Discover,
        }
    }

    /// How the upstream is shown in logs: [`shown`](Self::shown), else its command (cut
    /// after [`SHOWN_MAX_CHARS`] characters) or its URL.
    pub fn label(&self) -> String {
        let full = match (&self.shown, &self.transport) {
            (Some(shown), _) => shown.clone(),
            (None, Transport::Stdio { command, .. }) => command.join(" "),
            (None, Transport::Http { url, .. }) => url.clone(),
        };
        match full.char_indices().nth(SHOWN_MAX_CHARS) {
            Some((cut, _)) => format!("{} …", full[..cut].trim_end()),
            None => full,
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

/// Every override of `overrides` whose glob matches `name`, merged in order.
pub(crate) fn catalog_override_for(
    overrides: &[(String, CatalogOverride)],
    name: &str,
) -> CatalogOverride {
    overrides
        .iter()
        .filter(|(glob, _)| glob_matches(glob, name))
        .fold(CatalogOverride::default(), |merged, (_, over)| {
            CatalogOverride {
                hide: over.hide.or(merged.hide),
                scopes: over.scopes.clone().or(merged.scopes),
                human_approval: over.human_approval.or(merged.human_approval),
            }
        })
}

impl std::fmt::Debug for UpstreamConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamConfig")
            .field("name", &self.name)
            .field("shown", &self.label())
            .field("prefix", &self.prefix)
            .field("overrides", &self.overrides)
            .field("resource_overrides", &self.resource_overrides)
            .field("prompt_overrides", &self.prompt_overrides)
            .field("start_timeout", &self.start_timeout)
            .field("max_message_bytes", &self.max_message_bytes)
            .field("pin", &self.pin)
            .field("protocol", &self.protocol)
            .finish_non_exhaustive()
    }
}

/// The most characters of an upstream's command or URL a log line shows.
pub const SHOWN_MAX_CHARS: usize = 60;

/// How an upstream is reached.
#[derive(Clone, PartialEq)]
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
        /// Headers sent on every request (name, value), e.g. an API key; values are
        /// marked sensitive and never shown.
        headers: Vec<(String, String)>,
    },
}

/// Names and the program only: environment and header values may be secrets.
impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transport::Stdio { command, env } => f
                .debug_struct("Stdio")
                .field("program", &command.first())
                .field("env", &env.iter().map(|(k, _)| k).collect::<Vec<_>>())
                .finish_non_exhaustive(),
            Transport::Http {
                bearer_env,
                headers,
                ..
            } => f
                .debug_struct("Http")
                .field("bearer_env", bearer_env)
                .field(
                    "headers",
                    &headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
                )
                .finish_non_exhaustive(),
        }
    }
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

/// Changes to how an upstream's resources (by URI or template) or prompts (by name) are
/// served here; `None` keeps the default.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct CatalogOverride {
    /// Leave them out: not listed, not read (default: listed).
    pub hide: Option<bool>,
    /// Scopes of which a reader needs one (default: none).
    pub scopes: Option<Vec<String>>,
    /// Whether each read (or prompt request) waits for a person's approval (default: no;
    /// see [`Resource::with_human_approval`](milpa::catalog::Resource::with_human_approval)).
    pub human_approval: Option<bool>,
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
