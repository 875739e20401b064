//! Runs one call of a tool component through milpa's whole pipeline (validation, policy,
//! audit) in a sandbox that grants nothing, and prints the result as JSON.
//!
//! ```sh
//! cargo run -p milpa-wasm --example run_tool -- slugify.wasm '{"text": "Hello, World!"}'
//! ```

use std::path::Path;
use std::process::ExitCode;

use milpa::{ToolContext, ToolDefinition, ToolRegistry};
use milpa_wasm::{Sandbox, WasmTool};
use serde_json::Value;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (path, call_args) = match args.as_slice() {
        [path] => (path, "{}"),
        [path, json] => (path, json.as_str()),
        _ => {
            eprintln!("usage: run_tool COMPONENT.wasm [ARGS_JSON]");
            return ExitCode::from(2);
        }
    };
    let call_args: Value = match serde_json::from_str(call_args) {
        Ok(value) => value,
        Err(error) => {
            eprintln!("ARGS_JSON is not JSON: {error}");
            return ExitCode::from(2);
        }
    };
    let name = Path::new(path)
        .file_stem()
        .and_then(|stem| stem.to_str())
        .unwrap_or("tool")
        .to_owned();
    let tool = match WasmTool::load(path, Sandbox::new()).await {
        Ok(tool) => tool,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::FAILURE;
        }
    };
    let mut registry = ToolRegistry::new();
    if let Err(error) = registry.register(tool.definition(ToolDefinition::builder(&name))) {
        eprintln!("{error}");
        return ExitCode::FAILURE;
    }
    let result = registry.call(&name, call_args, &ToolContext::cli()).await;
    println!("{}", result.to_json_pretty());
    if result.success {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
