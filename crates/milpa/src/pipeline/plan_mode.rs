//! Stage 6, `plan_mode`: in plan mode, return what would run instead of running it.

use serde_json::json;

use crate::audit::AuditOutcome;
use crate::pipeline::{Call, Flow};
use crate::result::ToolResult;

pub(crate) fn run(call: &mut Call<'_>) -> Flow {
    if !call.ctx.is_plan_mode() {
        return Flow::Continue;
    }
    let requires_confirmation = call.requires_confirmation();
    let def = &call.tool().definition;
    let timeout = def.options().timeout;
    let timeout = if timeout.subsec_nanos() == 0 {
        json!(timeout.as_secs())
    } else {
        json!(timeout.as_secs_f64())
    };
    let plan = json!({
        "plan": {
            "tool": def.name(),
            "mutating": def.is_mutating(),
            "requires_confirmation": requires_confirmation,
            "scopes_required": def.scopes(),
            "timeout": timeout,
            "args": call.args,
        }
    });
    call.finish(ToolResult::success(plan), AuditOutcome::Planned)
}
