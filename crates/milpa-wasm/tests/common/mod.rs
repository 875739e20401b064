//! Builds the test guests from C (`tests/guests/*.c`) with clang and wasi-libc, makes them
//! components, and loads them. Without clang a test prints a skip line and returns, unless
//! `CI=true`, where it fails: CI installs clang (scripts/install-test-deps.sh).

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use milpa::{ToolContext, ToolOutput, ToolResult};
use milpa_wasm::{Sandbox, WasmRuntime, WasmTool};
use serde_json::Value;

/// The folder of the guests' C sources.
pub fn guests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/guests")
}

/// Whether clang can build a guest; false means skip (outside CI).
fn have_clang() -> bool {
    let found = Command::new("clang")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if !found {
        if std::env::var("CI").is_ok_and(|ci| ci == "true") {
            panic!(
                "clang is required for the milpa-wasm tests under CI (scripts/install-test-deps.sh installs it)"
            );
        }
        // Written to the process's stderr itself, once: the test harness captures what a
        // passing test prints, and a skip must be seen.
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            use std::io::Write;
            let Ok(mut stderr) = std::fs::OpenOptions::new().append(true).open("/dev/stderr")
            else {
                return;
            };
            let _ = writeln!(
                stderr,
                "skipped: clang not found, the milpa-wasm guest tests return early \
                 (apt-get install clang lld libclang-rt-dev-wasm32 wasi-libc)"
            );
        });
    }
    found
}

/// The clang line that builds a tool (see [`milpa_wasm::componentize::clang_command`]).
pub fn clang_command(source: &Path, output: &Path) -> Command {
    milpa_wasm::componentize::clang_command(source, output)
}

/// The component of `tests/guests/{name}.c` (world `milpa:tool/tool`), built once per test
/// binary; `None` when the test should skip.
pub fn guest(name: &str) -> Option<Vec<u8>> {
    build(name, None)
}

/// The WASI WIT the guests' worlds import: `wit/deps` of the wasmtime-wasi-http crate
/// this workspace builds, where Cargo unpacked it (never copied into the repository).
pub fn wasi_wit_deps() -> PathBuf {
    static DEPS: OnceLock<PathBuf> = OnceLock::new();
    DEPS.get_or_init(|| {
        milpa_wasm::componentize::wasi_wit_deps(Path::new(env!("CARGO_MANIFEST_DIR")))
            .unwrap_or_else(|error| panic!("{error}"))
    })
    .clone()
}

/// The component of `tests/guests/{name}.c` for `world` of `tests/guests/wit/world.wit`
/// (the tool world plus the imports an escape needs), its WASI packages read from
/// [`wasi_wit_deps`].
pub fn guest_with_world(name: &str, world: &str) -> Option<Vec<u8>> {
    build(name, Some(world))
}

fn build(name: &str, world: Option<&str>) -> Option<Vec<u8>> {
    static BUILT: OnceLock<Mutex<HashMap<String, Vec<u8>>>> = OnceLock::new();
    if !have_clang() {
        return None;
    }
    let built = BUILT.get_or_init(Default::default);
    let mut built = built
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(bytes) = built.get(name) {
        return Some(bytes.clone());
    }
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("milpa-wasm-guests");
    std::fs::create_dir_all(&out_dir).unwrap();
    let module = out_dir.join(format!("{name}-{}.wasm", std::process::id()));
    let source = guests_dir().join(format!("{name}.c"));
    let out = clang_command(&source, &module).output().unwrap();
    assert!(
        out.status.success(),
        "clang failed for {}:\n{}",
        source.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(&module).unwrap();
    let _ = std::fs::remove_file(&module);
    let component = match world {
        None => milpa_wasm::componentize::componentize(&bytes),
        Some(world) => milpa_wasm::componentize::componentize_world(
            &bytes,
            &guests_dir().join("wit/world.wit"),
            &wasi_wit_deps(),
            world,
        ),
    }
    .unwrap_or_else(|error| panic!("componentize {name}: {error}"));
    built.insert(name.to_owned(), component.clone());
    Some(component)
}

/// The guest `name` loaded with `sandbox` on the shared runtime; `None` to skip.
pub async fn load(name: &str, sandbox: Sandbox) -> Option<WasmTool> {
    load_bytes(name, guest(name)?, sandbox).await
}

/// A guest built for `world` (see [`guest_with_world`]) loaded with `sandbox`.
pub async fn load_with_world(name: &str, world: &str, sandbox: Sandbox) -> Option<WasmTool> {
    load_bytes(name, guest_with_world(name, world)?, sandbox).await
}

async fn load_bytes(name: &str, bytes: Vec<u8>, sandbox: Sandbox) -> Option<WasmTool> {
    let runtime = WasmRuntime::shared().unwrap();
    Some(
        WasmTool::from_bytes(&runtime, format!("{name}.wasm"), bytes, sandbox)
            .await
            .unwrap_or_else(|error| panic!("load {name}: {error}")),
    )
}

/// A context on `cli` for `alice`, with a known request id.
pub fn ctx() -> ToolContext {
    ToolContext::builder("cli")
        .principal("alice")
        .request_id("req-1")
        .build()
}

/// One call outside the registry, as the result a caller would see.
pub async fn call(tool: &WasmTool, args: Value) -> ToolResult {
    match tool.call(&args, &ctx()).await {
        Ok(ToolOutput::Data(data)) => ToolResult::success(data),
        Ok(ToolOutput::Result(result)) => *result,
        Ok(other) => panic!("unexpected output {other:?}"),
        Err(error) => panic!("the host failed to set the call up: {error}"),
    }
}

/// The code of a result, as its wire string.
pub fn code(result: &ToolResult) -> &str {
    result.code().map(|code| code.as_str()).unwrap_or("")
}
