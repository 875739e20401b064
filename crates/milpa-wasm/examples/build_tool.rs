//! Makes a tool component of a core module built by clang and wasi-libc, then loads it the
//! way milpa will (compiled, imports checked against an empty sandbox) and says how long
//! that took.
//!
//! ```sh
//! clang --target=wasm32-wasi -mexec-model=reactor -O2 -Wl,--strip-debug -o slugify.core.wasm slugify.c
//! cargo run -p milpa-wasm --features componentize --example build_tool -- slugify.core.wasm slugify.wasm
//! ```

use std::process::ExitCode;
use std::time::Instant;

use milpa_wasm::{Sandbox, WasmTool};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, output] = args.as_slice() else {
        eprintln!("usage: build_tool CORE_MODULE.wasm COMPONENT.wasm");
        return ExitCode::from(2);
    };
    let module = match std::fs::read(input) {
        Ok(module) => module,
        Err(error) => {
            eprintln!("could not read {input}: {error}");
            return ExitCode::FAILURE;
        }
    };
    let component = match milpa_wasm::componentize::componentize(&module) {
        Ok(component) => component,
        Err(error) => {
            eprintln!("{input}: {error}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(error) = std::fs::write(output, &component) {
        eprintln!("could not write {output}: {error}");
        return ExitCode::FAILURE;
    }
    let started = Instant::now();
    match WasmTool::load(output, Sandbox::new()).await {
        Ok(tool) => {
            println!(
                "{output}: {} bytes, loaded in {} ms with nothing granted; imports:",
                component.len(),
                started.elapsed().as_millis()
            );
            for import in tool.imports() {
                println!("  {import}");
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("{error}");
            ExitCode::FAILURE
        }
    }
}
