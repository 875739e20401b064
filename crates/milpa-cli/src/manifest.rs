//! The manifest (`milpa.toml`): server info, policy, bearer tokens, command tools and
//! upstream MCP servers.
//!
//! Every table refuses keys it does not know, and every error names the file, the line and
//! what is wrong (`milpa.toml:12: unknown field `comand`, expected one of …`), so a typo
//! never silently turns a setting off.

use std::fmt;
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use milpa::policy::{ChannelPolicy, PolicyRule, RuleEffect, StaticRule};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use toml::Spanned;

use crate::env_template::EnvTemplate;
use crate::template::ArgTemplate;

/// Default cap on a command's standard output: 1 MiB.
pub(crate) const DEFAULT_MAX_OUTPUT_BYTES: u64 = 1024 * 1024;

/// Default hard timeout of a command tool, in seconds.
pub(crate) const DEFAULT_TIMEOUT_SECONDS: u64 = 30;

/// Default hard timeout of `[approvals] notify_command`, in seconds.
pub(crate) const DEFAULT_NOTIFY_TIMEOUT_SECONDS: u64 = 30;

pub use crate::manifest_error::ManifestError;

/// A parsed and checked manifest.
///
/// ```
/// use milpa_cli::manifest::Manifest;
///
/// let manifest = Manifest::parse("milpa.toml", r#"
/// [[tools]]
/// name = "greet"
/// command = ["echo", "hello", "{who}"]
///
/// [tools.params.who]
/// type = "string"
/// required = true
/// "#).unwrap();
/// assert_eq!(manifest.tools[0].name(), "greet");
///
/// let typo = Manifest::parse("milpa.toml", "[[tools]]\nname = \"x\"\ncomand = [\"ls\"]\n").unwrap_err();
/// assert!(typo.to_string().starts_with("milpa.toml:3: unknown field `comand`"));
/// ```
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// `[server]`: what the MCP server calls itself.
    #[serde(default)]
    pub server: ServerSection,
    /// `[rate_limit]`: no limiter when absent.
    #[serde(default)]
    pub rate_limit: Option<RateLimitSection>,
    /// `[caller_budget]`: a budget per caller spent before a tool is looked up; off when
    /// absent.
    #[serde(default)]
    pub caller_budget: Option<RateLimitSection>,
    /// `[confirmation]`: token lifetime and MCP elicitation.
    #[serde(default)]
    pub confirmation: ConfirmationSection,
    /// `[channels.NAME]`: overrides of channel policies.
    #[serde(default)]
    pub channels: IndexMap<String, ChannelOverride>,
    /// `[auth]`: HTTP bearer tokens.
    #[serde(default)]
    pub auth: AuthSection,
    /// `[[rules]]`: static policy rules, first match wins.
    #[serde(default)]
    pub rules: Vec<RuleSpec>,
    /// `[verification]`: the two verification tools; off when absent.
    #[serde(default)]
    pub verification: Option<VerificationSection>,
    /// `[store]`: where state lives (below `--store` and `MILPA_STORE`).
    #[serde(default)]
    pub store: StoreSection,
    /// `[approvals]`: how long a parked call waits for a person, and who is told.
    #[serde(default)]
    pub approvals: ApprovalsSection,
    /// `[policy]`: Cedar policies over every call (see [`crate::policy_section`]).
    #[serde(default)]
    pub policy: Option<crate::policy_section::PolicySection>,
    /// `[[tools]]`: tools that run programs.
    #[serde(default)]
    pub tools: Vec<CommandToolSpec>,
    /// `[[upstreams]]`: MCP servers whose tools are served through the pipeline.
    #[serde(default)]
    pub upstreams: Vec<UpstreamSpec>,
    /// `[[resources]]`: files, folders and commands offered to be read (see
    /// [`crate::catalog_section`]).
    #[serde(default)]
    pub resources: Vec<crate::catalog_section::ResourceSpec>,
    /// `[[prompts]]`: text templates offered as prompts.
    #[serde(default)]
    pub prompts: Vec<crate::catalog_section::PromptSpec>,
    /// Where the manifest was read from (`None` for the built-in defaults).
    #[serde(skip)]
    source: Option<PathBuf>,
    /// The file's name as given and its text, for error lines.
    #[serde(skip)]
    origin: Option<(String, String)>,
}

/// `[server]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSection {
    /// `serverInfo.name` (default `milpa`).
    pub name: Option<String>,
    /// `serverInfo.version` (default: this program's version).
    pub version: Option<String>,
    /// `serverInfo.title`.
    pub title: Option<String>,
    /// `instructions` sent to MCP clients on `initialize`.
    pub instructions: Option<String>,
    /// List every tool, resource and prompt to every MCP caller (default `false`: a
    /// listing leaves out what the caller could never use).
    #[serde(default)]
    pub list_all: bool,
    /// Who may read `/metrics` on `serve --http`: `"token"` (default: a bearer token
    /// holding the scope `metrics:read`) or `"public"` (anyone who reaches the listener).
    #[serde(default)]
    pub metrics: MetricsSetting,
}

/// `[server] metrics`: who may read the Prometheus metrics at `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum MetricsSetting {
    /// A bearer token holding `metrics:read`.
    #[default]
    Token,
    /// Anyone who can reach the server (it listens on loopback only): for a Prometheus on
    /// the same machine without a token to keep.
    Public,
}

/// `[store]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreSection {
    /// `memory`, `sqlite:PATH` (a relative path is relative to the manifest's folder) or
    /// `redis://HOST:PORT[/DB]`.
    pub url: Option<Spanned<String>>,
    /// Prefix of every Redis key (default `milpa:`), so several deployments can share one
    /// Redis.
    pub redis_prefix: Option<String>,
}

/// `[approvals]`: calls parked for a person (`confirm = "human"`, or a channel's
/// `require_human_approval_for_mutating`) and verification requests.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalsSection {
    /// How long a parked call waits for a decision, then for its replay (default 3600).
    pub ttl_seconds: Option<Spanned<u64>>,
    /// A program run whenever an approval opens, so a person learns of it: an argv, never a
    /// shell, with the placeholders of [`NOTIFY_PLACEHOLDERS`]. Its failures are logged,
    /// never fatal.
    pub notify_command: Option<Spanned<Vec<String>>>,
    /// Environment variables passed to the notify command besides `PATH`, `HOME` and `LANG`
    /// (e.g. `DBUS_SESSION_BUS_ADDRESS` for `notify-send`).
    pub notify_env: Option<Spanned<Vec<String>>>,
    /// Seconds the notify command may run before its process group is killed (default 30).
    pub notify_timeout_seconds: Option<Spanned<u64>>,
    /// The WebAuthn relying party id of the page's passkeys (default `localhost`): the
    /// host name people open the page at, or a parent of it.
    pub rp_id: Option<Spanned<String>>,
    /// The page's exact origin when it is served under a real host name behind TLS
    /// (`https://tools.example.com`); by default `http://<rp_id>` on any port.
    pub origin: Option<Spanned<String>>,
    /// Whether `milpa approvals grant|reject` may decide from a shell (default `on`).
    pub shell: Option<ShellDecisions>,
}

/// `[approvals] shell`: whether a person may decide from a shell.
///
/// `on` (the default): `milpa approvals grant|reject` asks at a terminal for the approval's
/// short code and refuses without a terminal. A program that controls a terminal (an agent
/// with a shell can make one) still passes, so `on` stops an agent's plain one-liner, not a
/// determined agent running as the same user. `off`: no decision from a shell at all; the
/// `/approvals` page of `milpa serve --http` (bearer token with `approvals:grant`) decides.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ShellDecisions {
    /// Decisions at an interactive terminal, with the approval's code typed.
    #[default]
    On,
    /// No decisions from a shell.
    Off,
}

impl ApprovalsSection {
    /// The variables `notify_env` lists.
    pub(crate) fn notify_env(&self) -> &[String] {
        self.notify_env.as_ref().map_or(&[], |env| env.get_ref())
    }

    /// How long the notify command may run.
    pub(crate) fn notify_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(
            self.notify_timeout_seconds
                .as_ref()
                .map_or(DEFAULT_NOTIFY_TIMEOUT_SECONDS, |t| *t.get_ref()),
        )
    }

    /// Whether a shell may decide (`shell`, default on).
    pub(crate) fn shell_decisions(&self) -> ShellDecisions {
        self.shell.unwrap_or_default()
    }

    /// The TTL of parked calls.
    pub(crate) fn ttl(&self) -> std::time::Duration {
        self.ttl_seconds
            .as_ref()
            .map_or(milpa::approval::DEFAULT_TTL, |ttl| {
                std::time::Duration::from_secs(*ttl.get_ref())
            })
    }
}

/// The placeholders an `[approvals] notify_command` element may hold: the approval's id,
/// its summary (secrets already redacted), the parked call's tool, who asked, its kind
/// (`tool_call` or `verification`), when it expires (RFC 3339) and the approval's page
/// (`http://ADDR/approvals/ID` when serving HTTP). A value the approval does not have is
/// empty text.
pub const NOTIFY_PLACEHOLDERS: [&str; 7] = [
    "id",
    "summary",
    "tool",
    "requested_by",
    "kind",
    "expires_at",
    "url",
];

/// `[rate_limit]`: a GCRA budget per `channel:principal:tool`; the same two keys make
/// `[caller_budget]`, a budget per caller (principal, or an anonymous caller's address) that
/// every call spends, one token each, before its tool is looked up.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitSection {
    /// Tokens in a full window (a mutating call costs 5, others 1).
    pub max_tokens: Spanned<u32>,
    /// Seconds a full budget takes to refill.
    pub window_seconds: Spanned<u64>,
}

/// `[confirmation]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfirmationSection {
    /// How long a confirmation token lives (default 60).
    pub ttl_seconds: Option<Spanned<u64>>,
    /// `milpa serve`: confirm through MCP elicitation when the client supports it
    /// (default `true`); `false` always uses the `confirm_token` round trip.
    pub elicitation: Option<bool>,
}

/// `[channels.NAME]`: the keys given replace the channel's built-in values; the others keep
/// them (a channel without a built-in policy starts from the fail-closed one, which
/// requires an authenticated principal).
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelOverride {
    /// Lets mutating tools through even when `block_mutating` is set.
    pub allow_all: Option<bool>,
    /// Denies calls without a principal.
    pub require_auth: Option<bool>,
    /// Denies every mutating tool.
    pub block_mutating: Option<bool>,
    /// Makes every mutating tool ask for confirmation.
    pub require_confirmation_for_mutating: Option<bool>,
    /// Parks every mutating tool's call until a person other than the caller approves it.
    pub require_human_approval_for_mutating: Option<bool>,
}

impl ChannelOverride {
    /// `base` with the keys this override sets.
    pub(crate) fn apply(&self, base: ChannelPolicy) -> ChannelPolicy {
        base.with_allow_all(self.allow_all.unwrap_or(base.allow_all))
            .with_require_auth(self.require_auth.unwrap_or(base.require_auth))
            .with_block_mutating(self.block_mutating.unwrap_or(base.block_mutating))
            .with_require_confirmation_for_mutating(
                self.require_confirmation_for_mutating
                    .unwrap_or(base.require_confirmation_for_mutating),
            )
            .with_require_human_approval_for_mutating(
                self.require_human_approval_for_mutating
                    .unwrap_or(base.require_human_approval_for_mutating),
            )
    }
}

/// `[auth]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSection {
    /// `[[auth.tokens]]`.
    #[serde(default)]
    pub tokens: Vec<TokenSpec>,
    /// `[auth.oauth]`: the HTTP server as an OAuth 2.1 resource server.
    pub oauth: Option<OAuthSpec>,
}

/// `[auth.oauth]`: access tokens (JWTs) from an authorization server, checked against its
/// keys; beside them the `[[auth.tokens]]` keep working. Scopes in the token are the tool
/// scopes themselves (no mapping).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthSpec {
    /// The authorization server (`iss` of the tokens).
    pub issuer: Spanned<String>,
    /// This server's resource URL (`aud` of the tokens, RFC 8707), e.g.
    /// `https://tools.example.com/mcp`.
    pub audience: Spanned<String>,
    /// The issuer's JWKS: an `http://` URL or a file path (relative to the manifest).
    pub jwks: Spanned<String>,
    /// The claim holding the scopes (default `scope`): a space-separated string or a list.
    pub scopes_claim: Option<String>,
}

/// `[[auth.tokens]]`: a bearer token, by the SHA-256 of its text (never the text itself).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenSpec {
    /// Lowercase or uppercase hex SHA-256 of the token (`printf %s TOKEN | sha256sum`).
    pub sha256: Spanned<String>,
    /// Who calls with this token; never a name milpa keeps for its local callers (`stdio`,
    /// `cli`, `local-…`: [`milpa::principal::is_reserved`]).
    pub principal: Spanned<String>,
    /// The scopes the token grants.
    #[serde(default)]
    pub scopes: Vec<String>,
}

impl OAuthSpec {
    fn check(&self, at: &dyn Fn(usize, String) -> ManifestError) -> Result<(), ManifestError> {
        if self.issuer.get_ref().trim().is_empty() {
            return Err(at(
                self.issuer.span().start,
                "auth.oauth.issuer must name the authorization server".into(),
            ));
        }
        let audience = self.audience.get_ref().to_ascii_lowercase();
        if !(audience.starts_with("https://") || audience.starts_with("http://")) {
            return Err(at(
                self.audience.span().start,
                "auth.oauth.audience must be this server's URL (e.g. \
                 `https://tools.example.com/mcp`): tokens must be issued for it"
                    .into(),
            ));
        }
        if self.jwks.get_ref().trim().is_empty() {
            return Err(at(
                self.jwks.span().start,
                "auth.oauth.jwks must be the issuer's JWKS URL or a file path".into(),
            ));
        }
        Ok(())
    }
}

/// `[[rules]]`: a static policy rule, checked after scopes; the first match wins.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    /// Shown in denial messages as `#<id>`.
    pub id: Option<i64>,
    /// Tool-name pattern (`*` matches any run of characters).
    pub tool: String,
    /// Principal pattern; absent matches every caller, anonymous included.
    pub principal: Option<String>,
    /// Channel; absent matches every channel.
    pub channel: Option<String>,
    /// `allow` or `deny`.
    pub effect: RuleEffect,
    /// If not empty, the caller needs one of these scopes or the rule denies.
    #[serde(default)]
    pub requires_scopes: Vec<String>,
    /// The denial message, verbatim.
    pub description: Option<String>,
}

impl RuleSpec {
    /// The rule as the policy gate takes it.
    pub(crate) fn to_static_rule(&self) -> StaticRule {
        let mut rule =
            PolicyRule::new(self.effect).with_requires_scopes(self.requires_scopes.iter().cloned());
        if let Some(id) = self.id {
            rule = rule.with_id(id);
        }
        if let Some(description) = &self.description {
            rule = rule.with_description(description.clone());
        }
        let mut rule = StaticRule::new(self.tool.clone(), rule);
        if let Some(principal) = &self.principal {
            rule = rule.with_principal(principal.clone());
        }
        if let Some(channel) = &self.channel {
            rule = rule.with_channel(channel.clone());
        }
        rule
    }
}

/// `[verification]`: registers `request_verification` and `resolve_verification`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerificationSection {
    /// On unless `false`.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Scopes of which a caller of `resolve_verification` needs one.
    #[serde(default)]
    pub resolve_scopes: Vec<String>,
}

fn yes() -> bool {
    true
}

/// `[[tools]]`: a tool that runs a program (`command`) or a WebAssembly component in a
/// sandbox (`wasm`, with `[tools.sandbox]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandToolSpec {
    /// The tool's name.
    pub name: Spanned<String>,
    /// What it does, for people and models.
    #[serde(default)]
    pub description: String,
    /// The argv: a program, then arguments with `{param}` placeholders. Never a shell.
    /// Exactly one of `command` and `wasm` is set.
    pub command: Option<Spanned<Vec<String>>>,
    /// A WebAssembly component of the `milpa:tool` world (a relative path is taken from
    /// the manifest's folder), run in a sandbox that grants only what `[tools.sandbox]`
    /// says: for a tool written by someone else, or by a model. Needs the cargo feature
    /// `wasm` (on by default).
    pub wasm: Option<Spanned<PathBuf>>,
    /// `[tools.sandbox]`: what a `wasm` tool may reach; nothing when absent.
    pub sandbox: Option<Spanned<SandboxSpec>>,
    /// Scopes of which the caller needs one.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Whether the tool changes state.
    #[serde(default)]
    pub mutating: bool,
    /// Who confirms a call first: nobody (`false`), the caller (`true`), or a person
    /// other than the caller (`"human"`).
    #[serde(default)]
    pub confirm: Confirm,
    /// Hard timeout in seconds (default 30): the whole process group is killed, or the
    /// component is stopped at its next epoch tick.
    pub timeout_seconds: Option<Spanned<u64>>,
    /// Working directory (relative paths are relative to the manifest's folder); command
    /// tools only.
    pub cwd: Option<Spanned<PathBuf>>,
    /// Names of environment variables passed through besides `PATH`, `HOME` and `LANG`;
    /// command tools only (a `wasm` tool's variables are `[tools.sandbox] env`).
    #[serde(default)]
    pub env: Vec<String>,
    /// Standard output beyond this is cut (`meta.truncated = true`); default 1 MiB. For a
    /// `wasm` tool, the largest result it may return (a larger one fails the call).
    pub max_output_bytes: Option<Spanned<u64>>,
    /// The tool's version, shown in listings.
    pub version: Option<String>,
    /// `[tools.params.NAME]`: the arguments, in order.
    #[serde(default)]
    pub params: IndexMap<String, ParamSpec>,
}

impl CommandToolSpec {
    /// The tool's name.
    pub fn name(&self) -> &str {
        self.name.get_ref()
    }

    /// The hard timeout in seconds.
    pub(crate) fn timeout_seconds(&self) -> u64 {
        self.timeout_seconds
            .as_ref()
            .map_or(DEFAULT_TIMEOUT_SECONDS, |t| *t.get_ref())
    }

    /// The stdout cap in bytes.
    pub(crate) fn max_output_bytes(&self) -> u64 {
        self.max_output_bytes
            .as_ref()
            .map_or(DEFAULT_MAX_OUTPUT_BYTES, |m| *m.get_ref())
    }

    /// The JSON Schema of the arguments: one property per param, `required` as declared,
    /// no other properties allowed.
    pub(crate) fn input_schema(&self) -> Value {
        let mut properties = Map::new();
        let mut required = Vec::new();
        for (name, param) in &self.params {
            properties.insert(name.clone(), param.schema());
            if param.required {
                required.push(Value::String(name.clone()));
            }
        }
        let mut schema = Map::new();
        schema.insert("type".into(), json!("object"));
        schema.insert("properties".into(), Value::Object(properties));
        if !required.is_empty() {
            schema.insert("required".into(), Value::Array(required));
        }
        schema.insert("additionalProperties".into(), json!(false));
        Value::Object(schema)
    }
}

/// `[tools.sandbox]`: the grants of a `wasm` tool. Nothing is granted by default: no
/// folder, no host, no variable; memory is capped at 64 MiB and wall time at the tool's
/// `timeout_seconds`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSpec {
    /// Linear memory cap in MiB (default 64).
    pub memory_mib: Option<Spanned<u32>>,
    /// Folders preopened read-only (relative to the manifest's folder).
    #[serde(default)]
    pub fs_read: Vec<PathBuf>,
    /// Folders preopened read-write (relative to the manifest's folder).
    #[serde(default)]
    pub fs_write: Vec<PathBuf>,
    /// Hosts (`name` or `name:port`) outgoing `wasi:http` may reach; no sockets either way.
    #[serde(default)]
    pub allow_hosts: Vec<String>,
    /// Variables the component sees, `NAME = "value"`; a value may hold `${VAR}` (or
    /// `${VAR:-default}`), read from milpa's environment when the tool is loaded.
    #[serde(default)]
    pub env: IndexMap<String, String>,
}

/// `[[upstreams]]`: an MCP server whose tools become ours (DESIGN §7).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamSpec {
    /// The upstream's name (messages, logs, listings, the default prefix).
    pub name: Spanned<String>,
    /// A stdio child: the argv, never a shell. `${VAR}` and `${VAR:-default}` are read
    /// from milpa's environment when it starts.
    pub command: Option<Spanned<Vec<String>>>,
    /// A Streamable HTTP server's endpoint (`http://` or `https://`); `${VAR}` allowed.
    pub url: Option<Spanned<String>>,
    /// The environment variable holding the HTTP server's bearer token.
    pub bearer_env: Option<Spanned<String>>,
    /// Variables set in the child's environment besides `PATH`, `HOME` and `LANG`;
    /// `${VAR}` in a value is read from milpa's environment.
    #[serde(default)]
    pub env: IndexMap<String, Spanned<String>>,
    /// Headers sent on every request to an HTTP upstream (e.g. an API key);
    /// `${VAR}` in a value is read from milpa's environment.
    #[serde(default)]
    pub headers: IndexMap<String, Spanned<String>>,
    /// Put before each tool's name; default `"<name>__"` when there are several
    /// upstreams, none when there is one; `""` allowed.
    pub prefix: Option<String>,
    /// How long a start (launch, handshake, discovery of the tools) may take, in seconds
    /// (default 120: room for `npx -y` to download a server the first time).
    pub start_timeout_seconds: Option<Spanned<u64>>,
    /// The largest message it may send, in bytes (default 16 MiB): a stdio line over it
    /// resets its session (and the server is started again); an HTTP answer or event over
    /// it fails that exchange.
    pub max_message_bytes: Option<Spanned<u64>>,
    /// Whether the definitions of its tools and prompts are pinned in the store at first
    /// sight, a changed one held until a person grants it (default `true`).
    pub pin: Option<bool>,
    /// Which revision of MCP to speak to it: `"auto"` (default: `server/discover` first,
    /// 2026-07-28 when the server lists it, else `initialize`), `"2026-07-28"` (only that)
    /// or `"2025-11-25"` (`initialize` and sessions only).
    pub protocol: Option<Spanned<String>>,
    /// `[upstreams.tools."GLOB"]`: overrides by glob over the upstream's own tool names.
    #[serde(default)]
    pub tools: IndexMap<String, UpstreamToolOverride>,
    /// `[upstreams.resources."GLOB"]`: overrides by glob over its resource URIs and
    /// template texts.
    #[serde(default)]
    pub resources: IndexMap<String, UpstreamCatalogOverride>,
    /// `[upstreams.prompts."GLOB"]`: overrides by glob over its own prompt names.
    #[serde(default)]
    pub prompts: IndexMap<String, UpstreamCatalogOverride>,
}

/// `[upstreams.resources."GLOB"]` and `[upstreams.prompts."GLOB"]`: how the matching
/// resources or prompts of an upstream are served here.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamCatalogOverride {
    /// Scopes of which a reader needs one.
    pub scopes: Option<Vec<String>>,
    /// Leave them out: not listed, not read.
    pub hide: Option<bool>,
    /// `"human"`: each read (or prompt request) waits for a person's approval; `false`:
    /// none. `true` is refused: a read has no way to send a caller's token back.
    pub confirm: Option<Spanned<Confirm>>,
}

impl UpstreamCatalogOverride {
    fn to_gateway(&self) -> milpa_gateway::CatalogOverride {
        let mut gateway = milpa_gateway::CatalogOverride::default();
        gateway.scopes = self.scopes.clone();
        gateway.hide = self.hide;
        gateway.human_approval = self
            .confirm
            .as_ref()
            .map(|confirm| *confirm.get_ref() == Confirm::Human);
        gateway
    }
}

/// `[upstreams.tools."GLOB"]`: how the matching upstream tools behave here.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamToolOverride {
    /// Whether the tools change state (default: unless the upstream says `readOnlyHint`).
    pub mutating: Option<bool>,
    /// Who confirms a call first.
    pub confirm: Option<Confirm>,
    /// Scopes of which the caller needs one.
    pub scopes: Option<Vec<String>>,
    /// Soft and hard timeout of a call, in seconds.
    pub timeout_seconds: Option<Spanned<u64>>,
    /// Leave the tools out.
    pub hide: Option<bool>,
}

impl UpstreamSpec {
    /// The upstream's name.
    pub(crate) fn name(&self) -> &str {
        self.name.get_ref()
    }

    /// Every setting that may hold `${VAR}`, with where it is written: the command's
    /// words, the `env` values, the URL, the `headers` values.
    fn templated(&self) -> Vec<(usize, &str)> {
        let mut settings = Vec::new();
        if let Some(command) = &self.command {
            let at = command.span().start;
            settings.extend(command.get_ref().iter().map(|word| (at, word.as_str())));
        }
        if let Some(url) = &self.url {
            settings.push((url.span().start, url.get_ref().as_str()));
        }
        for value in self.env.values().chain(self.headers.values()) {
            settings.push((value.span().start, value.get_ref().as_str()));
        }
        settings
    }

    /// The first variable its settings need that `env` does not set (and that has no
    /// default): where it is written, and what to say.
    pub(crate) fn unset_variable(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Option<(usize, String)> {
        self.templated().into_iter().find_map(|(at, text)| {
            let template = EnvTemplate::parse(text).ok()?;
            let unset = template.expand(env).err()?;
            Some((at, format!("upstream `{}`: {unset}", self.name())))
        })
    }

    /// The gateway's configuration of this upstream, each `${VAR}` read from `env`; the
    /// first variable that is unset (without a default) is an error: where it is
    /// written, and what to say. What listings and logs show keeps the text as written.
    pub(crate) fn config(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<milpa_gateway::UpstreamConfig, (usize, String)> {
        if let Some(unset) = self.unset_variable(env) {
            return Err(unset);
        }
        // Checked at load (`check`) and just now: every template parses and expands.
        let expand = |text: &str| {
            EnvTemplate::parse(text)
                .ok()
                .and_then(|template| template.expand(env).ok())
                .unwrap_or_default()
        };
        let mut config = match (&self.url, &self.command) {
            (Some(url), _) => milpa_gateway::UpstreamConfig::http(
                self.name(),
                expand(url.get_ref()),
                self.bearer_env.as_ref().map(|b| b.get_ref().clone()),
            ),
            (None, command) => milpa_gateway::UpstreamConfig::stdio(
                self.name(),
                command
                    .as_ref()
                    .map(|c| c.get_ref().iter().map(|word| expand(word)).collect())
                    .unwrap_or_default(),
            ),
        };
        config.shown = Some(self.shown());
        match &mut config.transport {
            milpa_gateway::Transport::Stdio { env, .. } => env.extend(
                self.env
                    .iter()
                    .map(|(k, v)| (k.clone(), expand(v.get_ref()))),
            ),
            milpa_gateway::Transport::Http { headers, .. } => headers.extend(
                self.headers
                    .iter()
                    .map(|(k, v)| (k.clone(), expand(v.get_ref()))),
            ),
            _ => {}
        }
        config.prefix = self.prefix.clone();
        if let Some(seconds) = &self.start_timeout_seconds {
            config.start_timeout = std::time::Duration::from_secs(*seconds.get_ref());
        }
        if let Some(bytes) = &self.max_message_bytes {
            config.max_message_bytes = usize::try_from(*bytes.get_ref()).unwrap_or(usize::MAX);
        }
        config.pin = self.pin.unwrap_or(true);
        // Checked at load (`check`): a known revision.
        if let Some(choice) = self
            .protocol
            .as_ref()
            .and_then(|p| milpa_gateway::ProtocolChoice::parse(p.get_ref()))
        {
            config.protocol = choice;
        }
        config.overrides = self
            .tools
            .iter()
            .map(|(glob, over)| {
                let mut gateway = milpa_gateway::ToolOverride::default();
                gateway.mutating = over.mutating;
                gateway.confirm = over.confirm.map(|confirm| match confirm {
                    Confirm::No => milpa_gateway::Confirm::No,
                    Confirm::Caller => milpa_gateway::Confirm::Caller,
                    Confirm::Human => milpa_gateway::Confirm::Human,
                });
                gateway.scopes = over.scopes.clone();
                gateway.timeout = over
                    .timeout_seconds
                    .as_ref()
                    .map(|t| std::time::Duration::from_secs(*t.get_ref()));
                gateway.hide = over.hide;
                (glob.clone(), gateway)
            })
            .collect();
        let catalog = |overrides: &IndexMap<String, UpstreamCatalogOverride>| {
            overrides
                .iter()
                .map(|(glob, over)| (glob.clone(), over.to_gateway()))
                .collect()
        };
        config.resource_overrides = catalog(&self.resources);
        config.prompt_overrides = catalog(&self.prompts);
        Ok(config)
    }

    /// Its command or URL as written (`${VAR}` unexpanded): what listings and logs show.
    pub(crate) fn shown(&self) -> String {
        match (&self.url, &self.command) {
            (Some(url), _) => url.get_ref().clone(),
            (None, Some(command)) => command.get_ref().join(" "),
            (None, None) => String::new(),
        }
    }

    fn check(&self, at: &dyn Fn(usize, String) -> ManifestError) -> Result<(), ManifestError> {
        let name = self.name();
        let name_at = self.name.span().start;
        for (written, text) in self.templated() {
            if let Err(why) = EnvTemplate::parse(text) {
                return Err(at(written, format!("upstream `{name}`: {why}")));
            }
        }
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        {
            return Err(at(
                name_at,
                format!("upstream `{name}`: the name takes letters, digits, `_`, `-` and `.`"),
            ));
        }
        match (&self.command, &self.url) {
            (Some(_), Some(url)) => {
                return Err(at(
                    url.span().start,
                    format!("upstream `{name}`: set `command` or `url`, not both"),
                ));
            }
            (None, None) => {
                return Err(at(
                    name_at,
                    format!("upstream `{name}`: set `command` (a stdio server) or `url` (HTTP)"),
                ));
            }
            (Some(command), None) => {
                if command.get_ref().first().is_none_or(String::is_empty) {
                    return Err(at(
                        command.span().start,
                        format!("upstream `{name}`: command must name a program"),
                    ));
                }
                if let Some(bearer) = &self.bearer_env {
                    return Err(at(
                        bearer.span().start,
                        format!("upstream `{name}`: `bearer_env` goes with `url`"),
                    ));
                }
                if let Some(header) = self.headers.values().next() {
                    return Err(at(
                        header.span().start,
                        format!("upstream `{name}`: `headers` go with `url`"),
                    ));
                }
            }
            (None, Some(url)) => {
                // A URL that starts with a variable is checked when it is read.
                let url_text = url.get_ref();
                if !(url_text.starts_with("http://")
                    || url_text.starts_with("https://")
                    || url_text.starts_with("${"))
                {
                    return Err(at(
                        url.span().start,
                        format!("upstream `{name}`: url must start with http:// or https://"),
                    ));
                }
                if !self.env.is_empty() {
                    return Err(at(
                        name_at,
                        format!("upstream `{name}`: `env` goes with `command`"),
                    ));
                }
            }
        }
        if let Some(timeout) = &self.start_timeout_seconds
            && *timeout.get_ref() == 0
        {
            return Err(at(
                timeout.span().start,
                format!("upstream `{name}`: start_timeout_seconds must be at least 1"),
            ));
        }
        if let Some(protocol) = &self.protocol
            && milpa_gateway::ProtocolChoice::parse(protocol.get_ref()).is_none()
        {
            return Err(at(
                protocol.span().start,
                format!(
                    "upstream `{name}`: protocol must be \"auto\", \"2026-07-28\" or \"2025-11-25\""
                ),
            ));
        }
        if let Some(bytes) = &self.max_message_bytes
            && *bytes.get_ref() < 1024
        {
            return Err(at(
                bytes.span().start,
                format!("upstream `{name}`: max_message_bytes must be at least 1024"),
            ));
        }
        for (section, overrides) in [("resources", &self.resources), ("prompts", &self.prompts)] {
            for (glob, over) in overrides {
                if let Some(confirm) = &over.confirm
                    && *confirm.get_ref() == Confirm::Caller
                {
                    return Err(at(
                        confirm.span().start,
                        format!(
                            "upstream `{name}`: {section}.\"{glob}\".confirm = true is for tools (a read has no way to send a token back); confirm = \"human\" parks each request for a person"
                        ),
                    ));
                }
            }
        }
        for (glob, over) in &self.tools {
            if let Some(timeout) = &over.timeout_seconds
                && *timeout.get_ref() == 0
            {
                return Err(at(
                    timeout.span().start,
                    format!(
                        "upstream `{name}`: tools.\"{glob}\".timeout_seconds must be at least 1"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// A command tool's `confirm`: `false`, `true` or `"human"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Confirm {
    /// `false`: the call runs at once.
    #[default]
    No,
    /// `true`: the first call returns a one-time token the caller replays (a speed bump:
    /// the caller confirms its own call).
    Caller,
    /// `"human"`: the first call is parked until a person other than the caller approves
    /// it (`milpa approvals`, the `/approvals` page).
    Human,
}

impl<'de> Deserialize<'de> for Confirm {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;

        impl serde::de::Visitor<'_> for Visitor {
            type Value = Confirm;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(CONFIRM_VALUES)
            }

            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Confirm, E> {
                Ok(if v { Confirm::Caller } else { Confirm::No })
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Confirm, E> {
                match v {
                    "human" => Ok(Confirm::Human),
                    other => Err(E::custom(format_args!(
                        "confirm = {other:?} is not a confirmation mode; expected {CONFIRM_VALUES}"
                    ))),
                }
            }
        }

        deserializer.deserialize_any(Visitor)
    }
}

/// What `confirm` accepts, for error messages.
const CONFIRM_VALUES: &str = "false, true (the caller confirms) or \"human\" (a person approves)";

/// The JSON type of a command tool's parameter (placeholders take scalars only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ParamType {
    /// Text.
    String,
    /// A whole number.
    Integer,
    /// Any number.
    Number,
    /// `true` or `false`.
    Boolean,
    /// A file path (a JSON string), normalised before validation and policy; see
    /// [`ParamSpec::path_rule`].
    Path,
}

impl ParamType {
    /// The JSON Schema type name.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ParamType::String | ParamType::Path => "string",
            ParamType::Integer => "integer",
            ParamType::Number => "number",
            ParamType::Boolean => "boolean",
        }
    }

    fn admits(self, value: &Value) -> bool {
        match self {
            ParamType::String | ParamType::Path => value.is_string(),
            ParamType::Integer => value.is_i64() || value.is_u64(),
            ParamType::Number => value.is_number(),
            ParamType::Boolean => value.is_boolean(),
        }
    }
}

/// `[tools.params.NAME]`: one argument of a command tool.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParamSpec {
    /// `string`, `integer`, `number`, `boolean` or `path`.
    #[serde(rename = "type")]
    pub kind: ParamType,
    /// What the argument means.
    pub description: Option<String>,
    /// Whether a call must give it.
    #[serde(default)]
    pub required: bool,
    /// The only values allowed.
    #[serde(rename = "enum")]
    pub allowed: Option<Vec<Value>>,
    /// The value used when a call leaves the argument out.
    pub default: Option<Value>,
    /// Smallest number allowed.
    pub minimum: Option<serde_json::Number>,
    /// Largest number allowed.
    pub maximum: Option<serde_json::Number>,
    /// Shortest text allowed, in characters.
    pub min_length: Option<u64>,
    /// Longest text allowed, in characters.
    pub max_length: Option<u64>,
    /// A regular expression the text must match.
    pub pattern: Option<String>,
    /// Lets a value that starts with `-` stand where the program would read it as an
    /// option (at the start of an argv element, with no literal `--` element before it).
    /// Off by default: `touch {path}` called with `--version` would run `touch --version`,
    /// so such a call is refused with `VALIDATION_ERROR`. Values from the param's `enum` or
    /// its `default` are the manifest's own and always pass.
    #[serde(default)]
    pub allow_leading_dash: bool,
    /// `type = "path"` only: resolve the path against the filesystem (symlinks followed).
    #[serde(default)]
    pub resolve: bool,
    /// `type = "path"` only: the absolute folders the path must be in.
    pub within: Option<Vec<String>>,
    /// `type = "path"` only: the absolute folder a relative path is taken against (without
    /// it a relative path is refused).
    pub base: Option<String>,
}

impl ParamSpec {
    /// How a `type = "path"` argument is normalised and where it may point; `None` for the
    /// other types.
    pub fn path_rule(&self) -> Option<milpa::schema::PathRule> {
        if self.kind != ParamType::Path {
            return None;
        }
        let mut rule = milpa::schema::PathRule::new()
            .resolve(self.resolve)
            .within(self.within.iter().flatten().map(PathBuf::from));
        if let Some(base) = &self.base {
            rule = rule.base(base);
        }
        Some(rule)
    }

    /// The parameter's JSON Schema.
    pub(crate) fn schema(&self) -> Value {
        let mut schema = Map::new();
        schema.insert("type".into(), json!(self.kind.as_str()));
        if let Some(description) = &self.description {
            schema.insert("description".into(), json!(description));
        }
        if let Some(allowed) = &self.allowed {
            schema.insert("enum".into(), Value::Array(allowed.clone()));
        }
        if let Some(default) = &self.default {
            schema.insert("default".into(), default.clone());
        }
        if let Some(minimum) = &self.minimum {
            schema.insert("minimum".into(), Value::Number(minimum.clone()));
        }
        if let Some(maximum) = &self.maximum {
            schema.insert("maximum".into(), Value::Number(maximum.clone()));
        }
        if let Some(n) = self.min_length {
            schema.insert("minLength".into(), json!(n));
        }
        if let Some(n) = self.max_length {
            schema.insert("maxLength".into(), json!(n));
        }
        if let Some(pattern) = &self.pattern {
            schema.insert("pattern".into(), json!(pattern));
        }
        Value::Object(schema)
    }
}

impl Manifest {
    /// The manifest used when there is no file: no limiter, built-in policies, no tokens,
    /// no rules, no command tools.
    pub fn builtin() -> Manifest {
        Manifest::default()
    }

    /// Reads and checks the manifest at `path`.
    pub fn load(path: &Path) -> Result<Manifest, ManifestError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ManifestError::new(&name, None, format!("cannot read: {e}")))?;
        let mut manifest = Manifest::parse(&name, &text)?;
        manifest.source = Some(path.to_path_buf());
        Ok(manifest)
    }

    /// Parses and checks manifest text; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<Manifest, ManifestError> {
        let mut manifest: Manifest = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|span| line_of(text, span.start));
            ManifestError::new(file, line, e.message().trim_end())
        })?;
        manifest.origin = Some((file.to_owned(), text.to_owned()));
        manifest.check()?;
        Ok(manifest)
    }

    /// An error about this manifest at byte `offset` of its text (when known).
    pub(crate) fn error_at(
        &self,
        offset: Option<usize>,
        message: impl Into<String>,
    ) -> ManifestError {
        match &self.origin {
            Some((file, text)) => {
                ManifestError::new(file, offset.map(|o| line_of(text, o)), message)
            }
            None => ManifestError::new("(built-in manifest)", None, message),
        }
    }

    /// The file the manifest was read from; `None` for the built-in defaults.
    pub fn source(&self) -> Option<&Path> {
        self.source.as_deref()
    }

    /// The name this server's approvals are tagged with: `[server] name`, else the
    /// manifest's file stem (`ops` for `ops.toml`), else `demo` (the built-in toolset).
    pub fn server_name(&self) -> String {
        if let Some(name) = &self.server.name {
            return name.clone();
        }
        self.source
            .as_deref()
            .and_then(Path::file_stem)
            .map(|stem| stem.to_string_lossy().into_owned())
            .unwrap_or_else(|| "demo".to_owned())
    }

    /// The folder relative paths in the manifest are resolved against.
    pub fn base_dir(&self) -> Option<&Path> {
        self.source
            .as_deref()
            .map(|p| p.parent().unwrap_or(Path::new("")))
            .map(|p| {
                if p.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    p
                }
            })
    }

    /// Semantic checks serde cannot do; each error points at the offending line.
    fn check(&self) -> Result<(), ManifestError> {
        let at = |start: usize, message: String| self.error_at(Some(start), message);
        for (section, limit) in [
            ("rate_limit", &self.rate_limit),
            ("caller_budget", &self.caller_budget),
        ] {
            let Some(limit) = limit else { continue };
            if *limit.max_tokens.get_ref() == 0 {
                return Err(at(
                    limit.max_tokens.span().start,
                    format!("{section}.max_tokens must be at least 1"),
                ));
            }
            if *limit.window_seconds.get_ref() == 0 {
                return Err(at(
                    limit.window_seconds.span().start,
                    format!("{section}.window_seconds must be at least 1"),
                ));
            }
        }
        if let Some(ttl) = &self.confirmation.ttl_seconds
            && *ttl.get_ref() == 0
        {
            return Err(at(
                ttl.span().start,
                "confirmation.ttl_seconds must be at least 1".into(),
            ));
        }
        self.approvals.check(&at)?;
        if let Some(policy) = &self.policy {
            policy.check(&at)?;
        }
        if let Some(oauth) = &self.auth.oauth {
            oauth.check(&at)?;
        }
        let mut hashes: Vec<String> = Vec::new();
        for token in &self.auth.tokens {
            let hash = token.sha256.get_ref();
            let normalized = hash.to_ascii_lowercase();
            if hashes.contains(&normalized) {
                return Err(at(
                    token.sha256.span().start,
                    "auth.tokens: the same token is listed twice".into(),
                ));
            }
            hashes.push(normalized);
            let principal = token.principal.get_ref();
            if milpa::principal::is_reserved(principal) {
                return Err(at(
                    token.principal.span().start,
                    format!(
                        "auth.tokens.principal `{principal}` is a name milpa keeps for its local \
                         callers (stdio, cli, local-...): a remote caller must not pass for one"
                    ),
                ));
            }
            if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(at(
                    token.sha256.span().start,
                    "auth.tokens.sha256 must be the 64 hex digits of the token's SHA-256 \
                     (e.g. `printf %s TOKEN | sha256sum`), never the token itself"
                        .into(),
                ));
            }
        }
        let mut seen: Vec<&str> = Vec::new();
        for tool in &self.tools {
            let name = tool.name();
            let name_at = tool.name.span().start;
            if seen.contains(&name) {
                return Err(at(name_at, format!("tool `{name}` is declared twice")));
            }
            seen.push(name);
            tool.check(name, &at)?;
        }
        let mut uris: Vec<&str> = Vec::new();
        for resource in &self.resources {
            resource.check(&at)?;
            let uri = resource.uri.get_ref().as_str();
            if uris.contains(&uri) {
                return Err(at(
                    resource.uri.span().start,
                    format!("resource `{uri}` is declared twice"),
                ));
            }
            uris.push(uri);
        }
        let mut prompts: Vec<&str> = Vec::new();
        for prompt in &self.prompts {
            prompt.check(&at)?;
            let name = prompt.name.get_ref().as_str();
            if prompts.contains(&name) {
                return Err(at(
                    prompt.name.span().start,
                    format!("prompt `{name}` is declared twice"),
                ));
            }
            prompts.push(name);
        }
        let mut upstreams: Vec<&str> = Vec::new();
        for upstream in &self.upstreams {
            let name = upstream.name();
            if upstreams.contains(&name) {
                return Err(at(
                    upstream.name.span().start,
                    format!("upstream `{name}` is declared twice"),
                ));
            }
            upstreams.push(name);
            upstream.check(&at)?;
        }
        Ok(())
    }
}

impl ApprovalsSection {
    fn check(&self, at: &dyn Fn(usize, String) -> ManifestError) -> Result<(), ManifestError> {
        if let Some(ttl) = &self.ttl_seconds
            && *ttl.get_ref() == 0
        {
            return Err(at(
                ttl.span().start,
                "approvals.ttl_seconds must be at least 1".into(),
            ));
        }
        if let Some(timeout) = &self.notify_timeout_seconds
            && *timeout.get_ref() == 0
        {
            return Err(at(
                timeout.span().start,
                "approvals.notify_timeout_seconds must be at least 1".into(),
            ));
        }
        if let Some(command) = &self.notify_command {
            let command_at = command.span().start;
            let argv = command.get_ref();
            let Some(program) = argv.first().filter(|program| !program.is_empty()) else {
                return Err(at(
                    command_at,
                    "approvals.notify_command must name a program".into(),
                ));
            };
            if !ArgTemplate::parse(program).params().is_empty() {
                return Err(at(
                    command_at,
                    "approvals.notify_command: the program (notify_command[0]) cannot be a \
                     placeholder"
                        .into(),
                ));
            }
            for arg in &argv[1..] {
                for placeholder in ArgTemplate::parse(arg).params() {
                    if !NOTIFY_PLACEHOLDERS.contains(&placeholder) {
                        return Err(at(
                            command_at,
                            format!(
                                "approvals.notify_command: unknown placeholder {{{placeholder}}} \
                                 (known: {}); write {{{{ and }}}} for literal braces",
                                NOTIFY_PLACEHOLDERS
                                    .iter()
                                    .map(|p| format!("{{{p}}}"))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        ));
                    }
                }
            }
        }
        if let Some(env) = &self.notify_env {
            for var in env.get_ref() {
                if var.is_empty() || var.contains('=') || var.contains('\0') {
                    return Err(at(
                        env.span().start,
                        format!("approvals.notify_env lists variable names, got {var:?}"),
                    ));
                }
            }
        }
        Ok(())
    }
}

impl CommandToolSpec {
    fn check(
        &self,
        name: &str,
        at: &dyn Fn(usize, String) -> ManifestError,
    ) -> Result<(), ManifestError> {
        let name_at = self.name.span().start;
        let command = match (&self.command, &self.wasm) {
            (Some(_), Some(wasm)) => {
                return Err(at(
                    wasm.span().start,
                    format!("tool `{name}`: set `command` or `wasm`, not both"),
                ));
            }
            (None, None) => {
                return Err(at(
                    name_at,
                    format!(
                        "tool `{name}`: set `command` (a program to run) or `wasm` (a WebAssembly component)"
                    ),
                ));
            }
            (None, Some(wasm)) => {
                self.check_params(name, at)?;
                self.check_limits(name, at)?;
                return self.check_wasm(name, wasm, at);
            }
            (Some(command), None) => command,
        };
        if let Some(sandbox) = &self.sandbox {
            return Err(at(
                sandbox.span().start,
                format!("tool `{name}`: [tools.sandbox] goes with `wasm`, not `command`"),
            ));
        }
        let command_at = command.span().start;
        let argv = command.get_ref();
        let Some(program) = argv.first().filter(|program| !program.is_empty()) else {
            return Err(at(
                command_at,
                format!("tool `{name}`: command must name a program"),
            ));
        };
        if !ArgTemplate::parse(program).params().is_empty() {
            return Err(at(
                command_at,
                format!("tool `{name}`: the program (command[0]) cannot be a placeholder"),
            ));
        }
        self.check_params(name, at)?;
        for arg in &argv[1..] {
            for placeholder in ArgTemplate::parse(arg).params() {
                if !self.params.contains_key(placeholder) {
                    let declared = if self.params.is_empty() {
                        "none declared".to_owned()
                    } else {
                        self.params.keys().cloned().collect::<Vec<_>>().join(", ")
                    };
                    return Err(at(
                        command_at,
                        format!(
                            "tool `{name}`: placeholder {{{placeholder}}} names no param (params: {declared}); write {{{{ and }}}} for literal braces"
                        ),
                    ));
                }
            }
        }
        self.check_limits(name, at)?;
        for var in &self.env {
            if var.is_empty() || var.contains('=') || var.contains('\0') {
                return Err(at(
                    name_at,
                    format!("tool `{name}`: env lists variable names, got {var:?}"),
                ));
            }
        }
        Ok(())
    }

    /// The `[tools.params.*]` of either kind of tool.
    fn check_params(
        &self,
        name: &str,
        at: &dyn Fn(usize, String) -> ManifestError,
    ) -> Result<(), ManifestError> {
        let name_at = self.name.span().start;
        for (param, spec) in &self.params {
            if !crate::template::is_identifier(param) {
                return Err(at(
                    name_at,
                    format!(
                        "tool `{name}`: param `{param}`: use letters, digits and `_` (not first a digit)"
                    ),
                ));
            }
            let path_keys = spec.resolve || spec.within.is_some() || spec.base.is_some();
            if path_keys && spec.kind != ParamType::Path {
                return Err(at(
                    name_at,
                    format!(
                        "tool `{name}`: param `{param}`: resolve, within and base are for type = \"path\""
                    ),
                ));
            }
            if let Some(relative) = spec
                .within
                .iter()
                .flatten()
                .chain(&spec.base)
                .find(|folder| !Path::new(folder.as_str()).is_absolute())
            {
                return Err(at(
                    name_at,
                    format!(
                        "tool `{name}`: param `{param}`: {relative:?} in within or base must be an absolute folder"
                    ),
                ));
            }
            if let Some(default) = &spec.default
                && !spec.kind.admits(default)
            {
                return Err(at(
                    name_at,
                    format!(
                        "tool `{name}`: param `{param}`: default is not a {}",
                        spec.kind.as_str()
                    ),
                ));
            }
            if let Some(allowed) = &spec.allowed
                && let Some(bad) = allowed.iter().find(|v| !spec.kind.admits(v))
            {
                return Err(at(
                    name_at,
                    format!(
                        "tool `{name}`: param `{param}`: enum value {bad} is not a {}",
                        spec.kind.as_str()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// `timeout_seconds` and `max_output_bytes`, of either kind of tool.
    fn check_limits(
        &self,
        name: &str,
        at: &dyn Fn(usize, String) -> ManifestError,
    ) -> Result<(), ManifestError> {
        if let Some(timeout) = &self.timeout_seconds
            && *timeout.get_ref() == 0
        {
            return Err(at(
                timeout.span().start,
                format!("tool `{name}`: timeout_seconds must be at least 1"),
            ));
        }
        if let Some(max) = &self.max_output_bytes
            && *max.get_ref() == 0
        {
            return Err(at(
                max.span().start,
                format!("tool `{name}`: max_output_bytes must be at least 1"),
            ));
        }
        Ok(())
    }

    /// A `wasm` tool: a path, no command-only setting, a sound `[tools.sandbox]`.
    fn check_wasm(
        &self,
        name: &str,
        wasm: &Spanned<PathBuf>,
        at: &dyn Fn(usize, String) -> ManifestError,
    ) -> Result<(), ManifestError> {
        if wasm.get_ref().as_os_str().is_empty() {
            return Err(at(
                wasm.span().start,
                format!("tool `{name}`: wasm must name a component file"),
            ));
        }
        if let Some(cwd) = &self.cwd {
            return Err(at(
                cwd.span().start,
                format!(
                    "tool `{name}`: `cwd` goes with `command`; a wasm tool sees only the folders of [tools.sandbox] fs_read and fs_write"
                ),
            ));
        }
        if !self.env.is_empty() {
            return Err(at(
                self.name.span().start,
                format!(
                    "tool `{name}`: `env` goes with `command`; give a wasm tool its variables in [tools.sandbox] env (NAME = \"value\")"
                ),
            ));
        }
        let Some(sandbox) = &self.sandbox else {
            return Ok(());
        };
        let sandbox_at = sandbox.span().start;
        let sandbox = sandbox.get_ref();
        if let Some(memory) = &sandbox.memory_mib
            && *memory.get_ref() == 0
        {
            return Err(at(
                memory.span().start,
                format!("tool `{name}`: sandbox.memory_mib must be at least 1"),
            ));
        }
        if let Some(folder) = sandbox
            .fs_read
            .iter()
            .chain(&sandbox.fs_write)
            .find(|folder| folder.as_os_str().is_empty())
        {
            return Err(at(
                sandbox_at,
                format!("tool `{name}`: sandbox folders must be named, got {folder:?}"),
            ));
        }
        if let Some(host) = sandbox
            .allow_hosts
            .iter()
            .find(|host| host.trim().is_empty() || host.contains(['/', '*']))
        {
            return Err(at(
                sandbox_at,
                format!(
                    "tool `{name}`: sandbox.allow_hosts lists host names (`api.example.com` or `host:port`), got {host:?}"
                ),
            ));
        }
        for (var, value) in &sandbox.env {
            if var.is_empty() || var.contains('=') || var.contains('\0') {
                return Err(at(
                    sandbox_at,
                    format!("tool `{name}`: sandbox.env: {var:?} is not a variable name"),
                ));
            }
            if let Err(message) = EnvTemplate::parse(value) {
                return Err(at(
                    sandbox_at,
                    format!("tool `{name}`: sandbox.env.{var}: {message}"),
                ));
            }
        }
        Ok(())
    }
}

/// The 1-based line holding byte `offset` of `text`.
pub(crate) fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> String {
        Manifest::parse("m.toml", text).unwrap_err().to_string()
    }

    #[test]
    fn an_upstreams_resources_and_prompts_take_overrides_by_glob() {
        let manifest = Manifest::parse(
            "m.toml",
            "[[upstreams]]\nname = \"fs\"\ncommand = [\"server\"]\n\
             [upstreams.resources.\"file:///etc/*\"]\nhide = true\n\
             [upstreams.resources.\"file:///home/*\"]\nscopes = [\"fs:read\"]\n\
             [upstreams.prompts.\"review\"]\nscopes = [\"code:review\"]\n",
        )
        .unwrap();
        let config = manifest.upstreams[0].config(&|_| None).unwrap();
        let (etc, home) = (&config.resource_overrides[0], &config.resource_overrides[1]);
        assert_eq!(
            (etc.0.as_str(), etc.1.hide, &etc.1.scopes),
            ("file:///etc/*", Some(true), &None)
        );
        assert_eq!(
            (home.0.as_str(), home.1.hide, &home.1.scopes),
            ("file:///home/*", None, &Some(vec!["fs:read".to_owned()]))
        );
        assert_eq!(config.prompt_overrides[0].0, "review");
        assert_eq!(
            config.prompt_overrides[0].1.scopes.as_deref(),
            Some(&["code:review".to_owned()][..])
        );
        let e = error(
            "[[upstreams]]\nname = \"fs\"\ncommand = [\"server\"]\n[upstreams.prompts.\"x\"]\nconfirm = true\n",
        );
        assert!(
            e.starts_with("m.toml:5: upstream `fs`: prompts.\"x\".confirm = true is for tools"),
            "{e}"
        );
        let manifest = Manifest::parse(
            "m.toml",
            "[[upstreams]]\nname = \"fs\"\ncommand = [\"server\"]\n\
             [upstreams.resources.\"file:///etc/*\"]\nconfirm = \"human\"\n",
        )
        .unwrap();
        let config = manifest.upstreams[0].config(&|_| None).unwrap();
        assert_eq!(config.resource_overrides[0].1.human_approval, Some(true));
    }

    #[test]
    fn an_upstreams_protocol_is_auto_or_a_revision() {
        let config = |extra: &str| {
            let manifest = Manifest::parse(
                "m.toml",
                &format!("[[upstreams]]\nname = \"fs\"\ncommand = [\"server\"]\n{extra}"),
            )
            .unwrap();
            manifest.upstreams[0].config(&|_| None).unwrap().protocol
        };
        use milpa_gateway::ProtocolChoice;
        assert_eq!(config(""), ProtocolChoice::Discover);
        assert_eq!(config("protocol = \"auto\"\n"), ProtocolChoice::Discover);
        assert_eq!(
            config("protocol = \"2026-07-28\"\n"),
            ProtocolChoice::Stateless
        );
        assert_eq!(
            config("protocol = \"2025-11-25\"\n"),
            ProtocolChoice::Sessions
        );
        let e = error(
            "[[upstreams]]\nname = \"fs\"\ncommand = [\"server\"]\nprotocol = \"2025-06-18\"\n",
        );
        assert!(
            e.starts_with(
                "m.toml:4: upstream `fs`: protocol must be \"auto\", \"2026-07-28\" or \"2025-11-25\""
            ),
            "{e}"
        );
    }

    #[test]
    fn the_oauth_section_names_an_issuer_a_resource_url_and_keys() {
        let e = error(
            "[auth.oauth]\nissuer = \"https://a.example\"\naudience = \"tools.example.com\"\njwks = \"k.json\"\n",
        );
        assert!(
            e.starts_with("m.toml:3: auth.oauth.audience must be this server's URL"),
            "{e}"
        );
        let e = error(
            "[auth.oauth]\nissuer = \" \"\naudience = \"https://t.example/mcp\"\njwks = \"k.json\"\n",
        );
        assert!(
            e.starts_with("m.toml:2: auth.oauth.issuer must name"),
            "{e}"
        );
        let e = error(
            "[auth.oauth]\nissuer = \"https://a.example\"\naudience = \"https://t.example/mcp\"\njwks = \"\"\n",
        );
        assert!(e.starts_with("m.toml:4: auth.oauth.jwks must be"), "{e}");
        let e = error(
            "[auth.oauth]\nissuer = \"https://a.example\"\naudience = \"https://t.example/mcp\"\n",
        );
        assert!(e.contains("missing field `jwks`"), "{e}");
        let e = error(
            "[auth.oauth]\nissuer = \"i\"\naudience = \"https://t.example/mcp\"\njwks = \"k\"\nscope_claim = \"scp\"\n",
        );
        assert!(e.contains("unknown field `scope_claim`"), "{e}");
        let m = Manifest::parse(
            "m.toml",
            "[auth.oauth]\nissuer = \"https://a.example\"\naudience = \"https://t.example/mcp\"\njwks = \"k.json\"\nscopes_claim = \"scp\"\n",
        )
        .unwrap();
        let oauth = m.auth.oauth.unwrap();
        assert_eq!(oauth.jwks.get_ref(), "k.json");
        assert_eq!(oauth.scopes_claim.as_deref(), Some("scp"));
    }

    #[test]
    fn metrics_need_a_token_unless_the_server_says_public() {
        let default = Manifest::parse("m.toml", "[server]\nname = \"x\"\n").unwrap();
        assert_eq!(default.server.metrics, MetricsSetting::Token);
        let public = Manifest::parse("m.toml", "[server]\nmetrics = \"public\"\n").unwrap();
        assert_eq!(public.server.metrics, MetricsSetting::Public);
        let e = error("[server]\nmetrics = \"open\"\n");
        assert!(e.starts_with("m.toml:2:"), "{e}");
        assert!(e.contains("`token`") && e.contains("`public`"), "{e}");
    }

    #[test]
    fn lines_are_counted_from_one() {
        assert_eq!(line_of("a\nb\nc", 0), 1);
        assert_eq!(line_of("a\nb\nc", 2), 2);
        assert_eq!(line_of("a\nb\nc", 99), 3);
    }

    #[test]
    fn unknown_keys_name_their_line() {
        let text =
            "[server]\nname = \"x\"\n\n[[tools]]\nname = \"t\"\ncommand = [\"ls\"]\ncomand = 1\n";
        let e = error(text);
        assert!(e.starts_with("m.toml:7: unknown field `comand`"), "{e}");
    }

    #[test]
    fn wrong_types_name_their_line() {
        let e = error("[rate_limit]\nmax_tokens = \"many\"\nwindow_seconds = 60\n");
        assert!(e.starts_with("m.toml:2: invalid type"), "{e}");
        let e = error("[channels.mcp]\nrequire_auth = true\nrequire_ath = true\n");
        assert!(
            e.starts_with("m.toml:3: unknown field `require_ath`"),
            "{e}"
        );
    }

    #[test]
    fn placeholders_must_name_params() {
        let text = "[[tools]]\nname = \"t\"\ncommand = [\"ls\", \"{pth}\"]\n[tools.params.path]\ntype = \"string\"\n";
        let e = error(text);
        assert!(
            e.starts_with("m.toml:3: tool `t`: placeholder {pth} names no param (params: path)"),
            "{e}"
        );
        let e = error("[[tools]]\nname = \"t\"\ncommand = [\"{p}\"]\n");
        assert!(e.contains("cannot be a placeholder"), "{e}");
    }

    #[test]
    fn token_hashes_are_checked() {
        let e = error("[[auth.tokens]]\nprincipal = \"a\"\nsha256 = \"secret\"\n");
        assert!(e.starts_with("m.toml:3: auth.tokens.sha256 must be"), "{e}");
    }

    #[test]
    fn schemas_forbid_other_properties() {
        let m = Manifest::parse(
            "m",
            "[[tools]]\nname = \"t\"\ncommand = [\"ls\", \"{b}\", \"{a}\"]\n[tools.params.b]\ntype = \"integer\"\nrequired = true\nminimum = 1\n[tools.params.a]\ntype = \"string\"\nenum = [\"x\", \"y\"]\n",
        )
        .unwrap();
        assert_eq!(
            m.tools[0].input_schema(),
            json!({"type": "object", "properties": {
                "b": {"type": "integer", "minimum": 1},
                "a": {"type": "string", "enum": ["x", "y"]}
            }, "required": ["b"], "additionalProperties": false})
        );
    }

    #[test]
    fn wasm_tools_take_a_sandbox_and_no_command_settings() {
        let m = Manifest::parse(
            "m.toml",
            "[[tools]]\nname = \"slug\"\nwasm = \"tools/slugify.wasm\"\nscopes = [\"text\"]\n\
             [tools.params.text]\ntype = \"string\"\nrequired = true\n\
             [tools.sandbox]\nmemory_mib = 32\nallow_hosts = [\"api.example.com:443\"]\nenv = { LEVEL = \"${LEVEL:-warn}\" }\n",
        )
        .unwrap();
        let tool = &m.tools[0];
        assert!(tool.command.is_none());
        assert_eq!(
            tool.wasm.as_ref().unwrap().get_ref(),
            Path::new("tools/slugify.wasm")
        );
        let sandbox = tool.sandbox.as_ref().unwrap().get_ref();
        assert_eq!(*sandbox.memory_mib.as_ref().unwrap().get_ref(), 32);
        assert_eq!(sandbox.env["LEVEL"], "${LEVEL:-warn}");
        assert_eq!(tool.input_schema()["required"], json!(["text"]));

        let e = error("[[tools]]\nname = \"t\"\ncommand = [\"ls\"]\nwasm = \"t.wasm\"\n");
        assert!(
            e.starts_with("m.toml:4: tool `t`: set `command` or `wasm`, not both"),
            "{e}"
        );
        let e = error("[[tools]]\nname = \"t\"\n");
        assert!(e.starts_with("m.toml:2: tool `t`: set `command`"), "{e}");
        let e =
            error("[[tools]]\nname = \"t\"\ncommand = [\"ls\"]\n[tools.sandbox]\nmemory_mib = 8\n");
        assert!(
            e.starts_with("m.toml:4: tool `t`: [tools.sandbox] goes with `wasm`, not `command`"),
            "{e}"
        );
        let e = error("[[tools]]\nname = \"t\"\nwasm = \"t.wasm\"\ncwd = \"/tmp\"\n");
        assert!(
            e.starts_with("m.toml:4: tool `t`: `cwd` goes with `command`"),
            "{e}"
        );
        let e = error("[[tools]]\nname = \"t\"\nwasm = \"t.wasm\"\nenv = [\"HOME\"]\n");
        assert!(e.contains("[tools.sandbox] env"), "{e}");
        let e =
            error("[[tools]]\nname = \"t\"\nwasm = \"t.wasm\"\n[tools.sandbox]\nmemory_mib = 0\n");
        assert!(
            e.starts_with("m.toml:5: tool `t`: sandbox.memory_mib must be at least 1"),
            "{e}"
        );
        let e = error(
            "[[tools]]\nname = \"t\"\nwasm = \"t.wasm\"\n[tools.sandbox]\nenv = { A = \"${OPEN\" }\n",
        );
        assert!(e.contains("sandbox.env.A"), "{e}");
        let e = error(
            "[[tools]]\nname = \"t\"\nwasm = \"t.wasm\"\n[tools.sandbox]\nallow_hosts = [\"https://x\"]\n",
        );
        assert!(e.contains("sandbox.allow_hosts lists host names"), "{e}");
        let e =
            error("[[tools]]\nname = \"t\"\nwasm = \"t.wasm\"\n[tools.sandbox]\nfs_raed = []\n");
        assert!(e.starts_with("m.toml:5: unknown field `fs_raed`"), "{e}");
    }

    #[test]
    fn confirm_is_false_true_or_human() {
        let tool = |confirm: &str| {
            format!("[[tools]]\nname = \"t\"\ncommand = [\"true\"]\nconfirm = {confirm}\n")
        };
        let confirm = |text: &str| Manifest::parse("m.toml", text).unwrap().tools[0].confirm;
        assert_eq!(confirm(&tool("false")), Confirm::No);
        assert_eq!(confirm(&tool("true")), Confirm::Caller);
        assert_eq!(confirm(&tool("\"human\"")), Confirm::Human);
        assert_eq!(
            confirm("[[tools]]\nname = \"t\"\ncommand = [\"true\"]\n"),
            Confirm::No
        );
        for bad in ["\"person\"", "\"Human\"", "1", "[\"human\"]"] {
            let e = error(&tool(bad));
            assert!(e.starts_with("m.toml:4: "), "{e}");
            assert!(
                e.contains("false, true (the caller confirms) or \"human\" (a person approves)"),
                "{e}"
            );
        }
        assert!(
            error(&tool("\"person\"")).contains("confirm = \"person\" is not a confirmation mode")
        );
    }

    #[test]
    fn path_params_are_checked() {
        let tool = |param: &str| {
            format!(
                "[[tools]]\nname = \"t\"\ncommand = [\"cat\", \"{{p}}\"]\n\n[tools.params.p]\n{param}\n"
            )
        };
        let m = Manifest::parse(
            "m",
            &tool("type = \"path\"\nresolve = true\nwithin = [\"/srv\"]\nbase = \"/srv\""),
        )
        .unwrap();
        let rule = m.tools[0].params["p"].path_rule().unwrap();
        assert_eq!(
            rule,
            milpa::schema::PathRule::new()
                .resolve(true)
                .within(["/srv"])
                .base("/srv")
        );
        assert_eq!(m.tools[0].params["p"].schema()["type"], "string");
        let e = error(&tool("type = \"string\"\nwithin = [\"/srv\"]"));
        assert!(
            e.contains("resolve, within and base are for type = \"path\""),
            "{e}"
        );
        let e = error(&tool("type = \"path\"\nwithin = [\"srv\"]"));
        assert!(
            e.contains("\"srv\" in within or base must be an absolute folder"),
            "{e}"
        );
    }

    #[test]
    fn approvals_are_checked() {
        let m = Manifest::parse("m", "[approvals]\nttl_seconds = 5\nnotify_command = [\"notify-send\", \"--\", \"{summary} {url}\"]\nnotify_env = [\"DBUS_SESSION_BUS_ADDRESS\"]\n").unwrap();
        assert_eq!(m.approvals.ttl(), std::time::Duration::from_secs(5));
        assert_eq!(m.approvals.notify_env(), ["DBUS_SESSION_BUS_ADDRESS"]);
        assert_eq!(
            Manifest::default().approvals.ttl(),
            milpa::approval::DEFAULT_TTL
        );
        let e = error("[approvals]\n\nttl_seconds = 0\n");
        assert!(
            e.starts_with("m.toml:3: approvals.ttl_seconds must be at least 1"),
            "{e}"
        );
        let e = error("[approvals]\nnotify_command = [\"x\", \"{summry}\"]\n");
        assert!(
            e.starts_with("m.toml:2: approvals.notify_command: unknown placeholder {summry} (known: {id}, {summary}"),
            "{e}"
        );
        let e = error("[approvals]\nnotify_command = []\n");
        assert!(
            e.starts_with("m.toml:2: approvals.notify_command must name a program"),
            "{e}"
        );
        let e = error("[approvals]\nnotify_command = [\"{url}\"]\n");
        assert!(e.contains("cannot be a placeholder"), "{e}");
        let e = error("[approvals]\nnotify_command = [\"x\"]\n\nnotify_env = [\"A=1\"]\n");
        assert!(
            e.starts_with("m.toml:4: approvals.notify_env lists variable names"),
            "{e}"
        );
        let e = error("[approvals]\nnotify = [\"x\"]\n");
        assert!(e.starts_with("m.toml:2: unknown field `notify`"), "{e}");
        assert_eq!(m.approvals.shell_decisions(), ShellDecisions::On);
        let off = Manifest::parse("m", "[approvals]\nshell = \"off\"\n").unwrap();
        assert_eq!(off.approvals.shell_decisions(), ShellDecisions::Off);
        assert!(error("[approvals]\nshell = \"maybe\"\n").starts_with("m.toml:2"));
        let e = error("[approvals]\nnotify_timeout_seconds = 0\n");
        assert!(
            e.starts_with("m.toml:2: approvals.notify_timeout_seconds must be at least 1"),
            "{e}"
        );
    }

    #[test]
    fn channel_overrides_merge() {
        let o = ChannelOverride {
            block_mutating: Some(true),
            ..Default::default()
        };
        let p = o.apply(ChannelPolicy::TELEGRAM);
        assert!(p.block_mutating && p.require_confirmation_for_mutating);
        assert!(!p.require_human_approval_for_mutating);
        let human = ChannelOverride {
            require_human_approval_for_mutating: Some(true),
            ..Default::default()
        };
        assert!(human.apply(p).require_human_approval_for_mutating);
    }
}
