//! The events the runtime dispatches.

use serde_json::Value;

use crate::context::ToolContext;
use crate::events::slot::InterceptionSlot;
use crate::policy::Access;
use crate::result::{ErrorCode, ToolResult};
use crate::verification::{
    VERIFICATION_GRANTED, VERIFICATION_REJECTED, VERIFICATION_REQUESTED, VerificationEvent,
};

/// Name of the event dispatched after every gate passed, before the tool runs.
pub const TOOL_EXECUTING: &str = "tool.executing";
/// Name of the event dispatched after a tool ran (or a listener answered for it).
pub const TOOL_EXECUTED: &str = "tool.executed";
/// Name of the event dispatched after a tool failed, panicked or timed out.
pub const TOOL_FAILED: &str = "tool.failed";

/// Name of the event dispatched after a resource was read.
pub const RESOURCE_READ: &str = "resource.read";
/// Name of the event dispatched after a resource's provider failed (or its contents were
/// over the result cap).
pub const RESOURCE_FAILED: &str = "resource.failed";
/// Name of the event dispatched after a prompt was rendered.
pub const PROMPT_GOT: &str = "prompt.got";
/// Name of the event dispatched after a prompt's provider failed.
pub const PROMPT_FAILED: &str = "prompt.failed";

/// `resource.read` / `prompt.got`, or `resource.failed` / `prompt.failed`: a read or a
/// prompt request passed every gate and its provider answered. A request the gates refused
/// leaves its audit record only, as a refused call does.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Accessed<'a> {
    /// A read ([`Access::ReadResource`]) or a prompt ([`Access::GetPrompt`]).
    pub access: Access,
    /// The URI read, or the prompt's name.
    pub name: &'a str,
    /// The caller's context.
    pub ctx: &'a ToolContext,
    /// The failure's code and message, for `*.failed`.
    pub failure: Option<(&'a ErrorCode, &'a str)>,
    /// Time from the request to its answer, in milliseconds.
    pub took_ms: u64,
}

impl Accessed<'_> {
    fn name(&self) -> &'static str {
        match (self.access, self.failure.is_some()) {
            (Access::GetPrompt, false) => PROMPT_GOT,
            (Access::GetPrompt, true) => PROMPT_FAILED,
            (_, false) => RESOURCE_READ,
            (_, true) => RESOURCE_FAILED,
        }
    }
}

/// `tool.executing`: the call passed every gate. A listener may answer through the slot.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ToolExecuting<'a> {
    /// The tool's name.
    pub tool: &'a str,
    /// The caller's context.
    pub ctx: &'a ToolContext,
    /// The arguments the tool will run with (validated, clamped, confirmation resolved).
    pub args: &'a Value,
    /// Where a listener answers for the tool or vetoes the call.
    pub slot: &'a InterceptionSlot,
}

/// `tool.executed`: the call finished, live or answered by a listener.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ToolExecuted<'a> {
    /// The tool's name.
    pub tool: &'a str,
    /// The caller's context.
    pub ctx: &'a ToolContext,
    /// The arguments the tool ran with.
    pub args: &'a Value,
    /// The result returned to the caller.
    pub result: &'a ToolResult,
    /// True when a `tool.executing` listener answered and the tool did not run.
    pub cache_served: bool,
}

/// `tool.failed`: the tool returned an error, panicked or ran past its hard timeout.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ToolFailed<'a> {
    /// The tool's name.
    pub tool: &'a str,
    /// The caller's context.
    pub ctx: &'a ToolContext,
    /// The arguments the tool ran with.
    pub args: &'a Value,
    /// The failure's message.
    pub error: &'a str,
    /// The failure's code.
    pub code: &'a ErrorCode,
    /// Pipeline time until the failure, in milliseconds.
    pub took_ms: u64,
}

/// Anything the dispatcher carries.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Event<'a> {
    /// See [`ToolExecuting`].
    ToolExecuting(ToolExecuting<'a>),
    /// See [`ToolExecuted`].
    ToolExecuted(ToolExecuted<'a>),
    /// See [`ToolFailed`].
    ToolFailed(ToolFailed<'a>),
    /// See [`Accessed`].
    Accessed(Accessed<'a>),
    /// `verification.requested`: a verification request was opened.
    VerificationRequested(&'a VerificationEvent),
    /// `verification.granted`: a verification request passed (its last required grant).
    VerificationGranted(&'a VerificationEvent),
    /// `verification.rejected`: a verification request was rejected.
    VerificationRejected(&'a VerificationEvent),
    /// A host's own event.
    Custom {
        /// Its name (dot-separated segments).
        name: &'a str,
        /// Its payload.
        payload: &'a Value,
    },
}

impl Event<'_> {
    /// The event's name, e.g. `tool.executed`.
    pub fn name(&self) -> &str {
        match self {
            Event::ToolExecuting(_) => TOOL_EXECUTING,
            Event::ToolExecuted(_) => TOOL_EXECUTED,
            Event::ToolFailed(_) => TOOL_FAILED,
            Event::Accessed(accessed) => accessed.name(),
            Event::VerificationRequested(_) => VERIFICATION_REQUESTED,
            Event::VerificationGranted(_) => VERIFICATION_GRANTED,
            Event::VerificationRejected(_) => VERIFICATION_REJECTED,
            Event::Custom { name, .. } => name,
        }
    }

    /// The verification payload, for `verification.*` events.
    pub fn verification(&self) -> Option<&VerificationEvent> {
        match self {
            Event::VerificationRequested(e)
            | Event::VerificationGranted(e)
            | Event::VerificationRejected(e) => Some(e),
            _ => None,
        }
    }

    /// The interception slot, for `tool.executing`.
    pub fn slot(&self) -> Option<&InterceptionSlot> {
        match self {
            Event::ToolExecuting(e) => Some(e.slot),
            _ => None,
        }
    }
}
