//! [`CallState`]: everything one call's store owns (its WASI context, HTTP hooks, resource
//! table, limiter), built fresh for the call from the [`Sandbox`] and dropped with it.

use std::path::PathBuf;
use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use crate::http_grant::HostGrant;
use crate::limits::Limits;
use crate::sandbox::Sandbox;

/// A folder grant as resolved at load: the host folder and the path the guest sees.
#[derive(Debug, Clone)]
pub(crate) struct Preopen {
    pub(crate) host: PathBuf,
    pub(crate) guest: String,
    pub(crate) writable: bool,
}

/// The store data of one call.
pub(crate) struct CallState {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    hooks: HostGrant,
    table: ResourceTable,
    pub(crate) limits: Limits,
}

/// Standard output and standard error of one call, kept up to the sandbox's cap.
pub(crate) struct Captured {
    pub(crate) stdout: MemoryOutputPipe,
    pub(crate) stderr: MemoryOutputPipe,
}

impl CallState {
    /// The state for one call: no arguments, no inherited variables, empty standard input,
    /// captured (capped) output, the granted folders, no sockets of any kind.
    pub(crate) fn new(
        sandbox: &Arc<Sandbox>,
        preopens: &[Preopen],
    ) -> Result<(CallState, Captured), std::io::Error> {
        let captured = Captured {
            stdout: MemoryOutputPipe::new(sandbox.max_output_bytes),
            stderr: MemoryOutputPipe::new(sandbox.max_output_bytes),
        };
        let mut builder = WasiCtxBuilder::new();
        builder
            .stdout(captured.stdout.clone())
            .stderr(captured.stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        for (name, value) in &sandbox.env {
            builder.env(name, value);
        }
        for preopen in preopens {
            let perms = if preopen.writable {
                FsPerms::ReadWrite
            } else {
                FsPerms::ReadOnly
            };
            builder
                .preopened_dir(&preopen.host, &preopen.guest, perms)
                .map_err(|error| {
                    std::io::Error::other(format!(
                        "could not open the granted folder {}: {}",
                        preopen.host.display(),
                        crate::runtime::first_line(&error.to_string())
                    ))
                })?;
        }
        let state = CallState {
            wasi: builder.build(),
            http: WasiHttpCtx::new(),
            hooks: HostGrant::new(sandbox.clone()),
            table: ResourceTable::new(),
            limits: Limits::new(sandbox.memory_mib, sandbox.memory_bytes()),
        };
        Ok((state, captured))
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for CallState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.hooks,
        }
    }
}
