//! `milpa check`: everything `serve` would refuse at start, found without starting
//! anything. The manifest is read and its tools, resources, prompts and Cedar policy are
//! built as `serve` builds them (on a memory store, so no state file is touched); each
//! upstream's settings are checked without launching it or opening a connection.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::manifest::{Manifest, UpstreamSpec};
use crate::terminal_output::{emit, print_json, printable};
use crate::{CliError, EXIT_OK};

/// What a sound manifest offers, as counted by the check.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Offered {
    pub tools: usize,
    pub resources: usize,
    pub templates: usize,
    pub prompts: usize,
    pub upstreams: usize,
}

/// Reports `offered` for the manifest at `source` (`None`: the built-in demo toolset).
pub(crate) fn report(source: Option<&Path>, offered: &Offered, json: bool) -> Result<u8, CliError> {
    let name = source.map_or_else(
        || "the built-in demo toolset".to_owned(),
        |p| p.display().to_string(),
    );
    if json {
        print_json(&json!({
            "manifest": source.map(|p| p.display().to_string()),
            "ok": true,
            "tools": offered.tools,
            "resources": offered.resources,
            "resourceTemplates": offered.templates,
            "prompts": offered.prompts,
            "upstreams": offered.upstreams,
        }))?;
    } else {
        let upstreams = if offered.upstreams == 0 {
            String::new()
        } else {
            format!(
                ", {} upstream(s) checked but not started (their tools are found when served)",
                offered.upstreams
            )
        };
        emit(&format!(
            "{} is sound: {} tool(s), {} resource(s), {} template(s), {} prompt(s){upstreams}\n",
            printable(&name),
            offered.tools,
            offered.resources,
            offered.templates,
            offered.prompts,
        ));
    }
    Ok(EXIT_OK)
}

/// Checks each upstream's settings without starting it: a stdio command's program can be
/// found, a bearer token's variable is set. The first problem is a usage error naming its
/// line.
pub(crate) fn check_upstreams(
    manifest: &Manifest,
    env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<(), CliError> {
    for upstream in &manifest.upstreams {
        check_upstream(manifest, upstream, env)?;
    }
    Ok(())
}

fn check_upstream(
    manifest: &Manifest,
    upstream: &UpstreamSpec,
    env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<(), CliError> {
    let name = upstream.name();
    let text_env = |variable: &str| env(variable).and_then(|value| value.into_string().ok());
    if let Some((at, message)) = upstream.unset_variable(&text_env) {
        return Err(CliError::usage(
            manifest.error_at(Some(at), message).to_string(),
        ));
    }
    // The program as it will be run: its `${VAR}` read.
    let program = upstream.command.as_ref().and_then(|command| {
        let written = command.get_ref().first()?;
        crate::env_template::EnvTemplate::parse(written)
            .ok()?
            .expand(&text_env)
            .ok()
    });
    if let Some(command) = &upstream.command
        && let Some(program) = &program
        && find_program(program, env("PATH").as_deref()).is_none()
    {
        return Err(CliError::usage(
            manifest
                .error_at(
                    Some(command.span().start),
                    format!("upstream `{name}`: program `{program}` is not found (not a file, or not on PATH)"),
                )
                .to_string(),
        ));
    }
    if let Some(variable) = &upstream.bearer_env
        && env(variable.get_ref()).is_none_or(|value| value.is_empty())
    {
        return Err(CliError::usage(
            manifest
                .error_at(
                    Some(variable.span().start),
                    format!(
                        "upstream `{name}`: bearer_env names `{}`, which is not set",
                        variable.get_ref()
                    ),
                )
                .to_string(),
        ));
    }
    Ok(())
}

/// Where `program` would be run from, as the gateway runs it: the path itself when it has
/// a `/` (relative to the working folder), else the first executable file of that name on
/// `path`.
fn find_program(program: &str, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |candidate: &Path| {
        candidate
            .metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let candidate = PathBuf::from(program);
        return runnable(&candidate).then_some(candidate);
    }
    std::env::split_paths(path?)
        .map(|folder| folder.join(program))
        .find(|candidate| runnable(candidate))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_found_on_the_path_or_as_paths() {
        let path = std::ffi::OsString::from("/nonexistent:/bin:/usr/bin");
        assert!(find_program("sh", Some(&path)).is_some());
        assert!(find_program("no-such-program-here", Some(&path)).is_none());
        assert!(find_program("/bin/sh", None).is_some());
        assert!(find_program("./no-such-program.sh", Some(&path)).is_none());
        // A folder is not a program.
        assert!(find_program("/tmp", None).is_none());
    }
}
