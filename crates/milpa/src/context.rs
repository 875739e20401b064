//! [`ToolContext`]: who is calling, over which channel, with which scopes, in which mode.

use std::fmt;
use std::sync::Arc;

use serde::ser::SerializeStruct;
use serde_json::{Map, Value};

use crate::call_handle::CallHandle;
use crate::mcp_attributes::McpAttributes;

/// Names of the channels the runtime ships a policy for.
pub mod channel {
    /// A person at a terminal: every call is allowed.
    pub const CLI: &str = "cli";
    /// A Model Context Protocol client: requires an authenticated principal.
    pub const MCP: &str = "mcp";
    /// A Telegram bot: mutating tools ask for confirmation.
    pub const TELEGRAM: &str = "telegram";
    /// A web session: requires an authenticated principal.
    pub const WEB: &str = "web";
    /// The channel of a context built without one; it has no policy, so it fails closed.
    pub const UNKNOWN: &str = "unknown";
}

/// The principals milpa gives its own local callers, which no remote identity may take.
///
/// A person at the terminal (`local-shell`), a trusted stdio process (`stdio`) and the
/// tokens `serve --http` makes without a manifest (`local-user`, `local-approver`) are named
/// by milpa itself. If a manifest token or an OAuth `sub` could carry one of these names, a
/// remote caller would be indistinguishable from the local one in the audit trail, in
/// self-approval checks and in policy rules that name it; so those names are reserved
/// ([`is_reserved`](principal::is_reserved)) and refused where a remote identity is read.
pub mod principal {
    /// A person at a local terminal ([`ToolContext::cli`](super::ToolContext::cli)).
    pub const LOCAL_SHELL: &str = "local-shell";
    /// A trusted local MCP process ([`ToolContext::stdio`](super::ToolContext::stdio)).
    pub const STDIO: &str = "stdio";
    /// The name of the local terminal channel, reserved as a principal too so an audit
    /// record never shows a remote `cli` beside the channel `cli`.
    pub const CLI: &str = "cli";
    /// The prefix of every principal milpa makes for a local run (`local-shell`,
    /// `local-user`, `local-approver`, and any added later).
    pub const LOCAL_PREFIX: &str = "local-";

    /// Whether `name` is reserved for a local caller: `stdio`, `cli`, or anything starting
    /// with `local-`. Compared exactly, as principals are everywhere else.
    pub fn is_reserved(name: &str) -> bool {
        name == STDIO || name == CLI || name.starts_with(LOCAL_PREFIX)
    }
}

/// Whether a call should run, or only say what it would do.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Mode {
    /// Run the tool.
    #[default]
    Execute,
    /// Validate and authorize, then return the would-be plan without running the tool.
    Plan,
}

impl Mode {
    /// Parses a mode name; anything but `"plan"` is `Execute`, as in the original.
    pub fn parse(text: &str) -> Mode {
        if text == "plan" {
            Mode::Plan
        } else {
            Mode::Execute
        }
    }

    /// The wire name: `"execute"` or `"plan"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Execute => "execute",
            Mode::Plan => "plan",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone)]
struct Inner {
    principal: Option<Arc<str>>,
    channel: Arc<str>,
    scopes: Vec<String>,
    request_id: Arc<str>,
    ip: Option<String>,
    user_agent: Option<String>,
    extra: Map<String, Value>,
    mode: Mode,
    call_handle: CallHandle,
    // Boxed: only MCP calls carry it, and every context pays for the field.
    mcp: Option<Box<McpAttributes>>,
    client: Option<Arc<str>>,
}

/// Who is calling, over which channel, with which scopes and in which mode.
///
/// A context is immutable and cheap to clone (one reference count), so a host can build it
/// once per request and share it, and a result can carry it for its runtime meta without
/// copying strings.
///
/// ```
/// use milpa::{Mode, ToolContext};
///
/// let ctx = ToolContext::mcp("req-1", Some("alice".into()), ["notes:*"]);
/// assert_eq!(ctx.channel(), "mcp");
/// assert!(ctx.has_scope("notes:write"));
/// assert!(!ctx.has_scope("admin"));
/// assert_eq!(ctx.as_plan().mode(), Mode::Plan);
/// ```
#[derive(Clone)]
pub struct ToolContext {
    inner: Arc<Inner>,
}

impl ToolContext {
    /// Starts a context for `channel`; everything else defaults to anonymous, no scopes, a
    /// fresh request id and execute mode.
    pub fn builder(channel: impl Into<String>) -> ToolContextBuilder {
        ToolContextBuilder {
            inner: Inner {
                principal: None,
                channel: Arc::from(channel.into()),
                scopes: Vec::new(),
                request_id: Arc::from(""),
                ip: None,
                user_agent: None,
                extra: Map::new(),
                mode: Mode::Execute,
                call_handle: CallHandle::detached(),
                mcp: None,
                client: None,
            },
            request_id: None,
        }
    }

    /// A person at a local terminal: principal `local-shell`, every scope (`*`).
    pub fn cli() -> ToolContext {
        Self::builder(channel::CLI)
            .principal(principal::LOCAL_SHELL)
            .scopes(["*"])
            .build()
    }

    /// An MCP caller. `principal: None` is anonymous, which the `mcp` channel policy denies;
    /// unlike the original this never invents a principal.
    pub fn mcp(
        request_id: impl Into<String>,
        principal: Option<String>,
        scopes: impl IntoIterator<Item = impl Into<String>>,
    ) -> ToolContext {
        let mut builder = Self::builder(channel::MCP)
            .request_id(request_id)
            .scopes(scopes);
        if let Some(principal) = principal {
            builder = builder.principal(principal);
        }
        builder.build()
    }

    /// A trusted local MCP server process (stdio): principal `stdio`, every scope. The
    /// process boundary is the trust boundary.
    pub fn stdio(request_id: impl Into<String>) -> ToolContext {
        Self::builder(channel::MCP)
            .request_id(request_id)
            .principal(principal::STDIO)
            .scopes(["*"])
            .build()
    }

    /// A Telegram chat: principal is the user id, or `chat:<chat_id>` when there is none;
    /// scopes `read` and `write`; `extra.chat_id` holds the chat.
    pub fn telegram(chat_id: impl fmt::Display, user_id: Option<String>) -> ToolContext {
        let chat_id = chat_id.to_string();
        let principal = user_id.unwrap_or_else(|| format!("chat:{chat_id}"));
        Self::builder(channel::TELEGRAM)
            .principal(principal)
            .scopes(["read", "write"])
            .extra("chat_id", Value::String(chat_id))
            .build()
    }

    /// A web session for `principal` with exactly `scopes`.
    pub fn web(
        principal: impl Into<String>,
        scopes: impl IntoIterator<Item = impl Into<String>>,
    ) -> ToolContext {
        Self::builder(channel::WEB)
            .principal(principal)
            .scopes(scopes)
            .build()
    }

    /// The same context in plan mode (same request id and everything else).
    pub fn as_plan(&self) -> ToolContext {
        self.with_mode(Mode::Plan)
    }

    /// The same context with another mode.
    pub fn with_mode(&self, mode: Mode) -> ToolContext {
        if self.inner.mode == mode {
            return self.clone();
        }
        let mut inner = (*self.inner).clone();
        inner.mode = mode;
        ToolContext {
            inner: Arc::new(inner),
        }
    }

    /// The caller, or `None` when anonymous. An empty principal reads as anonymous.
    #[inline]
    pub fn principal(&self) -> Option<&str> {
        self.inner.principal.as_deref().filter(|p| !p.is_empty())
    }

    /// The principal as given, even when empty (for meta and audit, which report it as is).
    #[inline]
    pub fn raw_principal(&self) -> Option<&str> {
        self.inner.principal.as_deref()
    }

    /// The channel name (`cli`, `mcp`, …).
    #[inline]
    pub fn channel(&self) -> &str {
        &self.inner.channel
    }

    /// The scopes the caller holds.
    pub fn scopes(&self) -> &[String] {
        &self.inner.scopes
    }

    /// The request id (32 hex characters when generated).
    #[inline]
    pub fn request_id(&self) -> &str {
        &self.inner.request_id
    }

    /// The caller's IP address, if the host knows it.
    pub fn ip(&self) -> Option<&str> {
        self.inner.ip.as_deref()
    }

    /// The caller's user agent, if the host knows it.
    pub fn user_agent(&self) -> Option<&str> {
        self.inner.user_agent.as_deref()
    }

    /// Host-defined facts about the call (e.g. `chat_id` for Telegram).
    pub fn extra(&self) -> &Map<String, Value> {
        &self.inner.extra
    }

    /// Execute or plan.
    pub fn mode(&self) -> Mode {
        self.inner.mode
    }

    /// True in plan mode.
    #[inline]
    pub fn is_plan_mode(&self) -> bool {
        self.inner.mode == Mode::Plan
    }

    /// The caller's line back (progress, logs, sampling, elicitation, cancellation);
    /// detached unless a transport attached one.
    pub fn call_handle(&self) -> &CallHandle {
        &self.inner.call_handle
    }

    /// What the MCP transport recorded about the request (for the call's `execute_tool`
    /// span); `None` for a call made in process.
    #[inline]
    pub fn mcp_attributes(&self) -> Option<&McpAttributes> {
        self.inner.mcp.as_deref()
    }

    /// The client software the call came through, as it names itself (MCP
    /// `clientInfo.name`), when the host knows it. Self-reported and unverified: shown to
    /// people (the approvals page names it), never a reason to allow anything.
    pub fn client(&self) -> Option<&str> {
        self.inner.client.as_deref()
    }

    /// The same context naming the client software it came through (see
    /// [`client`](Self::client)); an empty name is none.
    pub fn with_client(&self, name: impl Into<Arc<str>>) -> ToolContext {
        let name = name.into();
        let mut inner = (*self.inner).clone();
        inner.client = (!name.trim().is_empty()).then_some(name);
        ToolContext {
            inner: Arc::new(inner),
        }
    }

    /// The same context with a transport's call handle.
    pub fn with_call_handle(&self, handle: CallHandle) -> ToolContext {
        let mut inner = (*self.inner).clone();
        inner.call_handle = handle;
        ToolContext {
            inner: Arc::new(inner),
        }
    }

    /// Whether the context holds `scope`: `*` matches everything, a held `ns:*` matches
    /// any `ns:…`, anything else must be equal.
    pub fn has_scope(&self, scope: &str) -> bool {
        self.inner
            .scopes
            .iter()
            .any(|held| scope_matches(held, scope))
    }

    /// True if the context holds at least one of `scopes` (false for an empty list).
    pub fn has_any_scope<S: AsRef<str>>(&self, scopes: &[S]) -> bool {
        scopes.iter().any(|s| self.has_scope(s.as_ref()))
    }

    /// True if the context holds every one of `scopes` (true for an empty list).
    pub fn has_all_scopes<S: AsRef<str>>(&self, scopes: &[S]) -> bool {
        scopes.iter().all(|s| self.has_scope(s.as_ref()))
    }
}

/// Whether a held scope grants a required one: `*`, `ns:*` as a prefix pattern, or equality.
pub fn scope_matches(held: &str, required: &str) -> bool {
    if held == "*" || held == required {
        return true;
    }
    match held.strip_suffix('*') {
        Some(prefix) if prefix.ends_with(':') => required.starts_with(prefix),
        _ => false,
    }
}

/// Whether a held `scope` acts as a pattern in [`scope_matches`] (`*`, or `ns:*`), granting
/// more than a scope of that exact name.
///
/// An identity whose scopes someone else chose (an OAuth issuer's token, the scopes milpa
/// computes for a generated token) must hold only literal scopes: the holder of such a
/// list drops the patterns rather than letting them widen the grant.
pub fn is_scope_pattern(scope: &str) -> bool {
    scope == "*"
        || scope
            .strip_suffix('*')
            .is_some_and(|prefix| prefix.ends_with(':'))
}

impl fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolContext")
            .field("principal", &self.inner.principal)
            .field("channel", &self.inner.channel)
            .field("scopes", &self.inner.scopes)
            .field("request_id", &self.inner.request_id)
            .field("mode", &self.inner.mode)
            .finish_non_exhaustive()
    }
}

impl serde::Serialize for ToolContext {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("ToolContext", 7)?;
        s.serialize_field("principal", &self.inner.principal.as_deref())?;
        s.serialize_field("channel", &*self.inner.channel)?;
        s.serialize_field("scopes", &self.inner.scopes)?;
        s.serialize_field("request_id", &*self.inner.request_id)?;
        s.serialize_field("ip", &self.inner.ip)?;
        s.serialize_field("user_agent", &self.inner.user_agent)?;
        s.serialize_field("mode", &self.inner.mode)?;
        s.end()
    }
}

/// Builds a [`ToolContext`] field by field. See [`ToolContext::builder`].
#[derive(Debug)]
pub struct ToolContextBuilder {
    inner: Inner,
    request_id: Option<String>,
}

impl ToolContextBuilder {
    /// Who is calling.
    pub fn principal(mut self, principal: impl Into<String>) -> Self {
        self.inner.principal = Some(Arc::from(principal.into()));
        self
    }

    /// The scopes the caller holds (replaces any set before).
    pub fn scopes(mut self, scopes: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.inner.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// The request id; one is generated when none is given.
    pub fn request_id(mut self, request_id: impl Into<String>) -> Self {
        self.request_id = Some(request_id.into());
        self
    }

    /// The caller's IP address.
    pub fn ip(mut self, ip: impl Into<String>) -> Self {
        self.inner.ip = Some(ip.into());
        self
    }

    /// The caller's user agent.
    pub fn user_agent(mut self, user_agent: impl Into<String>) -> Self {
        self.inner.user_agent = Some(user_agent.into());
        self
    }

    /// One host-defined fact.
    pub fn extra(mut self, key: impl Into<String>, value: Value) -> Self {
        self.inner.extra.insert(key.into(), value);
        self
    }

    /// The transport's line back to the caller.
    pub fn call_handle(mut self, handle: CallHandle) -> Self {
        self.inner.call_handle = handle;
        self
    }

    /// What the MCP transport knows about the request, recorded on the call's
    /// `execute_tool` span (see [`call_span`](crate::call_span)).
    pub fn mcp_attributes(mut self, attributes: McpAttributes) -> Self {
        self.inner.mcp = Some(Box::new(attributes));
        self
    }

    /// The client software the call came through (see [`ToolContext::client`]); an empty
    /// name is none.
    pub fn client(mut self, name: impl Into<Arc<str>>) -> Self {
        let name = name.into();
        self.inner.client = (!name.trim().is_empty()).then_some(name);
        self
    }

    /// Execute (default) or plan.
    pub fn mode(mut self, mode: Mode) -> Self {
        self.inner.mode = mode;
        self
    }

    /// The finished context.
    pub fn build(mut self) -> ToolContext {
        let request_id = self.request_id.unwrap_or_else(generate_request_id);
        self.inner.request_id = Arc::from(request_id);
        ToolContext {
            inner: Arc::new(self.inner),
        }
    }
}

/// A fresh request id: 16 bytes from a CSPRNG as 32 lowercase hex characters.
pub fn generate_request_id() -> String {
    crate::random_id::random_hex_128()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_context_names_its_client_and_a_blank_name_is_none() {
        let ctx = ToolContext::builder("mcp").client("claude-desktop").build();
        assert_eq!(ctx.client(), Some("claude-desktop"));
        assert_eq!(ToolContext::cli().client(), None);
        let named = ToolContext::cli().with_client("milpa CLI");
        assert_eq!(named.client(), Some("milpa CLI"));
        assert_eq!(named.principal(), Some("local-shell"));
        assert_eq!(named.as_plan().client(), Some("milpa CLI"));
        assert_eq!(named.with_client("  ").client(), None);
        assert_eq!(
            ToolContext::builder("mcp").client("").build().client(),
            None
        );
    }

    #[test]
    fn namespace_wildcards_match_only_their_namespace() {
        assert!(scope_matches("notes:*", "notes:write"));
        assert!(!scope_matches("notes:*", "notesx:write"));
        assert!(!scope_matches("notes:*", "admin"));
        assert!(scope_matches("*", "anything"));
        assert!(!scope_matches("a*", "ab"));
    }

    #[test]
    fn patterns_are_exactly_the_scopes_that_match_more_than_themselves() {
        for pattern in ["*", "notes:*", "a:b:*", ":*"] {
            assert!(is_scope_pattern(pattern), "{pattern}");
            assert!(scope_matches(pattern, &format!("{pattern}x")), "{pattern}");
        }
        for literal in ["notes:write", "a*", "notes*", "*:x", ""] {
            assert!(!is_scope_pattern(literal), "{literal}");
            assert!(!scope_matches(literal, &format!("{literal}x")), "{literal}");
        }
    }

    #[test]
    fn local_principals_are_reserved() {
        for name in [
            "stdio",
            "cli",
            "local-shell",
            "local-user",
            "local-approver",
            "local-",
        ] {
            assert!(principal::is_reserved(name), "{name}");
        }
        for name in ["alice", "Stdio", "shell-local", "localhost", "clinic", ""] {
            assert!(!principal::is_reserved(name), "{name}");
        }
        assert!(principal::is_reserved(
            ToolContext::cli().principal().unwrap()
        ));
        assert!(principal::is_reserved(
            ToolContext::stdio("r").principal().unwrap()
        ));
    }

    #[test]
    fn channel_factories_match_the_original() {
        let cli = ToolContext::cli();
        assert_eq!(cli.principal(), Some("local-shell"));
        assert_eq!(cli.scopes(), ["*"]);
        assert_eq!(cli.request_id().len(), 32);
        let tg = ToolContext::telegram(42, None);
        assert_eq!(tg.principal(), Some("chat:42"));
        assert_eq!(tg.extra()["chat_id"], "42");
        let stdio = ToolContext::stdio("r");
        assert_eq!((stdio.channel(), stdio.principal()), ("mcp", Some("stdio")));
        let anon = ToolContext::mcp("r", None, Vec::<String>::new());
        assert_eq!(anon.principal(), None);
        let empty = ToolContext::builder("web").principal("").build();
        assert_eq!(empty.principal(), None);
        assert_eq!(empty.raw_principal(), Some(""));
    }

    #[test]
    fn serializes_in_the_original_key_order() {
        let ctx = ToolContext::builder("web")
            .principal("0")
            .request_id("r")
            .build();
        assert_eq!(
            serde_json::to_string(&ctx).unwrap(),
            r#"{"principal":"0","channel":"web","scopes":[],"request_id":"r","ip":null,"user_agent":null,"mode":"execute"}"#
        );
    }
}
