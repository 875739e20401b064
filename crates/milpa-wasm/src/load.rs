//! Loading a component: read the file (a regular file, at most [`MAX_COMPONENT_BYTES`]),
//! compile it once on a blocking thread, check its imports against the sandbox, link WASI
//! (and `wasi:http` when hosts are granted) and pre-instantiate. What comes out is a
//! [`WasmTool`]; every call after that only instantiates.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use wasmtime::component::{Component, Linker};

use crate::bindings::ToolPre;
use crate::imports::{self, ImportRefused};
use crate::runtime::{EngineError, WasmRuntime, first_line};
use crate::sandbox::Sandbox;
use crate::state::{CallState, Preopen};
use crate::tool::{Loaded, WasmTool};

/// The largest component file accepted (256 MiB): far above any real tool, low enough that
/// a wrong path (a disk image, a device) is refused before it is read into memory.
pub const MAX_COMPONENT_BYTES: u64 = 256 * 1024 * 1024;

/// Why a component could not be loaded. Every variant names the file or the grant.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The file could not be opened or read.
    #[error("could not read the component {}: {source}", path.display())]
    Read {
        /// The component's path.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// The path is not a regular file (a folder, a device, a pipe).
    #[error("the component {} is not a regular file", path.display())]
    NotAFile {
        /// The component's path.
        path: PathBuf,
    },
    /// The file is larger than [`MAX_COMPONENT_BYTES`].
    #[error("the component {} is larger than {} MiB", path.display(), MAX_COMPONENT_BYTES / (1024 * 1024))]
    TooLarge {
        /// The component's path.
        path: PathBuf,
    },
    /// wasmtime could not compile it (not a component, invalid, or a core module).
    #[error("could not compile the component {}: {message}", path.display())]
    Compile {
        /// The component's path.
        path: PathBuf,
        /// wasmtime's message, first line only.
        message: String,
    },
    /// It imports more than its sandbox grants, or something the host never provides.
    #[error("refused the component {}: {source}", path.display())]
    Imports {
        /// The component's path.
        path: PathBuf,
        /// The import refused.
        #[source]
        source: ImportRefused,
    },
    /// It does not fit the `milpa:tool@0.1.0` world (no `call` export of that type), or
    /// an import did not link.
    #[error("the component {} does not fit the milpa:tool world: {message}", path.display())]
    Link {
        /// The component's path.
        path: PathBuf,
        /// wasmtime's message, first line only.
        message: String,
    },
    /// A folder grant is not an existing folder.
    #[error("the granted folder {} cannot be used: {source}", folder.display())]
    Grant {
        /// The folder as granted.
        folder: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// The engine could not be made.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The blocking thread that compiles was lost (the runtime is shutting down).
    #[error("the component {} was not compiled: the compiling thread stopped", path.display())]
    Interrupted {
        /// The component's path.
        path: PathBuf,
    },
}

impl WasmTool {
    /// Loads the component at `path` on the process-wide [`WasmRuntime::shared`]. Call it
    /// within a Tokio runtime: the file is read and compiled on its blocking pool, so a
    /// large component does not stall the tasks serving other calls.
    pub async fn load(path: impl AsRef<Path>, sandbox: Sandbox) -> Result<WasmTool, LoadError> {
        let runtime = WasmRuntime::shared()?;
        WasmTool::load_with(&runtime, path, sandbox).await
    }

    /// Loads the component at `path` on `runtime`.
    pub async fn load_with(
        runtime: &WasmRuntime,
        path: impl AsRef<Path>,
        sandbox: Sandbox,
    ) -> Result<WasmTool, LoadError> {
        let path = path.as_ref().to_path_buf();
        let engine = runtime.engine().clone();
        let for_thread = path.clone();
        let compiled = tokio::task::spawn_blocking(move || {
            let bytes = read_component(&for_thread)?;
            Component::new(&engine, &bytes).map_err(|error| LoadError::Compile {
                path: for_thread,
                message: first_line(&error.to_string()),
            })
        })
        .await
        .map_err(|_| LoadError::Interrupted { path: path.clone() })??;
        link(runtime, path, compiled, sandbox)
    }

    /// Loads a component already in memory (`origin` names it in errors): for components
    /// built on the fly, such as the tests' guests.
    pub async fn from_bytes(
        runtime: &WasmRuntime,
        origin: impl Into<PathBuf>,
        bytes: Vec<u8>,
        sandbox: Sandbox,
    ) -> Result<WasmTool, LoadError> {
        let path = origin.into();
        let engine = runtime.engine().clone();
        let for_thread = path.clone();
        let compiled = tokio::task::spawn_blocking(move || {
            Component::new(&engine, &bytes).map_err(|error| LoadError::Compile {
                path: for_thread,
                message: first_line(&error.to_string()),
            })
        })
        .await
        .map_err(|_| LoadError::Interrupted { path: path.clone() })??;
        link(runtime, path, compiled, sandbox)
    }
}

/// Reads a regular file of at most [`MAX_COMPONENT_BYTES`], through `take` so that a file
/// growing while it is read cannot push past the cap.
fn read_component(path: &Path) -> Result<Vec<u8>, LoadError> {
    let read_error = |source| LoadError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_error)?;
    let metadata = file.metadata().map_err(read_error)?;
    if !metadata.is_file() {
        return Err(LoadError::NotAFile {
            path: path.to_path_buf(),
        });
    }
    if metadata.len() > MAX_COMPONENT_BYTES {
        return Err(LoadError::TooLarge {
            path: path.to_path_buf(),
        });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(metadata.len()).unwrap_or(0));
    file.take(MAX_COMPONENT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_error)?;
    if bytes.len() as u64 > MAX_COMPONENT_BYTES {
        return Err(LoadError::TooLarge {
            path: path.to_path_buf(),
        });
    }
    Ok(bytes)
}

/// Checks the imports, resolves the folder grants, links and pre-instantiates.
fn link(
    runtime: &WasmRuntime,
    path: PathBuf,
    component: Component,
    sandbox: Sandbox,
) -> Result<WasmTool, LoadError> {
    let engine = runtime.engine();
    let imports: Vec<String> = component
        .component_type()
        .imports(engine)
        .map(|(name, _)| name.to_owned())
        .collect();
    imports::check(imports.iter().map(String::as_str), &sandbox).map_err(|source| {
        LoadError::Imports {
            path: path.clone(),
            source,
        }
    })?;
    let preopens = resolve_folders(&sandbox)?;

    let mut linker: Linker<CallState> = Linker::new(engine);
    let link_error = |error: wasmtime::Error| LoadError::Link {
        path: path.clone(),
        message: first_line(&error.to_string()),
    };
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(link_error)?;
    if !sandbox.allow_hosts.is_empty() {
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker).map_err(link_error)?;
    }
    let pre = linker.instantiate_pre(&component).map_err(link_error)?;
    let pre = ToolPre::new(pre).map_err(link_error)?;
    Ok(WasmTool::from_loaded(Loaded {
        path,
        sandbox: Arc::new(sandbox),
        imports,
        preopens,
        pre,
        engine: engine.clone(),
    }))
}

/// Each granted folder, canonical, seen by the guest under that same absolute path.
fn resolve_folders(sandbox: &Sandbox) -> Result<Vec<Preopen>, LoadError> {
    let read = sandbox.fs_read.iter().map(|folder| (folder, false));
    let write = sandbox.fs_write.iter().map(|folder| (folder, true));
    read.chain(write)
        .map(|(folder, writable)| {
            let grant_error = |source| LoadError::Grant {
                folder: folder.clone(),
                source,
            };
            let host = std::fs::canonicalize(folder).map_err(grant_error)?;
            if !host.is_dir() {
                return Err(grant_error(std::io::Error::new(
                    std::io::ErrorKind::NotADirectory,
                    "not a folder",
                )));
            }
            let guest = host.to_string_lossy().into_owned();
            Ok(Preopen {
                host,
                guest,
                writable,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_are_read() {
        let folder = tempfile::tempdir().unwrap();
        assert!(matches!(
            read_component(folder.path()),
            Err(LoadError::NotAFile { .. })
        ));
        let missing = folder.path().join("missing.wasm");
        let error = read_component(&missing).unwrap_err();
        assert!(error.to_string().contains("missing.wasm"), "{error}");
        let file = folder.path().join("tool.wasm");
        std::fs::write(&file, b"\0asm").unwrap();
        assert_eq!(read_component(&file).unwrap(), b"\0asm");
    }

    #[test]
    fn a_missing_folder_grant_is_named() {
        let sandbox = Sandbox::new().allow_read("/nonexistent/milpa-wasm-grant");
        let error = resolve_folders(&sandbox).unwrap_err();
        assert!(
            error.to_string().contains("/nonexistent/milpa-wasm-grant"),
            "{error}"
        );
    }
}
