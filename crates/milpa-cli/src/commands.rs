//! The subcommands.

use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::sync::Arc;

use milpa::audit::chain::ChainVerifier;
use milpa::audit::trail::AuditQuery;
use milpa::audit::{
    AuditRecord, AuditSink, CallCounts, CountingAuditSink, FoldingAuditSink, JsonLinesAuditSink,
    TracingAuditSink,
};
use milpa::render::{ChannelRenderer, TerminalRenderer};
use milpa::{
    CallOutcome, SentToken, ToolContext, ToolRegistry, ToolResult, channel, split_confirm_token,
};
use serde_json::Value;

use crate::cli::{
    AuditArgs, AuditCommand, CallArgs, CallerArgs, Cli, Command, ProxyArgs, ServeArgs, ToolsArgs,
    ToolsCommand,
};
use crate::local_tokens::LocalTokens;
use crate::manifest::{Manifest, MetricsSetting};
use crate::notify::ApprovalNotifier;
use crate::plan_words::{self, Approvers, Setup};
use crate::setup::{
    ToolsFn, authenticator, build_registry_with, oauth_config, server_options, url_host,
};
use crate::store::{self, StoreUrl, Stores};
use crate::telemetry::Telemetry;
use crate::terminal_output::{emit, print_json, printable, printable_lines, table};
use crate::upstream_metrics::ServeUpstreams;
use crate::verify_progress::VerifyProgress;
use crate::{CliError, EXIT_CALL_FAILED, EXIT_NOT_RUN, EXIT_OK, approvals, load_manifest};
use milpa_gateway::{DefinitionPins, Upstream, UpstreamConfig};
use milpa_mcp::MetricsAccess;
use milpa_mcp::auth::oauth::OAuthResource;

/// Runs a parsed command line; returns the exit code.
pub(crate) fn run(cli: Cli, tools: Box<ToolsFn<'_>>) -> Result<u8, CliError> {
    if let Command::Completions(args) = &cli.command {
        // Needs no manifest and no store: it describes the command line only.
        let mut command = <Cli as clap::CommandFactory>::command();
        clap_complete::generate(args.shell, &mut command, "milpa", &mut std::io::stdout());
        return Ok(EXIT_OK);
    }
    if let Command::Manpage = &cli.command {
        let command = <Cli as clap::CommandFactory>::command();
        clap_mangen::Man::new(command)
            .render(&mut std::io::stdout())
            .map_err(|e| CliError::failed(format!("cannot write the manual page: {e}")))?;
        return Ok(EXIT_OK);
    }
    let manifest = load_manifest(cli.manifest.as_deref())?;
    if let Command::Check(args) = &cli.command {
        return check(&manifest, tools, args.json);
    }
    let url = store::choose(
        cli.store.as_deref(),
        &|name| std::env::var_os(name),
        &manifest,
    )?;
    let serving = matches!(cli.command, Command::Serve(_) | Command::Proxy(_));
    let serving_http = matches!(
        cli.command,
        Command::Serve(ServeArgs { http: Some(_), .. })
            | Command::Proxy(ProxyArgs { http: Some(_), .. })
    );
    if matches!(cli.command, Command::Approvals(_)) && url == StoreUrl::Memory {
        return Err(approvals::memory_store_refusal());
    }
    let runtime = runtime(serving_http)?;
    // Calls are traced where they run: `serve`, `proxy` and `call`.
    let telemetry = if serving || matches!(cli.command, Command::Call(_)) {
        Telemetry::from_env(&|name| std::env::var(name).ok(), runtime.handle().clone())?
    } else {
        None
    };
    let log_filter = match &cli.command {
        Command::Serve(ServeArgs { audit: None, .. })
        | Command::Proxy(ProxyArgs { audit: None, .. }) => {
            "warn,milpa::audit=info,milpa::upstream=info"
        }
        Command::Serve(_) | Command::Proxy(_) => "warn,milpa::upstream=info",
        Command::Audit(_) | Command::Completions(_) | Command::Manpage | Command::Check(_) => {
            "warn"
        }
        Command::Tools(_)
        | Command::Call(_)
        | Command::Approvals(_)
        | Command::Resources(_)
        | Command::Prompts(_)
        | Command::Read(_)
        | Command::Prompt(_) => "warn,milpa::audit=off",
    };
    init_tracing(log_filter, telemetry.as_ref());
    let stores = runtime.block_on(Stores::open(&url, &manifest))?;
    let notifier = ApprovalNotifier::from_manifest(&manifest).map(Arc::new);
    let code = match cli.command {
        Command::Tools(args) => {
            // A changed upstream definition seen while listing is held and audited.
            let audit = with_store_trail(Arc::new(TracingAuditSink::line()), &stores);
            let registry = Arc::new(registry(&manifest, &stores, Some(audit), None, tools)?);
            let upstreams = settled_upstreams(
                &runtime,
                &registry,
                &stores,
                upstream_configs(&manifest, 0)?,
            );
            let approvers = approvers(&manifest, &stores);
            tools_command(&registry, &manifest, &upstreams, &approvers, args)
        }
        Command::Call(args) => {
            let audit = with_store_trail(Arc::new(TracingAuditSink::line()), &stores);
            let registry = Arc::new(registry(
                &manifest,
                &stores,
                Some(audit),
                notifier.as_ref(),
                tools,
            )?);
            let _upstreams = settled_upstreams(
                &runtime,
                &registry,
                &stores,
                upstream_configs(&manifest, 0)?,
            );
            runtime.block_on(async {
                let code = tokio::select! {
                    code = call(&registry, &stores, args) => code,
                    // Dropping the call kills a running command's process group.
                    () = shutdown_signal() => {
                        eprintln!("milpa: interrupted");
                        return Ok(EXIT_INTERRUPTED);
                    }
                };
                // A notify command the call started finishes (within its timeout) before
                // the process ends, which would kill it.
                if let Some(notifier) = &notifier {
                    tokio::select! {
                        () = notifier.idle() => {}
                        () = shutdown_signal() => {}
                    }
                }
                code
            })
        }
        Command::Serve(args) => {
            let upstreams = upstream_configs(&manifest, 0)?;
            serve(
                &runtime, &manifest, &stores, notifier, tools, upstreams, args,
            )
        }
        Command::Proxy(args) => {
            let mut upstreams = upstream_configs(&manifest, 1)?;
            // In front of one server, its own tool names: what clients and prompts know.
            let mut proxied = UpstreamConfig::stdio(args.upstream_name(), args.command.clone());
            proxied.prefix = Some(args.prefix.clone().unwrap_or_default());
            proxied.pin = !args.no_pin;
            proxied.protocol = args.protocol;
            upstreams.push(proxied);
            let serve_args = ServeArgs {
                stdio: args.http.is_none(),
                http: args.http,
                audit: args.audit,
            };
            // Only the upstream's tools (and the manifest's own), not the demo toolset.
            let no_tools: Box<ToolsFn<'_>> = Box::new(|_, _| Ok(()));
            serve(
                &runtime, &manifest, &stores, notifier, no_tools, upstreams, serve_args,
            )
        }
        Command::Approvals(args) => {
            let audit = with_store_trail(Arc::new(TracingAuditSink::line()), &stores);
            let registry = registry(&manifest, &stores, Some(audit), None, tools)?;
            runtime.block_on(approvals::run(
                &registry,
                &manifest.approvals,
                stores.passkeys.as_ref(),
                args,
            ))
        }
        Command::Audit(args) => audit_command(&stores, args),
        Command::Resources(args) => {
            let registry = registry(&manifest, &stores, None, None, tools)?;
            crate::catalog_commands::list_resources(&registry, args.json)
        }
        Command::Prompts(args) => {
            let registry = registry(&manifest, &stores, None, None, tools)?;
            crate::catalog_commands::list_prompts(&registry, args.json)
        }
        Command::Read(args) => {
            let audit = with_store_trail(Arc::new(TracingAuditSink::line()), &stores);
            let registry = registry(&manifest, &stores, Some(audit), None, tools)?;
            let ctx = context(&args.caller);
            runtime.block_on(crate::catalog_commands::read(&registry, &ctx, &args))
        }
        // Answered before the store was opened.
        Command::Completions(_) | Command::Manpage | Command::Check(_) => Ok(EXIT_OK),
        Command::Prompt(args) => {
            let audit = with_store_trail(Arc::new(TracingAuditSink::line()), &stores);
            let registry = registry(&manifest, &stores, Some(audit), None, tools)?;
            let ctx = context(&args.caller);
            runtime.block_on(crate::catalog_commands::prompt(&registry, &ctx, &args))
        }
    };
    // Whatever the trail still buffers is written before the process ends, and so are
    // the spans not exported yet.
    stores.flush();
    if let Some(telemetry) = telemetry {
        telemetry.shutdown(&runtime);
    }
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    code
}

fn registry(
    manifest: &Manifest,
    stores: &Stores,
    audit: Option<Arc<dyn AuditSink>>,
    notifier: Option<&Arc<ApprovalNotifier>>,
    tools: Box<ToolsFn<'_>>,
) -> Result<ToolRegistry, CliError> {
    build_registry_with(manifest, stores, audit, notifier, tools)
        .map_err(|e| CliError::usage(e.to_string()))
}

/// `milpa check`: builds what `serve` builds at start on a memory store (no state file is
/// opened or created), and checks each upstream's settings without starting it.
fn check(manifest: &Manifest, tools: Box<ToolsFn<'_>>, json: bool) -> Result<u8, CliError> {
    let runtime = runtime(false)?;
    let stores = runtime.block_on(Stores::open(&StoreUrl::Memory, manifest))?;
    let registry = registry(manifest, &stores, None, None, tools)?;
    crate::manifest_check::check_upstreams(manifest, &|name| std::env::var_os(name))?;
    let catalog = registry.catalog_snapshot();
    let offered = crate::manifest_check::Offered {
        tools: registry.tool_names().count(),
        resources: catalog.resources().count(),
        templates: catalog.templates().count(),
        prompts: catalog.prompts().count(),
        upstreams: manifest.upstreams.len(),
    };
    crate::manifest_check::report(manifest.source(), &offered, json)
}

/// The manifest's `[[upstreams]]`, each `${VAR}` read from milpa's environment now; a
/// variable that is unset (without a default) is a usage error naming its file and line.
/// Without a `prefix`, a lone upstream's tools keep their names, and several upstreams'
/// tools are prefixed `<name>__` (`alongside`: how many others are served besides).
fn upstream_configs(
    manifest: &Manifest,
    alongside: usize,
) -> Result<Vec<UpstreamConfig>, CliError> {
    let env = |name: &str| std::env::var(name).ok();
    manifest
        .upstreams
        .iter()
        .map(|upstream| {
            let mut config = upstream.config(&env).map_err(|(at, message)| {
                CliError::usage(manifest.error_at(Some(at), message).to_string())
            })?;
            // One upstream keeps its own tool names; several get `<name>__` each.
            if manifest.upstreams.len() + alongside == 1 && config.prefix.is_none() {
                config.prefix = Some(String::new());
            }
            Ok(config)
        })
        .collect()
}

/// Starts each upstream in the background, its tools served from `registry` once it is
/// up (and followed when its list changes), their definitions pinned in the store (a
/// changed one held for a person, unless the upstream says `pin = false`). Keep what this
/// returns alive while the tools are served: dropping an upstream ends its server's
/// process tree.
fn spawn_upstreams(
    runtime: &tokio::runtime::Runtime,
    registry: &Arc<ToolRegistry>,
    stores: &Stores,
    configs: Vec<UpstreamConfig>,
) -> Vec<Upstream> {
    let _runtime = runtime.enter();
    let pins = DefinitionPins::new(Arc::clone(&stores.pins), registry);
    configs
        .into_iter()
        .map(|config| {
            let upstream = Upstream::spawn_pinned(config, &pins);
            upstream.follow_tool_list(registry);
            upstream
        })
        .collect()
}

/// [`spawn_upstreams`], then waits until each one's first start ended (within its
/// `start_timeout_seconds`), for the commands that run once (`tools`, `call`): an upstream
/// that did not start is listed as down, and its tools are not there.
fn settled_upstreams(
    runtime: &tokio::runtime::Runtime,
    registry: &Arc<ToolRegistry>,
    stores: &Stores,
    configs: Vec<UpstreamConfig>,
) -> Vec<Upstream> {
    let upstreams = spawn_upstreams(runtime, registry, stores, configs);
    runtime.block_on(async {
        for upstream in &upstreams {
            upstream.settled().await;
        }
    });
    upstreams
}

/// `sink`, and the store's trail too when the store keeps one.
fn with_store_trail(sink: Arc<dyn AuditSink>, stores: &Stores) -> Arc<dyn AuditSink> {
    match stores.audit_sink() {
        Some(trail) => Arc::new(BothSinks(sink, trail)),
        None => sink,
    }
}

/// Hands every record to two sinks (a file or the log, and the store's trail).
struct BothSinks(Arc<dyn AuditSink>, Arc<dyn AuditSink>);

impl AuditSink for BothSinks {
    fn record(&self, record: &AuditRecord<'_>) {
        self.0.record(record);
        self.1.record(record);
    }

    fn flush(&self) {
        self.0.flush();
        self.1.flush();
    }
}

/// The async runtime: a worker per core to serve HTTP (many clients at once), one thread
/// for everything else, stdio serving included.
///
/// A stdio server has one client, and each of its messages hops between a few tasks (the
/// connection's loop, the call, an upstream's reader and writer). On one thread a hop is a
/// push onto the local queue, and the connection's idle poll (see `milpa_mcp::serve_io`)
/// drives the I/O driver itself, so an upstream's answer is read without waking another
/// thread. With worker threads each hop could wake a parked worker (tens of microseconds on
/// a virtual machine). Measured with `bench_stdio --proxy` (two shared, busy cores), one
/// call in flight: `milpa proxy` went from about 9 context switches per call to 1.4, and
/// the time it adds per call from about 114 µs to about 51 µs (medians, both builds in one
/// run). Nothing the serving path runs blocks the thread: child processes, SQLite
/// writes (its writer thread) and blocking tools (the blocking pool) all run off it.
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
/// gets no escape sequences. With `telemetry`, the call spans go to its exporter too; each
/// side has its own filter, so `RUST_LOG` never hides a span from the collector.
fn init_tracing(default: &str, telemetry: Option<&Telemetry>) {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;

    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let no_color = std::env::var_os("NO_COLOR");
    let ansi =
        TerminalRenderer::colour_wanted(std::io::stderr().is_terminal(), no_color.as_deref());
    let log = tracing_subscriber::fmt::layer()
        .with_ansi(ansi)
        // Lines from threads logging at once are combined, not serialized on the handle's
        // lock (see `StderrLog`).
        .with_writer(crate::stderr_log::StderrLog::stderr())
        .with_filter(filter);
    let _ = tracing_subscriber::registry()
        .with(log)
        .with(telemetry.map(Telemetry::layer))
        .try_init();
}

/// What a call from this command line names as its client (the approvals page shows it).
const CLI_CLIENT: &str = "milpa CLI";

/// The context the caller flags describe: `ToolContext::cli()` when there are none; either
/// way its client is the CLI.
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
    let ctx = ctx.with_client(CLI_CLIENT);
    if caller.plan { ctx.as_plan() } else { ctx }
}

/// Exit code after Ctrl-C or SIGTERM stopped a call (128 + SIGINT, as shells report it).
const EXIT_INTERRUPTED: u8 = 130;

/// How long the runtime waits for its threads once the work is over or interrupted.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

fn tools_command(
    registry: &ToolRegistry,
    manifest: &Manifest,
    upstreams: &[Upstream],
    approvers: &Approvers,
    args: ToolsArgs,
) -> Result<u8, CliError> {
    match args.command {
        Some(ToolsCommand::Inspect(mut inspect)) => {
            // `milpa tools --json inspect T` means the same as `milpa tools inspect T --json`.
            inspect.json |= args.json;
            crate::commands::inspect(registry, manifest, upstreams, approvers, inspect)
        }
        None if args.json => {
            print_json(&registry.tool_summaries())?;
            Ok(EXIT_OK)
        }
        None => {
            emit(&tool_table(registry));
            if !upstreams.is_empty() {
                emit(&upstream_table(registry, upstreams));
            }
            Ok(EXIT_OK)
        }
    }
}

/// The tools as a table: name, flags, scopes, description (its first line).
/// An UPSTREAM column appears when some tool forwards to an upstream MCP server.
pub(crate) fn tool_table(registry: &ToolRegistry) -> String {
    let with_upstreams = registry.definitions().any(|d| d.upstream().is_some());
    let rows: Vec<Vec<String>> = registry
        .definitions()
        .map(|d| {
            let mut flags = Vec::new();
            if d.is_mutating() {
                flags.push("mutating");
            }
            if d.requires_confirmation() {
                flags.push("confirm");
            }
            if d.requires_human_approval() {
                flags.push("approval");
            }
            let mut row = vec![
                d.name().to_owned(),
                or_dash(flags.join(",")),
                or_dash(d.scopes().join(",")),
            ];
            if with_upstreams {
                row.push(d.upstream().unwrap_or("-").to_owned());
            }
            row.push(d.description().lines().next().unwrap_or("").to_owned());
            row
        })
        .collect();
    if with_upstreams {
        table(
            &["NAME", "FLAGS", "SCOPES", "UPSTREAM", "DESCRIPTION"],
            &rows,
        )
    } else {
        table(&["NAME", "FLAGS", "SCOPES", "DESCRIPTION"], &rows)
    }
}

/// The upstreams: name, state now, the revision of MCP spoken to it (`-` before it first
/// started), and how many of their tools are served (and how many of their tools and
/// prompts are held for a person).
fn upstream_table(registry: &ToolRegistry, upstreams: &[Upstream]) -> String {
    let rows: Vec<Vec<String>> = upstreams
        .iter()
        .map(|upstream| {
            let served = registry
                .definitions()
                .filter(|d| d.upstream() == Some(upstream.name()))
                .count();
            // Held back until a person grants their changed definitions.
            let held = upstream.held().len();
            let tools = if held == 0 {
                served.to_string()
            } else {
                format!("{served} ({held} held: milpa approvals)")
            };
            vec![
                upstream.name().to_owned(),
                upstream.state().to_string(),
                upstream.protocol().unwrap_or_else(|| "-".to_owned()),
                tools,
            ]
        })
        .collect();
    table(&["UPSTREAM", "STATE", "PROTOCOL", "TOOLS"], &rows)
}

fn or_dash(text: String) -> String {
    if text.is_empty() {
        "-".to_owned()
    } else {
        text
    }
}

/// The plan of a call; for an upstream tool, also the upstream and its state now (`upstream`
/// in the JSON, a last line in the text).
/// Who could decide a parked call with this manifest and store (for `inspect`).
fn approvers(manifest: &Manifest, stores: &Stores) -> Approvers {
    let page_principals = manifest.source().map(|_| {
        manifest
            .auth
            .tokens
            .iter()
            .filter(|token| {
                token
                    .scopes
                    .iter()
                    .any(|scope| scope == "*" || scope == milpa::approval::APPROVE_SCOPE)
            })
            .map(|token| token.principal.get_ref().clone())
            .collect()
    });
    Approvers {
        memory_store: *stores.url() == StoreUrl::Memory,
        page_principals,
    }
}

fn inspect(
    registry: &ToolRegistry,
    manifest: &Manifest,
    upstreams: &[Upstream],
    approvers: &Approvers,
    args: crate::cli::InspectArgs,
) -> Result<u8, CliError> {
    let ctx = context(&args.caller);
    let Some(plan) = milpa::inspect::InvocationPlan::build(registry, &args.tool, &ctx) else {
        let hint = nearest_tool(registry, &args.tool)
            .map(|near| format!("\nmilpa: did you mean `{}`?", printable(&near)))
            .unwrap_or_default();
        return Err(CliError::failed(format!(
            "Tool not found: {}{hint}",
            args.tool
        )));
    };
    let upstream = registry.get(&args.tool).and_then(|d| {
        let name = d.upstream()?;
        upstreams.iter().find(|u| u.name() == name)
    });
    let sandbox = sandbox_grants(manifest, &args.tool);
    if args.json {
        let mut json = plan.to_json();
        if let (Some(upstream), Some(fields)) = (upstream, json.as_object_mut()) {
            fields.insert(
                "upstream".into(),
                serde_json::json!({"name": upstream.name(), "state": upstream.state().to_string()}),
            );
        }
        if let (Some(sandbox), Some(fields)) = (&sandbox, json.as_object_mut()) {
            fields.insert("sandbox".into(), sandbox.clone());
        }
        print_json(&json)?;
    } else {
        let gate = registry.policy_gate();
        if let Some(tool) = registry.get(&args.tool) {
            let setup = Setup {
                policy: gate.channel_policy(ctx.channel()),
                channel_known: gate.registered_policy(ctx.channel()).is_some(),
                rules: registry.has_rule_provider(),
                call_policy: gate.call_policy().map(|policy| policy.describe(&tool)),
                confirmation_ttl: registry.confirmation_ttl(),
                approval_ttl: registry.approvals().ttl(),
                approvers,
            };
            emit(&printable_lines(&plan_words::explain(&plan, &tool, &setup)));
        }
        if let Some(sandbox) = &sandbox {
            emit(&printable_lines(&sandbox_words(sandbox)));
        }
        if let Some(upstream) = upstream {
            emit(&format!(
                "\nupstream: {} ({})\n",
                printable(upstream.name()),
                printable(&upstream.state().to_string())
            ));
        }
    }
    Ok(EXIT_OK)
}

/// The grants of the manifest's `wasm` tool `name` (`None`: not a wasm tool, or a build
/// without the `wasm` feature, which registers none).
fn sandbox_grants(manifest: &Manifest, name: &str) -> Option<Value> {
    #[cfg(feature = "wasm")]
    return crate::wasm_tool::grants(manifest, name);
    #[cfg(not(feature = "wasm"))]
    {
        let _ = (manifest, name);
        None
    }
}

/// The grants in words (see [`sandbox_grants`]).
fn sandbox_words(grants: &Value) -> String {
    #[cfg(feature = "wasm")]
    return crate::sandbox_words::explain(grants);
    #[cfg(not(feature = "wasm"))]
    {
        let _ = grants;
        String::new()
    }
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
        return print_json(result);
    }
    if let Some(text) = invalid_arguments_text(result) {
        emit(&text);
        return Ok(());
    }
    // A list of records (`notes_list`) reads best as a table.
    emit(
        &TerminalRenderer::detect()
            .with_tables(true)
            .render(result, Some(ctx)),
    );
    Ok(())
}

/// A refusal of the arguments as a person reads it: the failures in the schema's words (the
/// result's message, one a line) instead of the original's (`id: Expected integer, got
/// string`, which `--json` keeps in `error`). `None` for any other result.
fn invalid_arguments_text(result: &ToolResult) -> Option<String> {
    if result.code() != Some(&milpa::ErrorCode::ValidationError) {
        return None;
    }
    let words = result.message.as_deref()?;
    let mut text = String::from("✗ Invalid arguments:\n");
    for line in words.lines() {
        text.push_str("  - ");
        text.push_str(&printable(line));
        text.push('\n');
    }
    Some(text)
}

fn exit_code(result: &ToolResult) -> u8 {
    if result.success {
        EXIT_OK
    } else {
        EXIT_CALL_FAILED
    }
}

async fn call(registry: &ToolRegistry, stores: &Stores, args: CallArgs) -> Result<u8, CliError> {
    let mut arguments = call_arguments(args.args.as_deref())?;
    // The legacy `confirm_token` argument is taken off here, at the edge; --confirm-token
    // wins over one written into ARGS_JSON.
    let in_arguments = split_confirm_token(&mut arguments);
    let sent = match &args.confirm_token {
        Some(token) => SentToken::Token(token.clone()),
        None => in_arguments,
    };
    let ctx = context(&args.caller);
    let ticket = match registry
        .invoke_sent(&args.tool, arguments, sent, &ctx)
        .await
    {
        CallOutcome::NeedsConfirmation(ticket) => ticket,
        CallOutcome::AwaitingApproval(pending) => {
            let result = pending.to_result();
            if args.json {
                print_json(&result)?;
            } else {
                emit(&format!(
                    "Nothing was done: {} waits for a person's approval (until {}).\n",
                    printable(pending.summary()),
                    pending.expires_at_text()
                ));
            }
            if args.confirm_token.is_none() {
                eprintln!("milpa: {}", approval_hint(stores, &ctx, pending.id()));
            }
            return Ok(EXIT_NOT_RUN);
        }
        other => {
            let result = other.into_result();
            show(&result, &ctx, args.json)?;
            if result.code() == Some(&milpa::ErrorCode::ToolNotFound)
                && let Some(near) = nearest_tool(registry, &args.tool)
            {
                eprintln!("milpa: did you mean `{}`?", printable(&near));
            }
            return Ok(exit_code(&result));
        }
    };
    if !std::io::stdin().is_terminal() {
        if args.json {
            print_json(&ticket.to_result())?;
        } else {
            emit(&format!(
                "Nothing was done: {} needs a confirmation.\n",
                printable(ticket.summary())
            ));
        }
        let lifetime = if *stores.url() == StoreUrl::Memory {
            " (with --store memory the token lives only in this process; run it at a terminal \
             to be asked instead)"
        } else {
            ""
        };
        eprintln!(
            "milpa: to confirm, before {expiry}, run{lifetime}:\n  {command}",
            expiry = ticket.expires_at_text(),
            command = confirm_command(std::env::args(), ticket.token()),
        );
        return Ok(EXIT_NOT_RUN);
    }
    eprintln!("{} needs a confirmation.", printable(ticket.summary()));
    // On a blocking thread, so Ctrl-C at the question still stops the program.
    let confirmed = tokio::task::spawn_blocking(|| ask("Proceed? [y/N] "))
        .await
        .unwrap_or(false);
    if !confirmed {
        eprintln!("Not confirmed: nothing was done.");
        return Ok(EXIT_NOT_RUN);
    }
    let done = registry
        .redeem(&args.tool, ticket.token(), &ctx)
        .await
        .into_result();
    show(&done, &ctx, args.json)?;
    Ok(exit_code(&done))
}

/// The registered tool whose name is nearest to `asked`, when one is near enough to be a
/// typo (Jaro-Winkler similarity of at least 0.8, the threshold clap uses for subcommands).
fn nearest_tool(registry: &ToolRegistry, asked: &str) -> Option<Arc<str>> {
    registry
        .tool_names()
        .map(|name| (strsim::jaro_winkler(asked, &name), name))
        .filter(|(similarity, _)| *similarity >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, name)| name)
}

/// How a parked call can be decided with this setup: from the command line or the page
/// when the store outlives the process, not at all with the memory store.
fn approval_hint(stores: &Stores, ctx: &ToolContext, id: &str) -> String {
    let caller = ctx
        .principal()
        .map(|p| format!("other than {}", printable(p)))
        .unwrap_or_else(|| "other than the caller".to_owned());
    if *stores.url() == StoreUrl::Memory {
        return format!(
            "with --store memory the approval lives only in this process and nobody can grant \
             it; use a durable store (the default SQLite one, or --store redis://…) so that a \
             person {caller} can run `milpa approvals grant {id}`"
        );
    }
    format!(
        "nothing runs until a person {caller} grants it: `milpa approvals grant {id}` at their \
         own shell, or the /approvals page of `milpa serve --http` on this store; then repeat \
         the call with --confirm-token {id}",
        id = printable(id),
    )
}

/// The command line that confirms: this one, with `--confirm-token TOKEN` in place of any
/// token it had, quoted for a POSIX shell.
fn confirm_command(argv: impl Iterator<Item = String>, token: &str) -> String {
    let mut words = Vec::new();
    let mut argv = argv.peekable();
    while let Some(word) = argv.next() {
        if word == "--confirm-token" {
            argv.next();
            continue;
        }
        if word.starts_with("--confirm-token=") {
            continue;
        }
        words.push(word);
    }
    words.push("--confirm-token".to_owned());
    words.push(token.to_owned());
    words
        .iter()
        .map(|word| shell_quoted(word))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `word` as a POSIX shell reads it back: bare when it holds only safe characters, else in
/// single quotes.
fn shell_quoted(word: &str) -> String {
    let safe = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-./:=@%+,".contains(&b));
    if safe {
        word.to_owned()
    } else {
        format!("'{}'", printable(word).replace('\'', "'\\''"))
    }
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

fn serve(
    runtime: &tokio::runtime::Runtime,
    manifest: &Manifest,
    stores: &Stores,
    notifier: Option<Arc<ApprovalNotifier>>,
    tools: Box<ToolsFn<'_>>,
    upstreams: Vec<UpstreamConfig>,
    args: ServeArgs,
) -> Result<u8, CliError> {
    let log_or_file: Arc<dyn AuditSink> = match &args.audit {
        Some(path) => Arc::new(JsonLinesAuditSink::append_to(path).map_err(|e| {
            CliError::usage(format!("--audit {}: cannot open: {e}", path.display()))
        })?),
        None => Arc::new(TracingAuditSink::line()),
    };
    // A server meets floods of refusals (unknown names, anonymous callers): repeats of one
    // caller's refusal are counted into one record instead of one record each.
    let folding = Arc::new(FoldingAuditSink::new(with_store_trail(log_or_file, stores)));
    // Over HTTP, `/metrics` counts every tool call's record before any is folded: a few
    // atomic additions per record.
    let counts = Arc::new(CallCounts::new());
    let audit: Arc<dyn AuditSink> = match args.http {
        Some(_) => Arc::new(CountingAuditSink::new(folding.clone(), Arc::clone(&counts))),
        None => folding.clone(),
    };
    let registry = Arc::new(registry(
        manifest,
        stores,
        Some(audit),
        notifier.as_ref(),
        tools,
    )?);
    counts.follow(&registry);
    // They start in the background while the server serves; their tools appear when they
    // are up, and are discovered again when they say their list changed; the server then
    // tells its clients.
    let upstreams = spawn_upstreams(runtime, &registry, stores, upstreams);
    {
        let _runtime = runtime.enter();
        // Files added to a folder resource are listed, and clients told.
        crate::resource_source::rescan_folders(&registry, &manifest.resources);
    }
    // `/readyz` asks after them; they end when the server is done with them.
    let upstreams = Arc::new(upstreams);
    let mut options = server_options(manifest);
    options.state_secret = runtime.block_on(stores.request_state_secret())?;
    let passkeys = approvals::passkey_options(manifest, stores)?;
    if let Some(addr) = args.http
        && !addr.ip().is_loopback()
    {
        return Err(CliError::usage(format!(
            "--http {addr}: milpa serves HTTP on loopback addresses only (127.0.0.1, [::1]); \
                 put a reverse proxy in front to reach it from elsewhere"
        )));
    }
    let served = runtime.block_on(async move {
        let serving = async move {
            match args.http {
                None => milpa_mcp::serve_stdio_with(registry, options).await,
                Some(addr) => {
                    let page = (notifier.as_deref(), passkeys);
                    let observed = Observed {
                        readiness: crate::readiness::ServeReadiness::new(
                            stores,
                            Arc::clone(&upstreams),
                        ),
                        upstreams: ServeUpstreams::new(upstreams),
                        counts,
                    };
                    serve_http(registry, options, manifest, page, observed, addr).await
                }
            }
        };
        tokio::select! {
            served = serving => served,
            // Stopping drops every running call, which kills command process groups.
            () = shutdown_signal() => Ok(()),
        }
    });
    // The counts still folding are written before the store's trail is flushed.
    folding.flush();
    served
        .map(|()| EXIT_OK)
        .map_err(|e| CliError::failed(format!("serve: {e}")))
}

/// How many records `milpa audit` shows when `--limit` is not given.
const DEFAULT_AUDIT_LIMIT: usize = 50;

fn audit_command(stores: &Stores, args: AuditArgs) -> Result<u8, CliError> {
    if let Some(AuditCommand::Verify(verify)) = &args.command
        && let Some(file) = &verify.file
    {
        return verify_file(file);
    }
    let Some(trail) = stores.audit_trail() else {
        return Err(CliError::usage(match stores.url() {
            StoreUrl::Memory => "the memory store keeps nothing after the process ends, so it has \
                 no audit trail: use a SQLite store (the default, or --store sqlite:PATH), or \
                 `milpa audit verify FILE` on a `serve --audit FILE` file"
                .to_owned(),
            other => format!(
                "the store {other} keeps no audit trail: use a SQLite store, or \
                 `milpa audit verify FILE` on a `serve --audit FILE` file"
            ),
        }));
    };
    if args.command.is_some() {
        let bar = VerifyProgress::on_terminal();
        let verdict = trail
            .verify_reporting(&mut |checked, total| bar.show(checked, total))
            .map_err(|e| CliError::failed(format!("audit verify: {}", store::chain(&e))));
        bar.finish();
        let verdict = verdict?;
        return Ok(report_chain(
            &format!("the trail of {}", stores.url()),
            verdict,
        ));
    }
    let mut query = AuditQuery::default().with_limit(args.limit.unwrap_or(DEFAULT_AUDIT_LIMIT));
    if let Some(tool) = args.tool {
        query = query.with_tool(tool);
    }
    if let Some(actor) = args.actor {
        query = query.with_principal(actor);
    }
    if let Some(outcome) = args.outcome {
        query = query.with_outcome(outcome);
    }
    if let Some(since) = args.since {
        let now = milpa::confirm::unix_millis(std::time::SystemTime::now());
        query = query.with_since_ms(now.saturating_sub(since.as_millis() as u64));
    }
    let lines = trail
        .query(&query)
        .map_err(|e| CliError::failed(format!("audit: {}", store::chain(&e))))?;
    let records: Vec<Value> = lines
        .iter()
        .map(|line| serde_json::from_str(line).unwrap_or(Value::Null))
        .collect();
    if args.json {
        print_json(&records)?;
    } else {
        emit(&audit_table(&records));
    }
    Ok(EXIT_OK)
}

/// The records as a table, newest first as given.
fn audit_table(records: &[Value]) -> String {
    let text = |v: &Value, key: &str| match &v[key] {
        Value::String(s) => printable(s),
        Value::Null => "-".to_owned(),
        other => other.to_string(),
    };
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|r| {
            vec![
                text(r, "seq"),
                text(r, "ts"),
                text(r, "tool"),
                text(r, "principal"),
                text(r, "channel"),
                text(r, "outcome"),
                text(r, "code"),
                text(r, "took_ms"),
            ]
        })
        .collect();
    table(
        &[
            "SEQ", "TIME", "TOOL", "ACTOR", "CHANNEL", "OUTCOME", "CODE", "MS",
        ],
        &rows,
    )
}

/// `milpa audit verify FILE`.
///
/// Read line by line, each line bounded (`trail_file`): a trail of any size is checked
/// without being held in memory.
fn verify_file(path: &Path) -> Result<u8, CliError> {
    let cannot =
        |e: std::io::Error| CliError::usage(format!("audit verify {}: {e}", path.display()));
    let total = crate::trail_file::count_lines(path).map_err(cannot)?;
    let mut lines = crate::trail_file::TrailLines::open(path).map_err(cannot)?;
    let bar = VerifyProgress::on_terminal();
    bar.show(0, total);
    let mut verifier = ChainVerifier::new();
    let mut verdict = None;
    let mut checked = 0;
    loop {
        let line = match lines.next_line() {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(error) => {
                bar.finish();
                return Err(cannot(error));
            }
        };
        if let Err(broken) = verifier.push(line) {
            verdict = Some(Err(broken));
            break;
        }
        checked += 1;
        bar.show(checked, total);
    }
    bar.finish();
    Ok(report_chain(
        &path.display().to_string(),
        verdict.unwrap_or_else(|| Ok(verifier.finish())),
    ))
}

/// Prints what a chain check found; the exit code.
fn report_chain(
    what: &str,
    verdict: Result<milpa::audit::chain::ChainSummary, milpa::audit::chain::ChainBreak>,
) -> u8 {
    match verdict {
        Ok(summary) => {
            emit(&format!(
                "{what}: intact, {} records, last seq {}, head {}\n",
                summary.records, summary.head.seq, summary.head.hash
            ));
            EXIT_OK
        }
        Err(broken) => {
            eprintln!("milpa: {what}: broken: {broken}");
            EXIT_CALL_FAILED
        }
    }
}

/// What `serve --http`'s probes and `/metrics` read.
struct Observed {
    readiness: crate::readiness::ServeReadiness,
    upstreams: ServeUpstreams,
    counts: Arc<CallCounts>,
}

async fn serve_http(
    registry: Arc<ToolRegistry>,
    options: milpa_mcp::ServerOptions,
    manifest: &Manifest,
    (notifier, passkeys): (
        Option<&ApprovalNotifier>,
        milpa_mcp::approvals::PasskeyOptions,
    ),
    observed: Observed,
    addr: std::net::SocketAddr,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("--http {addr}: cannot listen: {e}")))?;
    let local = listener.local_addr()?;
    let page = format!("http://{local}{APPROVALS_PATH}");
    if let Some(notifier) = notifier {
        notifier.set_approvals_page(page.clone());
    }
    let tokens = if manifest.source().is_none() {
        // No manifest, so no tokens: this run makes its own, or nobody could call a tool.
        let local_tokens = LocalTokens::generate()?;
        eprint!(
            "{}",
            local_tokens.announcement(&format!("http://{local}/mcp"), &page)
        );
        local_tokens.authenticator(&registry)
    } else {
        let tokens = authenticator(manifest);
        if tokens.is_empty() && manifest.auth.oauth.is_none() {
            eprintln!("milpa: no [[auth.tokens]] in the manifest: every HTTP caller is anonymous");
        }
        tokens
    };
    // Tokens exist and the channel serves anonymous callers nothing: a client without one
    // hears so at `initialize` (401), not from a tool error at its first call.
    let require_token = !tokens.is_empty()
        && registry
            .policy_gate()
            .channel_policy(milpa::channel::MCP)
            .require_auth;
    let mut server = milpa_mcp::HttpServer::new(registry)
        .options(options)
        .require_token(require_token)
        .readiness(observed.readiness)
        .call_counts(observed.counts)
        .upstream_reports(observed.upstreams)
        .metrics_access(match manifest.server.metrics {
            MetricsSetting::Public => MetricsAccess::Public,
            MetricsSetting::Token => MetricsAccess::Token,
        })
        .authenticator(tokens)
        .approval_passkeys(passkeys);
    if let Some(config) = oauth_config(manifest) {
        // The audience is this server's public URL: its host is one clients (or the proxy
        // in front) send in `Host`.
        if let Some(host) = url_host(&config.audience) {
            server = server.allowed_hosts([host]);
        }
        let resource = OAuthResource::start(config).await.map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("[auth.oauth]: {e}"),
            )
        })?;
        eprintln!(
            "milpa: OAuth resource server for {} (issuer {}), metadata at {}",
            resource.config().audience,
            resource.config().issuer,
            resource.metadata_url()
        );
        server = server.oauth(resource);
    }
    eprintln!("milpa: serving MCP on http://{local}/mcp");
    if manifest.source().is_some() {
        // Without a manifest the announcement of the run's tokens named the page already.
        eprintln!("milpa: approvals page on {page} (sign in with a token holding approvals:grant)");
    }
    eprintln!(
        "milpa: metrics on http://{local}/metrics ({})",
        match manifest.server.metrics {
            MetricsSetting::Public => "public: [server] metrics = \"public\"",
            MetricsSetting::Token => "a bearer token holding metrics:read",
        }
    );
    server
        .serve_listener(listener, std::future::pending())
        .await
}

/// Where `milpa_mcp::HttpServer` serves the approvals page.
const APPROVALS_PATH: &str = "/approvals";

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
            (cli.channel(), cli.principal(), cli.client()),
            ("cli", Some("local-shell"), Some("milpa CLI"))
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

    #[test]
    fn the_confirm_command_is_this_one_with_the_token_quoted_for_a_shell() {
        let argv = [
            "milpa",
            "call",
            "notes_delete",
            r#"{"id": 1}"#,
            "--confirm-token",
            "old",
        ]
        .map(String::from);
        assert_eq!(
            confirm_command(argv.into_iter(), "abc123"),
            r#"milpa call notes_delete '{"id": 1}' --confirm-token abc123"#
        );
        let argv = ["milpa", "--confirm-token=old", "call", "it's"].map(String::from);
        assert_eq!(
            confirm_command(argv.into_iter(), "t"),
            r#"milpa call 'it'\''s' --confirm-token t"#
        );
        assert_eq!(shell_quoted(""), "''");
    }
}
