//! What a tool is: [`ToolDefinition`] (name, schema, options) and the [`Tool`] that runs.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Number, Value};

use crate::context::ToolContext;
use crate::deferred::Deferred;
use crate::result::{ErrorCode, ToolResult};

/// The soft timeout a tool gets when it declares none (30 s, as in the original).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// What a tool handed back: plain data (wrapped into a success) or a result it built.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ToolOutput {
    /// Data the runtime wraps in [`ToolResult::success`].
    Data(Value),
    /// A result the tool built itself; the runtime adds its meta and passes it on. Boxed:
    /// a result is large, and plain data is the common case.
    Result(Box<ToolResult>),
}

impl From<Value> for ToolOutput {
    fn from(value: Value) -> Self {
        ToolOutput::Data(value)
    }
}

impl From<ToolResult> for ToolOutput {
    fn from(result: ToolResult) -> Self {
        ToolOutput::Result(Box::new(result))
    }
}

/// A tool's failure: the runtime turns it into an error result (`INTERNAL_ERROR` unless the
/// tool chose a code) and emits `tool.failed`.
///
/// Any `std::error::Error` converts into it, so `?` works inside a tool, and the error
/// converted is kept as the [`cause`](ToolError::cause): a tool that calls another tool, or a
/// test, can walk the chain down to the `io::Error` or `serde_json::Error` that started it.
/// The result the caller sees carries only the message (the cause's `Display`), so what
/// users read is the same whether or not a cause is kept.
///
/// `ToolError` is not itself a `std::error::Error`: were it one, the blanket conversion that
/// makes `?` work would conflict with the standard `From<T> for T`.
///
/// ```
/// use std::error::Error as _;
/// use milpa::ToolError;
///
/// fn count(text: &str) -> Result<u32, ToolError> {
///     Ok(text.parse::<u32>()?)
/// }
/// let error = count("forty-two").unwrap_err();
/// let cause = error.cause().expect("the parse error is kept");
/// assert!(cause.downcast_ref::<std::num::ParseIntError>().is_some());
/// assert_eq!(error.message(), cause.to_string());
/// assert!(cause.source().is_none());
/// ```
#[derive(Debug, Clone)]
pub struct ToolError {
    code: ErrorCode,
    message: String,
    /// The error this one was converted from, if any. Shared, so a `ToolError` stays `Clone`.
    cause: Option<Arc<dyn std::error::Error + Send + Sync + 'static>>,
}

impl ToolError {
    /// An `INTERNAL_ERROR` with `message`.
    pub fn new(message: impl Into<String>) -> ToolError {
        ToolError {
            code: ErrorCode::InternalError,
            message: message.into(),
            cause: None,
        }
    }

    /// An error with a chosen code (e.g. `NOT_FOUND`).
    pub fn with_code(code: ErrorCode, message: impl Into<String>) -> ToolError {
        ToolError {
            code,
            message: message.into(),
            cause: None,
        }
    }

    /// The same error, caused by `cause` (its message unchanged): for a tool that words its
    /// own message yet keeps what went wrong underneath.
    pub fn with_cause(mut self, cause: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.cause = Some(Arc::new(cause));
        self
    }

    /// The code the result will carry.
    pub fn code(&self) -> &ErrorCode {
        &self.code
    }

    /// The message the result will carry.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The error this one came from (what a `?` converted, or [`with_cause`](Self::with_cause)
    /// set); its own [`source`](std::error::Error::source) continues the chain.
    pub fn cause(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.cause.as_deref()
    }
}

/// Two errors are equal when the caller would see the same result: same code, same message
/// (a cause has no equality of its own).
impl PartialEq for ToolError {
    fn eq(&self, other: &Self) -> bool {
        self.code == other.code && self.message == other.message
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for ToolError {
    fn from(error: E) -> Self {
        ToolError::new(error.to_string()).with_cause(error)
    }
}

/// What running a tool yields.
pub type Invocation<'a> = Deferred<'a, Result<ToolOutput, ToolError>>;

/// Something the runtime can run with validated arguments and the caller's context.
///
/// Implement it directly for full control, or wrap a closure with [`SyncTool`] /
/// [`AsyncTool`] (what [`ToolDefinitionBuilder::sync`] and
/// [`ToolDefinitionBuilder::asynchronous`] do). A sync tool answers with
/// [`Deferred::Ready`] and costs no allocation.
pub trait Tool: Send + Sync + 'static {
    /// Runs the tool. `args` is the validated, clamped argument object.
    fn invoke<'a>(&'a self, args: &'a Value, ctx: &'a ToolContext) -> Invocation<'a>;

    /// Whether `invoke` does its work synchronously (blocking the caller until done). A
    /// blocking tool with a hard timeout runs on Tokio's blocking pool so the timeout can
    /// fire while it works.
    fn runs_blocking(&self) -> bool {
        false
    }
}

/// Converts what a handler returns into the runtime's outcome.
pub trait IntoOutcome {
    /// The outcome: output or error.
    fn into_outcome(self) -> Result<ToolOutput, ToolError>;
}

impl IntoOutcome for Value {
    fn into_outcome(self) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::Data(self))
    }
}

impl IntoOutcome for ToolResult {
    fn into_outcome(self) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::Result(Box::new(self)))
    }
}

impl IntoOutcome for ToolOutput {
    fn into_outcome(self) -> Result<ToolOutput, ToolError> {
        Ok(self)
    }
}

impl<T: Into<ToolOutput>> IntoOutcome for Result<T, ToolError> {
    fn into_outcome(self) -> Result<ToolOutput, ToolError> {
        self.map(Into::into)
    }
}

/// A tool made of a synchronous closure `Fn(&Value, &ToolContext) -> R`.
pub struct SyncTool<F>(pub F);

impl<F, R> Tool for SyncTool<F>
where
    F: Fn(&Value, &ToolContext) -> R + Send + Sync + 'static,
    R: IntoOutcome,
{
    fn invoke<'a>(&'a self, args: &'a Value, ctx: &'a ToolContext) -> Invocation<'a> {
        Deferred::Ready((self.0)(args, ctx).into_outcome())
    }

    fn runs_blocking(&self) -> bool {
        true
    }
}

/// A tool made of an async closure `Fn(Value, ToolContext) -> impl Future<Output = R>`.
/// The context is passed owned (it is a cheap clone) so the future can be `'static`.
pub struct AsyncTool<F>(pub F);

impl<F, Fut, R> Tool for AsyncTool<F>
where
    F: Fn(Value, ToolContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = R> + Send + 'static,
    R: IntoOutcome,
{
    fn invoke<'a>(&'a self, args: &'a Value, ctx: &'a ToolContext) -> Invocation<'a> {
        let future = (self.0)(args.clone(), ctx.clone());
        Deferred::pending(async move { future.await.into_outcome() })
    }
}

/// A numeric or length bound applied to an argument after validation.
///
/// Written `[lo, hi]` or `{"min": lo, "max": hi, "maxLength": n}`. Values outside
/// `[min, max]` are moved to the nearest bound; strings longer than `maxLength` are cut
/// (in characters).
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct Clamp {
    /// Lower bound for numbers.
    pub min: Option<Number>,
    /// Upper bound for numbers.
    pub max: Option<Number>,
    /// Maximum length for strings, in characters.
    pub max_length: Option<usize>,
}

impl Clamp {
    /// A numeric range `[min, max]`.
    pub fn range(min: impl Into<Number>, max: impl Into<Number>) -> Clamp {
        Clamp {
            min: Some(min.into()),
            max: Some(max.into()),
            max_length: None,
        }
    }

    /// A maximum string length.
    pub fn max_length(max_length: usize) -> Clamp {
        Clamp {
            max_length: Some(max_length),
            ..Clamp::default()
        }
    }

    /// Reads either form: `[lo, hi]` or `{min, max, maxLength}`.
    pub fn from_json(value: &Value) -> Result<Clamp, String> {
        match value {
            Value::Array(items) if items.len() == 2 => match (&items[0], &items[1]) {
                (Value::Number(lo), Value::Number(hi)) => Ok(Clamp {
                    min: Some(lo.clone()),
                    max: Some(hi.clone()),
                    max_length: None,
                }),
                _ => Err("a clamp [lo, hi] needs two numbers".into()),
            },
            Value::Object(map) => {
                let mut clamp = Clamp::default();
                for (key, value) in map {
                    match (key.as_str(), value) {
                        ("min", Value::Number(n)) => clamp.min = Some(n.clone()),
                        ("max", Value::Number(n)) => clamp.max = Some(n.clone()),
                        ("maxLength", v) => {
                            let n = v.as_u64().ok_or("maxLength must be a whole number")?;
                            clamp.max_length = Some(n as usize);
                        }
                        (other, _) => {
                            return Err(format!("unknown clamp key or bad value: {other}"));
                        }
                    }
                }
                Ok(clamp)
            }
            _ => Err("a clamp is [lo, hi] or {min, max, maxLength}".into()),
        }
    }
}

/// How a tool behaves in the pipeline: who may call it, whether it changes things, how
/// long it may run.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolOptions {
    /// Scopes of which the caller needs at least one (none: anyone the channel admits).
    pub scopes: Vec<String>,
    /// Whether the tool changes state (costs 5 rate-limit tokens; channels may block or
    /// confirm it).
    pub mutating: bool,
    /// Whether every call needs a confirmation token first (the caller confirms).
    pub requires_confirmation: bool,
    /// Whether every call is parked until a person other than the caller approves it
    /// (`confirm = "human"`; see [`approval`](crate::approval)). Wins over
    /// `requires_confirmation`.
    pub requires_human_approval: bool,
    /// Soft timeout: a call that runs longer is flagged in meta, not stopped.
    pub timeout: Duration,
    /// Hard timeout: a call that runs longer is cancelled with `TIMEOUT`.
    pub hard_timeout: Option<Duration>,
    /// Bounds applied to arguments after validation, by argument name.
    pub clamps: Vec<(String, Clamp)>,
    /// Arguments that are paths, by argument name: normalised (and checked against their
    /// rule's folders) before validation, the normal form replacing the value, so the
    /// schema, policies and the tool see one spelling (see [`PathRule`](crate::schema::PathRule)).
    pub paths: Vec<(String, crate::schema::PathRule)>,
    /// The tool's version, shown in listings.
    pub version: Option<String>,
    /// JSON Schema of the result's structured data, shown in listings.
    pub output_schema: Option<Value>,
    /// The upstream MCP server the tool forwards to, when it is a gateway tool (policies
    /// see it as the tool's `upstream` attribute).
    pub upstream: Option<String>,
    /// A display name for people (MCP `title`), as an upstream server gave it.
    pub title: Option<String>,
    /// MCP tool annotations as an upstream server gave them (`title`, `idempotentHint`,
    /// `openWorldHint`, …), listed again as they came; `readOnlyHint` is always what
    /// [`mutating`](Self::mutating) says, since that is what the pipeline acts on.
    pub annotations: Option<serde_json::Map<String, Value>>,
    /// The `_meta` of an upstream server's tool entry, listed again as it came.
    pub meta: Option<serde_json::Map<String, Value>>,
    /// The icons of an upstream server's tool entry (MCP 2025-11-25 `icons`: `src`,
    /// `mimeType`, `sizes`, `theme`), listed again as they came; none when empty.
    pub icons: Vec<Value>,
}

impl Default for ToolOptions {
    fn default() -> Self {
        ToolOptions {
            scopes: Vec::new(),
            mutating: false,
            requires_confirmation: false,
            requires_human_approval: false,
            timeout: DEFAULT_TIMEOUT,
            hard_timeout: None,
            clamps: Vec::new(),
            paths: Vec::new(),
            version: None,
            output_schema: None,
            upstream: None,
            title: None,
            annotations: None,
            meta: None,
            icons: Vec::new(),
        }
    }
}

/// A tool as registered: name, description, input schema, options and the code that runs.
#[derive(Clone)]
pub struct ToolDefinition {
    name: Arc<str>,
    description: String,
    input_schema: Value,
    options: ToolOptions,
    tool: Arc<dyn Tool>,
}

impl ToolDefinition {
    /// Puts a definition together from its parts.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        options: ToolOptions,
        tool: Arc<dyn Tool>,
    ) -> ToolDefinition {
        ToolDefinition {
            name: Arc::from(name.into()),
            description: description.into(),
            input_schema,
            options,
            tool,
        }
    }

    /// Starts a definition with a builder.
    ///
    /// ```
    /// use milpa::ToolDefinition;
    /// use serde_json::json;
    ///
    /// let add = ToolDefinition::builder("add")
    ///     .description("Adds two integers")
    ///     .input_schema(json!({
    ///         "type": "object",
    ///         "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    ///         "required": ["a", "b"]
    ///     }))
    ///     .sync(|args, _ctx| json!(args["a"].as_i64().unwrap() + args["b"].as_i64().unwrap()));
    /// assert_eq!(add.name(), "add");
    /// ```
    pub fn builder(name: impl Into<String>) -> ToolDefinitionBuilder {
        ToolDefinitionBuilder {
            name: name.into(),
            description: String::new(),
            input_schema: Value::Object(Default::default()),
            options: ToolOptions::default(),
        }
    }

    /// The tool's name.
    #[inline]
    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn name_arc(&self) -> &Arc<str> {
        &self.name
    }

    /// What the tool does, for people and models.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The JSON Schema of the arguments (may be `{}`).
    pub fn input_schema(&self) -> &Value {
        &self.input_schema
    }

    /// The tool's options.
    #[inline]
    pub fn options(&self) -> &ToolOptions {
        &self.options
    }

    /// The scopes the tool requires (any of).
    #[inline]
    pub fn scopes(&self) -> &[String] {
        &self.options.scopes
    }

    /// Whether the tool changes state.
    #[inline]
    pub fn is_mutating(&self) -> bool {
        self.options.mutating
    }

    /// Whether the tool always asks for confirmation.
    #[inline]
    pub fn requires_confirmation(&self) -> bool {
        self.options.requires_confirmation
    }

    /// Whether every call waits for a person's approval.
    pub fn requires_human_approval(&self) -> bool {
        self.options.requires_human_approval
    }

    /// The upstream MCP server the tool forwards to, if it is a gateway tool.
    pub fn upstream(&self) -> Option<&str> {
        self.options.upstream.as_deref()
    }

    /// The code that runs.
    #[inline]
    pub fn tool(&self) -> &Arc<dyn Tool> {
        &self.tool
    }
}

impl fmt::Debug for ToolDefinition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolDefinition")
            .field("name", &self.name)
            .field("description", &self.description)
            .field("input_schema", &self.input_schema)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// Builds a [`ToolDefinition`]; finish with [`sync`](Self::sync),
/// [`asynchronous`](Self::asynchronous) or [`tool`](Self::tool).
#[derive(Debug)]
pub struct ToolDefinitionBuilder {
    name: String,
    description: String,
    input_schema: Value,
    options: ToolOptions,
}

impl ToolDefinitionBuilder {
    /// What the tool does.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// The JSON Schema (2020-12) of the arguments.
    pub fn input_schema(mut self, schema: Value) -> Self {
        self.input_schema = schema;
        self
    }

    /// All options at once.
    pub fn options(mut self, options: ToolOptions) -> Self {
        self.options = options;
        self
    }

    /// Scopes of which the caller needs one.
    pub fn scopes(mut self, scopes: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.options.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// Marks the tool as changing state.
    pub fn mutating(mut self, mutating: bool) -> Self {
        self.options.mutating = mutating;
        self
    }

    /// Makes every call ask for a confirmation token first.
    pub fn requires_confirmation(mut self, confirm: bool) -> Self {
        self.options.requires_confirmation = confirm;
        self
    }

    /// Parks every call until a person other than the caller approves it
    /// (`confirm = "human"`).
    pub fn requires_human_approval(mut self, human: bool) -> Self {
        self.options.requires_human_approval = human;
        self
    }

    /// Marks the tool as forwarding to the upstream MCP server `name` (a gateway tool).
    pub fn upstream(mut self, name: impl Into<String>) -> Self {
        self.options.upstream = Some(name.into());
        self
    }

    /// The soft timeout (flag in meta when exceeded).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.options.timeout = timeout;
        self
    }

    /// The hard timeout (cancel with `TIMEOUT` when exceeded).
    pub fn hard_timeout(mut self, timeout: Duration) -> Self {
        self.options.hard_timeout = Some(timeout);
        self
    }

    /// A clamp on one argument.
    pub fn clamp(mut self, field: impl Into<String>, clamp: Clamp) -> Self {
        self.options.clamps.push((field.into(), clamp));
        self
    }

    /// The tool's version.
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.options.version = Some(version.into());
        self
    }

    /// The JSON Schema of the result's structured data.
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.options.output_schema = Some(schema);
        self
    }

    /// A display name for people (MCP `title`).
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.options.title = Some(title.into());
        self
    }

    /// MCP tool annotations to list as given (see [`ToolOptions::annotations`]).
    pub fn annotations(mut self, annotations: serde_json::Map<String, Value>) -> Self {
        self.options.annotations = Some(annotations);
        self
    }

    /// A `_meta` object to list with the tool (see [`ToolOptions::meta`]).
    pub fn meta(mut self, meta: serde_json::Map<String, Value>) -> Self {
        self.options.meta = Some(meta);
        self
    }

    /// Icons to list with the tool (see [`ToolOptions::icons`]).
    pub fn icons(mut self, icons: Vec<Value>) -> Self {
        self.options.icons = icons;
        self
    }

    /// Finishes with any [`Tool`].
    pub fn tool(self, tool: impl Tool) -> ToolDefinition {
        ToolDefinition::new(
            self.name,
            self.description,
            self.input_schema,
            self.options,
            Arc::new(tool),
        )
    }

    /// Finishes with a synchronous handler.
    pub fn sync<F, R>(self, handler: F) -> ToolDefinition
    where
        F: Fn(&Value, &ToolContext) -> R + Send + Sync + 'static,
        R: IntoOutcome,
    {
        self.tool(SyncTool(handler))
    }

    /// Finishes with an asynchronous handler.
    pub fn asynchronous<F, Fut, R>(self, handler: F) -> ToolDefinition
    where
        F: Fn(Value, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: IntoOutcome,
    {
        self.tool(AsyncTool(handler))
    }
}

/// A group of tools registered together (what `#[tools]` generates for an `impl` block).
pub trait ToolProvider: Send + Sync + 'static {
    /// The provider's tools; each one usually holds a clone of `self`.
    fn tool_definitions(self: Arc<Self>) -> Vec<ToolDefinition>;

    /// Lines a host may append to an agent's system prompt.
    fn prompt_sections(&self) -> Vec<String> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn clamps_read_both_forms() {
        assert_eq!(
            Clamp::from_json(&json!([0, 100])).unwrap(),
            Clamp::range(0, 100)
        );
        let keyed = Clamp::from_json(&json!({"min": 1, "maxLength": 3})).unwrap();
        assert_eq!(keyed.min, Some(1.into()));
        assert_eq!(keyed.max_length, Some(3));
        assert!(Clamp::from_json(&json!([1])).is_err());
        assert!(Clamp::from_json(&json!({"lo": 1})).is_err());
    }

    /// An error whose own `source` is another error, to check the chain is walked whole.
    #[derive(Debug, thiserror::Error)]
    #[error("could not load the notes")]
    struct LoadFailed(#[source] std::io::Error);

    #[test]
    fn a_converted_error_keeps_its_chain_and_its_message() {
        fn parse() -> Result<Value, ToolError> {
            Ok(serde_json::from_str("{not json")?)
        }
        let error = parse().unwrap_err();
        let expected = serde_json::from_str::<Value>("{not json")
            .unwrap_err()
            .to_string();
        // What the caller sees is what it was before a cause was kept.
        assert_eq!(error.message(), expected);
        assert_eq!(error.to_string(), expected);
        assert_eq!(error.code(), &ErrorCode::InternalError);
        let cause = error.cause().expect("the serde error is kept");
        assert!(cause.downcast_ref::<serde_json::Error>().is_some());

        let nested = ToolError::from(LoadFailed(std::io::Error::other("disk gone")));
        assert_eq!(nested.message(), "could not load the notes");
        let cause = nested.cause().expect("kept");
        let root = std::error::Error::source(cause).expect("the io error under it");
        assert_eq!(root.to_string(), "disk gone");
        assert!(root.downcast_ref::<std::io::Error>().is_some());
    }

    #[test]
    fn a_worded_error_may_name_its_cause_and_equality_ignores_it() {
        let plain = ToolError::with_code(ErrorCode::NotFound, "no such note");
        assert!(plain.cause().is_none());
        let caused = plain
            .clone()
            .with_cause(std::io::Error::from(std::io::ErrorKind::NotFound));
        assert_eq!(caused.message(), "no such note");
        assert_eq!(caused.code(), &ErrorCode::NotFound);
        assert!(caused.cause().is_some());
        assert!(caused.clone().cause().is_some(), "a clone shares the cause");
        assert_eq!(caused, plain);
        assert_ne!(caused, ToolError::new("no such note"));
    }
}
