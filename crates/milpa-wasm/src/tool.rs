//! [`WasmTool`]: a loaded component as a [`milpa::Tool`] the registry runs like any other,
//! behind every gate of the pipeline.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use milpa::{Deferred, Invocation, Tool, ToolContext, ToolDefinition, ToolDefinitionBuilder};
use serde_json::Value;
use wasmtime::Engine;

use crate::bindings::ToolPre;
use crate::sandbox::Sandbox;
use crate::state::{CallState, Preopen};

/// How much longer than the sandbox's timeout the registry's hard timeout waits before it
/// cancels the call itself: the sandbox stops the guest first (with its own message), the
/// registry's timeout is the backstop.
pub const HARD_TIMEOUT_GRACE: Duration = Duration::from_secs(1);

/// Everything a load produced, shared by every call.
pub(crate) struct Loaded {
    pub(crate) path: PathBuf,
    pub(crate) sandbox: Arc<Sandbox>,
    pub(crate) imports: Vec<String>,
    pub(crate) preopens: Vec<Preopen>,
    pub(crate) pre: ToolPre<CallState>,
    pub(crate) engine: Engine,
}

/// A compiled, checked, pre-instantiated component of the `milpa:tool@0.1.0` world.
///
/// Load it with [`WasmTool::load`]; register it with [`WasmTool::definition`]. Cheap to
/// clone. Each call gets a fresh store and instance, dropped when the call ends: nothing a
/// call leaves in the guest's memory reaches the next caller.
#[derive(Clone)]
pub struct WasmTool {
    loaded: Arc<Loaded>,
}

impl std::fmt::Debug for WasmTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmTool")
            .field("path", &self.loaded.path)
            .field("sandbox", &self.loaded.sandbox)
            .finish_non_exhaustive()
    }
}

impl WasmTool {
    pub(crate) fn from_loaded(loaded: Loaded) -> WasmTool {
        WasmTool {
            loaded: Arc::new(loaded),
        }
    }

    pub(crate) fn loaded(&self) -> &Loaded {
        &self.loaded
    }

    /// Where the component came from.
    pub fn path(&self) -> &Path {
        &self.loaded.path
    }

    /// Its grants and limits (for `inspect`: [`Sandbox::describe`]).
    pub fn sandbox(&self) -> &Sandbox {
        &self.loaded.sandbox
    }

    /// What the component imports, by name (`wasi:cli/environment@0.2.0`, …), as checked
    /// at load.
    pub fn imports(&self) -> &[String] {
        &self.loaded.imports
    }

    /// The definition to register: what `builder` says (name, description, schema,
    /// scopes, …) with the sandbox's timeout as the soft timeout and, as the hard one, that
    /// timeout plus [`HARD_TIMEOUT_GRACE`].
    pub fn definition(self, builder: ToolDefinitionBuilder) -> ToolDefinition {
        let timeout = self.loaded.sandbox.timeout;
        builder
            .timeout(timeout)
            .hard_timeout(timeout + HARD_TIMEOUT_GRACE)
            .tool(self)
    }
}

impl Tool for WasmTool {
    fn invoke<'a>(&'a self, args: &'a Value, ctx: &'a ToolContext) -> Invocation<'a> {
        Deferred::pending(self.call(args, ctx))
    }
}
