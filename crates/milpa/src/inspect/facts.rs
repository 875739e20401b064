//! [`StageFacts`]: what a stage describes itself from. Built only from the wiring, a
//! registered tool and a context (the three things the executor reads), so a description
//! of a tool that is not registered cannot be written.

use std::time::Duration;

use crate::context::ToolContext;
use crate::definition::ToolDefinition;
use crate::events::TOOL_EXECUTING;
use crate::policy::CallPolicy;
use crate::policy::ChannelPolicy;
use crate::rate_limit::Quota;
use crate::tool_table::RegisteredTool;
use crate::wiring::Wiring;

/// The static facts a stage describes itself from.
#[derive(Clone, Copy)]
pub(crate) struct StageFacts<'a> {
    pub tool: &'a ToolDefinition,
    pub ctx: &'a ToolContext,
    pub policy: ChannelPolicy,
    pub channel_registered: bool,
    pub rate_limiter: bool,
    pub caller_budget: Option<Quota>,
    pub dispatcher: bool,
    pub executing_listeners: usize,
    pub rule_provider: bool,
    pub confirmation_ttl: Duration,
    pub approval_ttl: Duration,
    pub call_policy: Option<&'a dyn CallPolicy>,
    // Private: the only way to get facts is `new`, from a registered tool.
    registered: &'a RegisteredTool,
}

impl<'a> StageFacts<'a> {
    /// The facts of `tool` called in `ctx` under `wiring`.
    pub(crate) fn new(wiring: &'a Wiring, tool: &'a RegisteredTool, ctx: &'a ToolContext) -> Self {
        let registered = wiring.gate.registered_policy(ctx.channel());
        StageFacts {
            tool: &tool.definition,
            ctx,
            policy: registered.unwrap_or(ChannelPolicy::FAIL_CLOSED),
            channel_registered: registered.is_some(),
            rate_limiter: wiring.rate_limiter.is_some(),
            caller_budget: wiring.caller_budget.as_ref().map(|b| b.quota()),
            dispatcher: wiring.dispatcher.is_some(),
            executing_listeners: wiring
                .dispatcher
                .as_ref()
                .map_or(0, |d| d.subscriber_count(TOOL_EXECUTING)),
            rule_provider: wiring.gate.has_rule_provider(),
            confirmation_ttl: wiring.confirmation_ttl,
            approval_ttl: wiring.approvals.ttl(),
            call_policy: wiring.gate.call_policy().map(|p| p.as_ref()),
            registered: tool,
        }
    }

    /// The budget the tool is charged against (the one `rate_limit` charges).
    pub(crate) fn quota(&self) -> Quota {
        self.registered.quota
    }
}
