//! The human gate of stage 7, `confirm`: a call of a `confirm = "human"` tool (or of a
//! mutating tool on a channel with `require_human_approval_for_mutating`) is parked in the
//! approval queue until a person other than the caller decides; the caller's replay with
//! `confirm_token = <approval_id>` then runs the parked arguments once.
//!
//! Replays answer as DESIGN §5 says: `APPROVAL_PENDING` while nobody decided, the parked
//! call after a grant, `FORBIDDEN` naming who rejected and why, and the invalid-token
//! `VALIDATION_ERROR` for an unknown, foreign, expired or spent id.

use std::time::{Duration, UNIX_EPOCH};

use serde_json::Value;

use crate::approval::{APPROVE_SCOPE, Approval, ApprovalError, Claim, ParkedAbout};
use crate::audit::AuditOutcome;
use crate::confirm::ConfirmationBinding;
use crate::inspect::{InvocationStep, StageFacts, StepPresence, StepRole};
use crate::outcome::{ApprovalTicket, Ticket};
use crate::pipeline::redemption::{action_summary, refuse, run_parked};
use crate::pipeline::{Call, Flow, JudgedReplay, StepKind, TokenArg, step};
use crate::result::ToolResult;

pub(crate) async fn run(call: &mut Call<'_>) -> Flow {
    let binding = ConfirmationBinding::for_call(call.name, call.ctx);
    match std::mem::replace(&mut call.confirm_token, TokenArg::Absent) {
        TokenArg::Absent => park(call, binding).await,
        TokenArg::Given(id) => replay(call, &id, &binding, None).await,
        TokenArg::Judged(judged) => {
            let JudgedReplay { token, args } = *judged;
            replay(call, &token, &binding, Some(args)).await
        }
        TokenArg::Malformed | TokenArg::Redeemed { .. } => refuse(call),
    }
}

async fn park(call: &mut Call<'_>, binding: ConfirmationBinding) -> Flow {
    let summary = action_summary(call.name, &call.args, &call.wiring.redactor);
    let about = ParkedAbout::of(&call.tool().definition, call.ctx);
    let parked = call
        .wiring
        .approvals
        .park(summary, binding, call.args.clone(), about)
        .await;
    match parked {
        Ok(approval) => pending(call, &approval),
        Err(error) => store_failure(call, &error),
    }
}

async fn replay(
    call: &mut Call<'_>,
    id: &str,
    binding: &ConfirmationBinding,
    judged: Option<Value>,
) -> Flow {
    match call.wiring.approvals.claim(id, binding).await {
        Ok(Claim::Run(args)) => run_parked(call, args, judged),
        Ok(Claim::Pending(approval)) => pending(call, &approval),
        Ok(Claim::Rejected(approval)) => rejected(call, &approval),
        Ok(Claim::Invalid) => refuse(call),
        Err(error) => store_failure(call, &error),
    }
}

/// `APPROVAL_PENDING` (an [`ApprovalTicket`], rendered as `success: false`, `data
/// {approval_id, action_summary, expires_at}`).
fn pending(call: &mut Call<'_>, approval: &Approval) -> Flow {
    let expires_at = approval
        .expires_at_ms()
        .map(|ms| UNIX_EPOCH + Duration::from_millis(ms));
    let tool = call.tool().definition.name_arc().clone();
    let ticket = ApprovalTicket::new(
        approval.id().to_owned(),
        tool,
        approval.summary().to_owned(),
        expires_at,
    );
    call.finish_with_ticket(Ticket::Approval(ticket), AuditOutcome::ApprovalPending)
}

/// `FORBIDDEN`, naming who rejected and why.
fn rejected(call: &mut Call<'_>, approval: &Approval) -> Flow {
    let (who, reason) = approval.decided_by().unwrap_or(("someone", None));
    let message = format!(
        "Rejected by {who}: {reason} (approval {id}); nothing ran.",
        reason = reason.unwrap_or("no reason given"),
        id = approval.id(),
    );
    call.finish(ToolResult::forbidden(message), AuditOutcome::Denied)
}

fn store_failure(call: &mut Call<'_>, error: &ApprovalError) -> Flow {
    // Fail closed: without the queue nothing can be approved.
    call.finish(
        ToolResult::unavailable("approval queue", error),
        AuditOutcome::Unavailable,
    )
}

/// The confirm stage as inspection describes a human gate, or `None` when the call is not
/// gated by a person.
pub(crate) fn describe(facts: &StageFacts<'_>) -> Option<InvocationStep> {
    let policy = &facts.policy;
    let tool = facts.tool;
    let channel = facts.ctx.channel();
    let why = if tool.requires_human_approval() {
        "the tool requires a person's approval (confirm = \"human\")".to_owned()
    } else if policy.require_human_approval_for_mutating && tool.is_mutating() {
        format!(
            "channel '{channel}' parks mutating tools for a person's approval (require_human_approval_for_mutating)"
        )
    } else {
        return None;
    };
    let caller = facts.ctx.principal().unwrap_or("anonymous");
    let source = format!(
        "{why}: the first call is parked in the approval queue (expires after {ttl}s) and answers APPROVAL_PENDING; a principal other than the caller ('{caller}') decides it with `milpa approvals` (cli channel) or on the /approvals page (holding '{APPROVE_SCOPE}'); the caller's replay with confirm_token=<approval_id> runs the parked arguments once after a grant, is FORBIDDEN after a reject",
        ttl = facts.approval_ttl.as_secs(),
    );
    Some(step(
        StepKind::Confirm,
        StepRole::Branch,
        StepPresence::Conditional,
        true,
        false,
        source,
    ))
}
