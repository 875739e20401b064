//! A running upstream: its child process (or HTTP session), its state, and the supervisor
//! that starts it in the background and starts it again with backoff when it ends.
//!
//! [`Upstream::spawn`] returns at once, the upstream `starting`; a supervisor task launches
//! the child (or opens the HTTP session), runs the MCP handshake (`initialize`, then
//! `notifications/initialized`) and discovers the tools (`tools/list`, every page), all
//! within the upstream's start timeout, writing a line to the log every few seconds while
//! it waits. An upstream that cannot start is `down` and launched again after 0.5 s,
//! doubling up to 30 s while launches keep failing (back to 0.5 s once it stayed up 30 s):
//! never fatal. Once started, the supervisor waits for its end: the child exits, or the
//! session is reset (it sent a message over its limit); then its whole process tree is
//! killed, calls waiting on it fail with `UPSTREAM_UNAVAILABLE`, and it is launched again.
//! Dropping the [`Upstream`] stops the supervisor and kills the child's whole process tree.
//!
//! Its tools reach a registry through [`Upstream::follow_tool_list`] (or once through
//! [`register`]): set when it starts, discovered again (every page) each
//! time it sends `notifications/tools/list_changed` and after each restart, and replaced
//! there (overrides and `hide` applied again) when they differ. A tool the registry cannot
//! take (an invalid or over-long name, a name another tool holds, a schema that does not
//! compile) is left out with an error in the log naming the upstream and the tool; the
//! others are served.

use std::fmt;
use std::future::Future;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use hyper::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use milpa::approval::pins::DefinitionKind;
use milpa::{LogLevel, ToolDefinition, ToolRegistry};
use milpa_mcp::protocol::MODERN_VERSION;
use milpa_process::child_env;
use milpa_process::process_tree::{self, ProcessTree};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::process::Child;
use tokio::sync::{Notify, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::PROTOCOL_VERSION;
use crate::config::{Transport, UpstreamConfig};
use crate::connection::{CallError, Connection};
use crate::error::{ConfigProblem, GatewayError, HandshakeFailure};
use crate::forward;
use crate::pinning::{DefinitionPins, HeldDefinition, PinGate};
use crate::revision::{self, DISCOVER_TIMEOUT, ProtocolChoice};
use crate::unavailability::Unavailability;
use crate::upstream_catalog::{CatalogLists, Offers, UpstreamCatalog};
use crate::upstream_link::UpstreamLink;
use crate::upstream_log::UpstreamLog;

/// The first restart delay.
const INITIAL_BACKOFF: Duration = Duration::from_millis(500);
/// The longest restart delay.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// An upstream that stayed up this long restarts after [`INITIAL_BACKOFF`] again.
const STABLE_AFTER: Duration = Duration::from_secs(30);
/// While a start waits, the first line saying so comes after this long…
const FIRST_WAIT_NOTE: Duration = Duration::from_secs(5);
/// …then one this often for the first half minute…
const EARLY_WAIT_NOTES: Duration = Duration::from_secs(5);
/// …and one this often after that.
const LATE_WAIT_NOTES: Duration = Duration::from_secs(30);

/// Where an upstream is in its life, for listings.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum UpstreamState {
    /// Being launched (handshake and discovery under way).
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
    /// The tools it listed last (`tools/list` entries); locked while they are set in the
    /// registry, so two settings never cross.
    tools: Mutex<Vec<Value>>,
    /// The registry its tools are served from, once one follows it.
    registry: Mutex<Option<Weak<ToolRegistry>>>,
    /// Told when its tool list may have changed (it said so, or its stream reopened).
    list_changed: Arc<Notify>,
    /// Where its log messages go (see [`crate::upstream_log`]).
    log: Arc<UpstreamLog>,
    /// Its resources and prompts (see [`crate::upstream_catalog`]).
    catalog: Arc<UpstreamCatalog>,
    /// What it said at `initialize` of how to use its tools (cut to
    /// [`MAX_INSTRUCTIONS_BYTES`]), served with the registry's instructions.
    instructions: Mutex<Option<String>>,
    /// Becomes true once the first start ended, started or not.
    settled: watch::Sender<bool>,
    /// How many times the supervisor started it again after it had been up.
    restarts: AtomicU64,
    /// Its pin gate, when its definitions are pinned (see [`crate::pinning`]).
    pins: Option<Arc<PinGate>>,
    /// The revision it was last spoken to in.
    protocol: Mutex<Option<String>>,
}

impl UpstreamLink for Shared {
    fn config(&self) -> &UpstreamConfig {
        &self.config
    }

    fn connection(&self) -> Result<Arc<Connection>, CallError> {
        Shared::connection(self)
    }
}

impl Shared {
    pub(crate) fn name(&self) -> &str {
        &self.config.name
    }

    /// Itself as its tools see it.
    fn link(self: &Arc<Self>) -> Arc<dyn UpstreamLink> {
        Arc::clone(self) as Arc<dyn UpstreamLink>
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

    /// `tools` (as it listed them) without the ones its pin gate holds (all of them when
    /// it has none).
    async fn admit(&self, tools: Vec<Value>) -> Vec<Value> {
        match &self.pins {
            Some(gate) => {
                let hidden = |name: &str| self.config.override_for(name).hide == Some(true);
                gate.admit(DefinitionKind::Tool, tools, hidden, &self.list_changed)
                    .await
            }
            None => tools,
        }
    }

    /// Takes `tools` as its tools, and sets them in the registry that follows it (if any)
    /// when they differ from the last ones.
    fn publish(self: &Arc<Self>, tools: Vec<Value>) {
        let mut last = self.tools.lock();
        if *last == tools {
            tracing::debug!(target: "milpa::upstream", upstream = %self.name(), "its tools are unchanged");
            return;
        }
        let registry = self.registry.lock().as_ref().and_then(Weak::upgrade);
        if let Some(registry) = registry {
            forward::replace(&registry, &self.link(), &tools);
        }
        *last = tools;
    }

    /// Takes what it said at `initialize` of how to use its tools, and sets it in the
    /// registry that follows it (if any) under its name.
    fn set_instructions(&self, instructions: Option<String>) {
        let registry = self.registry.lock().as_ref().and_then(Weak::upgrade);
        if let Some(registry) = registry {
            registry.set_group_instructions(self.name(), instructions.as_deref());
        }
        *self.instructions.lock() = instructions;
    }

    /// Sets its tools (as it listed them last) in `registry`, and has every later list
    /// set there too; the same for its instructions.
    pub(crate) fn serve_in(self: &Arc<Self>, registry: &Arc<ToolRegistry>) {
        self.log.serve_in(registry.server_log());
        self.catalog.serve_in(registry);
        registry.set_group_instructions(self.name(), self.instructions.lock().as_deref());
        let tools = self.tools.lock();
        *self.registry.lock() = Some(Arc::downgrade(registry));
        forward::replace(registry, &self.link(), &tools);
    }
}

/// A running upstream MCP server. Dropping it ends the child's whole process tree.
pub struct Upstream {
    shared: Arc<Shared>,
    supervisor: JoinHandle<()>,
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
    /// Starts the upstream in the background and returns at once, the upstream
    /// [`Starting`](UpstreamState::Starting): a supervisor task launches it, and launches
    /// it again with backoff whenever it fails to start or ends. Needs a Tokio runtime.
    pub fn spawn(config: UpstreamConfig) -> Upstream {
        Upstream::spawn_reporting(config, None).0
    }

    /// [`spawn`](Self::spawn), its tools' and prompts' definitions pinned in `pins` (unless
    /// its configuration says [`pin = false`](UpstreamConfig::pin)): one that changed since
    /// it was first seen is neither listed nor callable until a person grants the change
    /// (see [`DefinitionPins`]).
    pub fn spawn_pinned(config: UpstreamConfig, pins: &DefinitionPins) -> Upstream {
        Upstream::spawn_reporting(config, Some(pins)).0
    }

    /// [`spawn`](Self::spawn), and a receiver of how its first start ended.
    fn spawn_reporting(
        config: UpstreamConfig,
        pins: Option<&DefinitionPins>,
    ) -> (Upstream, oneshot::Receiver<Result<(), GatewayError>>) {
        let (settled, _) = watch::channel(false);
        let pins = pins
            .filter(|_| config.pin)
            .map(|pins| Arc::new(PinGate::new(pins.clone(), &config.name, config.prefix())));
        let shared = Arc::new_cyclic(|link: &Weak<Shared>| Shared {
            catalog: Arc::new(UpstreamCatalog::new(&config, link.clone(), pins.clone())),
            config,
            state: Mutex::new(UpstreamState::Starting),
            connection: Mutex::new(None),
            tools: Mutex::new(Vec::new()),
            registry: Mutex::new(None),
            list_changed: Arc::new(Notify::new()),
            log: Arc::default(),
            instructions: Mutex::new(None),
            settled,
            restarts: AtomicU64::new(0),
            pins,
            protocol: Mutex::new(None),
        });
        let (first, first_rx) = oneshot::channel();
        let supervisor = tokio::spawn(supervise(Arc::clone(&shared), first));
        let upstream = Upstream {
            shared,
            supervisor,
            follower: Mutex::new(None),
        };
        (upstream, first_rx)
    }

    /// Starts the upstream and waits for its first start: the upstream once it serves, or
    /// why it could not start (the upstream is then dropped, and tried no more). Needs a
    /// Tokio runtime. A server that must keep serving while an upstream is down uses
    /// [`spawn`](Self::spawn).
    pub async fn start(config: UpstreamConfig) -> Result<Upstream, GatewayError> {
        let (upstream, first) = Upstream::spawn_reporting(config, None);
        match first.await {
            Ok(Ok(())) => Ok(upstream),
            Ok(Err(error)) => Err(error),
            // The supervisor ended without a word: only a panic does that.
            Err(_) => Err(GatewayError::Handshake {
                upstream: upstream.name().to_owned(),
                why: HandshakeFailure::Initialize(CallError::unavailable("its supervisor ended")),
            }),
        }
    }

    /// Completes once its first start ended, whether it started or not (see
    /// [`state`](Self::state)).
    pub async fn settled(&self) {
        let mut settled = self.shared.settled.subscribe();
        let _ = settled.wait_for(|settled| *settled).await;
    }

    /// Serves its tools from `registry`: the ones it listed (if it started already), then
    /// every later list, set when it starts, when it says its tool list changed, and after
    /// each restart; each change tells the registry's watchers
    /// ([`ToolRegistry::tool_list_changes`]), so MCP clients hear of it. Needs a Tokio
    /// runtime; stops when the upstream or the registry is dropped. A second call replaces
    /// the first.
    pub fn follow_tool_list(&self, registry: &Arc<ToolRegistry>) {
        self.shared.serve_in(registry);
        let shared = Arc::clone(&self.shared);
        let levels = registry.server_log().asked_levels();
        let weak = Arc::downgrade(registry);
        let task = tokio::spawn(async move {
            // Both end with the registry (or when the upstream is dropped).
            tokio::join!(
                follow(Arc::clone(&shared), weak.clone()),
                follow_catalog(Arc::clone(&shared), weak),
                follow_levels(shared, levels)
            );
        });
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

    /// How many times it was started again after it had been up (starts that completed
    /// the handshake; an HTTP upstream has no process and is never restarted).
    pub fn restarts(&self) -> u64 {
        self.shared.restarts.load(Ordering::Relaxed)
    }

    /// The revision of the protocol it was last spoken to in (`2026-07-28`, or the one
    /// it answered `initialize` with); `None` before it first started.
    pub fn protocol(&self) -> Option<String> {
        self.shared.protocol.lock().clone()
    }

    /// The tools it listed last (at start-up, or when discovered again), as it described
    /// them (`tools/list` entries), without the ones [held](Self::held); none before it
    /// first started.
    pub fn tools(&self) -> Vec<Value> {
        self.shared.tools.lock().clone()
    }

    /// The tools and prompts its last lists held back because their definitions changed
    /// since they were pinned (none when it is not pinned).
    pub fn held(&self) -> Vec<HeldDefinition> {
        self.shared
            .pins
            .as_ref()
            .map_or_else(Vec::new, |gate| gate.held())
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        // The task owns the child and its process tree: dropping its future kills both.
        self.supervisor.abort();
        if let Some(follower) = self.follower.lock().take() {
            follower.abort();
        }
    }
}

/// The definitions of `upstream`'s tools (hidden ones left out), in the order it listed
/// them. Entries without a name are skipped with a warning.
pub fn definitions(upstream: &Upstream) -> Vec<(String, ToolDefinition)> {
    forward::definitions_of(&upstream.shared.link(), &upstream.tools())
}

/// Sets `upstream`'s tools (the ones it listed last) in `registry`, as the registry's group
/// named after the upstream (see [`ToolRegistry::replace_tools_skipping`]). A tool that
/// cannot be served is left out, with an error in the log naming the upstream and the tool,
/// and handed back: one whose name another tool holds already (any tool, another
/// upstream's included), one twice in its list, one whose name is invalid or too long
/// once prefixed, one whose input schema does not compile. To keep them up to date, use
/// [`Upstream::follow_tool_list`] instead.
pub fn register(registry: &ToolRegistry, upstream: &Upstream) -> Vec<GatewayError> {
    forward::replace(registry, &upstream.shared.link(), &upstream.tools())
}

/// A launched upstream: its session, and for a stdio server the child and its tree.
struct Live {
    connection: Arc<Connection>,
    child: Option<(Child, ProcessTree)>,
    /// What it said at `initialize` of how to use its tools, until the supervisor takes it.
    instructions: Option<String>,
    /// What it declared it serves besides tools.
    offers: Offers,
    /// The revision it is spoken to in.
    protocol: String,
    /// 2026-07-28: its `subscriptions/listen`, ended with it.
    _listening: Option<Listening>,
}

/// The task that keeps an upstream's `subscriptions/listen` open; aborted when dropped
/// (it holds the session, which would otherwise outlive the upstream).
struct Listening(JoinHandle<()>);

impl Drop for Listening {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Live {
    /// Waits until it ends (its child exited, or its session ended), then ends the rest of
    /// it (the child's whole tree, the session); says why.
    async fn ended(&mut self) -> Unavailability {
        let why = match self.child.as_mut() {
            Some((child, _)) => tokio::select! {
                status = child.wait() => match status {
                    Ok(status) => Unavailability::new(format!("the server exited ({status})")),
                    Err(error) => Unavailability::new(format!(
                        "the server could not be watched ({error})"
                    ))
                    .with_cause(error),
                },
                () = self.connection.ended() => self
                    .connection
                    .closed()
                    .unwrap_or_else(|| Unavailability::new("the session ended")),
            },
            None => {
                self.connection.ended().await;
                self.connection
                    .closed()
                    .unwrap_or_else(|| Unavailability::new("the session ended"))
            }
        };
        if let Some((child, tree)) = self.child.as_mut() {
            tree.kill();
            let _ = child.start_kill();
        }
        self.connection.close(why.clone());
        why
    }
}

/// Starts the upstream and keeps it started, for as long as the [`Upstream`] lives: the
/// first start's outcome goes to `first`.
async fn supervise(shared: Arc<Shared>, first: oneshot::Sender<Result<(), GatewayError>>) {
    let mut first = Some(first);
    let mut delay = INITIAL_BACKOFF;
    let mut started_before = false;
    loop {
        shared.set_state(UpstreamState::Starting);
        let why = match start_once(&shared).await {
            Ok((mut live, tools, lists)) => {
                shared.set_connection(Some(Arc::clone(&live.connection)));
                shared.catalog.started(&live.connection, live.offers);
                shared.set_instructions(live.instructions.take());
                *shared.protocol.lock() = Some(live.protocol.clone());
                if let Some(level) = shared.log.server().and_then(|log| log.asked_level()) {
                    let connection = Arc::clone(&live.connection);
                    let name = shared.config.name.clone();
                    tokio::spawn(async move {
                        ask_level(&connection, &name, level).await;
                    });
                }
                shared.publish(tools);
                shared.catalog.publish(lists);
                shared.set_state(UpstreamState::Ready);
                if started_before {
                    shared.restarts.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(target: "milpa::upstream", upstream = %shared.name(), "restarted");
                } else {
                    tracing::info!(target: "milpa::upstream", upstream = %shared.name(), "ready");
                }
                started_before = true;
                if let Some(first) = first.take() {
                    let _ = first.send(Ok(()));
                }
                shared.settled.send_replace(true);
                let up_since = Instant::now();
                let ended = live.ended().await;
                shared.set_connection(None);
                if up_since.elapsed() >= STABLE_AFTER {
                    delay = INITIAL_BACKOFF;
                }
                ended.reason().to_owned()
            }
            Err(error) => {
                let why = error.to_string();
                if let Some(first) = first.take() {
                    let _ = first.send(Err(error));
                }
                why
            }
        };
        tracing::warn!(
            target: "milpa::upstream",
            upstream = %shared.name(),
            "{why}; restarting in {:.1}s",
            delay.as_secs_f64()
        );
        shared.set_state(UpstreamState::Down {
            why,
            retry_at: Instant::now() + delay,
        });
        shared.settled.send_replace(true);
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(MAX_BACKOFF);
    }
}

/// One start: launch, handshake and discovery (its tools, then its resources and prompts),
/// within the start timeout, with a line in the log every few seconds while it waits.
async fn start_once(shared: &Shared) -> Result<(Live, Vec<Value>, CatalogLists), GatewayError> {
    let config = &shared.config;
    let start = async {
        let live = launch(config, &shared.list_changed, &shared.log).await?;
        live.connection.on_catalog(shared.catalog.clone());
        let tools =
            list_tools(&live.connection)
                .await
                .map_err(|error| GatewayError::Handshake {
                    upstream: config.name.clone(),
                    why: HandshakeFailure::ToolList(error),
                })?;
        let tools = shared.admit(tools).await;
        let lists = shared.catalog.discover(&live.connection, live.offers).await;
        Ok((live, tools, lists))
    };
    let timed = async {
        tokio::time::timeout(config.start_timeout, start)
            .await
            .unwrap_or_else(|_| {
                Err(GatewayError::Handshake {
                    upstream: config.name.clone(),
                    why: HandshakeFailure::TimedOut(config.start_timeout),
                })
            })
    };
    noting_the_wait(config, timed).await
}

/// Runs `start`, logging every few seconds that the upstream is still awaited.
async fn noting_the_wait<T>(config: &UpstreamConfig, start: impl Future<Output = T>) -> T {
    let began = Instant::now();
    let mut next = FIRST_WAIT_NOTE;
    tokio::pin!(start);
    loop {
        tokio::select! {
            done = &mut start => return done,
            () = tokio::time::sleep_until(began + next) => {
                tracing::warn!(
                    target: "milpa::upstream",
                    upstream = %config.name,
                    "waiting for upstream '{}' ({}): {} s",
                    config.name,
                    config.label(),
                    next.as_secs()
                );
                next += if next < STABLE_AFTER { EARLY_WAIT_NOTES } else { LATE_WAIT_NOTES };
            }
        }
    }
}

/// Starts the child (or opens the HTTP session) and runs the handshake; `list_changed` is
/// told when the session says the tool list changed.
async fn launch(
    config: &UpstreamConfig,
    list_changed: &Arc<Notify>,
    log: &Arc<UpstreamLog>,
) -> Result<Live, GatewayError> {
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
        Transport::Http {
            url,
            bearer_env,
            headers,
        } => {
            // Messages name the URL as configured: a secret expanded into it stays out.
            let shown: Arc<str> = Arc::from(config.shown.as_deref().unwrap_or(url));
            let uri: hyper::Uri = url.parse().map_err(|source| {
                config_error(ConfigProblem::NotAUrl {
                    url: shown.to_string(),
                    source,
                })
            })?;
            if !matches!(uri.scheme_str(), Some("http" | "https")) {
                return Err(config_error(ConfigProblem::UnsupportedScheme {
                    url: shown.to_string(),
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
            let headers = request_headers(bearer.as_deref(), headers).map_err(config_error)?;
            (
                Arc::new(crate::http::open(
                    name,
                    uri,
                    shown,
                    headers,
                    config.max_message_bytes,
                    client,
                )),
                None,
            )
        }
    };
    connection.on_list_changed(Arc::clone(list_changed));
    connection.on_log(Arc::clone(log));
    let handshake = handshake(config, &connection).await?;
    let listening = connection
        .is_stateless()
        .then(|| listen_for_changes(&connection, &handshake.offers))
        .flatten();
    Ok(Live {
        connection,
        child,
        instructions: handshake.instructions,
        offers: handshake.offers,
        protocol: handshake.protocol,
        _listening: listening,
    })
}

/// Headers the gateway sets itself: a configured one of these is refused.
const RESERVED_HEADERS: [&str; 5] = [
    "content-type",
    "accept",
    "mcp-session-id",
    "mcp-protocol-version",
    "content-length",
];

/// The headers every request to an HTTP upstream carries: `Authorization: Bearer` (when a
/// token is given; a configured `Authorization` then is refused) and the configured ones,
/// each value marked sensitive.
fn request_headers(
    bearer: Option<&str>,
    configured: &[(String, String)],
) -> Result<HeaderMap, ConfigProblem> {
    let mut headers = HeaderMap::new();
    let bad = |name: &str, why| ConfigProblem::BadHeader {
        name: name.to_owned(),
        why,
    };
    if let Some(token) = bearer {
        let mut value = HeaderValue::try_from(format!("Bearer {token}"))
            .map_err(|_| bad("authorization", "the bearer token is not a header value"))?;
        value.set_sensitive(true);
        headers.insert(AUTHORIZATION, value);
    }
    for (name, value) in configured {
        let header =
            HeaderName::try_from(name.as_str()).map_err(|_| bad(name, "not a header name"))?;
        if RESERVED_HEADERS.contains(&header.as_str()) {
            return Err(bad(name, "the gateway sets it itself"));
        }
        if header == AUTHORIZATION && bearer.is_some() {
            return Err(bad(name, "bearer_env sets it already"));
        }
        let mut value =
            HeaderValue::try_from(value.as_str()).map_err(|_| bad(name, "not a header value"))?;
        value.set_sensitive(true);
        headers.append(header, value);
    }
    Ok(headers)
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
            // As written when it was given (`${VAR}` unexpanded), so no secret shows.
            program: match &config.shown {
                Some(_) => config.label(),
                None => program.clone(),
            },
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
    let connection = Arc::new(Connection::open(
        name,
        stdout,
        stdin,
        config.max_message_bytes,
    ));
    Ok((connection, child, tree))
}

/// What a handshake learnt: the upstream's `instructions`, if it gave any (cut to
/// [`MAX_INSTRUCTIONS_BYTES`]), what it serves besides tools, and the revision spoken.
struct Handshake {
    instructions: Option<String>,
    offers: Offers,
    protocol: String,
}

/// Finds out which revision to speak (see [`crate::revision`]): `server/discover` first
/// unless the configuration says sessions, then `initialize` for an upstream that does not
/// list 2026-07-28.
///
/// A server still silent after [`DISCOVER_TIMEOUT`] may be one that ignores the method or
/// one slow to start (`npx -y` downloading it): it is sent `initialize` too, and the first
/// answer decides. A server reads its input in order, so one slow to start answers
/// `server/discover` first; one that ignores it answers `initialize`.
async fn handshake(
    config: &UpstreamConfig,
    connection: &Connection,
) -> Result<Handshake, GatewayError> {
    let failed = |why| GatewayError::Handshake {
        upstream: config.name.clone(),
        why,
    };
    if config.protocol == ProtocolChoice::Sessions {
        return initialize(config, connection)
            .await
            .map_err(|error| failed(HandshakeFailure::Initialize(error)));
    }
    connection.set_stateless(true);
    let discover = connection.request("server/discover", json!({}), None);
    tokio::pin!(discover);
    let answered = match tokio::time::timeout(DISCOVER_TIMEOUT, &mut discover).await {
        Ok(answer) => Some(answer),
        // Only that revision will do: wait for it (within the start timeout).
        Err(_) if config.protocol == ProtocolChoice::Stateless => Some(discover.as_mut().await),
        Err(_) => None,
    };
    let Some(answer) = answered else {
        connection.set_stateless(false);
        let opening = initialize(config, connection);
        tokio::pin!(opening);
        tokio::select! {
            // Both answers may be in by the time this looks: the first one sent decides.
            biased;
            answer = &mut discover => if let Ok(answer) = answer
                && revision::offers_stateless(&answer)
            {
                connection.set_stateless(true);
                return Ok(stateless(config, &answer));
            },
            opened = &mut opening => {
                return opened.map_err(|error| failed(HandshakeFailure::Initialize(error)));
            }
        }
        // It answered `server/discover` without offering 2026-07-28: the session it is
        // opening is the one.
        return opening
            .await
            .map_err(|error| failed(HandshakeFailure::Initialize(error)));
    };
    match answer {
        Ok(answer) if revision::offers_stateless(&answer) => Ok(stateless(config, &answer)),
        outcome => {
            connection.set_stateless(false);
            if config.protocol == ProtocolChoice::Stateless {
                let error = outcome.err().unwrap_or_else(|| {
                    CallError::unavailable("its server/discover answer does not list 2026-07-28")
                });
                return Err(failed(HandshakeFailure::Discover(error)));
            }
            tracing::debug!(
                target: "milpa::upstream",
                upstream = %config.name,
                "it does not speak 2026-07-28; opening a session"
            );
            initialize(config, connection)
                .await
                .map_err(|error| failed(HandshakeFailure::Initialize(error)))
        }
    }
}

/// What a `server/discover` answer that lists 2026-07-28 says.
fn stateless(config: &UpstreamConfig, answer: &Value) -> Handshake {
    Handshake {
        instructions: instructions_of(config, answer),
        offers: Offers::from_capabilities(answer.get("capabilities")),
        protocol: MODERN_VERSION.to_owned(),
    }
}

/// Opens a session: `initialize`, then `notifications/initialized`.
async fn initialize(
    config: &UpstreamConfig,
    connection: &Connection,
) -> Result<Handshake, CallError> {
    let answer = connection
        .request(
            "initialize",
            json!({
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": crate::relay::declared_capabilities(),
                "clientInfo": revision::client_info(),
            }),
            None,
        )
        .await?;
    let offers = Offers::from_capabilities(answer.get("capabilities"));
    connection.set_declares_logging(offers.logging());
    let Some(protocol) = answer.get("protocolVersion").and_then(Value::as_str) else {
        return Err(CallError::unavailable(
            "its initialize answer has no protocolVersion",
        ));
    };
    let protocol = protocol.to_owned();
    connection.notify("notifications/initialized", json!({}))?;
    Ok(Handshake {
        instructions: instructions_of(config, &answer),
        offers,
        protocol,
    })
}

/// The `instructions` of an `initialize` or `server/discover` answer, when not blank.
fn instructions_of(config: &UpstreamConfig, answer: &Value) -> Option<String> {
    answer
        .get("instructions")
        .and_then(Value::as_str)
        .filter(|text| !text.trim().is_empty())
        .map(|text| bounded_instructions(&config.name, text))
}

/// The first delay before a `subscriptions/listen` that ended is opened again.
const RELISTEN: Duration = Duration::from_secs(1);
/// The longest such delay.
const RELISTEN_MAX: Duration = Duration::from_secs(30);

/// 2026-07-28: keeps a `subscriptions/listen` open for the list changes the upstream
/// announces (`listChanged` in its capabilities) and, when it offers `subscribe`, the
/// updates of the resources clients subscribed to, so they reach [`crate::connection`]'s
/// dispatch as the older revisions' notifications do.
///
/// - A new subscription ([`Connection::subscribe_resource`]) opens the listen again with
///   the larger filter (the old one is cancelled; an update in between is lost, as one is
///   while a session of the older revisions is re-opened).
/// - One that ends while the session lives is opened again (after 1 s, doubling up to
///   30 s), and the lists are read again, since a change may have gone unannounced.
///
/// `None` when it announces nothing that could be listened to.
fn listen_for_changes(connection: &Arc<Connection>, offers: &Offers) -> Option<Listening> {
    let lists = offers.list_changes();
    let subscribe = offers.subscribe();
    if lists.is_empty() && !subscribe {
        return None;
    }
    let connection = Arc::clone(connection);
    Some(Listening(tokio::spawn(async move {
        let mut delay = RELISTEN;
        loop {
            let mut filter = lists.clone();
            let resources = connection.resource_subscriptions();
            if subscribe && !resources.is_empty() {
                filter.insert("resourceSubscriptions".into(), json!(resources));
            }
            if filter.is_empty() {
                // Nothing to hear yet: wait for a subscription.
                connection.listen_filter_changed().await;
                continue;
            }
            let opened = Instant::now();
            let params = json!({ "notifications": filter });
            let outcome = tokio::select! {
                outcome = connection.request("subscriptions/listen", params, None) => outcome,
                () = connection.listen_filter_changed() => continue,
            };
            if connection.closed().is_some() {
                return;
            }
            tracing::debug!(
                target: "milpa::upstream",
                outcome = ?outcome.err(),
                "its subscriptions/listen ended; opening it again"
            );
            if opened.elapsed() >= RELISTEN_MAX {
                delay = RELISTEN;
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(RELISTEN_MAX);
            connection.lists_may_have_changed();
        }
    })))
}

/// At most this much of an upstream's `instructions` is served: they go into every
/// client's `initialize` answer, and a server that writes a book there is cut.
pub(crate) const MAX_INSTRUCTIONS_BYTES: usize = 16 * 1024;

/// `text`, cut to [`MAX_INSTRUCTIONS_BYTES`] on a character boundary (logged when cut).
fn bounded_instructions(upstream: &str, text: &str) -> String {
    if text.len() <= MAX_INSTRUCTIONS_BYTES {
        return text.to_owned();
    }
    let mut end = MAX_INSTRUCTIONS_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    tracing::warn!(
        target: "milpa::upstream",
        upstream,
        bytes = text.len(),
        "its instructions were cut to {MAX_INSTRUCTIONS_BYTES} bytes"
    );
    format!("{}…", &text[..end])
}

/// Every tool the upstream lists, following `nextCursor`.
async fn list_tools(connection: &Connection) -> Result<Vec<Value>, CallError> {
    connection.list_all("tools/list", "tools").await
}

/// `tools/list` got no answer in time: the timer that ran out is the cause.
fn list_timed_out(elapsed: tokio::time::error::Elapsed) -> CallError {
    CallError::Unavailable(Unavailability::new("tools/list timed out").with_cause(elapsed))
}

/// The longest line of a child's standard error that reaches the log; the rest of a
/// longer one is dropped (a child writing without a newline costs nothing more).
const STDERR_LINE_MAX: usize = 8 * 1024;

/// The child's standard error, line by line (each cut at [`STDERR_LINE_MAX`] bytes), into
/// our log under its name.
async fn log_stderr(upstream: Arc<str>, stderr: tokio::process::ChildStderr) {
    use futures_util::StreamExt;
    use tokio_util::codec::{AnyDelimiterCodecError, FramedRead};

    let mut lines = FramedRead::new(stderr, crate::connection::bounded_lines(STDERR_LINE_MAX));
    // After a line over the limit the reader says `None` once, then reads on (the rest of
    // that line is discarded as it comes).
    let mut after_cut = false;
    loop {
        match lines.next().await {
            Some(Ok(line)) => {
                after_cut = false;
                tracing::info!(
                    target: "milpa::upstream",
                    upstream = %upstream,
                    "{}",
                    String::from_utf8_lossy(&line)
                );
            }
            Some(Err(AnyDelimiterCodecError::MaxChunkLengthExceeded)) => {
                tracing::warn!(
                    target: "milpa::upstream",
                    upstream = %upstream,
                    "a line of its standard error over {STDERR_LINE_MAX} bytes was dropped"
                );
                after_cut = true;
            }
            None if after_cut => after_cut = false,
            None | Some(Err(AnyDelimiterCodecError::Io(_))) => return,
        }
    }
}

/// Re-discovers the upstream's tools each time it may have changed them, for as long as
/// the registry lives.
async fn follow(shared: Arc<Shared>, registry: Weak<ToolRegistry>) {
    loop {
        shared.list_changed.notified().await;
        if registry.strong_count() == 0 {
            return;
        }
        rediscover(&shared).await;
    }
}

/// Re-discovers the upstream's resources and prompts each time it says they changed, for
/// as long as the registry lives; one that times out keeps the previous lists.
async fn follow_catalog(shared: Arc<Shared>, registry: Weak<ToolRegistry>) {
    loop {
        shared.catalog.changed.notified().await;
        if registry.strong_count() == 0 {
            return;
        }
        let Ok(connection) = shared.connection() else {
            continue;
        };
        let discovered = tokio::time::timeout(
            shared.config.start_timeout,
            shared
                .catalog
                .discover(&connection, shared.catalog.offers()),
        )
        .await;
        match discovered {
            Ok(lists) => shared.catalog.publish(lists),
            Err(_) => tracing::warn!(
                target: "milpa::upstream",
                upstream = %shared.name(),
                "listing its resources and prompts again timed out; keeping the previous ones"
            ),
        }
    }
}

/// Asks the upstream, while it is up, for each level the clients ask for (see
/// [`crate::upstream_log`]); ends when the registry is gone.
async fn follow_levels(shared: Arc<Shared>, mut levels: watch::Receiver<Option<LogLevel>>) {
    while levels.changed().await.is_ok() {
        let Some(level) = *levels.borrow_and_update() else {
            continue;
        };
        if let Ok(connection) = shared.connection() {
            ask_level(&connection, shared.name(), level).await;
        }
    }
}

/// Lists the upstream's tools again and publishes them; keeps the previous ones (and says
/// why in the log) when that fails.
async fn rediscover(shared: &Arc<Shared>) {
    let name = shared.name();
    let listed = match shared.connection() {
        Ok(connection) => {
            tokio::time::timeout(shared.config.start_timeout, list_tools(&connection))
                .await
                .unwrap_or_else(|elapsed| Err(list_timed_out(elapsed)))
        }
        // A server that announces its tools while it starts (the npm server-everything
        // does): the start lists them itself.
        Err(_) if shared.state() == UpstreamState::Starting => {
            tracing::debug!(target: "milpa::upstream", upstream = %name, "its tool list changed while it starts");
            return;
        }
        Err(error) => Err(error),
    };
    match listed {
        Ok(tools) => {
            tracing::info!(
                target: "milpa::upstream",
                upstream = %name,
                tools = tools.len(),
                "its tools were discovered again"
            );
            let tools = shared.admit(tools).await;
            shared.publish(tools);
        }
        Err(error) => tracing::warn!(
            target: "milpa::upstream",
            upstream = %name,
            "could not list its tools again ({error}); keeping the previous ones"
        ),
    }
}

/// Asks `connection`'s upstream for messages at `level` and above (2026-07-28: in each
/// request's `_meta`; older revisions: `logging/setLevel`, when it declared `logging`); a refusal is noted in the log (the upstream then logs at its own level).
async fn ask_level(connection: &Connection, upstream: &str, level: LogLevel) {
    if connection.is_stateless() {
        // 2026-07-28 has no `logging/setLevel`: each request names the level.
        connection.set_log_level(level);
        return;
    }
    if !connection.declares_logging() {
        return;
    }
    if let Err(error) = connection
        .request("logging/setLevel", json!({"level": level}), None)
        .await
    {
        tracing::warn!(
            target: "milpa::upstream",
            upstream,
            "refused the log level the clients asked for ({error})"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instructions_are_cut_on_a_character_boundary() {
        assert_eq!(bounded_instructions("up", "short"), "short");
        // 'é' is two bytes: the cap falls inside one of them.
        let long = format!("a{}", "é".repeat(MAX_INSTRUCTIONS_BYTES));
        let cut = bounded_instructions("up", &long);
        assert!(cut.ends_with('…'), "{}", &cut[cut.len() - 8..]);
        assert!(cut.len() <= MAX_INSTRUCTIONS_BYTES + '…'.len_utf8());
        assert!(long.starts_with(cut.trim_end_matches('…')));
    }
}
