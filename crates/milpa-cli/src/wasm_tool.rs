//! `[[tools]]` entries with `wasm = "…"` (cargo feature `wasm`): a WebAssembly component
//! run by milpa-wasm in a sandbox that grants only what `[tools.sandbox]` says.
//!
//! Each component is read, compiled and checked when the registry is built (`serve`,
//! `call`, `tools`, `check`), so a missing file, a broken component or an import its grants
//! cannot satisfy is a manifest error naming the `wasm =` line before anything is served.

use std::path::{Path, PathBuf};
use std::time::Duration;

use milpa::ToolDefinition;
use milpa_wasm::{Sandbox, WasmTool};
use serde_json::Value;
use toml::Spanned;

use crate::command_tool::tool_options;
use crate::env_template::EnvTemplate;
use crate::manifest::{CommandToolSpec, Manifest, ManifestError};

/// The definition of the `wasm` tool `spec` (whose component is `wasm`): its component
/// loaded with the sandbox the manifest grants, `${VAR}` in `[tools.sandbox] env` read
/// from milpa's environment now.
pub(crate) fn definition(
    manifest: &Manifest,
    spec: &CommandToolSpec,
    wasm: &Spanned<PathBuf>,
) -> Result<ToolDefinition, ManifestError> {
    let name = spec.name();
    let base_dir = manifest.base_dir();
    let sandbox_at = spec
        .sandbox
        .as_ref()
        .map_or(wasm.span().start, |sandbox| sandbox.span().start);
    let sandbox =
        sandbox(spec, base_dir, &|variable| std::env::var(variable).ok()).map_err(|message| {
            manifest.error_at(Some(sandbox_at), format!("tool `{name}`: {message}"))
        })?;
    let path = resolve(base_dir, wasm.get_ref());
    let tool = load(path, sandbox).map_err(|message| {
        manifest.error_at(Some(wasm.span().start), format!("tool `{name}`: {message}"))
    })?;
    let builder = ToolDefinition::builder(name)
        .description(spec.description.clone())
        .input_schema(spec.input_schema())
        .options(tool_options(spec));
    Ok(tool.definition(builder))
}

/// The grants of `spec`: folders taken from `base_dir` (the manifest's folder), variables
/// expanded with `env`, the wall time of `timeout_seconds`, and `max_output_bytes` as the
/// largest result. What is wrong is said without the line (the caller adds it).
pub(crate) fn sandbox(
    spec: &CommandToolSpec,
    base_dir: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Sandbox, String> {
    let mut sandbox = Sandbox::new().with_timeout(Duration::from_secs(spec.timeout_seconds()));
    if let Some(max) = &spec.max_output_bytes {
        sandbox =
            sandbox.with_max_result_bytes(usize::try_from(*max.get_ref()).unwrap_or(usize::MAX));
    }
    let Some(grants) = &spec.sandbox else {
        return Ok(sandbox);
    };
    let grants = grants.get_ref();
    if let Some(memory) = &grants.memory_mib {
        sandbox = sandbox.with_memory_mib(*memory.get_ref());
    }
    for folder in &grants.fs_read {
        sandbox = sandbox.allow_read(resolve(base_dir, folder));
    }
    for folder in &grants.fs_write {
        sandbox = sandbox.allow_write(resolve(base_dir, folder));
    }
    for host in &grants.allow_hosts {
        sandbox = sandbox.allow_host(host.trim());
    }
    for (variable, written) in &grants.env {
        // Checked by `Manifest::parse`: every value is a well-formed template.
        let value = EnvTemplate::parse(written)
            .map_err(|message| format!("sandbox.env.{variable}: {message}"))?
            .expand(env)
            .map_err(|unset| format!("sandbox.env.{variable}: {unset}"))?;
        sandbox = sandbox.with_env(variable.clone(), value);
    }
    Ok(sandbox)
}

/// What `inspect` shows of a `wasm` tool: the component's path and its grants and limits
/// ([`Sandbox::describe`]: variables by name, never their values, which stay unread).
pub(crate) fn grants(manifest: &Manifest, name: &str) -> Option<Value> {
    let spec = manifest.tools.iter().find(|spec| spec.name() == name)?;
    let wasm = spec.wasm.as_ref()?;
    let base_dir = manifest.base_dir();
    // The values are not read: the description names the variables only.
    let sandbox = sandbox(spec, base_dir, &|_| Some(String::new())).ok()?;
    let mut described = sandbox.describe();
    if let Some(fields) = described.as_object_mut() {
        fields.insert(
            "wasm".into(),
            Value::String(resolve(base_dir, wasm.get_ref()).display().to_string()),
        );
    }
    Some(described)
}

/// `path` taken from the manifest's folder when relative.
fn resolve(base_dir: Option<&Path>, path: &Path) -> PathBuf {
    match base_dir {
        Some(base) if path.is_relative() => base.join(path),
        _ => path.to_path_buf(),
    }
}

/// Loads the component on a thread of its own with its own small Tokio runtime: the
/// registry is built both outside any runtime (the CLI) and inside one (programs embedding
/// milpa-cli, tests), and a runtime cannot be blocked on from within another. The file is
/// still compiled on that runtime's blocking pool, as milpa-wasm does it.
fn load(path: PathBuf, sandbox: Sandbox) -> Result<WasmTool, String> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .map_err(|error| format!("cannot start the loader: {error}"))?;
                runtime
                    .block_on(WasmTool::load(path, sandbox))
                    .map_err(|error| error.to_string())
            })
            .join()
            .unwrap_or_else(|_| Err("the component's loader stopped unexpectedly".to_owned()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> CommandToolSpec {
        Manifest::parse("m.toml", text).unwrap().tools.remove(0)
    }

    #[test]
    fn grants_are_taken_from_the_manifest_folder_and_variables_expanded() {
        let spec = spec(
            "[[tools]]\nname = \"t\"\nwasm = \"t.wasm\"\ntimeout_seconds = 5\nmax_output_bytes = 100\n\
             [tools.sandbox]\nmemory_mib = 16\nfs_read = [\"data\", \"/srv\"]\nfs_write = [\"out\"]\n\
             allow_hosts = [\"api.example.com\"]\nenv = { TOKEN = \"${SECRET}\", LEVEL = \"${LEVEL:-warn}\" }\n",
        );
        let env = |name: &str| (name == "SECRET").then(|| "s3cret".to_owned());
        let sandbox = sandbox(&spec, Some(Path::new("/etc/milpa")), &env).unwrap();
        assert_eq!(sandbox.memory_mib, 16);
        assert_eq!(sandbox.timeout, Duration::from_secs(5));
        assert_eq!(sandbox.max_result_bytes, 100);
        assert_eq!(
            sandbox.fs_read,
            [PathBuf::from("/etc/milpa/data"), PathBuf::from("/srv")]
        );
        assert_eq!(sandbox.fs_write, [PathBuf::from("/etc/milpa/out")]);
        assert!(sandbox.allows_host("api.example.com", Some(443)));
        let mut env = sandbox.env.clone();
        env.sort();
        assert_eq!(
            env,
            [
                ("LEVEL".to_owned(), "warn".to_owned()),
                ("TOKEN".to_owned(), "s3cret".to_owned())
            ]
        );
        let unset = super::sandbox(&spec, None, &|_| None).unwrap_err();
        assert!(
            unset.contains("sandbox.env.TOKEN") && unset.contains("SECRET"),
            "{unset}"
        );
    }

    #[test]
    fn nothing_is_granted_without_a_sandbox_table() {
        let spec = spec("[[tools]]\nname = \"t\"\nwasm = \"t.wasm\"\n");
        let sandbox = sandbox(&spec, None, &|_| None).unwrap();
        assert_eq!(sandbox.memory_mib, milpa_wasm::DEFAULT_MEMORY_MIB);
        assert!(sandbox.fs_read.is_empty() && sandbox.fs_write.is_empty());
        assert!(sandbox.allow_hosts.is_empty() && sandbox.env.is_empty());
    }
}
