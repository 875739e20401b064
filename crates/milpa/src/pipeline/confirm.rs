//! Stage 7, `confirm`: a tool that needs confirmation gets a one-time token on its first
//! call (a [`ConfirmationTicket`], the call's outcome); the replay of that token (which the
//! edge split off the arguments, or [`ToolRegistry::redeem`](crate::ToolRegistry::redeem)
//! was given) runs the first call's arguments.
//!
//! Beyond the original, a token is bound to the tool, the principal and the channel that
//! asked for it, so nobody else can redeem it; any refused token (unknown, expired, reused,
//! foreign, not a string) gets the same `VALIDATION_ERROR`.
//!
//! A tool (or channel) that asks for a *person's* approval goes through the human gate
//! instead (`approval_gate`): the same stage, the same token argument, but the call waits in
//! the approval queue until someone other than the caller decides.

use std::time::SystemTime;

use serde_json::Value;

use crate::audit::AuditOutcome;
use crate::confirm::{ConfirmationBinding, PendingConfirmation, random_hex_128, unix_millis};
use crate::inspect::StageFacts;
use crate::inspect::{InvocationStep, StepPresence, StepRole};
use crate::outcome::{ConfirmationTicket, Ticket};
use crate::pipeline::redemption::{action_summary, refuse, run_parked};
use crate::pipeline::{Call, Flow, JudgedReplay, TokenArg, approval_gate};
use crate::pipeline::{StepKind, step, unreachable_in_plan_mode};
use crate::policy::Confirmation;
use crate::result::ToolResult;
use crate::store_error::StoreError;

/// The stage for a call nobody must confirm, which awaits nothing: `None` for one somebody
/// must, and then [`run`] decides (whose first arm is this same answer).
///
/// The executor asks this first: polled as a future on every call, the stage was its own
/// function of 49 instructions once the walk was unrolled (callgrind, `trivial_cli`).
#[inline(always)]
pub(crate) fn run_now(call: &mut Call<'_>) -> Option<Flow> {
    match call.confirmation() {
        Confirmation::None => Some(Flow::Continue),
        _ => None,
    }
}

pub(crate) async fn run(call: &mut Call<'_>) -> Flow {
    match call.confirmation() {
        Confirmation::None => Flow::Continue,
        // Boxed: only confirmed tools pay for this state in the call's future.
        Confirmation::Caller => Box::pin(confirm(call)).await,
        Confirmation::Human => Box::pin(approval_gate::run(call)).await,
    }
}

async fn confirm(call: &mut Call<'_>) -> Flow {
    let binding = ConfirmationBinding::for_call(call.name, call.ctx);
    match std::mem::replace(&mut call.confirm_token, TokenArg::Absent) {
        TokenArg::Absent => issue(call, binding).await,
        TokenArg::Given(token) => redeem(call, &token, &binding, None).await,
        TokenArg::Judged(judged) => {
            let JudgedReplay { token, args } = *judged;
            redeem(call, &token, &binding, Some(args)).await
        }
        TokenArg::Malformed | TokenArg::Redeemed { .. } => refuse(call),
    }
}

async fn issue(call: &mut Call<'_>, binding: ConfirmationBinding) -> Flow {
    let summary = action_summary(call.name, &call.args, &call.wiring.redactor);
    let now = SystemTime::now();
    let expires = now + call.wiring.confirmation_ttl;
    let pending = PendingConfirmation {
        binding,
        args: call.args.clone(),
        action_summary: summary.clone(),
        expires_at_ms: unix_millis(expires),
    };
    let token = random_hex_128();
    if let Err(error) = call
        .wiring
        .confirmations
        .insert(token.clone(), pending)
        .await
    {
        return store_failure(call, &error);
    }
    let tool = call.tool().definition.name_arc().clone();
    let ticket = ConfirmationTicket::new(token, tool, summary, expires);
    call.finish_with_ticket(
        Ticket::Confirmation(ticket),
        AuditOutcome::ConfirmationRequested,
    )
}

async fn redeem(
    call: &mut Call<'_>,
    token: &str,
    binding: &ConfirmationBinding,
    judged: Option<Value>,
) -> Flow {
    let now = unix_millis(SystemTime::now());
    match call.wiring.confirmations.consume(token, binding, now).await {
        Ok(Some(pending)) => run_parked(call, pending.args, judged),
        Ok(None) => refuse(call),
        Err(error) => store_failure(call, &error),
    }
}

fn store_failure(call: &mut Call<'_>, error: &StoreError) -> Flow {
    // Fail closed: without the store nothing can be confirmed.
    call.finish(
        ToolResult::unavailable("confirmation store", error),
        AuditOutcome::Unavailable,
    )
}

pub(crate) fn describe(facts: &StageFacts<'_>) -> InvocationStep {
    if let Some(step) = unreachable_in_plan_mode(facts, StepKind::Confirm, StepRole::Branch) {
        return step;
    }
    if let Some(step) = approval_gate::describe(facts) {
        return step;
    }
    let channel = facts.ctx.channel();
    let dance = format!(
        "the first call returns a one-time token (bound to tool, principal and channel; expires after {}s); the replay with confirm_token runs the first call's arguments",
        facts.confirmation_ttl.as_secs()
    );
    let (presence, blocking, source) = if facts.tool.requires_confirmation() {
        (
            StepPresence::Conditional,
            true,
            format!("the tool requires confirmation: {dance}"),
        )
    } else if facts.policy.require_confirmation_for_mutating && facts.tool.is_mutating() {
        (
            StepPresence::Conditional,
            true,
            format!(
                "channel '{channel}' confirms mutating tools (require_confirmation_for_mutating): {dance}"
            ),
        )
    } else if facts.policy.require_confirmation_for_mutating {
        (
            StepPresence::Dormant,
            false,
            format!("channel '{channel}' confirms mutating tools, but this tool is not mutating"),
        )
    } else {
        (
            StepPresence::Dormant,
            false,
            format!("neither the tool nor channel '{channel}' asks for confirmation"),
        )
    };
    step(
        StepKind::Confirm,
        StepRole::Branch,
        presence,
        blocking,
        false,
        source,
    )
}
