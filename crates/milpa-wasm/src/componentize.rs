//! Turning a core WebAssembly module into a tool component (feature `componentize`).
//!
//! A C tool built with clang and wasi-libc (`--target=wasm32-wasi -mexec-model=reactor`)
//! is a core module speaking WASI preview 1 and exporting `call` by the canonical ABI. This
//! embeds the `milpa:tool` world's type information into it and wraps it with the WASI
//! preview-1 **reactor** adapter (the command adapter wants a `_start` a tool does not
//! have), giving a WASI 0.2 component the host loads.

use std::path::{Path, PathBuf};
use wasi_preview1_component_adapter_provider::{
    WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME, WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
};
use wit_component::{ComponentEncoder, StringEncoding, embed_component_metadata};

use wit_parser::{Resolve, UnresolvedPackageGroup};

/// Why a module could not be made a component.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ComponentizeError {
    /// The WIT did not parse or has no such world.
    #[error("the WIT did not parse: {0}")]
    Wit(String),
    /// The WASI WIT of the `wasmtime-wasi-http` crate was not found.
    #[error("the WASI WIT was not found: {0}")]
    Deps(String),
    /// The module does not fit the world (a missing `call`, `memory` or `cabi_realloc`
    /// export, an import the adapter cannot provide, …) or is not valid WebAssembly.
    #[error("could not make a component of the module: {0}")]
    Encode(String),
}

/// The clang line that builds a tool from C: a wasi-libc reactor (no `main`, exports
/// `call`), `-O2`, warnings as errors, debug info stripped. Debian's clang 14 knows the
/// target as `wasm32-wasi`; it needs `lld`, `libclang-rt-dev-wasm32` and `wasi-libc`.
/// Its output is the core module [`componentize`] takes.
pub fn clang_command(source: &Path, output: &Path) -> std::process::Command {
    let mut command = std::process::Command::new("clang");
    command
        .arg("--target=wasm32-wasi")
        .arg("-mexec-model=reactor")
        .arg("-O2")
        .arg("-Wall")
        .arg("-Werror")
        .arg("-Wl,--strip-debug")
        .arg("-o")
        .arg(output)
        .arg(source);
    command
}

/// The component for `module` (a core module's bytes) of the world `milpa:tool/tool`.
pub fn componentize(module: &[u8]) -> Result<Vec<u8>, ComponentizeError> {
    let mut resolve = Resolve::default();
    let package = tool_package(&mut resolve)?;
    let world = resolve
        .select_world(&[package], Some("tool"))
        .map_err(|error| ComponentizeError::Wit(format!("{error:#}")))?;
    encode(module, &resolve, world)
}

/// The component for `module` of `world`, a world of the WIT file `world_file` that
/// includes `milpa:tool/tool@0.1.0` and adds imports: for a tool that needs `wasi:http`
/// (its sandbox then needs `allow_hosts`). The WASI packages it names are read from the
/// `.wit` files of `deps` (one package per file, such as [`wasi_wit_deps`] finds).
pub fn componentize_world(
    module: &[u8],
    world_file: &Path,
    deps: &Path,
    world: &str,
) -> Result<Vec<u8>, ComponentizeError> {
    let mut resolve = Resolve::default();
    tool_package(&mut resolve)?;
    let main = parse_wit_file(world_file)?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(deps)
        .and_then(|entries| entries.map(|entry| entry.map(|e| e.path())).collect())
        .map_err(|error| {
            ComponentizeError::Wit(format!("cannot read {}: {error}", deps.display()))
        })?;
    files.retain(|file| file.extension().is_some_and(|ext| ext == "wit"));
    files.sort();
    let groups = files
        .iter()
        .map(|file| parse_wit_file(file))
        .collect::<Result<Vec<_>, _>>()?;
    let package = resolve
        .push_groups(main, groups)
        .map_err(|error| ComponentizeError::Wit(format!("{error:#}")))?;
    let world = resolve
        .select_world(&[package], Some(world))
        .map_err(|error| ComponentizeError::Wit(format!("{error:#}")))?;
    encode(module, &resolve, world)
}

/// The folder of WASI 0.2 WIT files (`cli.wit`, `http.wit`, …) that the
/// `wasmtime-wasi-http` crate this workspace builds ships in its source (`wit/deps`),
/// found with `cargo metadata --offline` (for the host platform) run in `manifest_dir` (a package of the
/// workspace). For building test guests whose worlds import WASI: the WIT is read where
/// the dependency keeps it, never copied into the repository.
pub fn wasi_wit_deps(manifest_dir: &Path) -> Result<PathBuf, ComponentizeError> {
    let not_found = |why: String| ComponentizeError::Deps(why);
    // Only this machine's platform: the others' dependencies may never have been
    // downloaded, and `--offline` would then fail on them.
    let host = std::process::Command::new("rustc")
        .arg("-vV")
        .output()
        .ok()
        .and_then(|out| {
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .find_map(|line| line.strip_prefix("host: ").map(str::to_owned))
        })
        .ok_or_else(|| not_found("`rustc -vV` named no host platform".into()))?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--filter-platform",
        ])
        .arg(&host)
        .current_dir(manifest_dir)
        .output()
        .map_err(|error| not_found(format!("cargo metadata did not run: {error}")))?;
    if !out.status.success() {
        return Err(not_found(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|error| not_found(format!("cargo metadata printed no JSON: {error}")))?;
    // The version milpa-wasm resolves to (Cargo.lock), not any other in the graph.
    let packages = metadata["packages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let id_of = |name: &str| {
        packages
            .iter()
            .find(|package| package["name"] == name && package["source"].is_null())
            .and_then(|package| package["id"].as_str())
    };
    let ours = id_of("milpa-wasm").ok_or_else(|| not_found("no milpa-wasm package".into()))?;
    let nodes = metadata["resolve"]["nodes"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let http_id = nodes
        .iter()
        .find(|node| node["id"] == ours)
        .and_then(|node| node["deps"].as_array())
        .and_then(|deps| {
            deps.iter()
                .find(|dep| dep["name"] == "wasmtime_wasi_http")
                .and_then(|dep| dep["pkg"].as_str())
        })
        .ok_or_else(|| not_found("milpa-wasm does not depend on wasmtime-wasi-http".into()))?;
    let manifest_path = packages
        .iter()
        .find(|package| package["id"] == http_id)
        .and_then(|package| package["manifest_path"].as_str())
        .ok_or_else(|| not_found("wasmtime-wasi-http has no manifest path".into()))?;
    let deps = Path::new(manifest_path)
        .parent()
        .unwrap_or(Path::new("."))
        .join("wit/deps");
    if deps.join("http.wit").is_file() {
        Ok(deps)
    } else {
        Err(not_found(format!(
            "{} holds no http.wit (has the crate's WIT layout changed?)",
            deps.display()
        )))
    }
}

/// One WIT file as a package, its errors rendered with the source line.
fn parse_wit_file(file: &Path) -> Result<UnresolvedPackageGroup, ComponentizeError> {
    let text = std::fs::read_to_string(file).map_err(|error| {
        ComponentizeError::Wit(format!("cannot read {}: {error}", file.display()))
    })?;
    UnresolvedPackageGroup::parse(file, &text)
        .map_err(|(map, error)| ComponentizeError::Wit(error.render(&map)))
}

fn tool_package(resolve: &mut Resolve) -> Result<wit_parser::PackageId, ComponentizeError> {
    resolve
        .push_str("tool.wit", crate::WIT)
        .map_err(|error| ComponentizeError::Wit(format!("{error:#}")))
}

fn encode(
    module: &[u8],
    resolve: &Resolve,
    world: wit_parser::WorldId,
) -> Result<Vec<u8>, ComponentizeError> {
    let mut module = module.to_vec();
    embed_component_metadata(&mut module, resolve, world, StringEncoding::UTF8)
        .map_err(|error| ComponentizeError::Encode(format!("{error:#}")))?;
    ComponentEncoder::default()
        .module(&module)
        .and_then(|encoder| {
            encoder.adapter(
                WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME,
                WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
            )
        })
        .map(|encoder| encoder.validate(true))
        .and_then(|mut encoder| encoder.encode())
        .map_err(|error| ComponentizeError::Encode(format!("{error:#}")))
}
