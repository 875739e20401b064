//! Events around a call: `tool.executing` (interceptable), `tool.executed`, `tool.failed`;
//! around a read or a prompt: `resource.read` / `resource.failed`, `prompt.got` /
//! `prompt.failed`.
//!
//! `tool.executing` is dispatched from exactly one place, after every gate has passed: a
//! listener (a cache, say) can answer for the tool or veto the call, but it can never answer
//! a call that authorization, validation or rate limiting refused.

mod dispatcher;
mod event;
mod pattern;
mod slot;

pub use dispatcher::{Dispatcher, Listener, ListenerError, ListenerOutcome};
pub use event::{
    Accessed, Event, PROMPT_FAILED, PROMPT_GOT, RESOURCE_FAILED, RESOURCE_READ, TOOL_EXECUTED,
    TOOL_EXECUTING, TOOL_FAILED, ToolExecuted, ToolExecuting, ToolFailed,
};
pub use pattern::EventPattern;
pub use slot::InterceptionSlot;
