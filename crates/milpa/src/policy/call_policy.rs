//! [`CallPolicy`]: a policy over the whole call (caller, tool, channel, mode and the
//! arguments), checked last in the authorize stage.
//!
//! Scopes, the channel policy and the rule provider decide on *who* calls *which* tool. Some
//! rules need the arguments ("refunds only under 100", "no writes outside /srv"): a call
//! policy sees them, after validation and clamping, so it judges exactly what would run. It
//! runs only when everything before it allowed the call, and it can only deny: deny wins.
//!
//! The Cedar engine (`milpa-cedar`) is one; a host may write its own.

use serde_json::Value;

use crate::context::ToolContext;
use crate::deferred::Deferred;
use crate::definition::ToolDefinition;
use crate::policy::subject::Access;

/// The call a [`CallPolicy`] judges.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct PolicyInput<'a> {
    /// The caller, channel and mode.
    pub ctx: &'a ToolContext,
    /// The tool.
    pub tool: &'a ToolDefinition,
    /// The arguments as validated and clamped (what the tool would receive).
    pub args: &'a Value,
}

impl<'a> PolicyInput<'a> {
    /// The input for a call of `tool` with `args` in `ctx`.
    pub fn new(ctx: &'a ToolContext, tool: &'a ToolDefinition, args: &'a Value) -> Self {
        PolicyInput { ctx, tool, args }
    }
}

/// A resource read or a prompt request a [`CallPolicy`] judges (see
/// [`CallPolicy::evaluate_access`]).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct AccessInput<'a> {
    /// The caller, channel and mode.
    pub ctx: &'a ToolContext,
    /// What is asked: [`Access::ReadResource`] or [`Access::GetPrompt`].
    pub access: Access,
    /// The resource's URI, or the prompt's name.
    pub name: &'a str,
    /// The prompt's arguments (an object of strings); `{}` for a read.
    pub args: &'a Value,
}

impl<'a> AccessInput<'a> {
    /// The input for `access` of `name` with `args` in `ctx`.
    pub fn new(ctx: &'a ToolContext, access: Access, name: &'a str, args: &'a Value) -> Self {
        AccessInput {
            ctx,
            access,
            name,
            args,
        }
    }
}

/// An entry of a listing a [`CallPolicy`] is asked about (see
/// [`CallPolicy::denies_whatever_the_arguments`]): a tool, a fixed resource or a prompt.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ListingInput<'a> {
    /// The caller, channel and mode.
    pub ctx: &'a ToolContext,
    /// What using the entry would be: a call, a read or a prompt request.
    pub access: Access,
    /// The tool's name, the resource's URI or the prompt's name.
    pub name: &'a str,
    /// The tool, for [`Access::CallTool`].
    pub tool: Option<&'a ToolDefinition>,
}

impl<'a> ListingInput<'a> {
    /// A tool in a listing for `ctx`.
    pub fn tool(ctx: &'a ToolContext, tool: &'a ToolDefinition) -> Self {
        ListingInput {
            ctx,
            access: Access::CallTool,
            name: tool.name(),
            tool: Some(tool),
        }
    }

    /// A resource (`Access::ReadResource`, its URI) or prompt (`Access::GetPrompt`, its
    /// name) in a listing for `ctx`.
    pub fn entry(ctx: &'a ToolContext, access: Access, name: &'a str) -> Self {
        ListingInput {
            ctx,
            access,
            name,
            tool: None,
        }
    }
}

/// What a [`CallPolicy`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PolicyDecision {
    /// Nothing against it: the call goes on.
    Continue,
    /// Denied; the message becomes the `FORBIDDEN` result's error.
    Deny(String),
}

/// A policy over whole calls, checked at the end of the authorize stage.
pub trait CallPolicy: Send + Sync + 'static {
    /// Judges one call. In-memory policies answer with [`Deferred::ready`].
    fn evaluate<'a>(&'a self, input: PolicyInput<'a>) -> Deferred<'a, PolicyDecision>;

    /// For `inspect`: what is wired and which of its policies can apply to `tool` (one
    /// line, e.g. `cedar (policy.cedar, default allow): may apply: deny-big-refunds`).
    fn describe(&self, tool: &ToolDefinition) -> String;

    /// Judges a resource read or a prompt request, after the scopes, the channel and the
    /// rules allowed it.
    ///
    /// The default denies: a policy written for tool calls has not said what it allows of
    /// the rest, and the gate fails closed rather than let a read through unjudged.
    fn evaluate_access<'a>(&'a self, input: AccessInput<'a>) -> Deferred<'a, PolicyDecision> {
        Deferred::ready(PolicyDecision::Deny(format!(
            "The call policy judges tool calls only; {} '{}' is denied (fail-closed).",
            input.access.noun(),
            input.name
        )))
    }

    /// Whether this policy denies `input.ctx` every use of the entry, whatever the
    /// arguments: listings leave such an entry out, so a model is not offered what it can
    /// never use.
    ///
    /// The default says no (the entry is listed): a listing may show what a call will be
    /// denied, never hide what it would allow.
    fn denies_whatever_the_arguments(&self, input: ListingInput<'_>) -> bool {
        let _ = input;
        false
    }
}
