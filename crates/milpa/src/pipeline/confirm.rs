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

use crate::audit::{AuditOutcome, REDACTED_IN_TEXT, Redactor};
use crate::confirm::{
    ConfirmationBinding, INVALID_TOKEN_MESSAGE, PendingConfirmation, random_hex_128, unix_millis,
};
use crate::inspect::StageFacts;
use crate::inspect::{InvocationStep, StepPresence, StepRole};
use crate::outcome::{ConfirmationTicket, Ticket};
use crate::pipeline::{Call, Flow, JudgedReplay, TokenArg, approval_gate};
use crate::pipeline::{StepKind, step, unreachable_in_plan_mode};
use crate::policy::Confirmation;
use crate::result::ToolResult;
use crate::store_error::StoreError;

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

/// Goes on with the parked arguments (the contract: they run). Other arguments sent with
/// the token are ignored, and the result says so. Shared with the human gate.
///
/// Under a call policy, the parked arguments run only if they are the ones `authorize`
/// judged (`judged`); anything else (a token that could not be read there but redeems
/// here) is refused, so no argument runs that the policy did not see.
pub(crate) fn run_parked(
    call: &mut Call<'_>,
    parked: serde_json::Value,
    judged: Option<Value>,
) -> Flow {
    if call.wiring.gate.call_policy().is_some() && judged.as_ref() != Some(&parked) {
        return refuse(call);
    }
    let sent_others = call.args.as_object().is_some_and(|a| !a.is_empty());
    call.confirm_token = TokenArg::Redeemed {
        other_args_ignored: sent_others && call.args != parked,
    };
    call.args = parked;
    Flow::Continue
}

/// The invalid-token refusal, for caller tokens and approval ids alike.
pub(crate) fn refuse(call: &mut Call<'_>) -> Flow {
    call.finish(
        ToolResult::validation_error(INVALID_TOKEN_MESSAGE),
        AuditOutcome::InvalidConfirmation,
    )
}

fn store_failure(call: &mut Call<'_>, error: &StoreError) -> Flow {
    // Fail closed: without the store nothing can be confirmed.
    call.finish(
        ToolResult::unavailable("confirmation store", error),
        AuditOutcome::Unavailable,
    )
}

/// Added to the message of a replay whose other arguments were ignored.
pub(crate) const REPLAY_ARGS_IGNORED: &str =
    "Ran the confirmed arguments; the arguments sent with the token were ignored.";

/// `tool(key=value, …)` with the first three scalar arguments. The summary is shown to
/// people (the result's message, the MCP elicitation) and stored with the token, so a
/// secret argument reads `key=[REDACTED]` and any secret quoted elsewhere is scrubbed.
pub(crate) fn action_summary(name: &str, args: &Value, redactor: &Redactor) -> String {
    let parts: Vec<String> = args
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| {
            let text = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                _ => return None,
            };
            if redactor.is_sensitive(k) {
                Some(format!("{k}={REDACTED_IN_TEXT}"))
            } else {
                // Each value on its own: a `key=value` pattern must not run into the
                // summary's own punctuation.
                Some(format!("{k}={}", redactor.scrub(&text, args)))
            }
        })
        .take(3)
        .collect();
    format!("{name}({})", parts.join(", "))
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn summary_takes_three_scalars() {
        let args = json!({"a": 1, "list": [1], "b": "x", "n": null, "c": true, "d": 4});
        assert_eq!(
            action_summary("t", &args, &Redactor::default()),
            "t(a=1, b=x, c=true)"
        );
    }

    #[test]
    fn summary_hides_secrets() {
        let args = json!({
            "password": "hunter22",
            "note": "hunter22 again",
            "url": "https://u:pw12@h",
        });
        let last = json!({"user": "ann", "new_password": "hunter22"});
        assert_eq!(
            action_summary("rotate", &last, &Redactor::default()),
            "rotate(user=ann, new_password=[REDACTED])"
        );
        let summary = action_summary("login", &args, &Redactor::default());
        assert_eq!(
            summary,
            "login(password=[REDACTED], note=[REDACTED] again, url=https://u:[REDACTED]@h)"
        );
    }
}
