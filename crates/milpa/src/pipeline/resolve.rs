//! Stage 1, `resolve`: find the tool by name. An unknown name is `TOOL_NOT_FOUND`.

use crate::audit::{AuditOutcome, MAX_TOOL_NAME_BYTES, clip};
use crate::inspect::StageFacts;
use crate::inspect::{InvocationStep, StepPresence, StepRole};
use crate::pipeline::{Call, Flow};
use crate::pipeline::{StepKind, step};
use std::sync::{Arc, OnceLock};

use crate::registry::{RegisteredTool, ToolRegistry};
use crate::result::ToolResult;

/// Finds the tool: in the registered tools first (borrowed, the hot path), else among the
/// replaceable groups, whose tool the call then holds in `held` for as long as it runs (its
/// group may be replaced meanwhile).
#[inline]
pub(crate) fn run<'r>(
    call: &mut Call<'r>,
    registry: &'r ToolRegistry,
    held: &'r OnceLock<Arc<RegisteredTool>>,
) -> Flow {
    if call.name.len() > MAX_TOOL_NAME_BYTES {
        // No tool has such a name; the caller's text is quoted cut, never whole.
        return call.finish(
            ToolResult::tool_not_found(&clip(call.name, MAX_TOOL_NAME_BYTES)),
            AuditOutcome::NotFound,
        );
    }
    if let Some(tool) = registry.tool_table().lookup(call.name) {
        call.tool = Some(tool);
        return Flow::Continue;
    }
    match registry.lookup_swappable(call.name) {
        Some(tool) => {
            call.tool = Some(held.get_or_init(|| tool));
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
        "registry lookup by name; an unknown name (or one over 128 bytes, quoted cut) ends the call with TOOL_NOT_FOUND",
    )
}
