//! One call: a fresh store and instance, the guest's `call` export with the caller's
//! context, wall time enforced, then everything dropped.
//!
//! Wall time is enforced twice. Inside wasm, the engine's epoch ticks every
//! [`EPOCH_TICK`](crate::EPOCH_TICK); at each tick the store's callback yields the thread
//! back to Tokio (so a guest in a tight loop shares it) and traps the guest once the
//! timeout has passed. Around the call, a Tokio timeout a few ticks longer catches the time
//! a guest spends waiting in the host (an HTTP response that never comes), where no tick is
//! seen. Both end the call with `TIMEOUT`.

use std::time::Instant;

use milpa::{ToolContext, ToolError, ToolOutput};
use serde_json::Value;
use wasmtime::{Store, UpdateDeadline};

use crate::bindings::CallContext;
use crate::limits::LimitHit;
use crate::outcome;
use crate::runtime::EPOCH_TICK;
use crate::state::CallState;
use crate::tool::WasmTool;

impl WasmTool {
    /// Runs one call outside the registry (the registry calls it through [`milpa::Tool`]):
    /// `args` as JSON text, the context's principal (empty when anonymous), channel and
    /// request id. Failures of the guest are results with their codes (see
    /// [`outcome`](crate::outcome)); `Err` only when the host itself could not set the
    /// call up (a granted folder vanished).
    pub async fn call(&self, args: &Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let loaded = self.loaded();
        let sandbox = &loaded.sandbox;
        let (state, captured) = CallState::new(sandbox, &loaded.preopens)
            .map_err(|error| ToolError::new(error.to_string()))?;
        let mut store = Store::new(&loaded.engine, state);
        store.limiter(|state| &mut state.limits);
        let timeout = sandbox.timeout;
        let started = Instant::now();
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |_| {
            if started.elapsed() >= timeout {
                Err(wasmtime::Error::new(LimitHit::WallTime))
            } else {
                Ok(UpdateDeadline::Yield(1))
            }
        });

        let args = args.to_string();
        let context = CallContext {
            principal: ctx.principal().unwrap_or_default().to_owned(),
            channel: ctx.channel().to_owned(),
            request_id: ctx.request_id().to_owned(),
        };
        let run = async {
            let instance = loaded.pre.instantiate_async(&mut store).await?;
            instance.call_call(&mut store, &args, &context).await
        };
        let answer = tokio::time::timeout(timeout + 2 * EPOCH_TICK, run).await;
        drop(store);

        let stderr = captured.stderr.contents();
        let output = match answer {
            Err(_elapsed) => outcome::limit(LimitHit::WallTime).into(),
            Ok(Err(error)) => outcome::trapped(&error, &stderr),
            Ok(Ok(answer)) => match full_stream(&captured, sandbox.max_output_bytes) {
                Some(hit) => outcome::limit(hit).into(),
                None => outcome::returned(answer, sandbox.max_result_bytes, &stderr),
            },
        };
        Ok(output)
    }
}

/// The stream that filled its capture, if one did: the guest's later writes to it failed,
/// so whatever it returned was computed blind to that.
fn full_stream(captured: &crate::state::Captured, cap: usize) -> Option<LimitHit> {
    [("stdout", &captured.stdout), ("stderr", &captured.stderr)]
        .into_iter()
        .find(|(_, pipe)| {
            let used = pipe.contents().len();
            used > 0 && used >= cap
        })
        .map(|(stream, _)| LimitHit::Output { stream, bytes: cap })
}
