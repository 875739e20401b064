//! Stage 4, `authorize`: the policy gate decides. A denial is `FORBIDDEN` with a message
//! that names the failing check.

use crate::audit::AuditOutcome;
use crate::pipeline::{Call, Flow};
use crate::policy::Authorization;
use crate::result::ToolResult;

pub(crate) async fn run(call: &mut Call<'_>) -> Flow {
    let policy = call.policy();
    let tool = call.tool();
    let verdict = call
        .registry
        .policy_gate()
        .authorize_under(&policy, call.ctx, &tool.definition)
        .await;
    tracing::debug!(
        target: "milpa::pipeline",
        tool = call.name,
        principal = call.ctx.principal(),
        channel = call.ctx.channel(),
        ?verdict,
        "authorize"
    );
    match verdict {
        Authorization::Allowed => Flow::Continue,
        Authorization::Denied(reason) => {
            call.finish(ToolResult::forbidden(reason), AuditOutcome::Denied)
        }
    }
}
