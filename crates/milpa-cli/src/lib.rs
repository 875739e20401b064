//! # milpa-cli
//!
//! The `milpa` command (DESIGN §5): list, inspect, call and serve tools, from the built-in
//! demo toolset or from a manifest (`milpa.toml`) that declares tools which run programs.
//!
//! ```text
//! milpa tools [--json]
//! milpa tools inspect TOOL [--channel C] [--actor P] [--scope S]... [--plan] [--json]
//! milpa call TOOL [ARGS_JSON] [--channel C] [--actor P] [--scope S]... [--plan]
//!            [--confirm-token T] [--json]
//! milpa serve [--stdio | --http ADDR] [--audit FILE]
//! milpa proxy [--http ADDR] [--name N] -- CMD [ARG]...
//! milpa approvals [list] [--json]
//! milpa approvals show ID [--json]
//! milpa approvals grant ID [--actor P] [--reason TEXT]
//! milpa approvals reject ID [--actor P] [--reason TEXT]
//! milpa audit [--tool T] [--actor P] [--outcome O] [--since DURATION] [--limit N] [--json]
//! milpa audit verify [FILE]
//! global: --manifest FILE, --store URL (memory | sqlite:PATH | redis://HOST:PORT[/DB])
//! ```
//!
//! State (confirmation tokens, parked calls and verification requests, rate budgets, the
//! audit trail) lives in the store: by default a SQLite file in the user's state folder (see [`store`]), so a
//! token minted by one `milpa call` is redeemed by the next.
//!
//! Exit codes: 0 success, 1 a refused or failed call (or decision), 2 a usage or manifest
//! error, or a state file other users can write.
//!
//! A Rust program with its own tools gets the same subcommands in one line; the manifest
//! (if any) still supplies the policy, the tokens and its command tools:
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! fn main() -> std::process::ExitCode {
//!     milpa_cli::main_with(|registry, setup| {
//!         // e.g. registry.register_provider(Arc::new(MyTools::default()))?;
//!         milpa_cli::demo::register_on(registry, setup.stores)
//!     })
//! }
//! ```
//!
//! The public items are that embedding seam ([`main_with`], [`run_with`], [`setup::Setup`]
//! with the [`store::Stores`] and the [`manifest::Manifest`] it hands over, the [`demo`]
//! toolset) and what the integration tests drive through the library
//! ([`setup::build_registry`], [`approval_code::short_code`]); everything else is
//! `pub(crate)`.

pub mod approval_code;
mod approvals;
mod catalog_commands;
pub mod catalog_section;
mod cli;
mod command_tool;
mod commands;
pub mod demo;
pub mod env_template;
mod local_tokens;
pub mod manifest;
mod manifest_check;
mod manifest_error;
mod notify;
mod plan_words;
pub mod policy_section;
mod prompt_template;
mod prompt_text;
mod readiness;
mod resource_source;
#[cfg(feature = "wasm")]
mod sandbox_words;
pub mod setup;
mod stderr_log;
pub mod store;
mod telemetry;
mod template;
mod terminal_output;
mod trail_file;
mod upstream_metrics;
mod verify_progress;
#[cfg(feature = "wasm")]
mod wasm_tool;

use std::ffi::OsString;
use std::fmt;
use std::path::Path;
use std::process::ExitCode;

use clap::Parser;
use milpa::{RegistryError, ToolRegistry};

use crate::cli::Cli;
use crate::manifest::Manifest;
use crate::setup::Setup;

/// Builds everything a parsed manifest describes, running none of it: the store URL it
/// names (parsed, not opened), the registry on memory stores (policy, rules, rate limit,
/// verification, command tools), the authenticator, the server options, and each command
/// tool's argv for empty arguments and its input schema.
///
/// For the fuzz target `fuzz/fuzz_targets/manifest.rs`, which must reach the code a served
/// manifest reaches while the CLI's internals stay private. Panics are the finding; every
/// refusal is returned or dropped.
#[doc(hidden)]
pub fn build_all_of(manifest: &Manifest) {
    if let Some(url) = &manifest.store.url {
        let _ = store::StoreUrl::parse(url.get_ref(), manifest.base_dir());
    }
    let _ = setup::build_registry(
        manifest,
        &store::Stores::memory(),
        None,
        Box::new(|_, _| Ok(())),
    );
    let _ = setup::authenticator(manifest);
    let _ = setup::server_options(manifest);
    for spec in manifest.tools.iter().filter(|spec| spec.command.is_some()) {
        let tool = command_tool::CommandTool::from_spec(spec, None);
        let _ = tool.argv(&serde_json::json!({}));
        let _ = spec.input_schema();
    }
}

/// Exit code of a successful run.
pub(crate) const EXIT_OK: u8 = 0;
/// Exit code of a refused or failed call.
pub(crate) const EXIT_CALL_FAILED: u8 = 1;
/// Exit code of a usage or manifest error.
pub(crate) const EXIT_USAGE: u8 = 2;
/// Exit code of a call that did not run: it waits for a confirmation or a person's
/// approval, or the confirmation was declined.
pub(crate) const EXIT_NOT_RUN: u8 = 3;

/// The manifest read when `--manifest` is not given, if it exists.
pub(crate) const DEFAULT_MANIFEST: &str = "milpa.toml";

/// A run that could not go on: what to print and the exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CliError {
    /// The exit code.
    pub(crate) code: u8,
    /// What to print on standard error.
    pub(crate) message: String,
}

impl CliError {
    /// A usage or manifest error (exit code 2).
    pub(crate) fn usage(message: impl Into<String>) -> CliError {
        CliError {
            code: EXIT_USAGE,
            message: message.into(),
        }
    }

    /// A failure while running (exit code 1).
    pub(crate) fn failed(message: impl Into<String>) -> CliError {
        CliError {
            code: EXIT_CALL_FAILED,
            message: message.into(),
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CliError {}

/// The `milpa` binary: the demo toolset when there is no manifest, the manifest's tools
/// otherwise.
pub fn main() -> ExitCode {
    main_with(demo_unless_manifest)
}

/// Registers the demo toolset (on the chosen store) when no manifest file was read.
pub(crate) fn demo_unless_manifest(
    registry: &mut ToolRegistry,
    setup: &Setup<'_>,
) -> Result<(), RegistryError> {
    if setup.manifest.source().is_none() {
        demo::register_on(registry, setup.stores)
    } else {
        Ok(())
    }
}

/// Runs the `milpa` command line on this process's arguments, with the tools `tools`
/// registers (besides the manifest's command tools and verification tools).
pub fn main_with<F>(tools: F) -> ExitCode
where
    F: FnOnce(&mut ToolRegistry, &Setup<'_>) -> Result<(), RegistryError>,
{
    run_with(std::env::args_os(), tools)
}

/// Runs the `milpa` command line on `args` (the first is the program name).
pub fn run_with<I, T, F>(args: I, tools: F) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
    F: FnOnce(&mut ToolRegistry, &Setup<'_>) -> Result<(), RegistryError>,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(error) => {
            // Help and version go to stdout with 0; usage errors to stderr with 2.
            let _ = error.print();
            return ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(EXIT_USAGE));
        }
    };
    match commands::run(cli, Box::new(tools)) {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            // A message can quote what a tool, a store or a peer said.
            eprintln!(
                "milpa: {}",
                milpa::escape::EscapeControl::keeping_layout(&error.to_string())
            );
            ExitCode::from(error.code)
        }
    }
}

/// Reads the manifest `--manifest` names, else `./milpa.toml` when it exists, else the
/// built-in defaults.
pub(crate) fn load_manifest(explicit: Option<&Path>) -> Result<Manifest, CliError> {
    let path = match explicit {
        Some(path) => path,
        None => {
            let default = Path::new(DEFAULT_MANIFEST);
            if !default.exists() {
                return Ok(Manifest::builtin());
            }
            default
        }
    };
    Manifest::load(path).map_err(|e| CliError::usage(e.to_string()))
}
