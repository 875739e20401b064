//! The command line, as clap reads it (DESIGN §5).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// `milpa`: list, inspect, call and serve tools.
#[derive(Debug, Parser)]
#[command(
    name = "milpa",
    version,
    about = "List, inspect, call and serve milpa tools (the built-in demo toolset, or a manifest's)",
    after_help = "Exit codes: 0 success, 1 a refused or failed call, 2 a usage or manifest error."
)]
pub struct Cli {
    /// The manifest [default: ./milpa.toml if present, else the built-in demo toolset]
    #[arg(long, global = true, value_name = "FILE")]
    pub manifest: Option<PathBuf>,

    /// Where confirmations, verifications and budgets live: memory | sqlite:PATH |
    /// redis://HOST:PORT
    #[arg(long, global = true, value_name = "URL", default_value = "memory")]
    pub store: String,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the tools (name, flags, scopes, description), or inspect one.
    Tools(ToolsArgs),
    /// Run one call through the pipeline and print its result.
    Call(CallArgs),
    /// Serve the tools over MCP (stdio by default, or Streamable HTTP).
    Serve(ServeArgs),
}

/// `milpa tools`.
#[derive(Debug, Args)]
pub struct ToolsArgs {
    /// Print the tool summaries as JSON (the MCP `tools/list` shape).
    #[arg(long)]
    pub json: bool,

    /// `inspect`.
    #[command(subcommand)]
    pub command: Option<ToolsCommand>,
}

/// `milpa tools …`.
#[derive(Debug, Subcommand)]
pub enum ToolsCommand {
    /// Show the stages a call of TOOL would go through, for a given caller.
    Inspect(InspectArgs),
}

/// Who calls, over which channel, in which mode.
#[derive(Debug, Clone, Default, Args)]
pub struct CallerArgs {
    /// The channel (cli, mcp, web, telegram, …) [default: cli]
    #[arg(long, value_name = "C")]
    pub channel: Option<String>,

    /// The principal calling [default: local-shell with every scope, when no caller flag
    /// is given; anonymous otherwise]
    #[arg(long, value_name = "P")]
    pub actor: Option<String>,

    /// A scope the caller holds (repeat for several).
    #[arg(long = "scope", value_name = "S")]
    pub scopes: Vec<String>,

    /// Plan mode: validate and authorize, run nothing.
    #[arg(long)]
    pub plan: bool,
}

impl CallerArgs {
    /// Whether any flag describing the caller was given.
    pub fn describes_a_caller(&self) -> bool {
        self.channel.is_some() || self.actor.is_some() || !self.scopes.is_empty()
    }
}

/// `milpa tools inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The tool.
    pub tool: String,

    /// The caller.
    #[command(flatten)]
    pub caller: CallerArgs,

    /// Print the plan as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `milpa call`.
#[derive(Debug, Args)]
pub struct CallArgs {
    /// The tool.
    pub tool: String,

    /// The arguments, a JSON object [default: {}]
    #[arg(value_name = "ARGS_JSON")]
    pub args: Option<String>,

    /// The caller.
    #[command(flatten)]
    pub caller: CallerArgs,

    /// Redeem a confirmation token (runs the arguments of the call that issued it).
    #[arg(long, value_name = "T")]
    pub confirm_token: Option<String>,

    /// Print the ToolResult JSON instead of rendering it.
    #[arg(long)]
    pub json: bool,
}

/// `milpa serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Serve over standard input and output (the default).
    #[arg(long, conflicts_with = "http")]
    pub stdio: bool,

    /// Serve Streamable HTTP on ADDR (a loopback address: 127.0.0.1:8080, localhost:8080,
    /// the IPv6 loopback on port 8080, or just a port; port 0 picks a free one), endpoint /mcp.
    #[arg(long, value_name = "ADDR", value_parser = parse_http_addr)]
    pub http: Option<SocketAddr>,

    /// Append one JSON line per call outcome to FILE [default: audit to stderr]
    #[arg(long, value_name = "FILE")]
    pub audit: Option<PathBuf>,
}

/// Reads `--http`: a socket address, `localhost:PORT`, or a bare port (on 127.0.0.1).
///
/// ```
/// use milpa_cli::cli::parse_http_addr;
///
/// assert_eq!(parse_http_addr("127.0.0.1:80").unwrap().to_string(), "127.0.0.1:80");
/// assert_eq!(parse_http_addr("localhost:8080").unwrap().to_string(), "127.0.0.1:8080");
/// assert_eq!(parse_http_addr("9000").unwrap().to_string(), "127.0.0.1:9000");
/// assert_eq!(parse_http_addr("[::1]:1").unwrap().to_string(), "[::1]:1");
/// assert!(parse_http_addr("example.com:80").is_err());
/// ```
pub fn parse_http_addr(text: &str) -> Result<SocketAddr, String> {
    let loopback = |port: &str| {
        port.parse::<u16>()
            .ok()
            .map(|port| SocketAddr::from(([127, 0, 0, 1], port)))
    };
    text.parse::<SocketAddr>()
        .ok()
        .or_else(|| text.strip_prefix("localhost:").and_then(loopback))
        .or_else(|| loopback(text))
        .ok_or_else(|| {
            format!("expected an address like 127.0.0.1:8080, localhost:8080 or 8080, got {text:?}")
        })
}
