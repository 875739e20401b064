//! Stage 10, `contain_exception`: wraps `execute`. A tool's error, a panic or a hard timeout
//! becomes an error result; the registry keeps serving. A tool that ran past its soft
//! timeout is flagged in meta (`timeout_exceeded`, `execution_time`, `timeout_limit`).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use futures_util::FutureExt;
use serde_json::{Value, json};

use crate::audit::AuditOutcome;
use crate::context::ToolContext;
use crate::deferred::{BoxFuture, Deferred};
use crate::definition::{Invocation, Tool, ToolError, ToolOutput};
use crate::inspect::StageFacts;
use crate::inspect::{InvocationStep, StepPresence, StepRole};
use crate::pipeline::redemption::REPLAY_ARGS_IGNORED;
use crate::pipeline::{Call, Flow, RawOutcome, panic_message};
use crate::pipeline::{StepKind, step, unreachable_in_plan_mode};
use crate::result::{ErrorCode, ToolResult};

/// A tool's outcome, or the message of its panic.
pub(crate) type Contained = Result<Result<ToolOutput, ToolError>, String>;

/// Runs a tool with panics caught, whether it panics while starting or while running.
pub(crate) async fn contained(tool: &dyn Tool, args: &Value, ctx: &ToolContext) -> Contained {
    match start(tool, args, ctx)? {
        Deferred::Ready(outcome) => Ok(outcome),
        Deferred::Pending(future) => finish(future).await,
    }
}

/// Starts a tool with a panic caught: a sync tool has answered by now, an async one hands
/// back its future for [`finish`]. Split from [`contained`] so that `execute` answers a
/// sync tool without building a future.
#[inline]
pub(crate) fn start<'a>(
    tool: &'a dyn Tool,
    args: &'a Value,
    ctx: &'a ToolContext,
) -> Result<Invocation<'a>, String> {
    catch_unwind(AssertUnwindSafe(|| tool.invoke(args, ctx)))
        .map_err(|panic| panic_message(panic.as_ref()))
}

/// Runs an async tool's future to its end, with a panic caught.
pub(crate) async fn finish(future: BoxFuture<'_, Result<ToolOutput, ToolError>>) -> Contained {
    AssertUnwindSafe(future)
        .catch_unwind()
        .await
        .map_err(|panic| panic_message(panic.as_ref()))
}

// Inlined into the pipeline: a tool that returned is judged here; failures, panics and
// timeouts out of line.
#[inline]
pub(crate) fn run(call: &mut Call<'_>) -> Flow {
    let flow = judge(call);
    if call.replay_args_ignored() {
        note_ignored_replay_args(call);
    }
    flow
}

#[inline]
fn judge(call: &mut Call<'_>) -> Flow {
    match call.raw.take() {
        Some(RawOutcome::Returned { output, exec_nanos }) => {
            let result = match output {
                ToolOutput::Data(data) => ToolResult::success(data),
                ToolOutput::Result(result) => *result,
            };
            // Finished first, then measured and flagged in place: the result is moved once
            // (measuring it before the move cost two more copies of it per call).
            let flow = call.finish(result, AuditOutcome::Executed);
            let max = call.wiring.max_result_bytes;
            let limit = call.tool().definition.options().timeout;
            if let Some(terminal) = &mut call.terminal {
                if terminal.result.size_within(max).is_none() {
                    return too_large(call, max);
                }
                if u128::from(exec_nanos) > limit.as_nanos() {
                    flag_soft_timeout(&mut terminal.result, exec_nanos, limit);
                }
            }
            flow
        }
        other => failed(call, other),
    }
}

/// A tool that failed, panicked, timed out, or (a bug in the stage table) never ran.
fn failed(call: &mut Call<'_>, raw: Option<RawOutcome>) -> Flow {
    match raw {
        Some(RawOutcome::Failed(error)) => call.finish(
            ToolResult::error_with_code(error.code().clone(), error.message()),
            AuditOutcome::Failed,
        ),
        Some(RawOutcome::Panicked(message)) => {
            tracing::error!(target: "milpa::pipeline", tool = call.name, "[ToolRegistry] {} threw exception: {message}", call.name);
            call.finish(ToolResult::internal_error(message), AuditOutcome::Failed)
        }
        Some(RawOutcome::TimedOut { after_secs }) => {
            let message = format!(
                "Tool '{}' timed out after {after_secs}s (hard timeout)",
                call.name
            );
            call.finish(ToolResult::timeout(message), AuditOutcome::TimedOut)
        }
        Some(RawOutcome::Returned { .. }) | None => call.finish(
            ToolResult::internal_error("the tool did not run"),
            AuditOutcome::Failed,
        ),
    }
}

/// Notes in meta that the tool ran past its soft timeout (it still returned its result).
#[cold]
fn note_ignored_replay_args(call: &mut Call<'_>) {
    if let Some(terminal) = &mut call.terminal {
        let message = &mut terminal.result.message;
        *message = Some(match message.take() {
            Some(own) => format!("{own} {REPLAY_ARGS_IGNORED}"),
            None => REPLAY_ARGS_IGNORED.to_owned(),
        });
    }
}

/// A result over the size cap is dropped, not sent: the call fails, and is audited so.
#[cold]
fn too_large(call: &mut Call<'_>, max: usize) -> Flow {
    let message = format!(
        "Tool '{}' returned a result larger than {max} bytes (the registry's max_result_bytes); it was not returned",
        call.name
    );
    call.finish(
        ToolResult::error_with_code(ErrorCode::ResultTooLarge, message),
        AuditOutcome::Failed,
    )
}

#[cold]
fn flag_soft_timeout(result: &mut ToolResult, exec_nanos: u64, limit: Duration) {
    let exec_secs = Duration::from_nanos(exec_nanos).as_secs_f64();
    result.meta.insert("timeout_exceeded", json!(true));
    result.meta.insert(
        "execution_time",
        json!((exec_secs * 1000.0).round() / 1000.0),
    );
    result.meta.insert("timeout_limit", json!(limit.as_secs()));
}

pub(crate) fn describe(facts: &StageFacts<'_>) -> InvocationStep {
    if let Some(step) =
        unreachable_in_plan_mode(facts, StepKind::ContainException, StepRole::Boundary)
    {
        return step;
    }
    let mut step = step(
        StepKind::ContainException,
        StepRole::Boundary,
        StepPresence::Active,
        false,
        false,
        "wraps execute: a tool error keeps its code (INTERNAL_ERROR by default), a panic becomes INTERNAL_ERROR, a hard timeout TIMEOUT, a result over the size cap RESULT_TOO_LARGE; the registry keeps serving",
    );
    step.wraps = Some(StepKind::Execute);
    step
}
