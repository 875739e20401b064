//! `milpa serve --http` without a manifest: two bearer tokens made for this run, so a first
//! HTTP step needs no configuration and still refuses anonymous callers.
//!
//! - `local-user` is the agents' identity: an MCP client sends it as
//!   `Authorization: Bearer <token>`. It holds every scope a registered tool asks for, each
//!   by its exact name ([`agent_scopes`]), so it can call every tool; it holds neither `*`
//!   (which would let it act as another principal: `requested_by` of
//!   `request_verification`, `principal` of `resolve_verification`) nor `approvals:grant`
//!   (which would let it decide approvals, a person's calls parked from a shell among them).
//! - `local-approver` (`approvals:grant` and `metrics:read`) signs a person in on the
//!   approvals page, and reads `/metrics`. It is
//!   a second principal because a parked call cannot be approved by the principal that made
//!   it: with one token, the calls agents park could never be approved over HTTP. It calls
//!   no tool: [`approver_calls_no_tool`] is a policy rule denying it every tool, so such a
//!   call is refused (and audited) in the pipeline like any other denial.
//!
//! Each token is 32 bytes from the operating system's CSPRNG, written as 64 hex digits. The
//! tokens are printed once on standard error (never inside a URL); the server keeps only
//! their SHA-256, and they stop working when the process ends.

use milpa::approval::APPROVE_SCOPE;
use milpa::policy::{PolicyRule, RuleEffect, StaticRule};
use milpa::{ToolRegistry, is_scope_pattern, scope_matches};
use milpa_mcp::METRICS_SCOPE;
use milpa_mcp::auth::StaticTokens;
use rand::TryRngCore;
use rand::rngs::OsRng;

/// The principal of the agents' token.
pub(crate) const LOCAL_USER: &str = "local-user";

/// The principal of the approver's token.
pub(crate) const LOCAL_APPROVER: &str = "local-approver";

/// Why the approver's token is refused a tool call (the `FORBIDDEN` message).
pub(crate) const APPROVER_CALLS_NO_TOOL: &str =
    "The approver token decides approvals on the page; it calls no tool.";

/// The policy rule that denies [`LOCAL_APPROVER`] every tool on every channel, with
/// [`APPROVER_CALLS_NO_TOOL`] as its message. A rule rather than an empty scope list: a tool
/// that asks for no scope would otherwise run for it.
pub(crate) fn approver_calls_no_tool() -> StaticRule {
    StaticRule::new(
        "*",
        PolicyRule::new(RuleEffect::Deny).with_description(APPROVER_CALLS_NO_TOOL),
    )
    .with_principal(LOCAL_APPROVER)
}

/// The scopes of the agents' token: every scope a tool of `registry` asks for, sorted and
/// without duplicates, except the patterns (`*`, `ns:*`: a tool that names one would hand
/// the agent more than any tool needs) and any that would grant `approvals:grant`.
///
/// Read when the server starts: the tools of a run without a manifest are the demo's and
/// those of an upstream without overrides, which ask for no scope, so a later change of an
/// upstream's list adds no scope to read.
pub(crate) fn agent_scopes(registry: &ToolRegistry) -> Vec<String> {
    let mut scopes: Vec<String> = registry
        .definitions()
        .flat_map(|tool| tool.scopes().to_vec())
        .filter(|scope| !is_scope_pattern(scope) && !scope_matches(scope, APPROVE_SCOPE))
        .collect();
    scopes.sort();
    scopes.dedup();
    scopes
}

/// Bytes of randomness in a token.
const TOKEN_BYTES: usize = 32;

/// The two tokens of one run, in clear until they are printed and hashed.
pub(crate) struct LocalTokens {
    agent: String,
    approver: String,
}

impl LocalTokens {
    /// Two fresh tokens; an error when the operating system cannot supply randomness.
    pub(crate) fn generate() -> std::io::Result<LocalTokens> {
        Ok(LocalTokens {
            agent: random_token()?,
            approver: random_token()?,
        })
    }

    /// The authenticator knowing both tokens, by their SHA-256 only: the agent's with the
    /// [`agent_scopes`] of `registry`, the approver's with `approvals:grant` and
    /// `metrics:read` (the person running the server reads its metrics too).
    pub(crate) fn authenticator(&self, registry: &ToolRegistry) -> StaticTokens {
        let mut tokens = StaticTokens::new();
        tokens.insert_token(&self.agent, LOCAL_USER, agent_scopes(registry));
        tokens.insert_token(
            &self.approver,
            LOCAL_APPROVER,
            [APPROVE_SCOPE, METRICS_SCOPE],
        );
        tokens
    }

    /// What the server prints once at start: the endpoint, the approvals page and the two
    /// tokens, each token on a line of its own and never in a URL.
    pub(crate) fn announcement(&self, endpoint: &str, page: &str) -> String {
        format!(
            "milpa: no manifest, so this run made two bearer tokens (shown only here; the server \
             keeps their SHA-256 and they end with it):\n\
             milpa:\n\
             milpa:   MCP endpoint    {endpoint}\n\
             milpa:   agent token     {agent}\n\
             milpa:                   principal {LOCAL_USER}, the scopes of every tool; MCP clients send it as the header\n\
             milpa:                   Authorization: Bearer <agent token>\n\
             milpa:\n\
             milpa:   approvals page  {page}\n\
             milpa:   approver token  {approver}\n\
             milpa:                   principal {LOCAL_APPROVER}, scopes {APPROVE_SCOPE} and {METRICS_SCOPE}; sign in on the page with it (it calls no tool)\n\
             milpa:\n\
             milpa: Two tokens because nobody may approve a call they made themselves: agents call as\n\
             milpa: {LOCAL_USER}, and a person approves their parked calls as {LOCAL_APPROVER}.\n",
            agent = self.agent,
            approver = self.approver,
        )
    }
}

impl std::fmt::Debug for LocalTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The tokens are secrets: a debug print never shows them.
        f.debug_struct("LocalTokens").finish_non_exhaustive()
    }
}

fn random_token() -> std::io::Result<String> {
    let mut bytes = [0u8; TOKEN_BYTES];
    OsRng
        .try_fill_bytes(&mut bytes)
        .map_err(|e| std::io::Error::other(format!("no randomness for a bearer token: {e}")))?;
    Ok(hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_fresh_and_only_their_hashes_authenticate() {
        let a = LocalTokens::generate().unwrap();
        let b = LocalTokens::generate().unwrap();
        assert_eq!(a.agent.len(), 2 * TOKEN_BYTES);
        assert!(a.agent.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a.agent, a.approver);
        assert_ne!(a.agent, b.agent);
        let tokens = a.authenticator(&ToolRegistry::new());
        assert_eq!(tokens.lookup(&a.agent).unwrap().principal, LOCAL_USER);
        let approver = tokens.lookup(&a.approver).unwrap();
        assert_eq!(
            (approver.principal.as_str(), approver.scopes.as_slice()),
            (
                LOCAL_APPROVER,
                [APPROVE_SCOPE.to_owned(), METRICS_SCOPE.to_owned()].as_slice()
            )
        );
        assert!(tokens.lookup(&b.agent).is_none());
        assert!(!format!("{a:?} {tokens:?}").contains(&a.agent));
    }

    fn tool(name: &str, scopes: &[&str]) -> milpa::ToolDefinition {
        milpa::ToolDefinition::builder(name)
            .scopes(scopes.iter().copied())
            .sync(|_, _| serde_json::Value::Null)
    }

    #[test]
    fn the_agent_holds_each_tool_scope_by_name_and_never_a_pattern_or_the_grant() {
        let mut registry = ToolRegistry::new();
        for definition in [
            tool("open", &[]),
            tool("write", &["notes:write", "notes:read"]),
            tool("read", &["notes:read"]),
            tool("everything", &["*"]),
            tool("family", &["ops:*"]),
            tool("decide", &[APPROVE_SCOPE, "approvals:*"]),
        ] {
            registry.register(definition).unwrap();
        }
        assert_eq!(agent_scopes(&registry), ["notes:read", "notes:write"]);
        let tokens = LocalTokens::generate().unwrap();
        let auth = tokens.authenticator(&registry);
        let agent = auth.lookup(&tokens.agent).unwrap();
        assert_eq!(agent.scopes, ["notes:read", "notes:write"]);
    }
}
