//! Stage 4, `authorize`: the policy gate decides. A denial is `FORBIDDEN` with a message
//! that names the failing check; a denial for a missing scope also lists, in
//! `meta.required_scopes`, every scope the call needs (read back with
//! [`ToolResult::required_scopes`], e.g. for an OAuth `insufficient_scope` challenge).

use crate::audit::AuditOutcome;
use crate::confirm::{ConfirmationBinding, unix_millis};
use crate::inspect::StageFacts;
use crate::inspect::{InvocationStep, StepPresence, StepRole};
use crate::pipeline::{Call, Flow, JudgedReplay, TokenArg};
use crate::pipeline::{StepKind, step};
use std::sync::Arc;
use std::time::SystemTime;

use serde_json::Value;

use crate::policy::{
    Authorization, CallPolicy, Confirmation, PolicyDecision, PolicyInput, Subject,
};
use crate::result::ToolResult;

/// The stage when it awaits nothing (no rules, no call policy): `None` when it must await,
/// and then [`run`] decides.
///
/// The executor asks this first. Polled as a future on every call, the stage was its own
/// function of 73 instructions once the walk was unrolled, against 12 inline this way
/// (callgrind, `trivial_cli`); `run` starts with it, so the two cannot disagree.
#[inline(always)]
pub(crate) fn run_now(call: &mut Call<'_>) -> Option<Flow> {
    if call.wiring.gate.call_policy().is_some() {
        return None;
    }
    let policy = call.policy();
    let subject = Subject::tool(&call.tool().definition);
    let verdict = call
        .wiring
        .gate
        .authorize_without_rules(&policy, call.ctx, subject)?;
    Some(conclude(call, verdict))
}

pub(crate) async fn run(call: &mut Call<'_>) -> Flow {
    if let Some(flow) = run_now(call) {
        return flow;
    }
    let policy = call.policy();
    let tool = call.tool();
    let gate = &call.wiring.gate;
    let subject = Subject::tool(&tool.definition);
    let verdict = match gate.authorize_without_rules(&policy, call.ctx, subject) {
        Some(verdict) => verdict,
        None => gate.authorize_subject(&policy, call.ctx, subject).await,
    };
    log_verdict(call, &verdict);
    match verdict {
        Authorization::Allowed => match call.wiring.gate.call_policy() {
            None => Flow::Continue,
            // Boxed: a registry without a call policy keeps every call's future small.
            Some(policy) => Box::pin(judge(call, policy.clone())).await,
        },
        refused => refuse(call, refused),
    }
}

/// The gate's verdict, when no call policy follows it.
#[inline]
fn conclude(call: &mut Call<'_>, verdict: Authorization) -> Flow {
    log_verdict(call, &verdict);
    match verdict {
        Authorization::Allowed => Flow::Continue,
        refused => refuse(call, refused),
    }
}

#[inline]
fn log_verdict(call: &Call<'_>, verdict: &Authorization) {
    tracing::debug!(
        target: "milpa::pipeline",
        tool = call.name,
        principal = call.ctx.principal(),
        channel = call.ctx.channel(),
        ?verdict,
        "authorize"
    );
}

/// Ends the call with the gate's refusal.
#[cold]
fn refuse(call: &mut Call<'_>, verdict: Authorization) -> Flow {
    match verdict {
        Authorization::InsufficientScope { reason, needed } => call.finish(
            ToolResult::forbidden(reason).with_required_scopes(needed),
            AuditOutcome::Denied,
        ),
        Authorization::Denied(reason) => {
            call.finish(ToolResult::forbidden(reason), AuditOutcome::Denied)
        }
        // Not a refusal (the callers send none here): the call goes on.
        Authorization::Allowed => Flow::Continue,
    }
}

/// The call policy's turn, last: it sees the validated, clamped arguments and can only deny.
///
/// A confirmation replay (or an approval replay) sends only its token; what runs are the
/// arguments parked on the first call. So those are what the policy judges: they are read
/// here without spending the token (a denied replay leaves it as it was), and `confirm`
/// later redeems the token and runs the parked arguments only if they are the judged ones.
async fn judge(call: &mut Call<'_>, policy: Arc<dyn CallPolicy>) -> Flow {
    let parked = match replay_args(call).await {
        Ok(Replay::NotOne) => None,
        Ok(Replay::Parked(args)) => Some(args),
        // Nothing can run: `confirm` refuses the token (and would refuse it even if it
        // redeemed now, since the policy judged nothing), so the caller hears the
        // invalid-token refusal rather than a policy's verdict on arguments that never run.
        Ok(Replay::Unredeemable) => return Flow::Continue,
        Err(flow) => return flow,
    };
    let args = parked.as_ref().unwrap_or(&call.args);
    let input = PolicyInput::new(call.ctx, &call.tool().definition, args);
    match policy.evaluate(input).await {
        PolicyDecision::Continue => {
            if let Some(args) = parked
                && let TokenArg::Given(token) =
                    std::mem::replace(&mut call.confirm_token, TokenArg::Absent)
            {
                call.confirm_token = TokenArg::Judged(Box::new(JudgedReplay { token, args }));
            }
            Flow::Continue
        }
        PolicyDecision::Deny(reason) => {
            call.finish(ToolResult::forbidden(reason), AuditOutcome::Denied)
        }
    }
}

/// What a call's token says about the arguments that will run.
enum Replay {
    /// No token, or a tool that confirms nothing: the sent arguments run.
    NotOne,
    /// A replay of a confirmed or approved call: these parked arguments run.
    Parked(Value),
    /// A replay whose token names nothing this caller may redeem: nothing runs.
    Unredeemable,
}

/// The parked arguments a replay will run, read without spending its token. A store that
/// cannot be read refuses the call (fail closed).
async fn replay_args(call: &mut Call<'_>) -> Result<Replay, Flow> {
    if call.confirm_token.token().is_none() {
        return Ok(Replay::NotOne);
    }
    let confirmation = call.confirmation();
    let wiring = call.wiring;
    let Some(token) = call.confirm_token.token() else {
        return Ok(Replay::NotOne);
    };
    let binding = ConfirmationBinding::for_call(call.name, call.ctx);
    let read = match confirmation {
        Confirmation::Caller => {
            let now = unix_millis(SystemTime::now());
            wiring
                .confirmations
                .peek(token, &binding, now)
                .await
                .map(|found| found.map(|pending| pending.args))
                .map_err(|error| ToolResult::unavailable("confirmation store", &error))
        }
        Confirmation::Human => wiring
            .approvals
            .parked_args(token, &binding)
            .await
            .map_err(|error| ToolResult::unavailable("approval queue", &error)),
        // No confirmation: the token is not a replay, the sent arguments run.
        _ => return Ok(Replay::NotOne),
    };
    match read {
        Ok(Some(args)) => Ok(Replay::Parked(args)),
        Ok(None) => Ok(Replay::Unredeemable),
        Err(refused) => Err(call.finish(refused, AuditOutcome::Unavailable)),
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
            "call policy (checked last, sees the arguments, can only deny): {}; a confirmation or approval replay is judged on the parked arguments it will run",
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
