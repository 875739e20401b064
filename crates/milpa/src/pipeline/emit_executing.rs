//! Stage 8, `emit_executing`: dispatch `tool.executing` after every gate has passed.
//!
//! This is the only place a listener can answer for a tool (short-circuit, e.g. a cache) or
//! veto it. Because it runs after `authorize`, `rate_limit` and `confirm`, a listener can
//! never answer a call those refused.

use crate::audit::AuditOutcome;
use crate::definition::ToolOutput;
use crate::events::{Dispatcher, Event, InterceptionSlot, ToolExecuting};
use crate::inspect::StageFacts;
use crate::inspect::{InvocationStep, StepPresence, StepRole};
use crate::pipeline::{Call, Flow};
use crate::pipeline::{StepKind, step, unreachable_in_plan_mode};
use crate::result::ToolResult;

/// The message of a vetoed call.
pub(crate) const VETO_MESSAGE: &str = "Tool execution vetoed by an event listener";

// The check is inlined into the pipeline; dispatching is out of line.
#[inline]
pub(crate) fn run(call: &mut Call<'_>) -> Flow {
    match call.wiring.dispatcher.as_deref() {
        Some(dispatcher) => dispatch(call, dispatcher),
        None => Flow::Continue,
    }
}

fn dispatch(call: &mut Call<'_>, dispatcher: &Dispatcher) -> Flow {
    let slot = InterceptionSlot::new();
    dispatcher.dispatch(&Event::ToolExecuting(ToolExecuting {
        tool: call.name,
        ctx: call.ctx,
        args: &call.args,
        slot: &slot,
    }));
    if let Some(answer) = slot.take_result() {
        let result = match answer {
            ToolOutput::Data(data) => ToolResult::success(data),
            ToolOutput::Result(result) => *result,
        };
        return call.finish(result, AuditOutcome::CacheServed);
    }
    if slot.is_stopped() {
        return call.finish(
            ToolResult::blocked(VETO_MESSAGE, None),
            AuditOutcome::Vetoed,
        );
    }
    Flow::Continue
}

pub(crate) fn describe(facts: &StageFacts<'_>) -> InvocationStep {
    if let Some(step) = unreachable_in_plan_mode(facts, StepKind::EmitExecuting, StepRole::Hook) {
        return step;
    }
    let (presence, blocking, source) = match (facts.dispatcher, facts.executing_listeners) {
        (false, _) => (
            StepPresence::Skipped,
            false,
            "no dispatcher wired".to_owned(),
        ),
        (true, 0) => (
            StepPresence::Dormant,
            false,
            "a dispatcher is wired, but nothing listens to tool.executing".to_owned(),
        ),
        (true, n) => (
            StepPresence::Active,
            true,
            format!(
                "{n} listener(s) on tool.executing, after every gate: one may answer for the tool (cache) or veto the call"
            ),
        ),
    };
    step(
        StepKind::EmitExecuting,
        StepRole::Hook,
        presence,
        blocking,
        false,
        source,
    )
}
