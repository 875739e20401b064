//! The thinnest faithful MCP proxy on rmcp: an rmcp server over stdio whose `tools/list` and
//! `tools/call` are forwarded to an upstream server that it starts as a child process and
//! talks to with rmcp's client (`TokioChildProcess`). No policy, no audit, no store: what a
//! proxy built on rmcp's client costs per call at the least, weighed against `milpa proxy`
//! (whose client is hand-written, in crates/milpa-gateway) by `bench/proxy_overhead.sh`.
//!
//! ```text
//! cargo build --release --manifest-path bench/rmcp-add/Cargo.toml
//! bench/rmcp-add/target/release/rmcp-proxy [--prefix PREFIX] -- UPSTREAM_CMD [ARG]...
//! ```
//!
//! `--prefix` renames the upstream's tools as `milpa proxy --prefix` does (`up__add` for
//! `add`), so the same client calls both proxies by the same names; a call without the
//! prefix is refused. The upstream's stderr is inherited.

use std::os::fd::AsFd;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::TokioChildProcess;
use rmcp::{ErrorData, Peer, RoleClient, RoleServer, ServerHandler, ServiceError, ServiceExt};

/// The server side: every request goes to the upstream through rmcp's client.
#[derive(Clone)]
struct Proxy {
    /// The client's handle on the upstream: cloneable, and requests through it may overlap
    /// (rmcp's client matches responses to requests by id), so calls in flight stay in
    /// flight upstream.
    upstream: Peer<RoleClient>,
    prefix: Arc<str>,
}

/// What the client reports, as the error the server answers with: the upstream's own
/// JSON-RPC error as it gave it, anything else (a closed upstream, say) as an internal error.
fn upstream_error(error: ServiceError) -> ErrorData {
    match error {
        ServiceError::McpError(error) => error,
        other => ErrorData::internal_error(format!("upstream: {other}"), None),
    }
}

impl ServerHandler for Proxy {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    /// The upstream's page of tools (from rmcp's client, which may answer from its cache
    /// of the upstream's answer while that is fresh), each renamed with the prefix.
    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut result = self
            .upstream
            .list_tools(request)
            .await
            .map_err(upstream_error)?;
        if !self.prefix.is_empty() {
            for tool in &mut result.tools {
                tool.name = format!("{}{}", self.prefix, tool.name).into();
            }
        }
        Ok(result)
    }

    /// The call, without the prefix, sent once: `call_tool_once` rather than the running
    /// service's `call_tool`, which would clone the request to drive input-required rounds
    /// on this side; the upstream's answer (a result, or an input-required or task result)
    /// goes back to the client as it came, and so does a cancellation (rmcp cancels the
    /// upstream request when this future is dropped).
    async fn call_tool(
        &self,
        mut request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(name) = request.name.strip_prefix(&*self.prefix) else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool {}", request.name),
                None,
            ));
        };
        request.name = name.to_owned().into();
        self.upstream
            .call_tool_once(request)
            .await
            .map_err(upstream_error)
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut prefix = String::new();
    let mut command = Vec::new();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--prefix" => prefix = args.next().ok_or("--prefix needs a value")?,
            "--" => {
                command = args.by_ref().collect();
                break;
            }
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let Some((program, program_args)) = command.split_first() else {
        return Err("usage: rmcp-proxy [--prefix PREFIX] -- UPSTREAM_CMD [ARG]...".into());
    };

    // The client first (spawn, then the initialize handshake), so the first `tools/list`
    // already finds the upstream's tools. `()` is rmcp's do-nothing client handler.
    let mut upstream_command = tokio::process::Command::new(program);
    upstream_command.args(program_args);
    let client = ().serve(TokioChildProcess::new(upstream_command)?).await?;

    let proxy = Proxy {
        upstream: client.peer().clone(),
        prefix: prefix.into(),
    };
    // Served on file descriptors 0 and 1 as reactor-driven non-blocking pipes, as
    // `rmcp-add pipes` and `milpa` serve stdio, not with `rmcp::transport::stdio()` (whose
    // stdin reads hop through Tokio's blocking pool): the proxies differ by their code, not
    // by how they read their input.
    let input = std::io::stdin().as_fd().try_clone_to_owned()?;
    let output = std::io::stdout().as_fd().try_clone_to_owned()?;
    let reader = tokio::net::unix::pipe::Receiver::from_owned_fd(input)?;
    let writer = tokio::net::unix::pipe::Sender::from_owned_fd(output)?;
    let server = proxy.serve((reader, writer)).await?;
    server.waiting().await?;
    // The client gone, the upstream's stdin closes and it exits (or is killed).
    client.cancel().await?;
    Ok(())
}
