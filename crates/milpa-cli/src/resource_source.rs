//! The manifest's `[[resources]]` served as a [`ResourceProvider`]: files, folders and
//! commands, read-only and bounded.
//!
//! - A file or a folder's file is read only if it lies inside the folder the manifest
//!   names once every symlink is followed (a link out of the folder is refused, as is a
//!   path with `..`), and only up to its `max_bytes` (a larger file is refused, not cut).
//! - A command runs as a command tool does (no shell, cleared environment, closed input,
//!   its own process group killed when it ends or times out); its output is cut at
//!   `max_bytes`, and a non-zero exit is a failed read quoting the end of its stderr.
//! - Text is returned as text when it is UTF-8 and its MIME type is textual; anything
//!   else as a base64 blob.

use std::path::{Component, Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use milpa::catalog::{
    CatalogError, Resource, ResourceContents, ResourceProvider, ResourceTemplate,
};
use milpa::{Deferred, ToolContext, ToolRegistry};
use milpa_process::{child_env, process_tree};

use crate::catalog_section::{DEFAULT_RESOURCE_TIMEOUT_SECONDS, ResourceSource, ResourceSpec};
use crate::command_tool::{STDERR_TAIL_BYTES, read_capped, read_tail};

/// The most files one folder lists (it still serves every file below it on request).
const MAX_LISTED_FILES: usize = 1000;

/// One `[[resources]]` entry, ready to read.
#[derive(Debug)]
struct Entry {
    uri: String,
    name: String,
    description: Option<String>,
    mime_type: Option<String>,
    scopes: Vec<String>,
    max_bytes: u64,
    source: Source,
}

#[derive(Debug)]
enum Source {
    File(PathBuf),
    /// The folder as written (resolved against the manifest's folder).
    Folder(PathBuf),
    Command {
        argv: Vec<String>,
        env: Vec<String>,
        cwd: Option<PathBuf>,
        timeout: Duration,
    },
}

/// The manifest's resources.
#[derive(Debug)]
pub(crate) struct ManifestResources {
    entries: Vec<Entry>,
}

impl ManifestResources {
    /// The resources of `specs`, paths relative to `base_dir`.
    pub(crate) fn new(specs: &[ResourceSpec], base_dir: Option<&Path>) -> ManifestResources {
        let resolve = |path: &Path| match base_dir {
            Some(base) if path.is_relative() => base.join(path),
            _ => path.to_path_buf(),
        };
        let entries = specs
            .iter()
            .map(|spec| {
                let source = match spec.source() {
                    ResourceSource::File => {
                        Source::File(resolve(spec.file.as_deref().unwrap_or(Path::new(""))))
                    }
                    ResourceSource::Folder => {
                        Source::Folder(resolve(spec.folder.as_deref().unwrap_or(Path::new(""))))
                    }
                    ResourceSource::Command => Source::Command {
                        argv: spec
                            .command
                            .as_ref()
                            .map(|c| c.get_ref().clone())
                            .unwrap_or_default(),
                        env: spec.env.clone(),
                        cwd: base_dir.map(Path::to_path_buf),
                        timeout: Duration::from_secs(
                            spec.timeout_seconds
                                .unwrap_or(DEFAULT_RESOURCE_TIMEOUT_SECONDS),
                        ),
                    },
                };
                Entry {
                    uri: spec.uri.get_ref().clone(),
                    name: spec
                        .name
                        .clone()
                        .unwrap_or_else(|| spec.uri.get_ref().clone()),
                    description: spec.description.clone(),
                    mime_type: spec.mime_type.clone(),
                    scopes: spec.scopes.clone(),
                    max_bytes: spec.max_bytes(),
                    source,
                }
            })
            .collect();
        ManifestResources { entries }
    }
}

impl Entry {
    fn listed(&self, uri: String, name: String, mime_type: Option<String>) -> Resource {
        let mut resource = Resource::new(uri, name).with_scopes(self.scopes.iter().cloned());
        if let Some(description) = &self.description {
            resource = resource.with_description(description.clone());
        }
        if let Some(mime_type) = mime_type {
            resource = resource.with_mime_type(mime_type);
        }
        resource
    }

    /// The MIME type of `path`: the manifest's, else by its extension.
    fn mime_of(&self, path: &Path) -> Option<String> {
        self.mime_type.clone().or_else(|| {
            mime_guess::from_path(path)
                .first()
                .map(|mime| mime.essence_str().to_owned())
        })
    }
}

impl ResourceProvider for ManifestResources {
    fn resources(&self) -> Vec<Resource> {
        let mut listed = Vec::new();
        for entry in &self.entries {
            match &entry.source {
                Source::File(path) => listed.push(entry.listed(
                    entry.uri.clone(),
                    entry.name.clone(),
                    entry.mime_of(path),
                )),
                Source::Command { .. } => listed.push(
                    entry.listed(
                        entry.uri.clone(),
                        entry.name.clone(),
                        Some(
                            entry
                                .mime_type
                                .clone()
                                .unwrap_or_else(|| "text/plain".into()),
                        ),
                    ),
                ),
                Source::Folder(root) => {
                    for relative in files_below(root, MAX_LISTED_FILES) {
                        let uri = format!("{}{relative}", entry.uri);
                        let mime = entry.mime_of(Path::new(&relative));
                        listed.push(entry.listed(uri, relative, mime));
                    }
                }
            }
        }
        listed
    }

    fn templates(&self) -> Vec<ResourceTemplate> {
        self.entries
            .iter()
            .filter(|entry| matches!(entry.source, Source::Folder(_)))
            .filter_map(|entry| {
                let template =
                    ResourceTemplate::new(&format!("{}{{+path}}", entry.uri), entry.name.clone())
                        .ok()?;
                let template = template.with_scopes(entry.scopes.iter().cloned());
                Some(match &entry.description {
                    Some(description) => template.with_description(description.clone()),
                    None => template,
                })
            })
            .collect()
    }

    fn read<'a>(
        &'a self,
        uri: &'a str,
        _ctx: &'a ToolContext,
    ) -> Deferred<'a, Result<Vec<ResourceContents>, CatalogError>> {
        Deferred::pending(async move {
            for entry in &self.entries {
                match &entry.source {
                    Source::File(path) if entry.uri == uri => {
                        return read_file(entry, uri, path.clone()).await;
                    }
                    Source::Command {
                        argv,
                        env,
                        cwd,
                        timeout,
                    } if entry.uri == uri => {
                        return run_command(entry, uri, argv, env, cwd.as_deref(), *timeout).await;
                    }
                    Source::Folder(root) => {
                        if let Some(relative) = uri.strip_prefix(entry.uri.as_str()) {
                            let path = inside(root, relative)?;
                            return read_file(entry, uri, path).await;
                        }
                    }
                    _ => {}
                }
            }
            Err(CatalogError::NotFound(uri.to_owned()))
        })
    }
}

/// Looks at the manifest's folders again every `rescan_seconds` (the shortest any folder
/// asks for) while `registry` is served: a file added or removed changes the listing, and
/// the registry tells each client (`notifications/resources/list_changed`). Nothing runs
/// when no folder asks for it. Must be called inside a Tokio runtime.
///
/// Polling, not file-system events: a listing is at most [`MAX_LISTED_FILES`] files, so a
/// look costs about a millisecond, and it works the same on every file system (network
/// mounts and containers included, where events are unreliable).
pub(crate) fn rescan_folders(registry: &Arc<ToolRegistry>, specs: &[ResourceSpec]) {
    let Some(every) = specs.iter().filter_map(ResourceSpec::rescan_every).min() else {
        return;
    };
    // The task must not keep the registry alive once the server let it go.
    let registry = Arc::downgrade(registry);
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await;
        let mut last_error: Option<String> = None;
        loop {
            ticks.tick().await;
            let Some(registry) = registry.upgrade() else {
                return;
            };
            // Reading folders blocks: off the runtime's threads.
            let Ok(refreshed) =
                tokio::task::spawn_blocking(move || registry.refresh_catalog()).await
            else {
                return;
            };
            match refreshed {
                Ok(()) => last_error = None,
                Err(error) => {
                    let message = error.to_string();
                    // Said once, not every few seconds while it lasts.
                    if last_error.as_deref() != Some(message.as_str()) {
                        tracing::warn!(target: "milpa::resources", error = %message, "the resource listing did not change: it would offer a URI twice");
                        last_error = Some(message);
                    }
                }
            }
        }
    });
}

/// `relative` below `root`, refused when it is not a plain relative path or leads out of
/// `root` once symlinks are followed. A path that does not exist is not found.
fn inside(root: &Path, relative: &str) -> Result<PathBuf, CatalogError> {
    let path = Path::new(relative);
    let plain = !relative.is_empty()
        && !relative.contains('\\')
        && path.components().all(|c| matches!(c, Component::Normal(_)));
    if !plain {
        return Err(CatalogError::InvalidArguments(format!(
            "'{relative}' is not a path inside the folder (no '..', '.', empty or absolute parts)"
        )));
    }
    let missing = |_| CatalogError::NotFound(relative.to_owned());
    let root = root.canonicalize().map_err(missing)?;
    let full = root.join(path).canonicalize().map_err(missing)?;
    if !full.starts_with(&root) {
        return Err(CatalogError::InvalidArguments(format!(
            "'{relative}' leads out of the folder (a symlink); it is not served"
        )));
    }
    Ok(full)
}

/// The files below `root` (following no symlink out of it), as `/`-separated paths: the
/// first `cap` found, sorted.
fn files_below(root: &Path, cap: usize) -> Vec<String> {
    let Ok(root) = root.canonicalize() else {
        return Vec::new();
    };
    let mut found = Vec::new();
    let mut folders = vec![root.clone()];
    // A link back up the tree would list forever: each folder is read once.
    let mut visited = std::collections::HashSet::new();
    while let Some(folder) = folders.pop() {
        if !visited.insert(folder.clone()) || found.len() >= cap {
            continue;
        }
        let Ok(read) = std::fs::read_dir(&folder) else {
            continue;
        };
        for item in read.flatten() {
            let Ok(path) = item.path().canonicalize() else {
                continue;
            };
            if !path.starts_with(&root) {
                continue;
            }
            if path.is_dir() {
                folders.push(path);
            } else if let Ok(relative) = item.path().strip_prefix(&root) {
                found.push(relative.to_string_lossy().replace('\\', "/"));
                // A folder of a million files lists `cap` of them, not a million.
                if found.len() >= cap {
                    break;
                }
            }
        }
    }
    found.sort();
    found
}

async fn read_file(
    entry: &Entry,
    uri: &str,
    path: PathBuf,
) -> Result<Vec<ResourceContents>, CatalogError> {
    let cap = entry.max_bytes;
    let mime = entry.mime_of(&path);
    let bytes = tokio::task::spawn_blocking(move || -> Result<Vec<u8>, CatalogError> {
        use std::io::Read;
        let file = std::fs::File::open(&path)
            .map_err(|_| CatalogError::NotFound(path.display().to_string()))?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        if !file.metadata().is_ok_and(|m| m.is_file()) {
            return Err(CatalogError::NotFound(path.display().to_string()));
        }
        if size > cap {
            return Err(CatalogError::failed(format!(
                "The file is {size} bytes, over the resource's {cap}-byte cap (max_bytes)"
            )));
        }
        // Read at most one byte over the cap: a file that grew meanwhile is still bounded.
        let mut bytes = Vec::new();
        file.take(cap + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| CatalogError::failed_with("The file could not be read", e))?;
        if bytes.len() as u64 > cap {
            return Err(CatalogError::failed(format!(
                "The file grew over the resource's {cap}-byte cap"
            )));
        }
        Ok(bytes)
    })
    .await
    .map_err(|e| CatalogError::failed_with("The read was interrupted", e))??;
    Ok(vec![contents(uri, mime.as_deref(), bytes)])
}

/// Text when the bytes are UTF-8 and the type is textual (or unknown), a blob otherwise.
fn contents(uri: &str, mime: Option<&str>, bytes: Vec<u8>) -> ResourceContents {
    let textual = mime.is_none_or(|m| {
        m.starts_with("text/")
            || m.ends_with("json")
            || m.ends_with("xml")
            || m.ends_with("yaml")
            || m.ends_with("toml")
            || m == "application/javascript"
    });
    let mime = mime.unwrap_or("text/plain");
    if textual {
        match String::from_utf8(bytes) {
            Ok(text) => return ResourceContents::text(uri, mime, text),
            Err(not_text) => {
                return ResourceContents::blob(
                    uri,
                    "application/octet-stream",
                    not_text.as_bytes(),
                );
            }
        }
    }
    ResourceContents::blob(uri, mime, &bytes)
}

async fn run_command(
    entry: &Entry,
    uri: &str,
    argv: &[String],
    env: &[String],
    cwd: Option<&Path>,
    timeout: Duration,
) -> Result<Vec<ResourceContents>, CatalogError> {
    let Some((program, args)) = argv.split_first() else {
        return Err(CatalogError::failed("The resource's command is empty"));
    };
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .env_clear()
        .envs(child_env::inherited(env))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(cwd) = cwd {
        command.current_dir(cwd);
    }
    let (mut child, mut tree) = process_tree::spawn(&mut command)
        .map_err(|e| CatalogError::failed_with(format!("Could not start `{program}`"), e))?;
    let cap = usize::try_from(entry.max_bytes).unwrap_or(usize::MAX);
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let run = async {
        let ((out, _cut), (err, _), status) = tokio::join!(
            read_capped(stdout, cap),
            read_tail(stderr, STDERR_TAIL_BYTES),
            child.wait()
        );
        (out, err, status)
    };
    let finished = tokio::time::timeout(timeout, run).await;
    // Whatever the program left running goes with it (and all of it, on a timeout).
    tree.kill();
    let (out, err, status) = finished.map_err(|_| {
        CatalogError::failed(format!(
            "`{program}` ran past its {}s timeout and was stopped",
            timeout.as_secs()
        ))
    })?;
    let status =
        status.map_err(|e| CatalogError::failed_with("Could not wait for the command", e))?;
    if !status.success() {
        let tail = String::from_utf8_lossy(&err);
        return Err(CatalogError::failed(format!(
            "`{program}` failed ({status}): {}",
            tail.trim_end()
        )));
    }
    let mime = entry.mime_type.as_deref().unwrap_or("text/plain");
    Ok(vec![contents(uri, Some(mime), out)])
}
