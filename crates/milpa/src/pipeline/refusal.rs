//! Calls that end outside the stage table but are still terminal paths of the core: a
//! confirmation the person declined (or cancelled), and a request refused at the protocol
//! level before a tool could be resolved. Both end in the one `audit` stage, like every
//! pipeline call, so there is one audit path.
//!
//! Neither emits `tool.failed`: a person saying no, or a malformed request, is not a failure
//! of the tool (`audit` emits `tool.failed` only for failed, timed-out and cancelled runs).

use std::time::SystemTime;

use serde_json::Value;

use crate::audit::AuditOutcome;
use crate::confirm::{ConfirmationBinding, unix_millis};
use crate::context::ToolContext;
use crate::pipeline::{Call, audit};
use crate::result::{ErrorCode, ToolResult};
use crate::wiring::Wiring;

/// Why a person did not confirm a parked call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConfirmationRefusal {
    /// The person answered no.
    Declined,
    /// The person dismissed the question without answering.
    Cancelled,
}

impl ConfirmationRefusal {
    /// The wire name, `"declined"` or `"cancelled"` (the result's `meta.confirmation`).
    pub fn as_str(self) -> &'static str {
        match self {
            ConfirmationRefusal::Declined => "declined",
            ConfirmationRefusal::Cancelled => "cancelled",
        }
    }
}

/// Revokes `token` (only if it was issued to this tool, principal and channel), audits the
/// refusal and returns the `CONFIRMATION_DECLINED` result.
pub(crate) async fn decline_confirmation(
    wiring: &Wiring,
    tool: &str,
    token: &str,
    refusal: ConfirmationRefusal,
    ctx: &ToolContext,
) -> ToolResult {
    let mut call = Call::new(wiring, tool, Value::Null, ctx);
    let binding = ConfirmationBinding::for_call(tool, ctx);
    let now = unix_millis(SystemTime::now());
    let pending = match wiring.confirmations.consume(token, &binding, now).await {
        Ok(pending) => pending,
        Err(error) => {
            // The refusal stands either way (nothing runs); an unrevoked token still
            // expires, and a replay of it is a new decision of its owner.
            tracing::warn!(target: "milpa::pipeline", tool, %error, "could not revoke a declined confirmation token");
            None
        }
    };
    let summary = match pending {
        Some(pending) => {
            // The record shows what was declined (redacted like any arguments).
            call.args = pending.args;
            pending.action_summary
        }
        None => tool.to_owned(),
    };
    let message = format!(
        "Not done: confirmation of {summary} was {}.",
        refusal.as_str()
    );
    let result = ToolResult::error_with_code(ErrorCode::ConfirmationDeclined, message)
        .with_meta("confirmation", Value::String(refusal.as_str().into()));
    call.finish(result, AuditOutcome::ConfirmationDeclined);
    finish(call)
}

/// Audits a `tools/call` refused before it reached the pipeline (`VALIDATION_ERROR`).
pub(crate) fn refused_request(
    wiring: &Wiring,
    name: Option<&str>,
    reason: &str,
    ctx: &ToolContext,
) {
    let mut call = Call::new(wiring, name.unwrap_or(""), Value::Null, ctx);
    call.finish(
        ToolResult::validation_error(reason),
        AuditOutcome::InvalidRequest,
    );
    finish(call);
}

/// Runs the one `audit` stage and hands back the result.
fn finish(mut call: Call<'_>) -> ToolResult {
    audit::run(&mut call);
    match call.terminal {
        Some(terminal) => terminal.result,
        None => unreachable!("audit always leaves a terminal"),
    }
}
