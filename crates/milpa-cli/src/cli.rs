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
    after_help = "Global options (--manifest, --store) go before or after the subcommand.\n\
Where state lives, unless --store says: $MILPA_STORE, else the manifest's `[store] url`, else \
sqlite:$MILPA_HOME/state.db, $XDG_STATE_HOME/milpa/state.db or ~/.local/state/milpa/state.db.\n\n\
Exit codes: 0 success, 1 a refused or failed call, 2 a usage or manifest error, 3 a call that \
did not run (it waits for a confirmation or an approval).\n\n\
Examples:\n  milpa call add '{\"a\": 2, \"b\": 3}'\n  milpa serve\n  \
milpa --manifest ops.toml serve --http 127.0.0.1:8080\n  milpa check --manifest ops.toml"
)]
pub(crate) struct Cli {
    /// The manifest [default: ./milpa.toml, else the demo toolset]
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) manifest: Option<PathBuf>,

    /// Where state lives: memory | sqlite:PATH | redis://HOST:PORT[/DB] (default: `milpa --help`)
    #[arg(long, global = true, value_name = "URL")]
    pub(crate) store: Option<String>,

    /// What to do.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// List the tools (name, flags, scopes, description), or inspect one.
    #[command(
        after_help = "Examples:\n  milpa tools\n  milpa tools --json\n  milpa tools inspect notes_delete --channel mcp --actor bot --scope notes:write"
    )]
    Tools(ToolsArgs),
    /// Run one call through the pipeline and print its result.
    #[command(
        after_help = "Examples:\n  milpa call add '{\"a\": 2, \"b\": 3}'\n  milpa call notes_delete '{\"id\": 1}'              # asks Proceed? [y/N] at a terminal\n  milpa call notes_delete --confirm-token TOKEN    # redeems a confirmation\n  milpa call notes_add '{\"text\": \"x\"}' --channel mcp --actor bot --scope notes:write --json"
    )]
    Call(CallArgs),
    /// Serve the tools over MCP (stdio by default, or Streamable HTTP).
    #[command(
        after_help = "Examples:\n  milpa serve                                # stdio, for a desktop client\n  milpa serve --http 127.0.0.1:8080 --audit audit.jsonl"
    )]
    Serve(ServeArgs),
    /// Serve one upstream MCP server (a stdio command) through the pipeline: its tools,
    /// under their own names (or `--prefix`), with the manifest's policy.
    #[command(
        after_help = "Examples:\n  milpa proxy -- npx -y @modelcontextprotocol/server-everything\n  milpa proxy --http 127.0.0.1:8080 --name files -- ./files-server --stdio"
    )]
    Proxy(ProxyArgs),
    /// List, show, grant or reject the approvals waiting for a person (calls parked by a
    /// `confirm = "human"` gate, and verification requests).
    #[command(
        after_help = "Examples:\n  milpa approvals\n  milpa approvals show ID\n  milpa approvals grant ID --reason 'looks right'\n  milpa approvals reject ID --reason 'not today'"
    )]
    Approvals(ApprovalsArgs),
    /// Show the store's audit trail, newest first, or check its hash chain.
    #[command(
        after_help = "Examples:\n  milpa audit --since 1h\n  milpa audit --tool notes_delete --outcome success --json\n  milpa audit verify"
    )]
    Audit(AuditArgs),
    /// List the resources and resource templates (URI, type, scopes, description).
    #[command(after_help = "Examples:\n  milpa resources\n  milpa resources --json")]
    Resources(ListArgs),
    /// List the prompts (name, arguments, scopes, description).
    #[command(after_help = "Examples:\n  milpa prompts\n  milpa prompts --json")]
    Prompts(ListArgs),
    /// Read one resource through the pipeline's gates and print its contents.
    #[command(
        after_help = "Examples:\n  milpa read notes://all\n  milpa read docs://guide/intro.md --channel mcp --actor bot --scope docs:read"
    )]
    Read(ReadArgs),
    /// Render one prompt through the pipeline's gates and print its messages.
    #[command(after_help = "Examples:\n  milpa prompt summarize_notes '{\"style\": \"one line\"}'")]
    Prompt(PromptArgs),
    /// Check the manifest as `serve` would at start (tools, resources, prompts, Cedar
    /// policy, upstream settings) without starting anything: exit 0 when sound, 2 naming
    /// the file and line of the first problem.
    #[command(after_help = "Examples:\n  milpa check --manifest ops.toml\n  milpa check --json")]
    Check(CheckArgs),
    /// Print a shell completion script, e.g. `source <(milpa completions bash)`.
    #[command(
        after_help = "Examples:\n  source <(milpa completions bash)\n  milpa completions zsh > ~/.zfunc/_milpa\n  milpa completions fish > ~/.config/fish/completions/milpa.fish"
    )]
    Completions(CompletionsArgs),
    /// Print the manual page (roff) on standard output: what the Debian package installs as
    /// milpa(1). Hidden: it is for packagers (`milpa manpage > milpa.1`).
    #[command(hide = true)]
    Manpage,
}

/// `milpa check`.
#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// Print the verdict as JSON (what the manifest offers).
    #[arg(long)]
    pub(crate) json: bool,
}

/// `milpa completions`.
#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub(crate) shell: clap_complete::Shell,
}

/// `milpa resources` and `milpa prompts`.
#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    /// Print them as JSON (the MCP list shapes).
    #[arg(long)]
    pub(crate) json: bool,
}

/// `milpa read`.
#[derive(Debug, Args)]
pub(crate) struct ReadArgs {
    /// The resource's URI.
    pub(crate) uri: String,

    /// The caller.
    #[command(flatten)]
    pub(crate) caller: CallerArgs,

    /// Print the contents as JSON (the MCP `resources/read` result).
    #[arg(long)]
    pub(crate) json: bool,
}

/// `milpa prompt`.
#[derive(Debug, Args)]
pub(crate) struct PromptArgs {
    /// The prompt.
    pub(crate) name: String,

    /// The arguments, a JSON object of strings [default: {}]
    #[arg(value_name = "ARGS_JSON")]
    pub(crate) args: Option<String>,

    /// The caller.
    #[command(flatten)]
    pub(crate) caller: CallerArgs,

    /// Print the messages as JSON (the MCP `prompts/get` result).
    #[arg(long)]
    pub(crate) json: bool,
}

/// `milpa approvals`.
#[derive(Debug, Args)]
pub(crate) struct ApprovalsArgs {
    /// Print the pending approvals as a JSON array.
    #[arg(long)]
    pub(crate) json: bool,

    /// List the approvals of every server on this store, not only this one's (`[server]
    /// name`, else the manifest's file stem, else `demo`).
    #[arg(long)]
    pub(crate) all: bool,

    /// `list` (the default), `show`, `grant` or `reject`.
    #[command(subcommand)]
    pub(crate) command: Option<ApprovalsCommand>,
}

/// `milpa approvals …`.
#[derive(Debug, Subcommand)]
pub(crate) enum ApprovalsCommand {
    /// The approvals waiting for a decision, oldest first (the default).
    List(ListApprovalsArgs),
    /// One approval in full: its arguments (secrets redacted), decisions and state.
    Show(ShowApprovalArgs),
    /// Approve: the caller's replay then runs the parked arguments, once.
    Grant(DecideArgs),
    /// Refuse: the caller's replay is then FORBIDDEN, naming you and your reason.
    Reject(DecideArgs),
    /// Print a one-time link (valid 10 minutes) that enrols a passkey for an approver on
    /// the approvals page; from then on that approver decides only there, with it.
    Enroll(EnrollArgs),
}

/// `milpa approvals enroll`.
#[derive(Debug, Args)]
pub(crate) struct EnrollArgs {
    /// The approver the passkey is for: the principal they sign in to the page as.
    #[arg(long, value_name = "P")]
    pub(crate) actor: String,

    /// The approvals page's address, to print the whole link (e.g.
    /// http://localhost:8080/approvals); without it, the link's path is printed.
    #[arg(long, value_name = "URL")]
    pub(crate) url: Option<String>,
}

/// `milpa approvals list`.
#[derive(Debug, Args)]
pub(crate) struct ListApprovalsArgs {
    /// Print them as a JSON array.
    #[arg(long)]
    pub(crate) json: bool,

    /// Every server's approvals on this store, not only this one's.
    #[arg(long)]
    pub(crate) all: bool,
}

/// `milpa approvals show`.
#[derive(Debug, Args)]
pub(crate) struct ShowApprovalArgs {
    /// The approval id (`data.approval_id` of the parked call, or the verification's
    /// `request_id`).
    pub(crate) id: String,

    /// Print it as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `milpa approvals grant|reject`.
#[derive(Debug, Args)]
pub(crate) struct DecideArgs {
    /// The approval id.
    pub(crate) id: String,

    /// Who decides (it must not be who asked) [default: $USER, else local-shell]
    #[arg(long, value_name = "P")]
    pub(crate) actor: Option<String>,

    /// Why (shown to the caller of a rejected call, and in the audit trail).
    #[arg(long, value_name = "TEXT")]
    pub(crate) reason: Option<String>,
}

/// `milpa audit`.
#[derive(Debug, Args)]
pub(crate) struct AuditArgs {
    /// Only calls of this tool.
    #[arg(long, value_name = "T")]
    pub(crate) tool: Option<String>,

    /// Only calls by this principal.
    #[arg(long, value_name = "P")]
    pub(crate) actor: Option<String>,

    /// Only this outcome (success, forbidden, rate_limited, …).
    #[arg(long, value_name = "O")]
    pub(crate) outcome: Option<String>,

    /// Only records newer than this (30s, 15m, 2h, 7d).
    #[arg(long, value_name = "DURATION", value_parser = parse_since)]
    pub(crate) since: Option<std::time::Duration>,

    /// At most this many records [default: 50]
    #[arg(long, value_name = "N")]
    pub(crate) limit: Option<usize>,

    /// Print the records as a JSON array.
    #[arg(long)]
    pub(crate) json: bool,

    /// `verify`.
    #[command(subcommand)]
    pub(crate) command: Option<AuditCommand>,
}

/// `milpa audit …`.
#[derive(Debug, Subcommand)]
pub(crate) enum AuditCommand {
    /// Check the hash chain: exit 0 when intact, 1 naming the first record that breaks it.
    Verify(VerifyArgs),
}

/// `milpa audit verify`.
#[derive(Debug, Args)]
pub(crate) struct VerifyArgs {
    /// A JSON-lines audit file (`serve --audit FILE`) [default: the store's trail]
    pub(crate) file: Option<PathBuf>,
}

/// Reads `--since`: a number and a unit (`s`, `m`, `h`, `d`), e.g. `15m`.
pub(crate) fn parse_since(text: &str) -> Result<std::time::Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?}: expected a number and a unit, e.g. 30s, 15m, 2h, 7d"))?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => {
            return Err(format!(
                "{text:?}: unknown unit {unit:?}; use s, m, h or d (e.g. 15m)"
            ));
        }
    };
    n.checked_mul(seconds)
        .map(std::time::Duration::from_secs)
        .ok_or_else(|| format!("{text:?}: too long"))
}

/// `milpa tools`.
#[derive(Debug, Args)]
pub(crate) struct ToolsArgs {
    /// Print the tool summaries as JSON (the MCP `tools/list` shape).
    #[arg(long)]
    pub(crate) json: bool,

    /// `inspect`.
    #[command(subcommand)]
    pub(crate) command: Option<ToolsCommand>,
}

/// `milpa tools …`.
#[derive(Debug, Subcommand)]
pub(crate) enum ToolsCommand {
    /// Show the stages a call of TOOL would go through, for a given caller.
    Inspect(InspectArgs),
}

/// Who calls, over which channel, in which mode.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct CallerArgs {
    /// The channel (cli, mcp, web, telegram, …) [default: cli]
    #[arg(long, value_name = "C")]
    pub(crate) channel: Option<String>,

    /// The principal calling [default: local-shell with every scope, when no caller flag
    /// is given; anonymous otherwise]
    #[arg(long, value_name = "P")]
    pub(crate) actor: Option<String>,

    /// A scope the caller holds (repeat for several).
    #[arg(long = "scope", value_name = "S")]
    pub(crate) scopes: Vec<String>,

    /// Plan mode: validate and authorize, run nothing.
    #[arg(long)]
    pub(crate) plan: bool,
}

impl CallerArgs {
    /// Whether any flag describing the caller was given.
    pub(crate) fn describes_a_caller(&self) -> bool {
        self.channel.is_some() || self.actor.is_some() || !self.scopes.is_empty()
    }
}

/// `milpa tools inspect`.
#[derive(Debug, Args)]
pub(crate) struct InspectArgs {
    /// The tool.
    pub(crate) tool: String,

    /// The caller.
    #[command(flatten)]
    pub(crate) caller: CallerArgs,

    /// Print the plan as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `milpa call`.
#[derive(Debug, Args)]
pub(crate) struct CallArgs {
    /// The tool.
    pub(crate) tool: String,

    /// The arguments, a JSON object [default: {}]
    #[arg(value_name = "ARGS_JSON")]
    pub(crate) args: Option<String>,

    /// The caller.
    #[command(flatten)]
    pub(crate) caller: CallerArgs,

    /// Redeem a confirmation token (runs the arguments of the call that issued it).
    #[arg(long, value_name = "T")]
    pub(crate) confirm_token: Option<String>,

    /// Print the ToolResult JSON instead of rendering it.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `milpa serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Serve over standard input and output (the default).
    #[arg(long, conflicts_with = "http")]
    pub(crate) stdio: bool,

    /// Serve Streamable HTTP on ADDR (a loopback address: 127.0.0.1:8080, localhost:8080,
    /// the IPv6 loopback on port 8080, or just a port; port 0 picks a free one), endpoint /mcp.
    #[arg(long, value_name = "ADDR", value_parser = parse_http_addr)]
    pub(crate) http: Option<SocketAddr>,

    /// Append one JSON line per call outcome to FILE [default: audit to stderr]
    #[arg(long, value_name = "FILE")]
    pub(crate) audit: Option<PathBuf>,
}

/// `milpa proxy`.
#[derive(Debug, Args)]
pub(crate) struct ProxyArgs {
    /// Serve Streamable HTTP on ADDR (a loopback address, as for `serve --http`) instead of
    /// standard input and output.
    #[arg(long, value_name = "ADDR", value_parser = parse_http_addr)]
    pub(crate) http: Option<SocketAddr>,

    /// The upstream's name, in logs and listings [default: the command's file name]
    #[arg(long, value_name = "N")]
    pub(crate) name: Option<String>,

    /// Put P before each of the server's tool names [default: none, the server's own names]
    #[arg(long, value_name = "P")]
    pub(crate) prefix: Option<String>,

    /// Append one JSON line per call outcome to FILE [default: audit to stderr]
    #[arg(long, value_name = "FILE")]
    pub(crate) audit: Option<PathBuf>,

    /// Serve the server's tools and prompts as it defines them each time, without pinning
    /// them (by default a definition that changed since it was first seen is held until a
    /// person grants it: `milpa approvals`)
    #[arg(long)]
    pub(crate) no_pin: bool,

    /// Which revision of MCP to speak to the server: `auto` (ask `server/discover` first,
    /// 2026-07-28 when it lists it, else `initialize`), `2026-07-28` or `2025-11-25`
    #[arg(long, value_name = "REVISION", default_value = "auto", value_parser = parse_protocol)]
    pub(crate) protocol: milpa_gateway::ProtocolChoice,

    /// The upstream server: a program and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub(crate) command: Vec<String>,
}

impl ProxyArgs {
    /// The upstream's name: `--name`, else the program's file name.
    pub(crate) fn upstream_name(&self) -> String {
        if let Some(name) = &self.name {
            return name.clone();
        }
        let program = self.command.first().map(String::as_str).unwrap_or_default();
        let file = program.rsplit('/').next().unwrap_or(program);
        file.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    }
}

/// Reads `--http`: a socket address, `localhost:PORT`, or a bare port (on 127.0.0.1).
pub(crate) fn parse_http_addr(text: &str) -> Result<SocketAddr, String> {
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

/// `--protocol`: `auto`, `2026-07-28` or `2025-11-25`.
fn parse_protocol(text: &str) -> Result<milpa_gateway::ProtocolChoice, String> {
    milpa_gateway::ProtocolChoice::parse(text)
        .ok_or_else(|| "expected auto, 2026-07-28 or 2025-11-25".to_owned())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn since_is_a_number_and_a_unit() {
        assert_eq!(parse_since("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_since("2h").unwrap(), Duration::from_secs(7200));
        assert!(parse_since("2 weeks").is_err());
    }

    #[test]
    fn http_addresses_default_to_loopback() {
        assert_eq!(
            parse_http_addr("127.0.0.1:80").unwrap().to_string(),
            "127.0.0.1:80"
        );
        assert_eq!(
            parse_http_addr("localhost:8080").unwrap().to_string(),
            "127.0.0.1:8080"
        );
        assert_eq!(
            parse_http_addr("9000").unwrap().to_string(),
            "127.0.0.1:9000"
        );
        assert_eq!(parse_http_addr("[::1]:1").unwrap().to_string(), "[::1]:1");
        assert!(parse_http_addr("example.com:80").is_err());
    }
}
