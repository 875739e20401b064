//! Stage 1, `resolve`: find the tool by name. An unknown name is `TOOL_NOT_FOUND`.

use crate::audit::AuditOutcome;
use crate::pipeline::{Call, Flow};
use crate::result::ToolResult;

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
