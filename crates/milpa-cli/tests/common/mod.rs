//! Helpers: run the real `milpa` binary in a temporary folder.

#![allow(dead_code)]

pub mod http;
pub mod redis;
pub mod stdio;
pub mod terminal;
pub mod tls;

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

/// milpa's state folder variable: each sandbox is its own.
pub const HOME_ENV: &str = "MILPA_HOME";
/// The store variable, removed so the developer's own setting cannot leak in.
pub const STORE_ENV: &str = "MILPA_STORE";

/// A temporary folder to run `milpa` in (so no stray `./milpa.toml` is picked up).
pub struct Sandbox {
    pub dir: tempfile::TempDir,
}

impl Sandbox {
    pub fn new() -> Sandbox {
        Sandbox {
            dir: tempfile::tempdir().expect("a temporary folder"),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `name` in the folder; returns its path.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Writes an executable script.
    pub fn script(&self, name: &str, text: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = self.write(name, text);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    /// `milpa` run in the folder, without colours.
    pub fn milpa(&self) -> Command {
        let mut cmd = Command::cargo_bin("milpa").expect("the milpa binary");
        cmd.current_dir(self.dir.path())
            .env("NO_COLOR", "1")
            // State (the default SQLite store) stays in the sandbox.
            .env(HOME_ENV, self.dir.path())
            .env_remove(STORE_ENV)
            .env_remove("RUST_LOG")
            .timeout(std::time::Duration::from_secs(60));
        cmd
    }

    /// `milpa --manifest m.toml …` after writing `manifest` to `m.toml`.
    pub fn with_manifest(&self, manifest: &str) -> Command {
        self.write("m.toml", manifest);
        let mut cmd = self.milpa();
        cmd.args(["--manifest", "m.toml"]);
        cmd
    }
}

/// What a finished run printed, and its exit code.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", self.stdout))
    }
}

pub fn run(cmd: &mut Command) -> Run {
    let output = cmd.output().expect("milpa ran");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Runs `milpa ARGS…` on `manifest` and returns what it printed.
pub fn run_manifest(sandbox: &Sandbox, manifest: &str, args: &[&str]) -> Run {
    run(sandbox.with_manifest(manifest).args(args))
}

/// A manifest line `command = [...]` that runs this build's `milpa` as a stdio MCP server
/// (memory store) on the manifest `upstream_manifest`: a real upstream for gateway tests.
pub fn upstream_command(upstream_manifest: &Path) -> String {
    let milpa = assert_cmd::cargo::cargo_bin("milpa");
    serde_json::json!([
        milpa.display().to_string(),
        "--store",
        "memory",
        "--manifest",
        upstream_manifest.display().to_string(),
        "serve"
    ])
    .to_string()
}

/// The hand-written fixture server (`examples/odd_upstream.rs`), built by `cargo test`.
pub fn odd_upstream() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let debug = exe.parent().unwrap().parent().unwrap();
    let server = debug.join("examples").join("odd_upstream");
    assert!(
        server.exists(),
        "{} is built by cargo test",
        server.display()
    );
    server
}

/// A manifest `command = [...]` line running the fixture with `args`.
pub fn odd_command(args: &[&str]) -> String {
    let mut argv = vec![odd_upstream().display().to_string()];
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    serde_json::json!(argv).to_string()
}

/// The records `audit` (a `milpa audit --json …` command) prints once `complete` holds of
/// them, re-reading for up to 10 s.
///
/// A serving process commits its audit records in groups, after a linger of up to 100 ms
/// (`SqliteOptions::audit_linger`, the documented durability trade). Another process that
/// reads the trail right after a call can come before that commit; a test reading a running
/// server's trail waits for the record it expects rather than reading once.
pub fn trail_until(
    mut audit: impl FnMut() -> Run,
    complete: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let read = audit();
        assert_eq!(read.code, 0, "{}", read.stderr);
        let records = read.json().as_array().cloned().unwrap_or_default();
        if complete(&records) {
            return records;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the trail never held what was expected: {records:#?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
