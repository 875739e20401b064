//! Stage 4, `authorize`: the policy gate decides. A denial is `FORBIDDEN` with a message
//! that names the failing check.

use crate::audit::AuditOutcome;
use crate::inspect::StageFacts;
use crate::inspect::{InvocationStep, StepPresence, StepRole};
use crate::pipeline::{Call, Flow};
use crate::pipeline::{StepKind, step};
use crate::policy::Authorization;
use crate::result::ToolResult;

pub(crate) async fn run(call: &mut Call<'_>) -> Flow {
    let policy = call.policy();
    let tool = call.tool();
    let verdict = call
        .wiring
        .gate
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

pub(crate) fn describe(facts: &StageFacts<'_>) -> InvocationStep {
    let p = facts.policy;
    let mut parts = vec![format!(
        "channel '{}'{}: require_auth={}, allow_all={}, block_mutating={}",
        facts.ctx.channel(),
        if facts.channel_registered {
            ""
        } else {
            " (no policy of its own: fail-closed)"
        },
        p.require_auth,
        p.allow_all,
        p.block_mutating
    )];
    if p.allow_all {
        parts.push("allow_all only lets mutating tools past block_mutating".to_owned());
    }
    let scopes = facts.tool.scopes();
    parts.push(if scopes.is_empty() {
        "the tool declares no scopes".to_owned()
    } else {
        format!("the tool requires one of: {}", scopes.join(", "))
    });
    parts.push(if facts.rule_provider {
        "rules: provider wired (checked after scopes; an allow skips block_mutating)".to_owned()
    } else {
        "rules: no provider".to_owned()
    });
    step(
        StepKind::Authorize,
        StepRole::Guard,
        StepPresence::Active,
        true,
        false,
        parts.join("; "),
    )
}
