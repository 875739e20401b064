//! Command tools: a manifest's `[[tools]]` entry run as a program.
//!
//! - argv only, never a shell; each `{param}` becomes part of exactly one argv element;
//! - a value that would start an element with `-` (so the program could read it as an
//!   option: `touch {path}` with `--version`) is refused with `VALIDATION_ERROR`, unless a
//!   literal `--` element comes first or the param sets `allow_leading_dash = true`;
//! - the environment is cleared except `PATH`, `HOME`, `LANG` and the tool's `env` list;
//! - standard input is closed (`/dev/null`);
//! - the program runs in its own process group; when its hard timeout fires (or the call is
//!   cancelled) the whole group is killed, and stragglers left behind after the program
//!   exits are killed too. On Linux that includes descendants that left the group
//!   (`setsid`): milpa adopts orphans as a child subreaper and kills every descendant (see
//!   [`process_tree`] for what that means for the whole process, and
//!   what other systems get);
//! - standard output is kept up to `max_output_bytes` (the rest is read and dropped, and
//!   `meta.truncated` is `true`); output that parses as JSON becomes structured `data`,
//!   anything else text;
//! - a non-zero exit is a failed result (`meta.code = COMMAND_FAILED`) with `meta.exit_code`
//!   (or `meta.signal`) and the tail of standard error in the message.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use milpa::{
    Deferred, ErrorCode, Invocation, Tool, ToolContext, ToolDefinition, ToolError, ToolOptions,
    ToolOutput, ToolResult,
};
use milpa_process::{child_env, process_tree};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::manifest::{CommandToolSpec, Confirm};
use crate::template::ArgTemplate;

/// How much of standard error a failure message quotes (its end).
pub(crate) const STDERR_TAIL_BYTES: usize = 2048;

/// The code of a result whose program exited unsuccessfully.
pub(crate) const COMMAND_FAILED: &str = "COMMAND_FAILED";

/// A program run as a tool. Build it with [`CommandTool::from_spec`].
#[derive(Debug, Clone)]
pub(crate) struct CommandTool {
    program: PathBuf,
    args: Vec<ArgTemplate>,
    /// Per element of `args`: whether a literal `--` comes before it (options ended).
    after_end_of_options: Vec<bool>,
    /// Params whose values may start an element with `-`: those that opted in, and those
    /// with an `enum` (every value is the manifest's own).
    leading_dash_ok: Vec<String>,
    defaults: Map<String, Value>,
    env: Vec<String>,
    cwd: Option<PathBuf>,
    max_output: usize,
}

/// What the pipeline enforces for a `[[tools]]` entry of either kind (command or
/// `wasm`): scopes, flags, confirmation, timeouts (soft and hard: the tool's
/// `timeout_seconds`), version, path rules of its params.
pub(crate) fn tool_options(spec: &CommandToolSpec) -> ToolOptions {
    let timeout = Duration::from_secs(spec.timeout_seconds());
    let mut options = ToolOptions::default();
    options.scopes = spec.scopes.clone();
    options.mutating = spec.mutating;
    options.requires_confirmation = spec.confirm == Confirm::Caller;
    options.requires_human_approval = spec.confirm == Confirm::Human;
    options.timeout = timeout;
    options.hard_timeout = Some(timeout);
    options.version = spec.version.clone();
    options.paths = spec
        .params
        .iter()
        .filter_map(|(name, param)| Some((name.clone(), param.path_rule()?)))
        .collect();
    options
}

impl CommandTool {
    /// The tool for a manifest entry; relative `cwd` and relative program paths with a `/`
    /// (`./scripts/x.sh`) are taken from `base_dir` (the manifest's folder).
    pub(crate) fn from_spec(spec: &CommandToolSpec, base_dir: Option<&Path>) -> CommandTool {
        // Checked by `Manifest::parse`: a tool without `wasm` has a command.
        let argv: &[String] = spec.command.as_ref().map_or(&[], |c| c.get_ref());
        let resolve = |path: &Path| match base_dir {
            Some(base) if path.is_relative() => base.join(path),
            _ => path.to_path_buf(),
        };
        let first = argv.first().map_or("", String::as_str);
        let program = PathBuf::from(first);
        let program = if first.contains('/') {
            resolve(&program)
        } else {
            program
        };
        let defaults = spec
            .params
            .iter()
            .filter_map(|(name, p)| p.default.clone().map(|d| (name.clone(), d)))
            .collect();
        let args: Vec<ArgTemplate> = argv.iter().skip(1).map(|a| ArgTemplate::parse(a)).collect();
        let after_end_of_options = args
            .iter()
            .scan(false, |ended, arg| {
                let before = *ended;
                *ended |= arg.is_end_of_options();
                Some(before)
            })
            .collect();
        let leading_dash_ok = spec
            .params
            .iter()
            .filter(|(_, p)| p.allow_leading_dash || p.allowed.is_some())
            .map(|(name, _)| name.clone())
            .collect();
        CommandTool {
            program,
            args,
            after_end_of_options,
            leading_dash_ok,
            defaults,
            env: spec.env.clone(),
            cwd: spec.cwd.as_ref().map(|cwd| resolve(cwd.get_ref())),
            max_output: usize::try_from(spec.max_output_bytes()).unwrap_or(usize::MAX),
        }
    }

    /// The definition to register: name, description, schema, scopes, flags, timeouts.
    pub(crate) fn definition(spec: &CommandToolSpec, base_dir: Option<&Path>) -> ToolDefinition {
        ToolDefinition::new(
            spec.name(),
            spec.description.clone(),
            spec.input_schema(),
            tool_options(spec),
            Arc::new(CommandTool::from_spec(spec, base_dir)),
        )
    }

    /// The argv (after the program) for validated arguments; `VALIDATION_ERROR` when a
    /// given value would start an element with `-` where the program reads options (see
    /// [`ParamSpec::allow_leading_dash`](crate::manifest::ParamSpec::allow_leading_dash)).
    pub(crate) fn argv(&self, args: &Value) -> Result<Vec<String>, ToolError> {
        let empty = Map::new();
        let given = args.as_object().unwrap_or(&empty);
        for (template, after_end) in self.args.iter().zip(&self.after_end_of_options) {
            if *after_end {
                continue;
            }
            // Defaults are the manifest's own; only the caller's values are checked.
            if let Some(param) = template
                .leading_dash_param(given)
                .filter(|param| !self.leading_dash_ok.iter().any(|ok| ok == param))
            {
                return Err(ToolError::with_code(
                    ErrorCode::ValidationError,
                    format!(
                        "{param}: must not start with `-` (the command would read it as an option)"
                    ),
                ));
            }
        }
        let mut values = self.defaults.clone();
        for (k, v) in given {
            values.insert(k.clone(), v.clone());
        }
        Ok(self.args.iter().filter_map(|t| t.render(&values)).collect())
    }

    fn environment(&self) -> Vec<(String, OsString)> {
        child_env::inherited(&self.env)
    }

    async fn run(&self, args: &Value) -> Result<ToolOutput, ToolError> {
        let argv = self.argv(args)?;
        let mut command = tokio::process::Command::new(&self.program);
        command
            .args(&argv)
            .env_clear()
            .envs(self.environment())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        if let Some(cwd) = &self.cwd {
            if !cwd.is_dir() {
                return Err(ToolError::new(format!(
                    "The working folder `{}` does not exist",
                    cwd.display()
                )));
            }
            command.current_dir(cwd);
        }
        let (mut child, mut tree) = process_tree::spawn(&mut command).map_err(|error| {
            ToolError::new(format!(
                "Could not start `{}`: {error}",
                self.program.display()
            ))
        })?;
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let waited = async move {
            let status = child.wait().await;
            // Whatever the program left running goes with it.
            tree.kill();
            status
        };
        let ((out, truncated), err, status) = tokio::join!(
            read_capped(stdout, self.max_output),
            read_tail(stderr, STDERR_TAIL_BYTES),
            waited
        );
        let status = status.map_err(|e| ToolError::new(format!("Could not wait: {e}")))?;
        Ok(ToolOutput::Result(Box::new(outcome(
            status, out, truncated, &err,
        ))))
    }
}

impl Tool for CommandTool {
    fn invoke<'a>(&'a self, args: &'a Value, _ctx: &'a ToolContext) -> Invocation<'a> {
        Deferred::pending(self.run(args))
    }
}

/// Reads everything, keeping the first `cap` bytes; reports whether more came. The rest is
/// read and dropped, so the program runs to its own end and its exit status is its own
/// (a program that never stops writing meets its timeout).
pub(crate) async fn read_capped(
    pipe: Option<impl AsyncRead + Unpin>,
    cap: usize,
) -> (Vec<u8>, bool) {
    let Some(mut pipe) = pipe else {
        return (Vec::new(), false);
    };
    let mut out = Vec::new();
    let mut truncated = false;
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(out.len());
                out.extend_from_slice(&chunk[..n.min(room)]);
                truncated |= n > room;
            }
        }
    }
    if truncated {
        cut_to_char_boundary(&mut out);
    }
    (out, truncated)
}

/// Reads everything, keeping only the last `keep` bytes (and whether any were dropped).
pub(crate) async fn read_tail(
    pipe: Option<impl AsyncRead + Unpin>,
    keep: usize,
) -> (Vec<u8>, bool) {
    let Some(mut pipe) = pipe else {
        return (Vec::new(), false);
    };
    let mut tail = Vec::new();
    let mut cut = false;
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                tail.extend_from_slice(&chunk[..n]);
                if tail.len() > 2 * keep {
                    tail.drain(..tail.len() - keep);
                    cut = true;
                }
            }
        }
    }
    if tail.len() > keep {
        tail.drain(..tail.len() - keep);
        cut = true;
    }
    // Do not start in the middle of a character.
    let start = tail
        .iter()
        .position(|b| (*b & 0xC0) != 0x80)
        .unwrap_or(tail.len());
    tail.drain(..start);
    (tail, cut)
}

fn cut_to_char_boundary(bytes: &mut Vec<u8>) {
    if let Err(error) = std::str::from_utf8(bytes)
        && error.error_len().is_none()
    {
        bytes.truncate(error.valid_up_to());
    }
}

/// What standard output becomes: JSON when it parses (and was not cut), else text without
/// its final newline; nothing at all is `null`.
fn output_data(out: &[u8], truncated: bool) -> Value {
    if out.is_empty() {
        return Value::Null;
    }
    if !truncated && let Ok(value) = serde_json::from_slice::<Value>(out) {
        return value;
    }
    let text = String::from_utf8_lossy(out);
    let text = text
        .strip_suffix('\n')
        .map(|t| t.strip_suffix('\r').unwrap_or(t))
        .unwrap_or(&text);
    Value::String(text.to_owned())
}

fn outcome(
    status: std::process::ExitStatus,
    out: Vec<u8>,
    truncated: bool,
    (err, err_cut): &(Vec<u8>, bool),
) -> ToolResult {
    let data = output_data(&out, truncated);
    let signal = status.signal();
    if status.success() {
        return ToolResult::success(data)
            .with_meta("exit_code", json!(status.code()))
            .with_meta("truncated", json!(truncated));
    }
    let stderr = String::from_utf8_lossy(err);
    let stderr = stderr.trim();
    let what = match (status.code(), signal) {
        (Some(code), _) => format!("Command exited with code {code}"),
        (None, Some(signal)) => format!("Command was killed by signal {signal}"),
        (None, None) => "Command failed".to_owned(),
    };
    let message = if stderr.is_empty() {
        format!("{what} (nothing on stderr)")
    } else if *err_cut {
        format!("{what}: …{stderr}")
    } else {
        format!("{what}: {stderr}")
    };
    let mut result = ToolResult::error_with_code(ErrorCode::Other(COMMAND_FAILED.into()), message)
        .with_meta("exit_code", json!(status.code()))
        .with_meta("truncated", json!(truncated));
    if let Some(signal) = signal {
        result = result.with_meta("signal", json!(signal));
    }
    result.data = data;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_becomes_json_or_text() {
        assert_eq!(output_data(b"{\"a\": 1}\n", false), json!({"a": 1}));
        assert_eq!(output_data(b"hello\n", false), json!("hello"));
        assert_eq!(output_data(b"a\nb\r\n", false), json!("a\nb"));
        assert_eq!(output_data(b"[1,2", true), json!("[1,2"));
        assert_eq!(output_data(b"", false), Value::Null);
        assert_eq!(output_data(b"5", true), json!("5"));
    }

    #[test]
    fn cuts_respect_characters() {
        let mut bytes = "añ".as_bytes()[..2].to_vec();
        cut_to_char_boundary(&mut bytes);
        assert_eq!(bytes, b"a");
    }

    #[tokio::test]
    async fn tails_keep_the_end() {
        let data = vec![b'x'; 10_000];
        let (tail, cut) = read_tail(Some(&data[..]), 100).await;
        assert_eq!((tail.len(), cut), (100, true));
        let (tail, cut) = read_tail(Some(&b"short"[..]), 100).await;
        assert_eq!((tail, cut), (b"short".to_vec(), false));
    }
}
