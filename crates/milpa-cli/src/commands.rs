//! The subcommands.

use std::fs::OpenOptions;
use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

use milpa::audit::{AuditSink, JsonLinesAuditSink};
use milpa::render::{ChannelRenderer, TerminalRenderer};
use milpa::{ToolContext, ToolRegistry, ToolResult, channel};
use serde_json::Value;

use crate::cli::{CallArgs, CallerArgs, Cli, Command, ServeArgs, ToolsArgs, ToolsCommand};
use crate::manifest::Manifest;
use crate::setup::{ToolsFn, authenticator, build_registry, server_options};
use crate::{CliError, EXIT_CALL_FAILED, EXIT_OK, Store, load_manifest, parse_store};

/// Runs a parsed command line; returns the exit code.
pub(crate) fn run(cli: Cli, tools: Box<ToolsFn<'_>>) -> Result<u8, CliError> {
    let Store::Memory = parse_store(&cli.store)?;
    let manifest = load_manifest(cli.manifest.as_deref())?;
    match cli.command {
        Command::Tools(args) => {
            init_tracing("warn,milpa::audit=off");
            let registry = registry(&manifest, None, tools)?;
            tools_command(&registry, args)
        }
        Command::Call(args) => {
            init_tracing("warn,milpa::audit=off");
            let registry = registry(&manifest, None, tools)?;
            let runtime = runtime(false)?;
            let code = runtime.block_on(async {
                tokio::select! {
                    code = call(&registry, args) => code,
                    // Dropping the call kills a running command's process group.
                    () = shutdown_signal() => {
                        eprintln!("milpa: interrupted");
                        Ok(EXIT_INTERRUPTED)
                    }
                }
            });
            runtime.shutdown_timeout(SHUTDOWN_GRACE);
            code
        }
        Command::Serve(args) => serve(&manifest, tools, args),
    }
}

fn registry(
    manifest: &Manifest,
    audit: Option<Arc<dyn AuditSink>>,
    tools: Box<ToolsFn<'_>>,
) -> Result<ToolRegistry, CliError> {
    build_registry(manifest, audit, tools).map_err(|e| CliError::usage(e.to_string()))
}

fn runtime(multi_thread: bool) -> Result<tokio::runtime::Runtime, CliError> {
    let mut builder = if multi_thread {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    builder
        .enable_all()
        .build()
        .map_err(|e| CliError::failed(format!("cannot start the async runtime: {e}")))
}

/// Logs to standard error only (standard output is the result, or the MCP channel);
/// `RUST_LOG` overrides `default`. Colours only when standard error is a terminal and
/// `NO_COLOR` is unset or empty (<https://no-color.org>): a log file or a log collector
/// gets no escape sequences.
fn init_tracing(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let no_color = std::env::var_os("NO_COLOR");
    let ansi =
        TerminalRenderer::colour_wanted(std::io::stderr().is_terminal(), no_color.as_deref());
    let _ = tracing_subscriber::fmt()
        .with_ansi(ansi)
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .try_init();
}

/// The context the caller flags describe: `ToolContext::cli()` when there are none.
fn context(caller: &CallerArgs) -> ToolContext {
    let ctx = if caller.describes_a_caller() {
        let mut builder = ToolContext::builder(caller.channel.as_deref().unwrap_or(channel::CLI))
            .scopes(caller.scopes.iter().cloned());
        if let Some(actor) = &caller.actor {
            builder = builder.principal(actor.clone());
        }
        builder.build()
    } else {
        ToolContext::cli()
    };
    if caller.plan { ctx.as_plan() } else { ctx }
}

/// Exit code after Ctrl-C or SIGTERM stopped a call (128 + SIGINT, as shells report it).
const EXIT_INTERRUPTED: u8 = 130;

/// How long the runtime waits for its threads once the work is over or interrupted.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// Writes to standard output; a reader that went away (`milpa tools | head -1`) is not an
/// error worth a panic.
fn emit(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

fn print_json(value: &impl serde::Serialize) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| CliError::failed(format!("cannot write JSON: {e}")))?;
    emit(&text);
    emit("\n");
    Ok(())
}

fn tools_command(registry: &ToolRegistry, args: ToolsArgs) -> Result<u8, CliError> {
    match args.command {
        Some(ToolsCommand::Inspect(mut inspect)) => {
            // `milpa tools --json inspect T` means the same as `milpa tools inspect T --json`.
            inspect.json |= args.json;
            crate::commands::inspect(registry, inspect)
        }
        None if args.json => {
            print_json(&registry.tool_summaries())?;
            Ok(EXIT_OK)
        }
        None => {
            emit(&tool_table(registry));
            Ok(EXIT_OK)
        }
    }
}

/// The tools as a table: name, flags, scopes, description (its first line).
pub(crate) fn tool_table(registry: &ToolRegistry) -> String {
    let rows: Vec<[String; 4]> = registry
        .definitions()
        .map(|d| {
            let mut flags = Vec::new();
            if d.is_mutating() {
                flags.push("mutating");
            }
            if d.requires_confirmation() {
                flags.push("confirm");
            }
            let or_dash = |s: String| if s.is_empty() { "-".to_owned() } else { s };
            [
                d.name().to_owned(),
                or_dash(flags.join(",")),
                or_dash(d.scopes().join(",")),
                d.description().lines().next().unwrap_or("").to_owned(),
            ]
        })
        .collect();
    let header = ["NAME", "FLAGS", "SCOPES", "DESCRIPTION"].map(String::from);
    let mut widths = [0usize; 3];
    for row in std::iter::once(&header).chain(&rows) {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let line = format!(
            "{:w0$}  {:w1$}  {:w2$}  {}",
            row[0],
            row[1],
            row[2],
            row[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2]
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn inspect(registry: &ToolRegistry, args: crate::cli::InspectArgs) -> Result<u8, CliError> {
    let ctx = context(&args.caller);
    let Some(plan) = milpa::inspect::InvocationPlan::build(registry, &args.tool, &ctx) else {
        return Err(CliError::failed(format!("Tool not found: {}", args.tool)));
    };
    if args.json {
        print_json(&plan.to_json())?;
    } else {
        emit(&plan.to_text());
    }
    Ok(EXIT_OK)
}

/// Parses ARGS_JSON: a JSON object (default `{}`).
fn call_arguments(text: Option<&str>) -> Result<Value, CliError> {
    let Some(text) = text else {
        return Ok(Value::Object(Default::default()));
    };
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err(CliError::usage(
            "ARGS_JSON must be a JSON object, e.g. '{\"a\": 2, \"b\": 3}'",
        )),
        Err(error) => Err(CliError::usage(format!(
            "ARGS_JSON is not valid JSON ({error}); pass an object, e.g. '{{\"a\": 2, \"b\": 3}}'"
        ))),
    }
}

fn show(result: &ToolResult, ctx: &ToolContext, json: bool) -> Result<(), CliError> {
    if json {
        print_json(result)
    } else {
        emit(&TerminalRenderer::detect().render(result, Some(ctx)));
        Ok(())
    }
}

fn exit_code(result: &ToolResult) -> u8 {
    if result.success {
        EXIT_OK
    } else {
        EXIT_CALL_FAILED
    }
}

async fn call(registry: &ToolRegistry, args: CallArgs) -> Result<u8, CliError> {
    let mut arguments = call_arguments(args.args.as_deref())?;
    if let (Some(token), Value::Object(map)) = (&args.confirm_token, &mut arguments) {
        map.insert("confirm_token".into(), Value::String(token.clone()));
    }
    let ctx = context(&args.caller);
    let result = registry.call(&args.tool, arguments, &ctx).await;
    let token = result
        .requires_confirmation()
        .then(|| result.confirm_token().map(str::to_owned))
        .flatten();
    let Some(token) = token else {
        show(&result, &ctx, args.json)?;
        return Ok(exit_code(&result));
    };
    if !std::io::stdin().is_terminal() {
        show(&result, &ctx, args.json)?;
        eprintln!(
            "milpa: confirm by repeating the call with --confirm-token {token} (with --store memory \
             the token lives only in this process; run interactively to be asked instead)"
        );
        return Ok(exit_code(&result));
    }
    if args.json {
        let summary = result.data["action_summary"].as_str().unwrap_or("");
        eprintln!("{summary}");
    } else {
        show(&result, &ctx, false)?;
    }
    // On a blocking thread, so Ctrl-C at the question still stops the program.
    let confirmed = tokio::task::spawn_blocking(|| ask("Proceed? [y/N] "))
        .await
        .unwrap_or(false);
    if !confirmed {
        eprintln!("Not confirmed: nothing was done.");
        return Ok(EXIT_CALL_FAILED);
    }
    let replay = serde_json::json!({"confirm_token": token});
    let done = registry.call(&args.tool, replay, &ctx).await;
    show(&done, &ctx, args.json)?;
    Ok(exit_code(&done))
}

/// Asks on standard error; true only for `y` or `yes`.
fn ask(question: &str) -> bool {
    eprint!("{question}");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    if std::io::stdin().lock().read_line(&mut answer).is_err() {
        return false;
    }
    matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

fn serve(manifest: &Manifest, tools: Box<ToolsFn<'_>>, args: ServeArgs) -> Result<u8, CliError> {
    let audit: Option<Arc<dyn AuditSink>> = match &args.audit {
        Some(path) => {
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| {
                    CliError::usage(format!("--audit {}: cannot open: {e}", path.display()))
                })?;
            init_tracing("warn");
            Some(Arc::new(JsonLinesAuditSink::new(file)))
        }
        None => {
            init_tracing("warn,milpa::audit=info");
            None
        }
    };
    let registry = Arc::new(registry(manifest, audit, tools)?);
    let options = server_options(manifest);
    if let Some(addr) = args.http {
        if !addr.ip().is_loopback() {
            return Err(CliError::usage(format!(
                "--http {addr}: milpa serves HTTP on loopback addresses only (127.0.0.1, [::1]); \
                 put a reverse proxy in front to reach it from elsewhere"
            )));
        }
    }
    let runtime = runtime(true)?;
    let served = runtime.block_on(async move {
        let serving = async move {
            match args.http {
                None => milpa_mcp::serve_stdio_with(registry, options).await,
                Some(addr) => serve_http(registry, options, manifest, addr).await,
            }
        };
        tokio::select! {
            served = serving => served,
            // Stopping drops every running call, which kills command process groups.
            () = shutdown_signal() => Ok(()),
        }
    });
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    served
        .map(|()| EXIT_OK)
        .map_err(|e| CliError::failed(format!("serve: {e}")))
}

async fn serve_http(
    registry: Arc<ToolRegistry>,
    options: milpa_mcp::ServerOptions,
    manifest: &Manifest,
    addr: std::net::SocketAddr,
) -> std::io::Result<()> {
    let tokens = authenticator(manifest);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("--http {addr}: cannot listen: {e}")))?;
    let local = listener.local_addr()?;
    if tokens.is_empty() {
        eprintln!("milpa: no [[auth.tokens]] in the manifest: every HTTP caller is anonymous");
    }
    eprintln!("milpa: serving MCP on http://{local}/mcp");
    milpa_mcp::HttpServer::new(registry)
        .options(options)
        .authenticator(tokens)
        .serve_listener(listener, std::future::pending())
        .await
}

/// Completes on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    let terminated = async {
        match term.as_mut() {
            Some(term) => {
                term.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminated => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_must_be_a_json_object() {
        assert_eq!(call_arguments(None).unwrap(), serde_json::json!({}));
        assert_eq!(call_arguments(Some("{\"a\":1}")).unwrap()["a"], 1);
        assert_eq!(call_arguments(Some("[1]")).unwrap_err().code, 2);
        let bad = call_arguments(Some("{a:1}")).unwrap_err();
        assert_eq!(bad.code, 2);
        assert!(bad.message.starts_with("ARGS_JSON is not valid JSON"));
    }

    #[test]
    fn caller_flags_build_the_context() {
        let cli = context(&CallerArgs::default());
        assert_eq!(
            (cli.channel(), cli.principal()),
            ("cli", Some("local-shell"))
        );
        let ctx = context(&CallerArgs {
            channel: Some("mcp".into()),
            actor: Some("bob".into()),
            scopes: vec!["a".into(), "b".into()],
            plan: true,
        });
        assert_eq!((ctx.channel(), ctx.principal()), ("mcp", Some("bob")));
        assert_eq!(ctx.scopes(), ["a", "b"]);
        assert!(ctx.is_plan_mode());
        let anon = context(&CallerArgs {
            channel: Some("web".into()),
            ..Default::default()
        });
        assert_eq!(anon.principal(), None);
    }
}
