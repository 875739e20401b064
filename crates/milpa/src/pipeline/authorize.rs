//! Stage 4, `authorize`: the policy gate decides. A denial is `FORBIDDEN` with a message
//! that names the failing check; a denial for a missing scope also lists, in
//! `meta.required_scopes`, every scope the call needs (read back with
//! [`ToolResult::required_scopes`], e.g. for an OAuth `insufficient_scope` challenge).

use crate::audit::AuditOutcome;
use crate::inspect::StageFacts;
use crate::inspect::{InvocationStep, StepPresence, StepRole};
use crate::pipeline::{Call, Flow};
use crate::pipeline::{StepKind, step};
use std::sync::Arc;

use crate::policy::{Authorization, CallPolicy, PolicyDecision, PolicyInput};
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
        Authorization::Allowed => match call.wiring.gate.call_policy() {
            None => Flow::Continue,
            // Boxed: a registry without a call policy keeps every call's future small.
            Some(policy) => Box::pin(judge(call, policy.clone())).await,
        },
        Authorization::InsufficientScope { reason, needed } => call.finish(
            ToolResult::forbidden(reason).with_required_scopes(needed),
            AuditOutcome::Denied,
        ),
        // `Denied`, and any verdict this stage does not know: fail closed.
        Authorization::Denied(reason) => {
            call.finish(ToolResult::forbidden(reason), AuditOutcome::Denied)
        }
    }
}

/// The call policy's turn, last: it sees the validated, clamped arguments and can only deny.
async fn judge(call: &mut Call<'_>, policy: Arc<dyn CallPolicy>) -> Flow {
    let input = PolicyInput::new(call.ctx, &call.tool().definition, &call.args);
    match policy.evaluate(input).await {
        PolicyDecision::Continue => Flow::Continue,
        PolicyDecision::Deny(reason) => {
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
    parts.push(match facts.call_policy {
        Some(policy) => format!(
            "call policy (checked last, sees the arguments, can only deny): {}",
            policy.describe(facts.tool)
        ),
        None => "call policy: none".to_owned(),
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
