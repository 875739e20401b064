//! Stage 11, `audit`: every terminal path ends here. It stamps the runtime meta on the
//! result, records an [`AuditRecord`], then emits `tool.executed` or `tool.failed`.

use std::sync::Arc;

use crate::audit::{AuditOutcome, AuditRecord};
use crate::events::{Event, ToolExecuted, ToolFailed};
use crate::inspect::StageFacts;
use crate::inspect::{InvocationStep, StepPresence, StepRole};
use crate::pipeline::{Call, Terminal};
use crate::pipeline::{StepKind, step};
use crate::result::{ErrorCode, RuntimeMeta, ToolResult};

pub(crate) fn run(call: &mut Call<'_>) {
    let took_ms = call.elapsed_ms();
    let tool_name = match call.tool {
        Some(tool) => tool.definition.name_arc().clone(),
        None => Arc::from(call.name),
    };
    let Terminal { result, outcome } = finished(&mut call.terminal);
    let outcome = *outcome;
    result
        .meta
        .set_runtime(RuntimeMeta::new(tool_name, took_ms, call.ctx));
    let result = &*result;
    let registry = call.registry;
    // A tool's error may quote its arguments (a command's stderr echoing a password): the
    // record gets the text with every secret of the call scrubbed.
    let error = result
        .error
        .as_deref()
        .map(|error| registry.redactor().scrub(error, &call.args));
    registry.audit_sink().record(&AuditRecord {
        request_id: call.ctx.request_id(),
        channel: call.ctx.channel(),
        tool: call.name,
        principal: call.ctx.principal(),
        outcome,
        success: result.success,
        code: result.meta.code(),
        error: error.as_deref(),
        took_ms,
        timeout_exceeded: result.meta.get("timeout_exceeded").is_some(),
        args: &call.args,
        redactor: registry.redactor(),
    });
    if let Some(dispatcher) = registry.dispatcher() {
        match outcome {
            AuditOutcome::Executed | AuditOutcome::CacheServed => {
                dispatcher.dispatch(&Event::ToolExecuted(ToolExecuted {
                    tool: call.name,
                    ctx: call.ctx,
                    args: &call.args,
                    result,
                    cache_served: outcome == AuditOutcome::CacheServed,
                }));
            }
            AuditOutcome::Failed | AuditOutcome::TimedOut => {
                let fallback = ErrorCode::InternalError;
                dispatcher.dispatch(&Event::ToolFailed(ToolFailed {
                    tool: call.name,
                    ctx: call.ctx,
                    args: &call.args,
                    error: result.error.as_deref().unwrap_or(""),
                    code: result.meta.code().unwrap_or(&fallback),
                    took_ms,
                }));
            }
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

/// The record of a call dropped while its tool ran (the caller cancelled or went away).
pub(crate) fn record_cancelled(call: &Call<'_>) {
    let took_ms = call.elapsed_ms();
    let code = ErrorCode::Cancelled;
    let message = "The call was cancelled while the tool ran";
    let registry = call.registry;
    registry.audit_sink().record(&AuditRecord {
        request_id: call.ctx.request_id(),
        channel: call.ctx.channel(),
        tool: call.name,
        principal: call.ctx.principal(),
        outcome: AuditOutcome::Cancelled,
        success: false,
        code: Some(&code),
        error: Some(message),
        took_ms,
        timeout_exceeded: false,
        args: &call.args,
        redactor: registry.redactor(),
    });
    if let Some(dispatcher) = registry.dispatcher() {
        dispatcher.dispatch(&Event::ToolFailed(ToolFailed {
            tool: call.name,
            ctx: call.ctx,
            args: &call.args,
            error: message,
            code: &code,
            took_ms,
        }));
    }
}

pub(crate) fn describe(_facts: &StageFacts<'_>) -> InvocationStep {
    step(
        StepKind::Audit,
        StepRole::Outcome,
        StepPresence::Active,
        false,
        false,
        "one record on every terminal path (not found, invalid arguments, denied, rate limited, planned, confirmation requested, invalid confirmation, cache served, vetoed, executed, failed, timed out, cancelled), secrets redacted; then tool.executed / tool.failed when a dispatcher is wired",
    )
}
