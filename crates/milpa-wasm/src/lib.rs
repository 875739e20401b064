//! WebAssembly component tools for milpa: a tool written by someone else (or by a model)
//! runs in a sandbox that grants it nothing it was not given.
//!
//! A tool is a WASI 0.2 component of the world `milpa:tool@0.1.0`
//! ([`WIT`], published in the repository as `crates/milpa-wasm/wit/tool.wit`):
//!
//! ```wit
//! package milpa:tool@0.1.0;
//! world tool {
//!   record call-context { principal: string, channel: string, request-id: string }
//!   variant tool-error { invalid-args(string), failed(string) }
//!   export call: func(args: string, ctx: call-context) -> result<string, tool-error>;
//! }
//! ```
//!
//! JSON travels as text: the pipeline has already validated the arguments; the host
//! size-checks and parses the reply.
//!
//! - [`Sandbox`]: the grants (folders read-only or read-write, hosts for outgoing
//!   `wasi:http`, environment variables) and limits (memory, wall time, output, result).
//! - [`WasmTool::load`]: reads, compiles once on a blocking thread, checks the component's
//!   imports against the grants ([`imports`]), links WASI and pre-instantiates.
//! - [`WasmTool::definition`]: the [`milpa::ToolDefinition`] to register; every call then
//!   goes through the whole pipeline (scopes, confirmation, approvals, rate limits, audit)
//!   and gets a fresh instance, dropped after.
//! - [`outcome`]: how a call's end (an answer, a trap, a limit) becomes a result and code.
//!
//! With the `componentize` feature, `componentize::componentize` turns a core module
//! built by clang and wasi-libc into such a component, and `componentize_world` does the
//! same for a world that adds imports to the tool world (`wasi:http`).
//!
//! Loading and calling need a Tokio runtime (compilation goes to its blocking pool; WASI's
//! host side runs on it).

pub mod bindings;
mod call;
#[cfg(feature = "componentize")]
pub mod componentize;
mod http_grant;
pub mod imports;
mod limits;
mod load;
pub mod outcome;
mod runtime;
mod sandbox;
mod state;
mod tool;

pub use imports::ImportRefused;
pub use limits::{LimitHit, MAX_TABLE_ELEMENTS};
pub use load::{LoadError, MAX_COMPONENT_BYTES};
pub use runtime::{EPOCH_TICK, EngineError, MAX_WASM_STACK, WasmRuntime};
pub use sandbox::{
    DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_MAX_RESULT_BYTES, DEFAULT_MEMORY_MIB, DEFAULT_TIMEOUT,
    Sandbox,
};
pub use tool::{HARD_TIMEOUT_GRACE, WasmTool};

/// The WIT world every tool component implements, as published in the repository.
pub const WIT: &str = include_str!("../wit/tool.wit");
