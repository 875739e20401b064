//! [`ToolRegistry`]: holds the tools and their collaborators, and runs every call through
//! the pipeline.

use std::collections::BTreeMap;

use crate::catalog::{
    AccessRefusal, Catalog, CatalogError, CatalogGenerations, CatalogNotifier, CatalogSnapshot,
    Completion, CompletionRef, PromptProvider, PromptReply, ResourceContents, ResourceProvider,
};
use crate::server_log::ServerLog;
use std::collections::HashMap;
use std::future::Future;
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::watch;

use crate::approval::{Approval, ApprovalError, ApprovalQueue, DefinitionChange, Verdict};
use crate::audit::{AuditLimits, AuditSink, Redactor, TracingAuditSink};
use crate::confirm::{ConfirmationStore, DEFAULT_TTL, InMemoryConfirmationStore};
use crate::context::ToolContext;
use crate::definition::{ToolDefinition, ToolProvider};
use crate::events::Dispatcher;
use crate::outcome::{CallOutcome, ConfirmationTicket, SentToken, split_confirm_token};
use crate::pipeline::clock::PipelineClock;
use crate::pipeline::refusal::{self, ConfirmationRefusal};
use crate::pipeline::{StageTrace, TokenArg, execute_call};
use crate::pipeline::{approval_decision, definition_hold};
use crate::policy::{ChannelPolicy, PolicyGate, PolicyRuleProvider};
use crate::rate_limit::{Quota, RateLimiter};
use crate::result::ToolResult;
use crate::schema::{InputValidator, SchemaError};
use crate::tool_table::{RegisteredTool, ToolLookup, ToolTable};
use crate::wiring::{DEFAULT_MAX_RESULT_BYTES, Wiring};

/// Why a tool could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// A tool with that name exists already.
    #[error("Tool already registered: {0}")]
    AlreadyRegistered(String),
    /// The name is empty, too long, or has characters other than letters, digits, `_`, `-`
    /// and `.` (the names MCP clients accept).
    #[error("Invalid tool name {0:?}: use 1 to 128 letters, digits, '_', '-' or '.'")]
    InvalidName(String),
    /// The input schema is not a valid JSON Schema for an object.
    #[error("Tool {tool}: {error}")]
    InvalidSchema {
        /// The tool.
        tool: String,
        /// What is wrong with its schema.
        error: SchemaError,
    },
    /// A resource or prompt provider was refused (see [`ToolRegistry::register_resources`]):
    /// the [`CatalogError`]'s message.
    #[error("{0}")]
    Catalog(String),
    /// A clamp names an argument the tool does not take.
    #[error("Tool {tool}: clamp on unknown argument {field:?}")]
    UnknownClampField {
        /// The tool.
        tool: String,
        /// The clamped argument.
        field: String,
    },
}

impl From<CatalogError> for RegistryError {
    fn from(error: CatalogError) -> RegistryError {
        RegistryError::Catalog(error.to_string())
    }
}

/// A registered tool's definition, as [`ToolRegistry::get`] and
/// [`ToolRegistry::definitions`] hand it out: borrowed for a tool registered with
/// [`register`](ToolRegistry::register), shared for one of a group set with
/// [`replace_tools`](ToolRegistry::replace_tools) (which the group may replace meanwhile:
/// this one stays valid). Dereferences to the [`ToolDefinition`].
pub struct ToolRef<'a> {
    tool: ToolRefInner<'a>,
}

enum ToolRefInner<'a> {
    Fixed(&'a RegisteredTool),
    Swappable(Arc<RegisteredTool>),
}

impl ToolRef<'_> {
    pub(crate) fn registered(&self) -> &RegisteredTool {
        match &self.tool {
            ToolRefInner::Fixed(tool) => tool,
            ToolRefInner::Swappable(tool) => tool,
        }
    }
}

impl Deref for ToolRef<'_> {
    type Target = ToolDefinition;

    fn deref(&self) -> &ToolDefinition {
        &self.registered().definition
    }
}

impl std::fmt::Debug for ToolRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRef")
            .field("name", &self.name())
            .finish_non_exhaustive()
    }
}

/// The tools, and the pipeline every call to them runs through.
///
/// Build it with [`ToolRegistry::builder`], register tools, then share it (it is `Send +
/// Sync`; put it in an `Arc`) and call concurrently.
///
/// ```
/// use milpa::{ToolContext, ToolDefinition, ToolRegistry};
/// use serde_json::json;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let mut registry = ToolRegistry::new();
/// registry.register(
///     ToolDefinition::builder("echo")
///         .description("Echoes the text")
///         .input_schema(json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}))
///         .sync(|args, _ctx| args["text"].clone()),
/// )?;
/// let result = registry.call("echo", json!({"text": "hi"}), &ToolContext::cli()).await;
/// assert!(result.success);
/// assert_eq!(result.data, json!("hi"));
/// let missing = registry.call("echo", json!({}), &ToolContext::cli()).await;
/// assert_eq!(missing.error.as_deref(), Some("Missing required field: text"));
/// # Ok::<(), milpa::RegistryError>(())
/// # }).unwrap();
/// ```
pub struct ToolRegistry {
    /// The registered tools and the replaceable groups: one field, so the call's future
    /// takes one pointer to them (see [`ToolLookup`]).
    tools: ToolLookup,
    /// Held while a group is replaced, so two replacements do not lose one another.
    swapping: Mutex<()>,
    /// The tool list's generation, bumped on every change.
    changes: watch::Sender<u64>,
    default_quota: Quota,
    tool_quotas: HashMap<String, Quota>,
    /// The resources and prompts, beside the tools.
    catalog: Catalog,
    /// Log messages for every client, outside any call (see [`ServerLog`]).
    server_log: ServerLog,
    /// What each group's server says of how to use its tools, in the order first set.
    group_instructions: Mutex<Vec<(Arc<str>, Arc<str>)>>,
    wiring: Wiring,
}

impl Default for ToolRegistry {
    fn default() -> Self {
        Self::builder().build()
    }
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("tools", &self.tool_names().collect::<Vec<_>>())
            .field("gate", &self.wiring.gate)
            .field("rate_limiter", &self.wiring.rate_limiter.is_some())
            .field("dispatcher", &self.wiring.dispatcher.is_some())
            .finish_non_exhaustive()
    }
}

impl ToolRegistry {
    /// A registry with the defaults: built-in channel policies, no rate limiter, in-memory
    /// confirmations (60 s), no dispatcher, audit through `tracing`.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts configuring a registry.
    pub fn builder() -> ToolRegistryBuilder {
        ToolRegistryBuilder {
            gate: PolicyGate::new(),
            rate_limiter: None,
            caller_budget: None,
            default_quota: Quota::DEFAULT,
            tool_quotas: HashMap::new(),
            confirmations: None,
            confirmation_ttl: DEFAULT_TTL,
            approvals: None,
            dispatcher: None,
            audit: None,
            redactor: Redactor::default(),
            audit_limits: AuditLimits::default(),
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
        }
    }

    /// Adds a tool. Its input schema is compiled now; an invalid one is refused.
    pub fn register(&mut self, definition: ToolDefinition) -> Result<(), RegistryError> {
        let name = definition.name();
        if self.tools.contains(name) {
            return Err(RegistryError::AlreadyRegistered(name.to_owned()));
        }
        let tool = self.compile(definition)?;
        self.tools.table.push(tool);
        self.changes.send_modify(|generation| *generation += 1);
        Ok(())
    }

    /// Checks a definition and precomputes what the pipeline needs of it.
    fn compile(&self, definition: ToolDefinition) -> Result<RegisteredTool, RegistryError> {
        let name = definition.name();
        if !valid_tool_name(name) {
            return Err(RegistryError::InvalidName(name.to_owned()));
        }
        let validator = InputValidator::compile(definition.input_schema()).map_err(|error| {
            RegistryError::InvalidSchema {
                tool: name.to_owned(),
                error,
            }
        })?;
        let properties = definition
            .input_schema()
            .get("properties")
            .and_then(Value::as_object);
        for (field, _) in &definition.options().clamps {
            if properties.is_some_and(|p| !p.contains_key(field)) {
                return Err(RegistryError::UnknownClampField {
                    tool: name.to_owned(),
                    field: field.clone(),
                });
            }
        }
        let quota = self
            .tool_quotas
            .get(name)
            .copied()
            .unwrap_or(self.default_quota);
        Ok(RegisteredTool {
            definition,
            validator,
            quota,
        })
    }

    /// Sets the tools of `group` (an upstream's name, say) to `definitions`, replacing the
    /// ones it had, all at once, while the registry serves: calls that resolved an old tool
    /// finish with it, later calls see the new set (an empty set removes the group). The
    /// group's tools are listed after the tools added with [`register`](Self::register),
    /// groups in the order they were first set.
    ///
    /// All or nothing: a name another group or a registered tool holds, a name twice in
    /// `definitions`, or a definition [`register`](Self::register) would refuse leaves the
    /// group as it was. Bumps [`tool_list_changes`](Self::tool_list_changes).
    pub fn replace_tools(
        &self,
        group: &str,
        definitions: Vec<ToolDefinition>,
    ) -> Result<(), RegistryError> {
        let _swapping = self.swapping.lock();
        let current = self.tools.swappable.load_full();
        let mut tools: Vec<Arc<RegisteredTool>> = Vec::with_capacity(definitions.len());
        for definition in definitions {
            let name = definition.name();
            let taken = self.tools.table.contains(name)
                || current.group_of(name).is_some_and(|owner| owner != group)
                || tools.iter().any(|t| t.definition.name() == name);
            if taken {
                return Err(RegistryError::AlreadyRegistered(name.to_owned()));
            }
            tools.push(Arc::new(self.compile(definition)?));
        }
        self.tools
            .swappable
            .store(Arc::new(current.with_group(group, tools)));
        self.changes.send_modify(|generation| *generation += 1);
        Ok(())
    }

    /// Like [`replace_tools`](Self::replace_tools), one definition at a time: a definition
    /// it would refuse (a name another group or a registered tool holds, a name already
    /// taken earlier in `definitions`, an invalid name or input schema) is left out and
    /// handed back, by name, with why; the others become the group's tools. An upstream
    /// server's odd tool then costs that tool, not the whole server. Bumps
    /// [`tool_list_changes`](Self::tool_list_changes).
    ///
    /// ```
    /// use milpa::{RegistryError, ToolDefinition, ToolRegistry};
    /// use serde_json::json;
    ///
    /// let registry = ToolRegistry::new();
    /// let tool = |name: &str| ToolDefinition::builder(name).sync(|_, _| json!(null));
    /// let refused = registry.replace_tools_skipping("up", vec![tool("ok"), tool("not ok"), tool("ok")]);
    /// assert_eq!(registry.tool_names().count(), 1);
    /// assert_eq!(refused.len(), 2);
    /// assert!(matches!(refused[0], (ref name, RegistryError::InvalidName(_)) if name == "not ok"));
    /// assert!(matches!(refused[1].1, RegistryError::AlreadyRegistered(_)));
    /// ```
    pub fn replace_tools_skipping(
        &self,
        group: &str,
        definitions: Vec<ToolDefinition>,
    ) -> Vec<(String, RegistryError)> {
        let _swapping = self.swapping.lock();
        let current = self.tools.swappable.load_full();
        let mut tools: Vec<Arc<RegisteredTool>> = Vec::with_capacity(definitions.len());
        let mut refused = Vec::new();
        for definition in definitions {
            let name = definition.name().to_owned();
            let taken = self.tools.table.contains(&name)
                || current.group_of(&name).is_some_and(|owner| owner != group)
                || tools.iter().any(|t| t.definition.name() == name);
            if taken {
                refused.push((name.clone(), RegistryError::AlreadyRegistered(name)));
                continue;
            }
            match self.compile(definition) {
                Ok(tool) => tools.push(Arc::new(tool)),
                Err(error) => refused.push((name, error)),
            }
        }
        self.tools
            .swappable
            .store(Arc::new(current.with_group(group, tools)));
        self.changes.send_modify(|generation| *generation += 1);
        refused
    }

    /// A signal of changes to the tool list: the value is a generation counter, bumped
    /// each time a tool is registered or a group replaced. Servers watch it to tell their
    /// clients (`notifications/tools/list_changed`) and to list afresh.
    pub fn tool_list_changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Sets what the server behind the tool group `group` says of how to use its tools (an
    /// upstream's `instructions` at `initialize`), or clears it with `None`. MCP servers add
    /// each group's instructions, under the group's name, after their own.
    ///
    /// ```
    /// let registry = milpa::ToolRegistry::new();
    /// registry.set_group_instructions("fs", Some("Paths are relative to /srv."));
    /// registry.set_group_instructions("git", Some("Commit messages in English."));
    /// registry.set_group_instructions("fs", Some("Paths are absolute."));
    /// let names: Vec<String> = registry
    ///     .group_instructions()
    ///     .iter()
    ///     .map(|(group, text)| format!("{group}: {text}"))
    ///     .collect();
    /// assert_eq!(names, ["fs: Paths are absolute.", "git: Commit messages in English."]);
    /// ```
    pub fn set_group_instructions(&self, group: &str, instructions: Option<&str>) {
        let mut groups = self.group_instructions.lock();
        let at = groups.iter().position(|(name, _)| &**name == group);
        match (at, instructions) {
            (Some(at), Some(text)) => groups[at].1 = Arc::from(text),
            (None, Some(text)) => groups.push((Arc::from(group), Arc::from(text))),
            (Some(at), None) => {
                groups.remove(at);
            }
            (None, None) => {}
        }
    }

    /// Every tool group's instructions (see
    /// [`set_group_instructions`](Self::set_group_instructions)), in the order first set.
    pub fn group_instructions(&self) -> Vec<(Arc<str>, Arc<str>)> {
        self.group_instructions.lock().clone()
    }

    /// The server-wide log: messages for every client outside any call (a gateway relays
    /// its upstreams' logs through it), and the log levels the clients asked for.
    pub fn server_log(&self) -> &ServerLog {
        &self.server_log
    }

    /// The tool list's generation now (what [`tool_list_changes`](Self::tool_list_changes)
    /// carries).
    pub fn tool_list_generation(&self) -> u64 {
        *self.changes.borrow()
    }

    /// Adds every tool of a provider (what `#[tools]` generates). Stops at the first error;
    /// tools registered before it stay.
    pub fn register_provider<P: ToolProvider>(
        &mut self,
        provider: Arc<P>,
    ) -> Result<usize, RegistryError> {
        let definitions = provider.tool_definitions();
        let count = definitions.len();
        for definition in definitions {
            self.register(definition)?;
        }
        Ok(count)
    }

    /// Runs one call through the whole pipeline and hands back its typed outcome: the
    /// result, or the ticket of a confirmation or approval it waits for. Never panics and
    /// never fails: every refusal or failure is a [`CallOutcome::Done`] result with
    /// `meta.code`.
    ///
    /// `args` are the tool's arguments only: a `confirm_token` among them is an argument
    /// like any other (legacy callers that put a replay's token there go through
    /// [`call`](Self::call) or [`split_confirm_token`] and [`invoke_sent`](Self::invoke_sent)).
    ///
    /// ```
    /// use milpa::{CallOutcome, ToolContext, ToolDefinition, ToolRegistry};
    /// use serde_json::json;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let mut registry = ToolRegistry::new();
    /// registry.register(
    ///     ToolDefinition::builder("delete_note")
    ///         .requires_confirmation(true)
    ///         .sync(|args, _| json!(format!("deleted {}", args["id"]))),
    /// )?;
    /// let ctx = ToolContext::cli();
    /// let CallOutcome::NeedsConfirmation(ticket) =
    ///     registry.invoke("delete_note", json!({"id": 4}), &ctx).await
    /// else {
    ///     panic!("a confirmation")
    /// };
    /// assert_eq!(ticket.summary(), "delete_note(id=4)");
    /// let ran = registry.redeem("delete_note", ticket.token(), &ctx).await;
    /// assert_eq!(ran.into_result().data, json!("deleted 4"));
    /// # Ok::<(), milpa::RegistryError>(())
    /// # }).unwrap();
    /// ```
    pub fn invoke<'a>(
        &'a self,
        name: &'a str,
        args: Value,
        ctx: &'a ToolContext,
    ) -> impl Future<Output = CallOutcome> + Send + 'a {
        execute_call(
            &self.tools,
            &self.wiring,
            name,
            args,
            TokenArg::Absent,
            ctx,
            (),
        )
    }

    /// Redeems a ticket: replays `token` (a confirmation token or an approval id) for
    /// `name` in `ctx`, running the arguments parked when it was issued. An unknown,
    /// foreign, expired or spent token is the invalid-token `VALIDATION_ERROR`; an approval
    /// nobody decided yet is [`CallOutcome::AwaitingApproval`] again, a rejected one
    /// `FORBIDDEN`. The gates run as for any call (the replay is authorized and charged).
    pub fn redeem<'a>(
        &'a self,
        name: &'a str,
        token: &str,
        ctx: &'a ToolContext,
    ) -> impl Future<Output = CallOutcome> + Send + use<'a> {
        let token = TokenArg::Given(token.to_owned());
        execute_call(&self.tools, &self.wiring, name, Value::Null, token, ctx, ())
    }

    /// A call as a legacy caller sent it: `args` with the token [`split_confirm_token`]
    /// took off them. No token is [`invoke`](Self::invoke); a string token is a replay
    /// (other arguments sent with it are ignored in favour of the parked ones, and the
    /// result says so); a malformed one is refused by a tool that confirms.
    pub fn invoke_sent<'a>(
        &'a self,
        name: &'a str,
        args: Value,
        token: SentToken,
        ctx: &'a ToolContext,
    ) -> impl Future<Output = CallOutcome> + Send + 'a {
        execute_call(&self.tools, &self.wiring, name, args, token.into(), ctx, ())
    }

    /// Runs one call through the whole pipeline: the library's legacy edge. A
    /// `confirm_token` among `args` is split off ([`split_confirm_token`]) and replayed, and
    /// a ticket comes back rendered as its PHP-compatible result (DESIGN §4). Never panics
    /// and never fails: every refusal or failure is a [`ToolResult`] with `meta.code`.
    // A plain `fn` returning the executor's future (rather than an `async fn` wrapping
    // it): one state machine per call instead of two.
    // Inlined: out of line it returned the call's future by copy, and with the token split
    // it no longer inlined by itself (53 instructions and one more `memcpy` per call).
    #[inline]
    pub fn call<'a>(
        &'a self,
        name: &'a str,
        mut args: Value,
        ctx: &'a ToolContext,
    ) -> impl Future<Output = ToolResult> + Send + 'a {
        let token = split_confirm_token(&mut args).into();
        execute_call(&self.tools, &self.wiring, name, args, token, ctx, ())
    }

    /// [`call`](Self::call) in the default context, [`ToolContext::cli`] (full access, for
    /// scripts and tests): the original's `call()` without a context.
    ///
    /// ```
    /// use milpa::{ToolDefinition, ToolRegistry};
    /// use serde_json::json;
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let mut registry = ToolRegistry::new();
    /// registry.register(ToolDefinition::builder("ping").sync(|_, _| json!("pong"))).unwrap();
    /// let result = registry.call_cli("ping", json!({})).await;
    /// assert_eq!(result.data, json!("pong"));
    /// assert_eq!(result.meta.runtime().unwrap().channel(), "cli");
    /// # });
    /// ```
    pub async fn call_cli(&self, name: &str, args: Value) -> ToolResult {
        let ctx = ToolContext::cli();
        self.call(name, args, &ctx).await
    }

    /// Like [`call`](Self::call), also returning the stages the call went through.
    pub async fn call_traced(
        &self,
        name: &str,
        mut args: Value,
        ctx: &ToolContext,
    ) -> (ToolResult, StageTrace) {
        let mut trace = StageTrace::default();
        let token = split_confirm_token(&mut args).into();
        let result = execute_call(
            &self.tools,
            &self.wiring,
            name,
            args,
            token,
            ctx,
            &mut trace,
        )
        .await;
        (result, trace)
    }

    /// [`decline_confirmation`](Self::decline_confirmation) of a ticket the person
    /// declined or cancelled.
    pub fn decline_ticket<'a>(
        &'a self,
        ticket: &'a ConfirmationTicket,
        refusal: ConfirmationRefusal,
        ctx: &'a ToolContext,
    ) -> impl Future<Output = ToolResult> + Send + 'a {
        refusal::decline_confirmation(&self.wiring, ticket.tool(), ticket.token(), refusal, ctx)
    }

    /// Ends a parked confirmation the person declined or cancelled: revokes `token` (only
    /// if it was issued for `tool` to this context's principal and channel), audits the
    /// call with [`AuditOutcome::ConfirmationDeclined`](crate::audit::AuditOutcome) and
    /// returns a failure with code [`ErrorCode::ConfirmationDeclined`](crate::ErrorCode),
    /// the message `Not done: confirmation of <summary> was declined.` (or `cancelled`) and
    /// `meta.confirmation` = `"declined"` / `"cancelled"`.
    ///
    /// A refusal is not a failure of the tool: no `tool.failed` event is emitted.
    pub fn decline_confirmation<'a>(
        &'a self,
        tool: &'a str,
        token: &'a str,
        refusal: ConfirmationRefusal,
        ctx: &'a ToolContext,
    ) -> impl Future<Output = ToolResult> + Send + 'a {
        refusal::decline_confirmation(&self.wiring, tool, token, refusal, ctx)
    }

    /// Audits a call refused at the protocol level, before it could reach the pipeline
    /// (`tools/call` arguments not an object, name missing): outcome
    /// [`AuditOutcome::InvalidRequest`](crate::audit::AuditOutcome), code
    /// `VALIDATION_ERROR` (the code such a request gets when it does reach the pipeline),
    /// `reason` as the error.
    pub fn audit_refused_request(&self, name: Option<&str>, reason: &str, ctx: &ToolContext) {
        refusal::refused_request(&self.wiring, name, reason, ctx);
    }

    /// The tool registered as `name`, whichever table holds it.
    pub(crate) fn lookup(&self, name: &str) -> Option<ToolRef<'_>> {
        match self.tools.table.lookup(name) {
            Some(tool) => Some(ToolRef {
                tool: ToolRefInner::Fixed(tool),
            }),
            None => self.tools.swappable(name).map(|tool| ToolRef {
                tool: ToolRefInner::Swappable(tool),
            }),
        }
    }

    /// The definition of `name`.
    pub fn get(&self, name: &str) -> Option<ToolRef<'_>> {
        self.lookup(name)
    }

    /// Whether a tool is registered under `name`.
    pub fn has(&self, name: &str) -> bool {
        self.tools.contains(name)
    }

    /// All definitions, in listing order: registered tools in registration order, then
    /// each group's ([`replace_tools`](Self::replace_tools)) as it stands now.
    pub fn definitions(&self) -> impl Iterator<Item = ToolRef<'_>> {
        let swappable: Vec<Arc<RegisteredTool>> =
            self.tools.swappable.load().iter().cloned().collect();
        self.tools
            .table
            .iter()
            .map(|tool| ToolRef {
                tool: ToolRefInner::Fixed(tool),
            })
            .chain(swappable.into_iter().map(|tool| ToolRef {
                tool: ToolRefInner::Swappable(tool),
            }))
    }

    /// All names, in listing order (as [`definitions`](Self::definitions)).
    pub fn tool_names(&self) -> impl Iterator<Item = Arc<str>> {
        self.definitions().map(|d| d.name_arc().clone())
    }

    /// How many tools are registered.
    pub fn len(&self) -> usize {
        self.tools.table.len() + self.tools.swappable.load().len()
    }

    /// Whether no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The rate-limit budget `name` is charged against.
    pub fn quota_for(&self, name: &str) -> Option<Quota> {
        self.lookup(name).map(|t| t.registered().quota)
    }

    /// The policy gate.
    #[inline]
    pub fn policy_gate(&self) -> &PolicyGate {
        &self.wiring.gate
    }

    /// The policy gate, to change channel policies or the rule provider.
    pub fn policy_gate_mut(&mut self) -> &mut PolicyGate {
        &mut self.wiring.gate
    }

    /// Whether a rate limiter is wired.
    pub fn has_rate_limiter(&self) -> bool {
        self.wiring.rate_limiter.is_some()
    }

    /// The rate limiter, if wired.
    #[inline]
    pub fn rate_limiter(&self) -> Option<&Arc<dyn RateLimiter>> {
        self.wiring.rate_limiter.as_ref()
    }

    /// Whether an event dispatcher is wired.
    pub fn has_dispatcher(&self) -> bool {
        self.wiring.dispatcher.is_some()
    }

    /// The event dispatcher, if wired.
    #[inline]
    pub fn dispatcher(&self) -> Option<&Arc<Dispatcher>> {
        self.wiring.dispatcher.as_ref()
    }

    /// Whether the gate has a rule provider.
    pub fn has_rule_provider(&self) -> bool {
        self.wiring.gate.has_rule_provider()
    }

    /// The confirmation store.
    pub fn confirmation_store(&self) -> &Arc<dyn ConfirmationStore> {
        &self.wiring.confirmations
    }

    /// How long confirmation tokens live.
    pub fn confirmation_ttl(&self) -> Duration {
        self.wiring.confirmation_ttl
    }

    /// The approval queue where `confirm = "human"` calls wait.
    pub fn approvals(&self) -> &Arc<ApprovalQueue> {
        &self.wiring.approvals
    }

    /// Records `approver`'s decision on approval `id` (see [`ApprovalQueue::decide`]) and
    /// audits it: outcome `approval_granted` / `approval_rejected` under the approver's
    /// principal and channel, or `approval_refused` with the reason, with the tool the
    /// parked call named (`resolve_verification` for a verification request) and the
    /// arguments `{approval_id, decision, reason}`.
    pub fn decide_approval<'a>(
        &'a self,
        id: &'a str,
        verdict: Verdict,
        reason: Option<&'a str>,
        approver: &'a ToolContext,
    ) -> impl Future<Output = Result<Approval, ApprovalError>> + Send + 'a {
        approval_decision::decide(&self.wiring, id, verdict, reason, approver)
    }

    /// Holds a changed upstream definition for a person: opens its approval in the queue
    /// (or finds the one opened before for the same change, see
    /// [`ApprovalQueue::hold_change`](crate::approval::ApprovalQueue::hold_change)) and, when
    /// it opened one, audits it (`definition_held`). Returns the approval and whether it
    /// was opened now.
    pub fn hold_definition_change(
        &self,
        change: DefinitionChange,
    ) -> impl Future<Output = Result<(Approval, bool), ApprovalError>> + Send + '_ {
        definition_hold::hold(&self.wiring, change)
    }

    /// The audit sink.
    pub fn audit_sink(&self) -> &Arc<dyn AuditSink> {
        &self.wiring.audit
    }

    /// The redaction rules used for audit records.
    pub fn redactor(&self) -> &Redactor {
        &self.wiring.redactor
    }

    /// The size caps of audit records.
    pub fn audit_limits(&self) -> &AuditLimits {
        &self.wiring.audit_limits
    }

    /// The largest tool result (in bytes of JSON) a call may return.
    pub fn max_result_bytes(&self) -> usize {
        self.wiring.max_result_bytes
    }

    /// What the stages of a call borrow.
    #[inline]
    pub(crate) fn wiring(&self) -> &Wiring {
        &self.wiring
    }

    /// The budget a tool without its own quota is charged against (reads and prompts
    /// too).
    pub(crate) fn default_quota(&self) -> Quota {
        self.default_quota
    }

    /// The resources and prompts.
    pub(crate) fn catalog(&self) -> &Catalog {
        &self.catalog
    }
}

/// Resources and prompts: registered beside the tools, served through the same gates (see
/// [`catalog`](crate::catalog)).
impl ToolRegistry {
    /// Adds a resource provider. Its listing is read now; a URI or template another
    /// provider offers is refused, and nothing of this provider is added.
    pub fn register_resources(
        &mut self,
        provider: impl ResourceProvider,
    ) -> Result<(), CatalogError> {
        self.catalog.add_resources(Arc::new(provider))
    }

    /// Adds a prompt provider. Its listing is read now; a name another provider offers is
    /// refused, and nothing of this provider is added.
    pub fn register_prompts(&mut self, provider: impl PromptProvider) -> Result<(), CatalogError> {
        self.catalog.add_prompts(Arc::new(provider))
    }

    /// Adds a resource provider to a registry that may already serve: for providers that
    /// arrive at run time (a gateway's upstream server, whose lists are known once it
    /// started). The lists are read now and announced to every session
    /// (`notifications/resources/list_changed`); a URI or template another provider offers
    /// is refused, and nothing of this provider is added. A server declares the resources
    /// capability at `initialize` only if some provider was there by then.
    pub fn attach_resources(
        &self,
        provider: Arc<dyn ResourceProvider>,
    ) -> Result<(), CatalogError> {
        self.catalog.add_resources(provider)
    }

    /// Adds a prompt provider to a registry that may already serve (see
    /// [`attach_resources`](Self::attach_resources)); a name another provider offers is
    /// refused.
    pub fn attach_prompts(&self, provider: Arc<dyn PromptProvider>) -> Result<(), CatalogError> {
        self.catalog.add_prompts(provider)
    }

    /// A client subscribed to `uri`: tells the provider that serves it
    /// ([`ResourceProvider::subscribed`]); false when no provider serves it.
    pub fn subscribe_resource(&self, uri: &str) -> bool {
        match self.catalog.snapshot().resolve_resource(uri) {
            Some(resolved) => {
                resolved.provider.subscribed(uri);
                true
            }
            None => false,
        }
    }

    /// The resources, templates and prompts as they stand now.
    pub fn catalog_snapshot(&self) -> CatalogSnapshot {
        CatalogSnapshot::new(self.catalog.snapshot())
    }

    /// The handle that announces a resource's update to the sessions subscribed to it,
    /// and a change of the lists to every session.
    pub fn catalog_notifier(&self) -> CatalogNotifier {
        self.catalog.notifier()
    }

    /// Reads every provider's lists again (what [`CatalogNotifier::lists_changed`] does).
    pub fn refresh_catalog(&self) -> Result<(), CatalogError> {
        self.catalog.refresh()
    }

    /// A signal of changes to the resource and prompt lists: each list's generation,
    /// bumped when a provider is registered or a refresh changes it. Servers watch it to
    /// tell their clients (`notifications/resources/list_changed`,
    /// `notifications/prompts/list_changed`).
    pub fn catalog_changes(&self) -> watch::Receiver<CatalogGenerations> {
        self.catalog.changes()
    }

    /// Whether `uri` is one this registry serves (a fixed resource, or one a template
    /// matches). Says nothing of who may read it.
    pub fn serves_resource(&self, uri: &str) -> bool {
        self.catalog.snapshot().resolve_resource(uri).is_some()
    }

    /// Whether any resource provider is registered.
    pub fn has_resources(&self) -> bool {
        self.catalog.snapshot().has_resources()
    }

    /// Whether any prompt provider is registered.
    pub fn has_prompts(&self) -> bool {
        self.catalog.snapshot().has_prompts()
    }

    /// Reads `uri` for `ctx`: resolve (a fixed resource, else the first matching
    /// template), authorize (channel policy, the resource's scopes, rules matched on its
    /// URI or template, then the call policy's
    /// [`evaluate_access`](crate::policy::CallPolicy::evaluate_access)), rate limit (its
    /// own bucket, the default quota), read, audit (kind `read_resource`).
    pub async fn read_resource(
        &self,
        uri: &str,
        ctx: &ToolContext,
    ) -> Result<Vec<ResourceContents>, AccessRefusal> {
        crate::catalog::read_resource(self, uri, ctx).await
    }

    /// Renders prompt `name` with `arguments` for `ctx`, through the same stages as
    /// [`read_resource`](Self::read_resource) (a missing required argument is refused at
    /// resolve); audited with kind `get_prompt`.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: &BTreeMap<String, String>,
        ctx: &ToolContext,
    ) -> Result<PromptReply, AccessRefusal> {
        crate::catalog::get_prompt(self, name, arguments, ctx).await
    }

    /// Suggestions for `argument` of a prompt or resource template, for a caller the gate
    /// lets use it (see [`catalog`](crate::catalog)).
    pub async fn complete(
        &self,
        reference: CompletionRef<'_>,
        argument: &str,
        value: &str,
        ctx: &ToolContext,
    ) -> Result<Completion, AccessRefusal> {
        crate::catalog::complete(self, reference, argument, value, ctx).await
    }
}

fn valid_tool_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// Configures a [`ToolRegistry`]. Every collaborator is optional.
pub struct ToolRegistryBuilder {
    gate: PolicyGate,
    rate_limiter: Option<Arc<dyn RateLimiter>>,
    caller_budget: Option<Quota>,
    default_quota: Quota,
    tool_quotas: HashMap<String, Quota>,
    confirmations: Option<Arc<dyn ConfirmationStore>>,
    confirmation_ttl: Duration,
    approvals: Option<Arc<ApprovalQueue>>,
    dispatcher: Option<Arc<Dispatcher>>,
    audit: Option<Arc<dyn AuditSink>>,
    redactor: Redactor,
    audit_limits: AuditLimits,
    max_result_bytes: usize,
}

impl std::fmt::Debug for ToolRegistryBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistryBuilder")
            .finish_non_exhaustive()
    }
}

impl ToolRegistryBuilder {
    /// Charges every call against `limiter`.
    pub fn rate_limiter(mut self, limiter: Arc<dyn RateLimiter>) -> Self {
        self.rate_limiter = Some(limiter);
        self
    }

    /// The budget of tools without their own (default 100 per 60 s).
    pub fn default_quota(mut self, quota: Quota) -> Self {
        self.default_quota = quota;
        self
    }

    /// A budget for one tool.
    pub fn tool_quota(mut self, tool: impl Into<String>, quota: Quota) -> Self {
        self.tool_quotas.insert(tool.into(), quota);
        self
    }

    /// Where pending confirmations live (default: in memory).
    pub fn confirmation_store(mut self, store: Arc<dyn ConfirmationStore>) -> Self {
        self.confirmations = Some(store);
        self
    }

    /// How long confirmation tokens live (default 60 s).
    pub fn confirmation_ttl(mut self, ttl: Duration) -> Self {
        self.confirmation_ttl = ttl;
        self
    }

    /// Where calls of `confirm = "human"` tools wait for a person (default: an in-memory
    /// queue, one hour TTL). Share its verifier with
    /// [`VerificationTools`](crate::verification::VerificationTools) for one queue.
    pub fn approvals(mut self, queue: Arc<ApprovalQueue>) -> Self {
        self.approvals = Some(queue);
        self
    }

    /// Dispatches `tool.executing`, `tool.executed` and `tool.failed` through `dispatcher`.
    pub fn dispatcher(mut self, dispatcher: Arc<Dispatcher>) -> Self {
        self.dispatcher = Some(dispatcher);
        self
    }

    /// Where audit records go (default: `tracing`, target `milpa::audit`).
    pub fn audit_sink(mut self, sink: Arc<dyn AuditSink>) -> Self {
        self.audit = Some(sink);
        self
    }

    /// Which argument keys are secret in audit records.
    pub fn redactor(mut self, redactor: Redactor) -> Self {
        self.redactor = redactor;
        self
    }

    /// How large an audit record may grow (arguments, error text); beyond, the text is cut
    /// with a visible marker.
    pub fn audit_limits(mut self, limits: AuditLimits) -> Self {
        self.audit_limits = limits;
        self
    }

    /// The largest tool result, in bytes of JSON (default 4 MiB). A larger one fails the
    /// call with `RESULT_TOO_LARGE`.
    pub fn max_result_bytes(mut self, max: usize) -> Self {
        self.max_result_bytes = max;
        self
    }

    /// Replaces the policy of one channel.
    pub fn channel_policy(mut self, channel: impl Into<String>, policy: ChannelPolicy) -> Self {
        self.gate.set_channel_policy(channel, policy);
        self
    }

    /// Consults `provider` after the scope check.
    pub fn rule_provider(mut self, provider: Arc<dyn PolicyRuleProvider>) -> Self {
        self.gate.set_rule_provider(provider);
        self
    }

    /// Judges every call the rest of the gate allowed, with its arguments (see
    /// [`CallPolicy`](crate::policy::CallPolicy)).
    pub fn call_policy(mut self, policy: Arc<dyn crate::policy::CallPolicy>) -> Self {
        self.gate.set_call_policy(policy);
        self
    }

    /// A budget per caller (channel and principal, or an anonymous caller's address) that
    /// every call spends, one token each, in the resolve stage before its tool is looked
    /// up: unknown names, refused calls and real calls alike. Past it a call is
    /// `RATE_LIMITED` without a lookup. Off by default; kept in this process.
    pub fn caller_budget(mut self, quota: Quota) -> Self {
        self.caller_budget = Some(quota);
        self
    }

    /// The finished (empty) registry.
    pub fn build(self) -> ToolRegistry {
        ToolRegistry {
            tools: ToolLookup {
                table: ToolTable::default(),
                swappable: ArcSwap::default(),
            },
            swapping: Mutex::new(()),
            changes: watch::Sender::new(0),
            server_log: ServerLog::new(),
            group_instructions: Mutex::new(Vec::new()),
            default_quota: self.default_quota,
            tool_quotas: self.tool_quotas,
            catalog: Catalog::default(),
            wiring: Wiring {
                gate: self.gate,
                rate_limiter: self.rate_limiter,
                caller_budget: self.caller_budget.map(crate::rate_limit::CallerBudget::new),
                confirmations: self
                    .confirmations
                    .unwrap_or_else(|| Arc::new(InMemoryConfirmationStore::new())),
                confirmation_ttl: self.confirmation_ttl,
                approvals: self
                    .approvals
                    .unwrap_or_else(|| Arc::new(ApprovalQueue::in_memory())),
                dispatcher: self.dispatcher,
                audit: self
                    .audit
                    .unwrap_or_else(|| Arc::new(TracingAuditSink::default())),
                redactor: self.redactor,
                audit_limits: self.audit_limits,
                max_result_bytes: self.max_result_bytes,
                clock: PipelineClock::default(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_and_call_future_are_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>(_: &T) {}
        fn assert_send<T: Send>(_: &T) {}
        let registry = ToolRegistry::new();
        assert_send_sync(&registry);
        let ctx = ToolContext::cli();
        let future = registry.call("x", Value::Null, &ctx);
        assert_send(&future);
        assert_send(&registry.invoke("x", Value::Null, &ctx));
        assert_send(&registry.redeem("x", "t", &ctx));
    }

    #[test]
    fn lookup_finds_the_same_tools_by_scan_and_by_hash() {
        let mut registry = ToolRegistry::new();
        for count in 1..=crate::tool_table::LINEAR_LOOKUP_MAX + 3 {
            let name = format!("tool_{count}");
            registry
                .register(ToolDefinition::builder(name).sync(|_, _| Value::Null))
                .unwrap();
            for i in 1..=count {
                let name = format!("tool_{i}");
                assert_eq!(registry.lookup(&name).unwrap().name(), name);
            }
            assert!(registry.lookup("tool_0").is_none());
            assert!(registry.lookup("tool").is_none());
            assert!(registry.lookup("").is_none());
        }
    }

    fn answering(name: &str, answer: &'static str) -> ToolDefinition {
        ToolDefinition::builder(name).sync(move |_, _| Value::from(answer))
    }

    /// A group's tools are replaced all at once while calls run: a call that resolved the
    /// old tool finishes with it, later calls see the new set, removed tools are not found,
    /// and every change bumps the generation.
    #[tokio::test]
    async fn groups_are_replaced_whole_under_running_calls() {
        let mut registry = ToolRegistry::new();
        registry.register(answering("native", "n")).unwrap();
        let changes = registry.tool_list_changes();
        let before = *changes.borrow();
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let released = Arc::new(tokio::sync::Mutex::new(Some(released)));
        let slow = ToolDefinition::builder("up__slow").asynchronous(move |_, _| {
            let released = Arc::clone(&released);
            async move {
                if let Some(released) = released.lock().await.take() {
                    let _ = released.await;
                }
                Value::from("old slow")
            }
        });
        registry
            .replace_tools("up", vec![slow, answering("up__a", "old a")])
            .unwrap();
        assert_eq!(*changes.borrow(), before + 1);
        let names: Vec<Arc<str>> = registry.tool_names().collect();
        assert_eq!(names, ["native".into(), "up__slow".into(), "up__a".into()]);
        assert!(registry.has("up__a") && registry.len() == 3);

        let ctx = ToolContext::cli();
        let running = registry.call("up__slow", Value::Null, &ctx);
        let mut running = Box::pin(running);
        assert!(futures_poll_once(&mut running).await.is_none(), "it waits");
        registry
            .replace_tools("up", vec![answering("up__b", "new b")])
            .unwrap();
        let _ = release.send(());
        assert_eq!(running.await.data, Value::from("old slow"));
        assert_eq!(registry.call_cli("up__b", Value::Null).await.data, "new b");
        let gone = registry.call_cli("up__a", Value::Null).await;
        assert_eq!(gone.meta.code(), Some(&crate::ErrorCode::ToolNotFound));
        assert_eq!(*changes.borrow(), before + 2);

        // All or nothing: a taken name (another group's, a registered tool's, twice in
        // the set) leaves the group as it was.
        registry
            .replace_tools("other", vec![answering("o", "o")])
            .unwrap();
        for clash in ["native", "o"] {
            let refused =
                registry.replace_tools("up", vec![answering("up__c", "c"), answering(clash, "x")]);
            assert_eq!(refused, Err(RegistryError::AlreadyRegistered(clash.into())));
        }
        let twice =
            registry.replace_tools("up", vec![answering("up__d", "1"), answering("up__d", "2")]);
        assert!(twice.is_err());
        assert!(registry.has("up__b") && !registry.has("up__c") && !registry.has("up__d"));
        let mut fresh = ToolRegistry::new();
        fresh
            .replace_tools("g", vec![answering("g1", "1")])
            .unwrap();
        assert!(
            fresh.register(answering("g1", "2")).is_err(),
            "a group's name is taken"
        );
        // An empty set removes the group.
        registry.replace_tools("up", Vec::new()).unwrap();
        assert!(!registry.has("up__b"));
        assert_eq!(registry.len(), 2);
    }

    /// Polls `future` once.
    async fn futures_poll_once<F: Future + Unpin>(future: &mut F) -> Option<F::Output> {
        std::future::poll_fn(|cx| {
            std::task::Poll::Ready(match std::pin::Pin::new(&mut *future).poll(cx) {
                std::task::Poll::Ready(output) => Some(output),
                std::task::Poll::Pending => None,
            })
        })
        .await
    }

    #[test]
    fn names_are_checked() {
        assert!(valid_tool_name("notes.add-1_x"));
        assert!(!valid_tool_name(""));
        assert!(!valid_tool_name("a b"));
        assert!(!valid_tool_name("a:b"));
        assert!(!valid_tool_name(&"x".repeat(129)));
    }
}
