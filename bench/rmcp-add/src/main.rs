//! A tiny rmcp server with one tool, `add`, over stdio: the baseline that `bench_paced`
//! (crates/milpa-mcp/examples/bench_paced.rs) measures milpa against.
//!
//! ```text
//! cargo build --release --manifest-path bench/rmcp-add/Cargo.toml
//! bench/rmcp-add/target/release/rmcp-add [pipes|stdio|http [ADDR]]
//! ```
//!
//! `http` serves rmcp's Streamable HTTP transport (`StreamableHttpService` on axum, SSE
//! answers, stateful sessions: rmcp's defaults) at `http://ADDR/mcp` (default
//! `127.0.0.1:8766`), with `TCP_NODELAY` on accepted sockets as milpa sets it, for
//! `bench_http --url`.
//!
//! Two transports, because rmcp's own stdio helper and a pipe-backed one cost very
//! differently:
//!
//! - `stdio` is `rmcp::transport::stdio()`, which is `(tokio::io::stdin(),
//!   tokio::io::stdout())`: Tokio's stdin reads on a blocking-pool thread, so every read
//!   is a hand-off between threads.
//! - `pipes` (the default) wraps file descriptors 0 and 1 in
//!   `tokio::net::unix::pipe::{Receiver, Sender}`: non-blocking pipes driven by the
//!   reactor, no blocking thread. It needs stdin and stdout to be pipes (as a bench's
//!   child process has them).

use std::os::fd::AsFd;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{ServerCapabilities, ServerConfig};
use rmcp::{ServerHandler, ServiceExt, schemars, tool, tool_handler, tool_router};
use serde::Deserialize;

/// The arguments of `add`.
#[derive(Deserialize, schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct AddArgs {
    a: i64,
    b: i64,
}

/// The server: one tool.
#[derive(Clone)]
struct Adder {
    tool_router: ToolRouter<Adder>,
}

#[tool_router]
impl Adder {
    fn new() -> Adder {
        Adder {
            tool_router: Self::tool_router(),
        }
    }

    /// Adds two integers.
    #[tool(description = "Adds two integers")]
    fn add(&self, Parameters(AddArgs { a, b }): Parameters<AddArgs>) -> String {
        (a + b).to_string()
    }
}

// The router built once (in `new`), not per call (the macro's default).
#[tool_handler(router = self.tool_router)]
impl ServerHandler for Adder {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mode = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "pipes".to_owned());
    let running = match mode.as_str() {
        "stdio" => Adder::new().serve(rmcp::transport::stdio()).await?,
        "pipes" => {
            let input = std::io::stdin().as_fd().try_clone_to_owned()?;
            let output = std::io::stdout().as_fd().try_clone_to_owned()?;
            let reader = tokio::net::unix::pipe::Receiver::from_owned_fd(input)?;
            let writer = tokio::net::unix::pipe::Sender::from_owned_fd(output)?;
            Adder::new().serve((reader, writer)).await?
        }
        "http" => return serve_http().await,
        other => {
            return Err(format!("unknown transport {other}: expected pipes, stdio or http").into());
        }
    };
    running.waiting().await?;
    Ok(())
}

/// rmcp's Streamable HTTP server with its default configuration, until the process is killed.
async fn serve_http() -> Result<(), Box<dyn std::error::Error>> {
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    };
    let addr = std::env::args()
        .nth(2)
        .unwrap_or_else(|| "127.0.0.1:8766".to_owned());
    let service = StreamableHttpService::new(
        || Ok(Adder::new()),
        LocalSessionManager::default().into(),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    use axum::serve::ListenerExt;
    let listener = tokio::net::TcpListener::bind(&addr)
        .await?
        .tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
    eprintln!("rmcp-add: serving http://{addr}/mcp");
    axum::serve(listener, router).await?;
    Ok(())
}
