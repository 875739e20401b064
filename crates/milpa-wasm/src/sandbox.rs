//! [`Sandbox`]: what a component is granted (folders, hosts, variables) and the limits it
//! runs under (memory, wall time, output, result size).
//!
//! Everything is denied unless granted: no folder, no host, no variable, no argument, an
//! empty standard input. A grant is checked twice: at load, against what the component
//! imports ([`crate::imports`]), and on every call, by the WASI context built from it.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

/// Memory a component gets unless its sandbox says otherwise (64 MiB).
pub const DEFAULT_MEMORY_MIB: u32 = 64;

/// What standard output and standard error each keep unless the sandbox says otherwise
/// (1 MiB): enough for a guest's diagnostics, small next to its memory.
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 1024 * 1024;

/// The largest result string a call may hand back unless the sandbox says otherwise: the
/// core registry's own default `max_result_bytes` (4 MiB).
pub const DEFAULT_MAX_RESULT_BYTES: usize = 4 * 1024 * 1024;

/// The wall time a call gets unless the sandbox says otherwise: the core's default soft
/// timeout (30 s), so a component tool is never unbounded.
pub const DEFAULT_TIMEOUT: Duration = milpa::DEFAULT_TIMEOUT;

/// The grants and limits of one component tool.
///
/// Built with [`Sandbox::new`] and the `with_*`/`allow_*` methods, or field by field (a
/// manifest's `[tools.sandbox]` table maps onto the fields one to one). Cheap to clone;
/// shown as JSON by [`Sandbox::describe`] for `inspect`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Sandbox {
    /// Linear memory the component may use, all its memories together, in MiB. Growing
    /// past it traps the call (`SANDBOX_LIMIT`, `meta.sandbox_limit = "memory"`).
    pub memory_mib: u32,
    /// Wall time of one call, from instantiation to the result (the tool's
    /// `timeout_seconds`). Past it the call is stopped with `TIMEOUT`.
    pub timeout: Duration,
    /// Folders the component may read, preopened read-only under their own absolute path.
    pub fs_read: Vec<PathBuf>,
    /// Folders the component may read and write, preopened under their own absolute path.
    pub fs_write: Vec<PathBuf>,
    /// Hosts the component may call through outgoing `wasi:http`: `name` (any port) or
    /// `name:port`. Empty: `wasi:http` is not linked, and a component importing it is
    /// refused at load. Raw sockets are never granted.
    pub allow_hosts: Vec<String>,
    /// Environment variables the component sees (`name`, `value`); nothing is inherited.
    pub env: Vec<(String, String)>,
    /// Bytes kept of standard output, and of standard error, per call. Once a stream is
    /// full the guest's further writes to it fail, and the call fails with
    /// `SANDBOX_LIMIT` (`meta.sandbox_limit = "output"`) when it ends.
    pub max_output_bytes: usize,
    /// The largest result string accepted from a call; a larger one is `RESULT_TOO_LARGE`.
    pub max_result_bytes: usize,
}

impl Default for Sandbox {
    fn default() -> Self {
        Sandbox {
            memory_mib: DEFAULT_MEMORY_MIB,
            timeout: DEFAULT_TIMEOUT,
            fs_read: Vec::new(),
            fs_write: Vec::new(),
            allow_hosts: Vec::new(),
            env: Vec::new(),
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
        }
    }
}

impl Sandbox {
    /// Nothing granted, default limits.
    pub fn new() -> Sandbox {
        Sandbox::default()
    }

    /// Sets the memory cap in MiB.
    pub fn with_memory_mib(mut self, mib: u32) -> Self {
        self.memory_mib = mib;
        self
    }

    /// Sets the wall time of one call.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Grants reading `folder`.
    pub fn allow_read(mut self, folder: impl Into<PathBuf>) -> Self {
        self.fs_read.push(folder.into());
        self
    }

    /// Grants reading and writing `folder`.
    pub fn allow_write(mut self, folder: impl Into<PathBuf>) -> Self {
        self.fs_write.push(folder.into());
        self
    }

    /// Grants outgoing HTTP to `host` (`name` or `name:port`).
    pub fn allow_host(mut self, host: impl Into<String>) -> Self {
        self.allow_hosts.push(host.into());
        self
    }

    /// Sets one environment variable the component sees.
    pub fn with_env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// Sets how much of standard output and of standard error a call keeps.
    pub fn with_max_output_bytes(mut self, max: usize) -> Self {
        self.max_output_bytes = max;
        self
    }

    /// Sets the largest result string accepted.
    pub fn with_max_result_bytes(mut self, max: usize) -> Self {
        self.max_result_bytes = max;
        self
    }

    /// The memory cap in bytes.
    pub(crate) fn memory_bytes(&self) -> usize {
        usize::try_from(u64::from(self.memory_mib) * 1024 * 1024).unwrap_or(usize::MAX)
    }

    /// Whether outgoing HTTP to `host` on `port` (as the request will be sent) is granted.
    /// Host names compare without regard to case; an entry without a port allows every
    /// port.
    pub fn allows_host(&self, host: &str, port: Option<u16>) -> bool {
        self.allow_hosts.iter().any(|entry| {
            let (name, entry_port) = split_host_port(entry);
            name.eq_ignore_ascii_case(host.trim_start_matches('[').trim_end_matches(']'))
                && match entry_port {
                    None => true,
                    Some(p) => Some(p) == port,
                }
        })
    }

    /// The grants and limits as JSON, for `inspect` (variables by name only: their values
    /// may be secrets).
    pub fn describe(&self) -> Value {
        let names: Vec<&str> = self.env.iter().map(|(name, _)| name.as_str()).collect();
        json!({
            "memory_mib": self.memory_mib,
            "timeout_seconds": self.timeout.as_secs_f64(),
            "fs_read": self.fs_read,
            "fs_write": self.fs_write,
            "allow_hosts": self.allow_hosts,
            "env": names,
            "max_output_bytes": self.max_output_bytes,
            "max_result_bytes": self.max_result_bytes,
            "sockets": false,
        })
    }
}

/// Splits `name:port` (or `[v6]:port`); a name without a valid port is all name.
fn split_host_port(entry: &str) -> (&str, Option<u16>) {
    let entry = entry.trim();
    if let Some(rest) = entry.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((name, tail)) => (name, tail.strip_prefix(':').and_then(|p| p.parse().ok())),
            None => (rest, None),
        };
    }
    match entry.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') => match port.parse() {
            Ok(port) => (name, Some(port)),
            Err(_) => (entry, None),
        },
        _ => (entry, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_granted_by_default() {
        let sandbox = Sandbox::new();
        assert_eq!(sandbox.memory_mib, 64);
        assert!(sandbox.fs_read.is_empty() && sandbox.fs_write.is_empty());
        assert!(sandbox.allow_hosts.is_empty() && sandbox.env.is_empty());
        assert!(!sandbox.allows_host("localhost", Some(80)));
    }

    #[test]
    fn hosts_match_by_name_and_optional_port() {
        let sandbox = Sandbox::new()
            .allow_host("api.example.com")
            .allow_host("127.0.0.1:8080")
            .allow_host("[::1]:9000");
        assert!(sandbox.allows_host("API.example.com", Some(443)));
        assert!(sandbox.allows_host("api.example.com", None));
        assert!(sandbox.allows_host("127.0.0.1", Some(8080)));
        assert!(!sandbox.allows_host("127.0.0.1", Some(8081)));
        assert!(sandbox.allows_host("[::1]", Some(9000)));
        assert!(!sandbox.allows_host("example.com", Some(443)));
        assert!(!sandbox.allows_host("api.example.com.evil", Some(443)));
    }

    #[test]
    fn describe_names_variables_but_not_their_values() {
        let sandbox = Sandbox::new().with_env("TOKEN", "s3cret");
        let text = sandbox.describe().to_string();
        assert!(text.contains("TOKEN"));
        assert!(!text.contains("s3cret"));
    }
}
