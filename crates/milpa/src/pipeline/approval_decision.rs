//! A person's decision on an approval, audited through the one `audit` stage like every
//! call: who decided (the record's principal and channel), which approval (its arguments),
//! and how it went (`approval_granted`, `approval_rejected`, or `approval_refused` with the
//! reason). No `tool.*` event: a decision is not a run of the tool.

use serde_json::{Value, json};

use crate::approval::{Approval, ApprovalError, Verdict};
use crate::audit::AuditOutcome;
use crate::context::ToolContext;
use crate::pipeline::{Call, audit};
use crate::result::ToolResult;
use crate::verification::RESOLVE_NAME;
use crate::wiring::Wiring;

pub(crate) async fn decide(
    wiring: &Wiring,
    id: &str,
    verdict: Verdict,
    reason: Option<&str>,
    approver: &ToolContext,
) -> Result<Approval, ApprovalError> {
    let queue = &wiring.approvals;
    let outcome = queue.decide(id, verdict, reason, approver).await;
    // The record names the parked call's tool when there is one to name.
    let tool = match &outcome {
        Ok(approval) => approval.tool().map(str::to_owned),
        Err(_) => match queue.get(id).await {
            Ok(Some(approval)) => approval.tool().map(str::to_owned),
            _ => None,
        },
    };
    let tool = tool.as_deref().unwrap_or(RESOLVE_NAME);
    let args = json!({
        "approval_id": id,
        "decision": verdict.as_str(),
        "reason": reason,
    });
    let (result, audited) = match &outcome {
        Ok(approval) => {
            let decided = match verdict {
                Verdict::Grant => AuditOutcome::ApprovalGranted,
                Verdict::Reject => AuditOutcome::ApprovalRejected,
            };
            let message = format!("{} {}", verdict.as_str(), approval.id());
            (
                ToolResult::success(Value::Null).with_message(message),
                decided,
            )
        }
        Err(error) => (
            ToolResult::error_with_code(error.code(), error.to_string()),
            AuditOutcome::ApprovalRefused,
        ),
    };
    let mut call = Call::new(wiring, tool, args, approver);
    call.finish(result, audited);
    audit::run(&mut call);
    outcome
}
