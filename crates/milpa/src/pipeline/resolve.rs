//! Stage 1, `resolve`: find the tool by name. An unknown name is `TOOL_NOT_FOUND`.

use crate::audit::AuditOutcome;
use crate::inspect::StageFacts;
use crate::inspect::{InvocationStep, StepPresence, StepRole};
use crate::pipeline::{Call, Flow};
use crate::pipeline::{StepKind, step};
use crate::result::ToolResult;

#[inline]
pub(crate) fn run(call: &mut Call<'_>) -> Flow {
    match call.registry.lookup(call.name) {
        Some(tool) => {
            call.tool = Some(tool);
            Flow::Continue
        }
        None => call.finish(
            ToolResult::tool_not_found(call.name),
            AuditOutcome::NotFound,
        ),
    }
}

pub(crate) fn describe(_facts: &StageFacts<'_>) -> InvocationStep {
    step(
        StepKind::Resolve,
        StepRole::Guard,
        StepPresence::Active,
        true,
        false,
        "registry lookup by name; an unknown name ends the call with TOOL_NOT_FOUND",
    )
}
