//! A running upstream: its child process, its session, its state, and the supervisor that
//! restarts it with backoff when it dies.
//!
//! [`Upstream::start`] launches the child (or opens the HTTP session), runs the MCP
//! handshake (`initialize`, then `notifications/initialized`) and discovers the tools
//! (`tools/list`, every page); start-up fails with an error naming the upstream when any of
//! that fails. For a stdio server a supervisor task then waits on the child: when it exits,
//! its whole process tree is killed, calls waiting on it fail with `UPSTREAM_UNAVAILABLE`,
//! and it is launched again after 0.5 s, doubling up to 30 s while launches keep failing
//! (back to 0.5 s once it stayed up 30 s). Dropping the [`Upstream`] stops the supervisor and
//! kills the child's whole process tree. An HTTP server has no process here: each call
//! reaches it or fails with `UPSTREAM_UNAVAILABLE`.
//!
//! With [`Upstream::follow_tool_list`], its tools are discovered again (every page) each
//! time it sends `notifications/tools/list_changed`, and after each restart, and replace
//! the ones in the registry (overrides and `hide` applied again) when they differ. A new
//! list that would take a name another tool holds, or that cannot be had, leaves the
//! previous tools in place, with an error in the log.

use std::fmt;
use std::process::Stdio;
use std::sync::{Arc, Weak};
use std::time::Duration;

use milpa::ToolRegistry;
use milpa_process::child_env;
use milpa_process::process_tree::{self, ProcessTree};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::PROTOCOL_VERSION;
use crate::config::{Transport, UpstreamConfig};
use crate::connection::{CallError, Connection};
use crate::error::{ConfigProblem, GatewayError, HandshakeFailure};
use crate::unavailability::Unavailability;

/// The first restart delay.
const INITIAL_BACKOFF: Duration = Duration::from_millis(500);
/// The longest restart delay.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// An upstream that stayed up this long restarts after [`INITIAL_BACKOFF`] again.
const STABLE_AFTER: Duration = Duration::from_secs(30);
/// How long the handshake and discovery may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
/// Discovery stops after this many pages (an upstream whose cursors never end).
const MAX_PAGES: usize = 1000;

/// Where an upstream is in its life, for listings.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum UpstreamState {
    /// Being launched (handshake under way).
    Starting,
    /// Serving calls.
    Ready,
    /// Down for `why`; launched again at `retry_at`.
    Down {
        /// What happened.
        why: String,
        /// When the next launch starts.
        retry_at: Instant,
    },
}

impl fmt::Display for UpstreamState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpstreamState::Starting => f.write_str("starting"),
            UpstreamState::Ready => f.write_str("ready"),
            UpstreamState::Down { why, retry_at } => {
                let wait = retry_at.saturating_duration_since(Instant::now());
                write!(f, "down: {why}; restarting in {:.1}s", wait.as_secs_f64())
            }
        }
    }
}

/// What the supervisor and the tools share.
pub(crate) struct Shared {
    pub(crate) config: UpstreamConfig,
    state: Mutex<UpstreamState>,
    connection: Mutex<Option<Arc<Connection>>>,
    /// The tools it listed last (`tools/list` entries).
    tools: Mutex<Vec<Value>>,
    /// Told when its tool list may have changed (it said so, or it restarted).
    list_changed: Arc<Notify>,
}

impl Shared {
    pub(crate) fn name(&self) -> &str {
        &self.config.name
    }

    pub(crate) fn state(&self) -> UpstreamState {
        self.state.lock().clone()
    }

    fn set_state(&self, state: UpstreamState) {
        *self.state.lock() = state;
    }

    /// The live session, or why there is none.
    pub(crate) fn connection(&self) -> Result<Arc<Connection>, CallError> {
        if let Some(connection) = self.connection.lock().as_ref() {
            return Ok(Arc::clone(connection));
        }
        Err(CallError::unavailable(self.state().to_string()))
    }

    fn set_connection(&self, connection: Option<Arc<Connection>>) {
        *self.connection.lock() = connection;
    }
}

/// A running upstream MCP server. Dropping it ends the child's whole process tree.
pub struct Upstream {
    shared: Arc<Shared>,
    supervisor: Option<JoinHandle<()>>,
    /// The task that re-discovers its tools ([`Upstream::follow_tool_list`]).
    follower: Mutex<Option<JoinHandle<()>>>,
}

impl fmt::Debug for Upstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upstream")
            .field("name", &self.shared.name())
            .field("state", &self.shared.state())
            .field("tools", &self.shared.tools.lock().len())
            .finish()
    }
}

impl Upstream {
    /// Launches the upstream, runs the handshake and discovers its tools. Needs a Tokio
    /// runtime (the supervisor is a task on it).
    pub async fn start(config: UpstreamConfig) -> Result<Upstream, GatewayError> {
        let list_changed = Arc::new(Notify::new());
        let live = launch(&config, &list_changed).await?;
        let tools = tokio::time::timeout(HANDSHAKE_TIMEOUT, list_tools(&live.connection))
            .await
            .unwrap_or_else(|elapsed| Err(list_timed_out(elapsed)))
            .map_err(|error| GatewayError::Handshake {
                upstream: config.name.clone(),
                why: HandshakeFailure::ToolList(error),
            })?;
        let shared = Arc::new(Shared {
            config,
            state: Mutex::new(UpstreamState::Ready),
            connection: Mutex::new(Some(Arc::clone(&live.connection))),
            tools: Mutex::new(tools),
            list_changed,
        });
        // An HTTP upstream has no process to watch: each call reaches it or fails.
        let supervisor = live
            .child
            .is_some()
            .then(|| tokio::spawn(supervise(Arc::clone(&shared), live)));
        Ok(Upstream {
            shared,
            supervisor,
            follower: Mutex::new(None),
        })
    }

    /// Keeps its tools in `registry` (registered with [`register`](crate::register)) up to
    /// date: when the upstream says its tool list changed, or after it restarted, its tools
    /// are discovered again and replace its previous ones there, which tells the registry's
    /// watchers ([`ToolRegistry::tool_list_changes`]). Needs a Tokio runtime; stops when
    /// the upstream or the registry is dropped. A second call replaces the first.
    pub fn follow_tool_list(&self, registry: &Arc<ToolRegistry>) {
        let task = tokio::spawn(follow(Arc::clone(&self.shared), Arc::downgrade(registry)));
        if let Some(previous) = self.follower.lock().replace(task) {
            previous.abort();
        }
    }

    /// The upstream's name.
    pub fn name(&self) -> &str {
        self.shared.name()
    }

    /// Its configuration.
    pub fn config(&self) -> &UpstreamConfig {
        &self.shared.config
    }

    /// Where it is in its life now.
    pub fn state(&self) -> UpstreamState {
        self.shared.state()
    }

    /// The tools it listed last (at start-up, or when discovered again), as it described
    /// them (`tools/list` entries).
    pub fn tools(&self) -> Vec<Value> {
        self.shared.tools.lock().clone()
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        // The task owns the child and its process tree: dropping its future kills both.
        if let Some(supervisor) = &self.supervisor {
            supervisor.abort();
        }
        if let Some(follower) = self.follower.lock().take() {
            follower.abort();
        }
    }
}

/// A launched upstream: its session, and for a stdio server the child and its tree.
struct Live {
    connection: Arc<Connection>,
    child: Option<(Child, ProcessTree)>,
}

/// Starts the child (or opens the HTTP session) and runs the handshake; `list_changed` is
/// told when the session says the tool list changed.
async fn launch(config: &UpstreamConfig, list_changed: &Arc<Notify>) -> Result<Live, GatewayError> {
    let name: Arc<str> = Arc::from(config.name.as_str());
    let config_error = |problem: ConfigProblem| GatewayError::Config {
        upstream: config.name.clone(),
        problem,
    };
    let (connection, child) = match &config.transport {
        Transport::Stdio { command, env } => {
            let (connection, child, tree) = spawn_child(config, name, command, env)?;
            (connection, Some((child, tree)))
        }
        Transport::Http { url, bearer_env } => {
            let uri: hyper::Uri = url.parse().map_err(|source| {
                config_error(ConfigProblem::NotAUrl {
                    url: url.clone(),
                    source,
                })
            })?;
            if !matches!(uri.scheme_str(), Some("http" | "https")) {
                return Err(config_error(ConfigProblem::UnsupportedScheme {
                    url: url.clone(),
                }));
            }
            let client = crate::http::client(uri.scheme_str() == Some("https"))
                .map_err(|source| config_error(ConfigProblem::NoTrustedRoots { source }))?;
            let bearer = match bearer_env {
                Some(variable) => Some(std::env::var(variable).map_err(|source| {
                    config_error(ConfigProblem::BearerUnset {
                        variable: variable.clone(),
                        source,
                    })
                })?),
                None => None,
            };
            (Arc::new(crate::http::open(name, uri, bearer, client)), None)
        }
    };
    connection.on_list_changed(Arc::clone(list_changed));
    handshake(config, &connection).await?;
    Ok(Live { connection, child })
}

/// Starts a stdio server in a process group of its own, with a cleared environment.
fn spawn_child(
    config: &UpstreamConfig,
    name: Arc<str>,
    command: &[String],
    env: &[(String, String)],
) -> Result<(Arc<Connection>, Child, ProcessTree), GatewayError> {
    let Some((program, args)) = command.split_first() else {
        return Err(GatewayError::Config {
            upstream: config.name.clone(),
            problem: ConfigProblem::EmptyCommand,
        });
    };
    let mut child_command = tokio::process::Command::new(program);
    child_command
        .args(args)
        .env_clear()
        .envs(child_env::inherited(&[]))
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let (mut child, tree) =
        process_tree::spawn(&mut child_command).map_err(|source| GatewayError::Spawn {
            upstream: config.name.clone(),
            program: program.clone(),
            source,
        })?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(GatewayError::Handshake {
            upstream: config.name.clone(),
            why: HandshakeFailure::NoStdio,
        });
    };
    if let Some(stderr) = child.stderr.take() {
        tokio::spawn(log_stderr(Arc::clone(&name), stderr));
    }
    let connection = Arc::new(Connection::open(name, stdout, stdin));
    Ok((connection, child, tree))
}

/// `initialize`, then `notifications/initialized`.
async fn handshake(config: &UpstreamConfig, connection: &Connection) -> Result<(), GatewayError> {
    let handshake = async {
        let answer = connection
            .request(
                "initialize",
                json!({
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": crate::relay::declared_capabilities(),
                    "clientInfo": {"name": "milpa-gateway", "version": env!("CARGO_PKG_VERSION")}
                }),
                None,
            )
            .await?;
        if answer
            .get("protocolVersion")
            .and_then(Value::as_str)
            .is_none()
        {
            return Err(CallError::unavailable(
                "its initialize answer has no protocolVersion",
            ));
        }
        connection.notify("notifications/initialized", json!({}))
    };
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => Err(GatewayError::Handshake {
            upstream: config.name.clone(),
            why: HandshakeFailure::Initialize(error),
        }),
        Err(_) => Err(GatewayError::Handshake {
            upstream: config.name.clone(),
            why: HandshakeFailure::InitializeTimedOut,
        }),
    }
}

/// Every tool the upstream lists, following `nextCursor`.
async fn list_tools(connection: &Connection) -> Result<Vec<Value>, CallError> {
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let params = match &cursor {
            Some(cursor) => json!({"cursor": cursor}),
            None => json!({}),
        };
        let mut page = connection.request("tools/list", params, None).await?;
        if let Some(Value::Array(listed)) = page.get_mut("tools").map(Value::take) {
            tools.extend(listed);
        }
        match page.get("nextCursor").and_then(Value::as_str) {
            Some(next) if !next.is_empty() => cursor = Some(next.to_owned()),
            _ => return Ok(tools),
        }
    }
    Err(CallError::unavailable(format!(
        "tools/list still had more after {MAX_PAGES} pages"
    )))
}

/// `tools/list` got no answer in time: the timer that ran out is the cause.
fn list_timed_out(elapsed: tokio::time::error::Elapsed) -> CallError {
    CallError::Unavailable(Unavailability::new("tools/list timed out").with_cause(elapsed))
}

/// The child's standard error, line by line, into our log under its name.
async fn log_stderr(upstream: Arc<str>, stderr: tokio::process::ChildStderr) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::info!(target: "milpa::upstream", upstream = %upstream, "{line}");
    }
}

/// Waits on the child; when it exits, marks the upstream down and launches it again with
/// backoff, for as long as the [`Upstream`] lives.
async fn supervise(shared: Arc<Shared>, mut live: Live) {
    let mut delay = INITIAL_BACKOFF;
    loop {
        let up_since = Instant::now();
        let Some((child, tree)) = live.child.as_mut() else {
            return;
        };
        let status = child.wait().await;
        tree.kill();
        let ended = match status {
            Ok(status) => Unavailability::new(format!("the server exited ({status})")),
            Err(error) => Unavailability::new(format!("the server could not be watched ({error})"))
                .with_cause(error),
        };
        let mut why = ended.reason().to_owned();
        live.connection.close(ended);
        shared.set_connection(None);
        if up_since.elapsed() >= STABLE_AFTER {
            delay = INITIAL_BACKOFF;
        }
        loop {
            tracing::warn!(
                target: "milpa::upstream",
                upstream = %shared.name(),
                "{why}; restarting in {:.1}s",
                delay.as_secs_f64()
            );
            shared.set_state(UpstreamState::Down {
                why: why.clone(),
                retry_at: Instant::now() + delay,
            });
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(MAX_BACKOFF);
            shared.set_state(UpstreamState::Starting);
            match launch(&shared.config, &shared.list_changed).await {
                Ok(next) => {
                    live = next;
                    shared.set_connection(Some(Arc::clone(&live.connection)));
                    shared.set_state(UpstreamState::Ready);
                    tracing::info!(target: "milpa::upstream", upstream = %shared.name(), "restarted");
                    // The new process may list other tools.
                    shared.list_changed.notify_one();
                    break;
                }
                Err(error) => why = error.to_string(),
            }
        }
    }
}

/// Re-discovers the upstream's tools each time it may have changed them, for as long as
/// the registry lives.
async fn follow(shared: Arc<Shared>, registry: Weak<ToolRegistry>) {
    loop {
        shared.list_changed.notified().await;
        let Some(registry) = registry.upgrade() else {
            return;
        };
        rediscover(&shared, &registry).await;
    }
}

/// Lists the upstream's tools again and, when they differ from the last list, replaces
/// them in `registry`; keeps the previous ones (and says why in the log) when that fails.
async fn rediscover(shared: &Arc<Shared>, registry: &ToolRegistry) {
    let name = shared.name();
    let listed = match shared.connection() {
        Ok(connection) => tokio::time::timeout(HANDSHAKE_TIMEOUT, list_tools(&connection))
            .await
            .unwrap_or_else(|elapsed| Err(list_timed_out(elapsed))),
        Err(error) => Err(error),
    };
    let tools = match listed {
        Ok(tools) => tools,
        Err(error) => {
            tracing::warn!(
                target: "milpa::upstream",
                upstream = %name,
                "could not list its tools again ({error}); keeping the previous ones"
            );
            return;
        }
    };
    if *shared.tools.lock() == tools {
        tracing::debug!(target: "milpa::upstream", upstream = %name, "its tools are unchanged");
        return;
    }
    match crate::forward::replace(registry, shared, &tools) {
        Ok(()) => {
            tracing::info!(
                target: "milpa::upstream",
                upstream = %name,
                tools = tools.len(),
                "its tools were discovered again"
            );
            *shared.tools.lock() = tools;
        }
        Err(error) => tracing::error!(
            target: "milpa::upstream",
            upstream = %name,
            "{error}; keeping its previous tools"
        ),
    }
}
