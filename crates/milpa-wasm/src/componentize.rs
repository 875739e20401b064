//! Turning a core WebAssembly module into a tool component (feature `componentize`).
//!
//! A C tool built with clang and wasi-libc (`--target=wasm32-wasi -mexec-model=reactor`)
//! is a core module speaking WASI preview 1 and exporting `call` by the canonical ABI. This
//! embeds the `milpa:tool` world's type information into it and wraps it with the WASI
//! preview-1 **reactor** adapter (the command adapter wants a `_start` a tool does not
//! have), giving a WASI 0.2 component the host loads.

use wasi_preview1_component_adapter_provider::{
    WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME, WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
};
use wit_component::{ComponentEncoder, StringEncoding, embed_component_metadata};
use wit_parser::Resolve;

/// Why a module could not be made a component.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ComponentizeError {
    /// The WIT did not parse or has no such world.
    #[error("the WIT did not parse: {0}")]
    Wit(String),
    /// The module does not fit the world (a missing `call`, `memory` or `cabi_realloc`
    /// export, an import the adapter cannot provide, …) or is not valid WebAssembly.
    #[error("could not make a component of the module: {0}")]
    Encode(String),
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

/// The component for `module` of `world`, a world of the WIT package in `wit_folder`
/// (with its `deps/`) that includes `milpa:tool/tool@0.1.0` and adds imports: for a tool
/// that needs `wasi:http` (its sandbox then needs `allow_hosts`).
pub fn componentize_world(
    module: &[u8],
    wit_folder: &std::path::Path,
    world: &str,
) -> Result<Vec<u8>, ComponentizeError> {
    let mut resolve = Resolve::default();
    tool_package(&mut resolve)?;
    let (package, _) = resolve
        .push_path(wit_folder)
        .map_err(|error| ComponentizeError::Wit(format!("{error:#}")))?;
    let world = resolve
        .select_world(&[package], Some(world))
        .map_err(|error| ComponentizeError::Wit(format!("{error:#}")))?;
    encode(module, &resolve, world)
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
