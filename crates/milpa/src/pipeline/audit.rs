//! Stage 11, `audit`: every terminal path ends here. It stamps the runtime meta on the
//! result, scrubs the call's secret argument values from the result's texts (what the
//! caller gets back, over any transport: see [`outgoing`](crate::audit::outgoing)), records
//! an [`AuditRecord`], then emits `tool.executed` or `tool.failed`.

use std::sync::Arc;

use serde_json::Value;

use crate::audit::{AuditOutcome, AuditRecord, MAX_TOOL_NAME_BYTES, clip, outgoing};
use crate::context::ToolContext;
use crate::events::{Event, ToolExecuted, ToolFailed};
use crate::inspect::StageFacts;
use crate::inspect::{InvocationStep, StepPresence, StepRole};
use crate::pipeline::{Call, Terminal};
use crate::pipeline::{StepKind, step};
use crate::result::{ErrorCode, RuntimeMeta, ToolResult};
use crate::tool_table::RegisteredTool;
use crate::wiring::Wiring;

/// What `audit` reads of a call besides its terminal.
#[derive(Clone, Copy)]
pub(crate) struct Audited<'a> {
    pub wiring: &'a Wiring,
    pub ctx: &'a ToolContext,
    pub name: &'a str,
    pub tool: Option<&'a RegisteredTool>,
    pub args: &'a Value,
    pub took_ms: u64,
}

impl<'a> Audited<'a> {
    /// The audited facts of `call` as it stands.
    pub fn of(call: &'a Call<'_>) -> Self {
        Audited {
            wiring: call.wiring,
            ctx: call.ctx,
            name: call.name,
            tool: call.tool,
            args: &call.args,
            took_ms: call.elapsed_ms(),
        }
    }
}

/// The stage as the executor runs it: on the call's terminal, where it lies.
pub(crate) fn run(call: &mut Call<'_>) {
    let audited = Audited {
        wiring: call.wiring,
        ctx: call.ctx,
        name: call.name,
        tool: call.tool,
        args: &call.args,
        took_ms: call.elapsed_ms(),
    };
    conclude(audited, finished(&mut call.terminal));
}

/// The one audit path: stamps the runtime meta on the result, records it, then emits
/// `tool.executed` or `tool.failed`. Every way a call can end comes here, including a call
/// dropped while its tool ran (`execute`'s guard) and the refusals outside the stage table.
// Always inlined into `run` (the guard's cold path gets its own copy): out of line, the
// call's facts were spilled and reloaded, a measurable share of a trivial call.
#[inline(always)]
pub(crate) fn conclude(call: Audited<'_>, terminal: &mut Terminal) {
    let Terminal { result, outcome } = terminal;
    let outcome = *outcome;
    let wiring = call.wiring;
    // A name longer than any tool's is the caller's text, not a tool: it is quoted cut.
    let name = clip(call.name, MAX_TOOL_NAME_BYTES);
    let tool_name = match call.tool {
        Some(tool) => tool.definition.name_arc().clone(),
        None => Arc::from(name.as_ref()),
    };
    result
        .meta
        .set_runtime(RuntimeMeta::new(tool_name, call.took_ms, call.ctx));
    // What goes back to the caller quotes no secret argument: scrubbed here, once, for every
    // transport. A call without secret-keyed arguments finds none and allocates nothing; a
    // result without texts (or a call without keyed arguments) is not even looked at.
    if outgoing::may_quote_secrets(call.args, result) {
        let secrets = wiring.redactor.argument_secrets(call.args);
        outgoing::scrub_result(result, &secrets);
    }
    let result = &*result;
    let limits = &wiring.audit_limits;
    // A tool's error may quote its arguments (a command's stderr echoing a password): the
    // record gets the text with every secret of the call scrubbed, then cut to its cap.
    let error = result.error.as_deref().map(|error| {
        let scrubbed = wiring.redactor.scrub(error, call.args);
        clip(&scrubbed, limits.max_error_bytes).into_owned()
    });
    wiring.audit.record(&AuditRecord {
        request_id: call.ctx.request_id(),
        channel: call.ctx.channel(),
        tool: &name,
        kind: Default::default(),
        principal: call.ctx.principal(),
        outcome,
        success: result.success,
        code: result.meta.code(),
        error: error.as_deref(),
        took_ms: call.took_ms,
        // A hard timeout is the soft one exceeded too.
        timeout_exceeded: outcome == AuditOutcome::TimedOut
            || result.meta.get("timeout_exceeded").is_some(),
        args: call.args,
        redactor: &wiring.redactor,
        count: 1,
        ip: call.ctx.ip(),
        max_args_bytes: limits.max_args_bytes,
    });
    if let Some(dispatcher) = &wiring.dispatcher {
        match outcome {
            AuditOutcome::Executed | AuditOutcome::CacheServed => {
                dispatcher.dispatch(&Event::ToolExecuted(ToolExecuted {
                    tool: call.name,
                    ctx: call.ctx,
                    args: call.args,
                    result,
                    cache_served: outcome == AuditOutcome::CacheServed,
                }));
            }
            AuditOutcome::Failed | AuditOutcome::TimedOut | AuditOutcome::Cancelled => {
                let fallback = ErrorCode::InternalError;
                dispatcher.dispatch(&Event::ToolFailed(ToolFailed {
                    tool: call.name,
                    ctx: call.ctx,
                    args: call.args,
                    error: result.error.as_deref().unwrap_or(""),
                    code: result.meta.code().unwrap_or(&fallback),
                    took_ms: call.took_ms,
                }));
            }
            // Refusals and answers that ran nothing are not the tool's failures.
            _ => {}
        }
    }
}

/// The call's terminal, where it lies. Every path ends with one (`contain_exception` always
/// finishes); a missing one is a bug in the stage table, reported rather than panicking.
fn finished(slot: &mut Option<Terminal>) -> &mut Terminal {
    slot.get_or_insert_with(|| {
        Terminal::new(
            ToolResult::internal_error("pipeline ended without a result"),
            AuditOutcome::Failed,
        )
    })
}

/// The terminal of a call dropped while its tool ran (the caller cancelled or went away).
pub(crate) fn cancelled() -> Terminal {
    Terminal::new(
        ToolResult::error_with_code(
            ErrorCode::Cancelled,
            "The call was cancelled while the tool ran",
        ),
        AuditOutcome::Cancelled,
    )
}

pub(crate) fn describe(_facts: &StageFacts<'_>) -> InvocationStep {
    step(
        StepKind::Audit,
        StepRole::Outcome,
        StepPresence::Active,
        false,
        false,
        "one record on every terminal path (not found, invalid arguments, denied, rate limited, planned, confirmation requested, invalid confirmation, cache served, vetoed, executed, failed, timed out, cancelled), secrets redacted; the returned result's error, message and string data have the secret argument values scrubbed; then tool.executed / tool.failed when a dispatcher is wired",
    )
}
