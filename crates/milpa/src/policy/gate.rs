//! [`PolicyGate`]: decides whether a context may call a tool.

use std::sync::Arc;

use crate::context::{ToolContext, channel};
use crate::definition::ToolDefinition;
use crate::policy::call_policy::{CallPolicy, ListingInput};
use crate::policy::channel::ChannelPolicy;
use crate::policy::rules::{PolicyRuleProvider, RuleEffect, RuleQuery};
use crate::policy::subject::Subject;

/// The gate's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Authorization {
    /// The call may proceed.
    Allowed,
    /// The call is denied; the reason names the check that failed.
    Denied(String),
    /// The call is denied because the caller lacks a scope: the tool's, or a matching
    /// rule's. `needed` lists every scope the call asks for (the tool's and the rule's), so
    /// a transport can ask for all of them at once (an OAuth `insufficient_scope`
    /// challenge) instead of one refusal per missing scope.
    InsufficientScope {
        /// What the caller is told, as for [`Authorization::Denied`].
        reason: String,
        /// Every scope the call needs, in order, without duplicates.
        needed: Vec<String>,
    },
}

/// Checks, in this order (the first failing check wins): authentication required by the
/// channel, the tool's scopes, the rule provider (whose `allow` skips the channel check),
/// then the channel's `block_mutating`.
///
/// Channels without a policy fail closed: they require an authenticated principal.
#[derive(Clone)]
pub struct PolicyGate {
    // A handful of channels: a linear scan beats hashing here.
    policies: Vec<(Box<str>, ChannelPolicy)>,
    rule_provider: Option<Arc<dyn PolicyRuleProvider>>,
    call_policy: Option<Arc<dyn CallPolicy>>,
}

impl Default for PolicyGate {
    fn default() -> Self {
        PolicyGate {
            policies: vec![
                (channel::CLI.into(), ChannelPolicy::CLI),
                (channel::MCP.into(), ChannelPolicy::AUTHENTICATED),
                (channel::WEB.into(), ChannelPolicy::AUTHENTICATED),
                (channel::TELEGRAM.into(), ChannelPolicy::TELEGRAM),
            ],
            rule_provider: None,
            call_policy: None,
        }
    }
}

impl std::fmt::Debug for PolicyGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyGate")
            .field("policies", &self.policies)
            .field("rule_provider", &self.rule_provider.is_some())
            .field("call_policy", &self.call_policy.is_some())
            .finish()
    }
}

impl PolicyGate {
    /// A gate with the built-in channel policies and no rule provider.
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces (does not merge) the policy of `channel`.
    pub fn set_channel_policy(&mut self, channel: impl Into<String>, policy: ChannelPolicy) {
        let channel = channel.into();
        match self
            .policies
            .iter_mut()
            .find(|(name, _)| **name == *channel)
        {
            Some((_, existing)) => *existing = policy,
            None => self.policies.push((channel.into(), policy)),
        }
    }

    /// The channels with a policy of their own (the built-in ones and those set), in the
    /// order they were added.
    pub fn channels(&self) -> impl Iterator<Item = &str> {
        self.policies.iter().map(|(name, _)| &**name)
    }

    /// The policy that applies to `channel`: its own, or the fail-closed one.
    pub fn channel_policy(&self, channel: &str) -> ChannelPolicy {
        self.registered_policy(channel)
            .unwrap_or(ChannelPolicy::FAIL_CLOSED)
    }

    /// The channel's own policy, `None` when it has none.
    #[inline]
    pub fn registered_policy(&self, channel: &str) -> Option<ChannelPolicy> {
        self.policies
            .iter()
            .find(|(name, _)| **name == *channel)
            .map(|(_, p)| *p)
    }

    /// Sets the rule provider consulted after scopes.
    pub fn set_rule_provider(&mut self, provider: Arc<dyn PolicyRuleProvider>) {
        self.rule_provider = Some(provider);
    }

    /// Whether a rule provider is set.
    pub fn has_rule_provider(&self) -> bool {
        self.rule_provider.is_some()
    }

    /// Judges every call the rest of the gate allowed, arguments included (see
    /// [`CallPolicy`]); it can only deny.
    pub fn set_call_policy(&mut self, policy: Arc<dyn CallPolicy>) {
        self.call_policy = Some(policy);
    }

    /// The call policy, if one is set.
    pub fn call_policy(&self) -> Option<&Arc<dyn CallPolicy>> {
        self.call_policy.as_ref()
    }

    /// Whether a call of `tool` in `ctx` must be confirmed first: the tool asks for it, or
    /// the channel confirms every mutating tool.
    pub fn requires_confirmation(&self, ctx: &ToolContext, tool: &ToolDefinition) -> bool {
        self.requires_confirmation_under(&self.channel_policy(ctx.channel()), tool)
    }

    #[inline]
    pub(crate) fn requires_confirmation_under(
        &self,
        policy: &ChannelPolicy,
        tool: &ToolDefinition,
    ) -> bool {
        self.confirmation_under(policy, tool) != Confirmation::None
    }

    /// Who must confirm a call of `tool` in `ctx`: nobody, its caller, or a person.
    pub fn confirmation(&self, ctx: &ToolContext, tool: &ToolDefinition) -> Confirmation {
        self.confirmation_under(&self.channel_policy(ctx.channel()), tool)
    }

    #[inline]
    pub(crate) fn confirmation_under(
        &self,
        policy: &ChannelPolicy,
        tool: &ToolDefinition,
    ) -> Confirmation {
        let mutating = tool.is_mutating();
        if tool.requires_human_approval()
            || (policy.require_human_approval_for_mutating && mutating)
        {
            Confirmation::Human
        } else if tool.requires_confirmation()
            || (policy.require_confirmation_for_mutating && mutating)
        {
            Confirmation::Caller
        } else {
            Confirmation::None
        }
    }

    /// Decides whether `ctx` may call `tool`.
    pub async fn authorize(&self, ctx: &ToolContext, tool: &ToolDefinition) -> Authorization {
        let policy = self.lookup_warning_if_unknown(ctx.channel());
        self.authorize_under(&policy, ctx, tool).await
    }

    // Inlined into every call's pipeline; the warning is out of line.
    #[inline]
    pub(crate) fn lookup_warning_if_unknown(&self, channel: &str) -> ChannelPolicy {
        match self.registered_policy(channel) {
            Some(policy) => policy,
            None => unknown_channel(channel),
        }
    }

    #[inline]
    pub(crate) async fn authorize_under(
        &self,
        policy: &ChannelPolicy,
        ctx: &ToolContext,
        tool: &ToolDefinition,
    ) -> Authorization {
        self.authorize_subject(policy, ctx, Subject::tool(tool))
            .await
    }

    /// The gate's verdict without a future, when no rule provider must be asked; `None`
    /// when one is set (then [`authorize_subject`](Self::authorize_subject) decides).
    ///
    /// Every call's `authorize` stage asks this first. Awaiting `authorize_subject` builds,
    /// polls and drops its state machine, about 30 instructions of a trivial call
    /// (callgrind, the `trivial_cli` bench case), for a decision that awaits nothing when
    /// there are no rules. `the_quick_verdict_is_the_general_one` holds the two together.
    #[inline]
    pub(crate) fn authorize_without_rules(
        &self,
        policy: &ChannelPolicy,
        ctx: &ToolContext,
        subject: Subject<'_>,
    ) -> Option<Authorization> {
        if self.rule_provider.is_some() {
            return None;
        }
        // The allowed call is answered inline; the wording of a denial is out of line (it
        // formats). Inlined whole, the two checks' `format!` paths kept `check_caller` out
        // of line, a call and its verdict's copy on every allowed call (callgrind).
        if subject_denial(policy, ctx, subject).is_none() && !subject_blocked(policy, subject) {
            return Some(Authorization::Allowed);
        }
        Some(worded_verdict(policy, ctx, subject))
    }

    /// The gate's checks on any subject: a tool call, a resource read, a prompt.
    pub(crate) async fn authorize_subject(
        &self,
        policy: &ChannelPolicy,
        ctx: &ToolContext,
        tool: Subject<'_>,
    ) -> Authorization {
        if let Some(denied) = check_caller(policy, ctx, tool) {
            return match denied {
                // Boxed: the denial path only; the rules' scopes join the tool's.
                Authorization::InsufficientScope { reason, needed } => {
                    Box::pin(self.with_rule_scopes(ctx, tool, reason, needed)).await
                }
                other => other,
            };
        }
        if let Some(provider) = &self.rule_provider {
            // Boxed: a gate without rules keeps every call's future small.
            if let Some(verdict) = Box::pin(check_rules(provider.as_ref(), ctx, tool)).await {
                return verdict;
            }
        }
        check_channel(policy, ctx, tool)
    }
}

impl PolicyGate {
    /// Whether `ctx` could use `subject` with some arguments, as far as a listing can tell:
    /// the channel's `require_auth` and `block_mutating`, the subject's scopes and, when
    /// `policy_input` is given, the call policy's
    /// [`denies_whatever_the_arguments`](CallPolicy::denies_whatever_the_arguments).
    ///
    /// Rules are not consulted: a rule provider may be remote, and a listing that waits on
    /// it for every entry would cost what a call costs per entry. A listing may therefore
    /// show what a rule denies; it never hides what the gate would allow.
    pub(crate) fn could_use(
        &self,
        ctx: &ToolContext,
        subject: Subject<'_>,
        policy_input: Option<ListingInput<'_>>,
    ) -> bool {
        let policy = self
            .registered_policy(ctx.channel())
            .unwrap_or(ChannelPolicy::FAIL_CLOSED);
        if subject_denial(&policy, ctx, subject).is_some() || subject_blocked(&policy, subject) {
            return false;
        }
        match (self.call_policy(), policy_input) {
            (Some(call_policy), Some(input)) => !call_policy.denies_whatever_the_arguments(input),
            _ => true,
        }
    }
}

impl PolicyGate {
    /// A scope denial completed with the scopes a matching rule would ask next, so one
    /// challenge names every scope the call needs.
    async fn with_rule_scopes(
        &self,
        ctx: &ToolContext,
        tool: Subject<'_>,
        reason: String,
        mut needed: Vec<String>,
    ) -> Authorization {
        if let Some(provider) = &self.rule_provider
            && let Some(rule) = provider.find_matching_rule(rule_query(ctx, tool)).await
        {
            add_scopes(&mut needed, &rule.requires_scopes);
        }
        Authorization::InsufficientScope { reason, needed }
    }
}

fn rule_query<'a>(ctx: &'a ToolContext, tool: Subject<'a>) -> RuleQuery<'a> {
    RuleQuery::new(ctx.channel(), tool.name)
        .with_principal(ctx.principal())
        .with_mutating(tool.mutating)
}

/// Appends the scopes `needed` does not list yet.
fn add_scopes(needed: &mut Vec<String>, scopes: &[String]) {
    for scope in scopes {
        if !needed.contains(scope) {
            needed.push(scope.clone());
        }
    }
}

/// The fail-closed policy of an unregistered channel, with a warning.
#[cold]
fn unknown_channel(channel: &str) -> ChannelPolicy {
    tracing::warn!(
        target: "milpa::policy",
        channel,
        "PolicyGate: channel '{channel}' is not a registered channel — falling back to a \
         FAIL-CLOSED policy (require_auth, no allow_all). An unregistered channel is \
         treated as untrusted, never as the laxest policy. Register it explicitly via \
         set_channel_policy() to define its rules."
    );
    ChannelPolicy::FAIL_CLOSED
}

/// Why the caller alone is refused, before any rule or the channel's mutating block.
///
/// Shared with the invocation plan, so what `inspect` predicts is what `authorize` checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallerDenial {
    /// The channel requires a principal and the context has none.
    Unauthenticated,
    /// The tool has scopes and the context holds none of them.
    MissingScope,
}

/// Authentication required by the channel, then the tool's scopes.
#[inline]
pub(crate) fn caller_denial(
    policy: &ChannelPolicy,
    ctx: &ToolContext,
    tool: &ToolDefinition,
) -> Option<CallerDenial> {
    subject_denial(policy, ctx, Subject::tool(tool))
}

/// [`caller_denial`] of any subject.
#[inline]
pub(crate) fn subject_denial(
    policy: &ChannelPolicy,
    ctx: &ToolContext,
    tool: Subject<'_>,
) -> Option<CallerDenial> {
    if policy.require_auth && ctx.principal().is_none() {
        return Some(CallerDenial::Unauthenticated);
    }
    let scopes = tool.scopes;
    if !scopes.is_empty() && !ctx.has_any_scope(scopes) {
        return Some(CallerDenial::MissingScope);
    }
    None
}

/// The channel's `block_mutating`, unless `allow_all`.
#[inline]
pub(crate) fn blocks_mutating(policy: &ChannelPolicy, tool: &ToolDefinition) -> bool {
    subject_blocked(policy, Subject::tool(tool))
}

/// [`blocks_mutating`] of any subject (a read or a prompt never mutates).
#[inline]
fn subject_blocked(policy: &ChannelPolicy, tool: Subject<'_>) -> bool {
    !policy.allow_all && policy.block_mutating && tool.mutating
}

/// [`caller_denial`], worded as the original denies it.
#[inline]
fn check_caller(
    policy: &ChannelPolicy,
    ctx: &ToolContext,
    tool: Subject<'_>,
) -> Option<Authorization> {
    Some(match subject_denial(policy, ctx, tool)? {
        CallerDenial::Unauthenticated => Authorization::Denied(format!(
            "channel '{}' requires an authenticated principal (require_auth) — none provided.",
            ctx.channel()
        )),
        CallerDenial::MissingScope => {
            let mut needed = Vec::with_capacity(tool.scopes.len());
            add_scopes(&mut needed, tool.scopes);
            Authorization::InsufficientScope {
                reason: format!(
                    "Missing required scope for {} '{}'. Need one of: {} — context has: {}.",
                    tool.access.noun(),
                    tool.name,
                    tool.scopes.join(", "),
                    held_scopes(ctx)
                ),
                needed,
            }
        }
    })
}

/// The verdict of the checks without rules, with a denial's wording.
#[cold]
#[inline(never)]
fn worded_verdict(
    policy: &ChannelPolicy,
    ctx: &ToolContext,
    subject: Subject<'_>,
) -> Authorization {
    check_caller(policy, ctx, subject).unwrap_or_else(|| check_channel(policy, ctx, subject))
}

/// The first matching rule decides, if there is one.
async fn check_rules(
    provider: &dyn PolicyRuleProvider,
    ctx: &ToolContext,
    tool: Subject<'_>,
) -> Option<Authorization> {
    let (channel, name, noun) = (ctx.channel(), tool.name, tool.access.noun());
    let rule = provider.find_matching_rule(rule_query(ctx, tool)).await?;
    let id = rule.id.map(|id| id.to_string()).unwrap_or_default();
    if !rule.requires_scopes.is_empty() && !ctx.has_any_scope(&rule.requires_scopes) {
        // The tool's own scopes are held (checked before); the call needs them still.
        let mut needed = Vec::new();
        add_scopes(&mut needed, tool.scopes);
        add_scopes(&mut needed, &rule.requires_scopes);
        return Some(Authorization::InsufficientScope {
            reason: format!(
                "Policy rule #{id} for {noun} '{name}' requires one of these scopes: {} — context has: {}.",
                rule.requires_scopes.join(", "),
                held_scopes(ctx)
            ),
            needed,
        });
    }
    Some(match rule.effect {
        RuleEffect::Allow => Authorization::Allowed,
        RuleEffect::Deny => Authorization::Denied(rule.description.unwrap_or_else(|| {
            format!(
                "Denied by policy rule #{id} for {noun} '{name}' on channel '{channel}' (principal: {}).",
                ctx.principal().unwrap_or("(none)")
            )
        })),
    })
}

/// [`blocks_mutating`], worded as the original denies it.
#[inline]
fn check_channel(policy: &ChannelPolicy, ctx: &ToolContext, tool: Subject<'_>) -> Authorization {
    if subject_blocked(policy, tool) {
        return Authorization::Denied(format!(
            "Mutating tool '{}' is blocked on channel '{}' (block_mutating policy).",
            tool.name,
            ctx.channel()
        ));
    }
    Authorization::Allowed
}

fn held_scopes(ctx: &ToolContext) -> String {
    if ctx.scopes().is_empty() {
        "(none)".to_owned()
    } else {
        ctx.scopes().join(", ")
    }
}

/// Who must confirm a call before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Confirmation {
    /// Nobody: the call runs.
    None,
    /// The caller, with a one-time token (`confirm = true`).
    Caller,
    /// A person other than the caller, through the approval queue (`confirm = "human"`).
    Human,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    fn now<F: Future>(future: F) -> F::Output {
        match pin!(future).poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(output) => output,
            Poll::Pending => panic!("a gate without rules awaits nothing"),
        }
    }

    #[test]
    fn the_quick_verdict_is_the_general_one() {
        let gate = PolicyGate::default();
        let tools = [
            ToolDefinition::builder("read").sync(|_, _| serde_json::Value::Null),
            ToolDefinition::builder("scoped")
                .scopes(["notes:read", "notes:admin"])
                .sync(|_, _| serde_json::Value::Null),
            ToolDefinition::builder("delete")
                .mutating(true)
                .sync(|_, _| serde_json::Value::Null),
        ];
        let contexts = [
            ToolContext::cli(),
            ToolContext::mcp("r", None, Vec::<String>::new()),
            ToolContext::mcp("r", Some("ann".into()), ["notes:*"]),
            ToolContext::mcp("r", Some("bob".into()), ["other"]),
            ToolContext::builder("nowhere").build(),
        ];
        let policies = [
            ChannelPolicy::default(),
            ChannelPolicy {
                require_auth: true,
                block_mutating: true,
                ..ChannelPolicy::default()
            },
        ];
        let mut verdicts = std::collections::HashSet::new();
        for tool in &tools {
            for ctx in &contexts {
                for policy in &policies {
                    let subject = Subject::tool(tool);
                    let quick = gate
                        .authorize_without_rules(policy, ctx, subject)
                        .expect("no rule provider: decided at once");
                    let general = now(gate.authorize_subject(policy, ctx, subject));
                    assert_eq!(quick, general, "{} on {}", tool.name(), ctx.channel());
                    verdicts.insert(match quick {
                        Authorization::Allowed => "allowed",
                        Authorization::Denied(_) => "denied",
                        Authorization::InsufficientScope { .. } => "insufficient_scope",
                    });
                }
            }
        }
        // Allowed, denied and missing-scope verdicts were all compared.
        assert_eq!(verdicts.len(), 3, "{verdicts:?}");
    }
}
