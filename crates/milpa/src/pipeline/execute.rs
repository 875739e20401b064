//! Stage 9, `execute`: run the tool, under `contain_exception`'s guard.
//!
//! A tool with a hard timeout is cancelled at its deadline (an async tool is dropped; a
//! blocking tool runs on Tokio's blocking pool and is abandoned, since a thread cannot be
//! killed). If the caller drops the call while the tool runs (a client that went away), the
//! call is audited as cancelled.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::context::ToolContext;
use crate::deferred::Deferred;
use crate::definition::Tool;
use crate::inspect::StageFacts;
use crate::inspect::{InvocationStep, StepPresence, StepRole};
use crate::pipeline::clock::Tick;
use crate::pipeline::contain_exception::{Contained, contained, finish, start};
use crate::pipeline::{Call, Flow, RawOutcome, audit};
use crate::pipeline::{StepKind, step, unreachable_in_plan_mode};

pub(crate) async fn run(call: &mut Call<'_>) -> Flow {
    let def = &call.tool().definition;
    if let Some(limit) = def.options().hard_timeout {
        // Boxed: only tools with a hard timeout carry a timer in their call's future.
        let (raw, finished) = Box::pin(run_with_hard_timeout(call, limit)).await;
        call.raw = Some(raw);
        call.finished = finished;
        return Flow::Continue;
    }
    let clock = &call.wiring.clock;
    let started = clock.now();
    // The fast path: a sync tool answers here, with no future in between.
    let outcome = match start(def.tool().as_ref(), &call.args, call.ctx) {
        Ok(Deferred::Ready(outcome)) => Ok(outcome),
        Ok(Deferred::Pending(future)) => {
            let guard = CancelGuard {
                call: &*call,
                armed: true,
            };
            let outcome = finish(future).await;
            guard.disarm();
            outcome
        }
        Err(panic) => Err(panic),
    };
    let finished = clock.now();
    call.finished = Some(finished);
    call.raw = Some(RawOutcome::from_contained(
        outcome, started, finished, clock,
    ));
    Flow::Continue
}

/// The outcome, and when the tool returned (`None` when the deadline passed first).
async fn run_with_hard_timeout(call: &Call<'_>, limit: Duration) -> (RawOutcome, Option<Tick>) {
    let guard = CancelGuard { call, armed: true };
    let clock = &call.wiring.clock;
    let started = clock.now();
    let outcome = with_hard_timeout(call, limit).await;
    guard.disarm();
    match outcome {
        Some(outcome) => {
            let finished = clock.now();
            let raw = RawOutcome::from_contained(outcome, started, finished, clock);
            (raw, Some(finished))
        }
        None => {
            let raw = RawOutcome::TimedOut {
                after_secs: limit.as_secs_f64(),
            };
            (raw, None)
        }
    }
}

/// Runs the tool under its hard timeout; `None` when the deadline passed first.
async fn with_hard_timeout(call: &Call<'_>, limit: Duration) -> Option<Contained> {
    let tool = call.tool().definition.tool();
    if tokio::runtime::Handle::try_current().is_err() {
        tracing::warn!(
            target: "milpa::pipeline",
            tool = call.name,
            "hard timeout not enforced: no Tokio runtime is running this call"
        );
        return Some(contained(tool.as_ref(), &call.args, call.ctx).await);
    }
    if tool.runs_blocking() {
        let handle = spawn_blocking(tool.clone(), call.args.clone(), call.ctx.clone());
        match tokio::time::timeout(limit, handle).await {
            Ok(Ok(outcome)) => Some(outcome),
            Ok(Err(join_error)) => Some(Err(join_error.to_string())),
            Err(_) => None,
        }
    } else {
        tokio::time::timeout(limit, contained(tool.as_ref(), &call.args, call.ctx))
            .await
            .ok()
    }
}

fn spawn_blocking(
    tool: Arc<dyn Tool>,
    args: Value,
    ctx: ToolContext,
) -> tokio::task::JoinHandle<Contained> {
    tokio::task::spawn_blocking(move || {
        futures_util::FutureExt::now_or_never(contained(tool.as_ref(), &args, &ctx))
            .unwrap_or_else(|| Err("a blocking tool returned a pending future".to_owned()))
    })
}

/// Audits the call as cancelled if it is dropped while the tool runs (the call's state is
/// borrowed by the running tool, so the guard hands `audit` its own terminal).
struct CancelGuard<'c, 'r> {
    call: &'c Call<'r>,
    armed: bool,
}

impl CancelGuard<'_, '_> {
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for CancelGuard<'_, '_> {
    fn drop(&mut self) {
        if self.armed {
            // Through the one audit stage, with the cancelled terminal the call never
            // reached: the executor is gone, so nothing else would record this call.
            audit::conclude(audit::Audited::of(self.call), &mut audit::cancelled());
        }
    }
}

pub(crate) fn describe(facts: &StageFacts<'_>) -> InvocationStep {
    if let Some(step) = unreachable_in_plan_mode(facts, StepKind::Execute, StepRole::Execution) {
        return step;
    }
    let options = facts.tool.options();
    let hard = match options.hard_timeout {
        Some(limit) => format!(
            "hard timeout {}s (cancelled with TIMEOUT)",
            limit.as_secs_f64()
        ),
        None => "no hard timeout".to_owned(),
    };
    step(
        StepKind::Execute,
        StepRole::Execution,
        StepPresence::Active,
        true,
        facts.tool.is_mutating(),
        format!(
            "the tool's handler, with the context passed alongside the arguments; soft timeout {}s (flagged in meta); {hard}",
            options.timeout.as_secs_f64()
        ),
    )
}
