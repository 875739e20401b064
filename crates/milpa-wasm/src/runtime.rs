//! [`WasmRuntime`]: the one wasmtime engine every component tool of a process shares, and
//! the ticker that gives it wall time.
//!
//! Sharing one engine means one ticker thread however many tools are loaded; a component
//! compiled by one engine can only run on that engine.

use std::sync::OnceLock;
use std::time::Duration;

use wasmtime::{Config, Engine};

/// How often the ticker advances the engine's epoch: the precision of every wall-time
/// limit (a call is stopped within one tick of its timeout).
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// The native stack a guest's wasm frames may use (512 KiB); deeper recursion traps with
/// `SANDBOX_LIMIT` (`meta.sandbox_limit = "stack"`).
pub const MAX_WASM_STACK: usize = 512 * 1024;

/// The engine component tools run on. Cheap to clone (it is a handle).
///
/// Most hosts want [`WasmRuntime::shared`]; a separate one (its own engine and ticker) is
/// for tests and embedders that want a different configuration later.
#[derive(Clone)]
pub struct WasmRuntime {
    engine: Engine,
}

impl std::fmt::Debug for WasmRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmRuntime").finish_non_exhaustive()
    }
}

/// Why the engine could not be made: wasmtime refused the configuration (a platform it does
/// not support).
#[derive(Debug, thiserror::Error)]
#[error("could not start the WebAssembly engine: {message}")]
pub struct EngineError {
    message: String,
}

impl WasmRuntime {
    /// A new engine, with its own ticker thread: epoch interruption (calls are async, so a
    /// guest at a tick gives the thread back) and the stack cap.
    pub fn new() -> Result<WasmRuntime, EngineError> {
        let mut config = Config::new();
        config
            .epoch_interruption(true)
            .max_wasm_stack(MAX_WASM_STACK)
            .wasm_component_model(true);
        let engine = Engine::new(&config).map_err(|error| EngineError {
            message: first_line(&error.to_string()),
        })?;
        start_ticker(&engine);
        Ok(WasmRuntime { engine })
    }

    /// The process-wide runtime, made on first use.
    pub fn shared() -> Result<WasmRuntime, EngineError> {
        static SHARED: OnceLock<Result<WasmRuntime, String>> = OnceLock::new();
        SHARED
            .get_or_init(|| WasmRuntime::new().map_err(|error| error.message))
            .clone()
            .map_err(|message| EngineError { message })
    }

    /// The wasmtime engine.
    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }
}

/// One thread per engine advances its epoch every [`EPOCH_TICK`]; it holds the engine
/// weakly and ends once the engine (and everything compiled by it) is gone.
fn start_ticker(engine: &Engine) {
    let weak = engine.weak();
    let spawned = std::thread::Builder::new()
        .name("milpa-wasm-epoch".into())
        .spawn(move || {
            loop {
                std::thread::sleep(EPOCH_TICK);
                match weak.upgrade() {
                    Some(engine) => engine.increment_epoch(),
                    None => break,
                }
            }
        });
    if let Err(error) = spawned {
        // Without the ticker no deadline fires: every call still ends at the outer
        // wall-time limit (see `call`), so this is worth a loud line, not a refusal.
        tracing::error!(target: "milpa::wasm", "could not start the epoch ticker: {error}");
    }
}

/// The first line of a message: wasmtime's errors and traps carry backtraces below it.
pub(crate) fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().trim().to_owned()
}
