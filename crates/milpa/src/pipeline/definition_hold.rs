//! An upstream definition that changed since it was pinned, held for a person and audited
//! through the one `audit` stage: the record names the tool (or prompt) as clients know it,
//! its arguments say which upstream, which approval and which two digests, and its outcome
//! is `definition_held`. Only the opening of the approval is recorded (seeing the same
//! change again after a restart adds nothing); the decision is recorded by
//! [`approval_decision`](super::approval_decision) like any other.

use serde_json::json;

use crate::approval::{Approval, ApprovalError, DefinitionChange};
use crate::audit::AuditOutcome;
use crate::context::ToolContext;
use crate::pipeline::{Call, audit};
use crate::result::{ErrorCode, ToolResult};
use crate::wiring::Wiring;

/// The channel a held change is recorded on: no caller made it, the upstream did.
const UPSTREAM_CHANNEL: &str = "upstream";

pub(crate) async fn hold(
    wiring: &Wiring,
    change: DefinitionChange,
) -> Result<(Approval, bool), ApprovalError> {
    let served_as = change.served_as.clone();
    let args = json!({
        "upstream": change.upstream,
        "kind": change.kind.as_str(),
        "name": change.name,
        "previous_digest": change.previous_digest,
        "current_digest": change.current_digest,
    });
    let (approval, opened) = wiring.approvals.hold_change(change).await?;
    if opened {
        let mut args = args;
        args["approval_id"] = json!(approval.id());
        let message = format!(
            "{}: held until a person approves it ({})",
            approval.summary(),
            approval.id()
        );
        let ctx = ToolContext::builder(UPSTREAM_CHANNEL).build();
        let mut call = Call::new(wiring, &served_as, args, &ctx);
        call.finish(
            ToolResult::error_with_code(ErrorCode::ApprovalPending, message),
            AuditOutcome::DefinitionHeld,
        );
        audit::run(&mut call);
    }
    Ok((approval, opened))
}
