//! Stage 6, `plan_mode`: in plan mode, return what would run instead of running it.

use serde_json::json;

use crate::audit::AuditOutcome;
use crate::inspect::StageFacts;
use crate::inspect::{InvocationStep, StepPresence, StepRole};
use crate::pipeline::{Call, Flow};
use crate::pipeline::{StepKind, step};
use crate::policy::Confirmation;
use crate::result::ToolResult;

// The check is inlined into the pipeline; the plan is built out of line.
#[inline]
pub(crate) fn run(call: &mut Call<'_>) -> Flow {
    if !call.ctx.is_plan_mode() {
        return Flow::Continue;
    }
    plan(call)
}

fn plan(call: &mut Call<'_>) -> Flow {
    let confirmation = call.confirmation();
    let def = &call.tool().definition;
    let timeout = def.options().timeout;
    let timeout = if timeout.subsec_nanos() == 0 {
        json!(timeout.as_secs())
    } else {
        json!(timeout.as_secs_f64())
    };
    let mut plan = json!({
        "plan": {
            "tool": def.name(),
            "mutating": def.is_mutating(),
            "requires_confirmation": confirmation != Confirmation::None,
            "scopes_required": def.scopes(),
            "timeout": timeout,
            "args": call.args,
        }
    });
    if confirmation == Confirmation::Human {
        // Only then: the plan keeps the original's shape for every other tool.
        plan["plan"]["requires_human_approval"] = json!(true);
    }
    call.finish(ToolResult::success(plan), AuditOutcome::Planned)
}

pub(crate) fn describe(facts: &StageFacts<'_>) -> InvocationStep {
    if facts.ctx.is_plan_mode() {
        step(
            StepKind::PlanMode,
            StepRole::Branch,
            StepPresence::Active,
            true,
            false,
            "the context is in plan mode: the call returns the plan; the tool never runs",
        )
    } else {
        step(
            StepKind::PlanMode,
            StepRole::Branch,
            StepPresence::Dormant,
            false,
            false,
            "the context is in execute mode: the call goes on",
        )
    }
}
