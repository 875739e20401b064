//! Stage 9, `execute`: run the tool, under `contain_exception`'s guard.
//!
//! A tool with a hard timeout is cancelled at its deadline (an async tool is dropped; a
//! blocking tool runs on Tokio's blocking pool and is abandoned, since a thread cannot be
//! killed). If the caller drops the call while the tool runs (a client that went away), the
//! call is audited as cancelled.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use crate::context::ToolContext;
use crate::definition::Tool;
use crate::pipeline::contain_exception::contained;
use crate::pipeline::{Call, Flow, RawOutcome, audit};

pub(crate) async fn run(call: &mut Call<'_>) -> Flow {
    let raw = {
        let guard = CancelGuard {
            call: &*call,
            armed: true,
        };
        let raw = invoke(guard.call).await;
        guard.disarm();
        raw
    };
    call.raw = Some(raw);
    Flow::Continue
}

async fn invoke(call: &Call<'_>) -> RawOutcome {
    let def = &call.tool().definition;
    let tool = def.tool();
    let started = Instant::now();
    let outcome = match def.options().hard_timeout {
        None => contained(tool.as_ref(), &call.args, call.ctx).await,
        Some(limit) => match tokio::runtime::Handle::try_current() {
            Ok(_) if tool.runs_blocking() => {
                let handle = spawn_blocking(tool.clone(), call.args.clone(), call.ctx.clone());
                match tokio::time::timeout(limit, handle).await {
                    Ok(Ok(outcome)) => outcome,
                    Ok(Err(join_error)) => Err(join_error.to_string()),
                    Err(_) => {
                        return RawOutcome::TimedOut {
                            after_secs: limit.as_secs_f64(),
                        };
                    }
                }
            }
            Ok(_) => {
                match tokio::time::timeout(limit, contained(tool.as_ref(), &call.args, call.ctx))
                    .await
                {
                    Ok(outcome) => outcome,
                    Err(_) => {
                        return RawOutcome::TimedOut {
                            after_secs: limit.as_secs_f64(),
                        };
                    }
                }
            }
            Err(_) => {
                tracing::warn!(
                    target: "milpa::pipeline",
                    tool = call.name,
                    "hard timeout not enforced: no Tokio runtime is running this call"
                );
                contained(tool.as_ref(), &call.args, call.ctx).await
            }
        },
    };
    let exec_secs = started.elapsed().as_secs_f64();
    match outcome {
        Ok(Ok(output)) => RawOutcome::Returned { output, exec_secs },
        Ok(Err(error)) => RawOutcome::Failed(error),
        Err(panic) => RawOutcome::Panicked(panic),
    }
}

fn spawn_blocking(
    tool: Arc<dyn Tool>,
    args: Value,
    ctx: ToolContext,
) -> tokio::task::JoinHandle<super::contain_exception::Contained> {
    tokio::task::spawn_blocking(move || {
        futures_util::FutureExt::now_or_never(contained(tool.as_ref(), &args, &ctx))
            .unwrap_or_else(|| Err("a blocking tool returned a pending future".to_owned()))
    })
}

/// Audits the call as cancelled if it is dropped while the tool runs.
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
            audit::record_cancelled(self.call);
        }
    }
}
