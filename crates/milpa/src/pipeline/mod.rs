//! The call pipeline as data: [`StepKind`] lists the eleven stages in order, and
//! [`execute_call`] walks exactly that list. Each stage lives in its own module.
//!
//! ```text
//! resolve → validate → clamp → authorize → rate_limit → plan_mode → confirm
//!        → emit_executing → execute ⊂ contain_exception → audit
//! ```
//!
//! A stage either lets the call continue or finishes it with a [`Terminal`]; every
//! terminal path then goes through `audit` (record, then `tool.executed` / `tool.failed`).
//! Nothing before `authorize` can answer a call with anything but a refusal, and the only
//! place a listener can answer is `emit_executing`, after every gate.

pub(crate) mod audit;
pub(crate) mod authorize;
pub(crate) mod clamp;
pub(crate) mod confirm;
pub(crate) mod contain_exception;
pub(crate) mod emit_executing;
pub(crate) mod execute;
pub(crate) mod plan_mode;
pub(crate) mod rate_limit;
pub(crate) mod resolve;
pub(crate) mod validate;

use std::any::Any;
use std::fmt;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::audit::AuditOutcome;
use crate::context::ToolContext;
use crate::definition::{ToolError, ToolOutput};
use crate::policy::ChannelPolicy;
use crate::registry::{RegisteredTool, ToolRegistry};
use crate::result::ToolResult;

/// One stage of the pipeline, in execution order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    /// Look the tool up by name.
    Resolve,
    /// Check the arguments against the input schema.
    Validate,
    /// Move arguments into their declared bounds.
    Clamp,
    /// Ask the policy gate.
    Authorize,
    /// Charge the caller's budget.
    RateLimit,
    /// In plan mode, return the plan instead of running.
    PlanMode,
    /// Issue or redeem a confirmation token.
    Confirm,
    /// Dispatch `tool.executing`; a listener may answer or veto.
    EmitExecuting,
    /// Run the tool.
    Execute,
    /// Turn a failure, panic or timeout of `execute` into an error result.
    ContainException,
    /// Record the outcome and emit `tool.executed` / `tool.failed`.
    Audit,
}

impl StepKind {
    /// Every stage, in the order the executor runs them.
    pub const ORDER: [StepKind; 11] = [
        StepKind::Resolve,
        StepKind::Validate,
        StepKind::Clamp,
        StepKind::Authorize,
        StepKind::RateLimit,
        StepKind::PlanMode,
        StepKind::Confirm,
        StepKind::EmitExecuting,
        StepKind::Execute,
        StepKind::ContainException,
        StepKind::Audit,
    ];

    /// The wire name, e.g. `rate_limit`.
    pub fn as_str(self) -> &'static str {
        match self {
            StepKind::Resolve => "resolve",
            StepKind::Validate => "validate",
            StepKind::Clamp => "clamp",
            StepKind::Authorize => "authorize",
            StepKind::RateLimit => "rate_limit",
            StepKind::PlanMode => "plan_mode",
            StepKind::Confirm => "confirm",
            StepKind::EmitExecuting => "emit_executing",
            StepKind::Execute => "execute",
            StepKind::ContainException => "contain_exception",
            StepKind::Audit => "audit",
        }
    }
}

impl fmt::Display for StepKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The stages one call visited, in order (recorded without allocating).
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct StageTrace {
    steps: [Option<StepKind>; 11],
    len: usize,
}

impl StageTrace {
    fn visit(&mut self, step: StepKind) {
        if self.len < self.steps.len() {
            self.steps[self.len] = Some(step);
            self.len += 1;
        }
    }

    /// The visited stages.
    pub fn steps(&self) -> Vec<StepKind> {
        self.steps[..self.len].iter().flatten().copied().collect()
    }
}

impl fmt::Debug for StageTrace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.steps()).finish()
    }
}

/// How a call ended: the result to return and what to audit.
pub(crate) struct Terminal {
    pub result: ToolResult,
    pub outcome: AuditOutcome,
}

impl Terminal {
    pub fn new(result: ToolResult, outcome: AuditOutcome) -> Self {
        Terminal { result, outcome }
    }
}

/// What a stage decided.
pub(crate) enum Flow {
    Continue,
    Finish(Terminal),
}

/// What `execute` produced, before `contain_exception` judged it.
pub(crate) enum RawOutcome {
    Returned { output: ToolOutput, exec_secs: f64 },
    Failed(ToolError),
    Panicked(String),
    TimedOut { after_secs: f64 },
}

/// The state of one call as it moves through the stages.
pub(crate) struct Call<'r> {
    pub registry: &'r ToolRegistry,
    pub ctx: &'r ToolContext,
    pub name: &'r str,
    pub started: Instant,
    pub tool: Option<&'r RegisteredTool>,
    pub args: Value,
    pub confirm_token: Option<Value>,
    pub policy: Option<ChannelPolicy>,
    pub raw: Option<RawOutcome>,
}

impl<'r> Call<'r> {
    /// The resolved tool (every stage after `resolve` may rely on it).
    pub fn tool(&self) -> &'r RegisteredTool {
        self.tool
            .expect("stages after resolve run only for a resolved tool")
    }

    /// The channel policy, looked up once per call.
    pub fn policy(&mut self) -> ChannelPolicy {
        match self.policy {
            Some(policy) => policy,
            None => {
                let policy = self
                    .registry
                    .policy_gate()
                    .lookup_warning_if_unknown(self.ctx.channel());
                self.policy = Some(policy);
                policy
            }
        }
    }

    pub fn requires_confirmation(&mut self) -> bool {
        let policy = self.policy();
        self.registry
            .policy_gate()
            .requires_confirmation_under(&policy, &self.tool().definition)
    }

    pub fn elapsed_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }
}

/// Runs one call through every stage of [`StepKind::ORDER`].
pub(crate) async fn execute_call(
    registry: &ToolRegistry,
    name: &str,
    args: Value,
    ctx: &ToolContext,
    trace: &mut StageTrace,
) -> ToolResult {
    let mut call = Call {
        registry,
        ctx,
        name,
        started: Instant::now(),
        tool: None,
        args,
        confirm_token: None,
        policy: None,
        raw: None,
    };
    let mut terminal = None;
    for step in StepKind::ORDER {
        if step == StepKind::Audit {
            break;
        }
        trace.visit(step);
        let flow = match step {
            StepKind::Resolve => resolve::run(&mut call),
            StepKind::Validate => validate::run(&mut call),
            StepKind::Clamp => clamp::run(&mut call),
            StepKind::Authorize => authorize::run(&mut call).await,
            StepKind::RateLimit => rate_limit::run(&mut call).await,
            StepKind::PlanMode => plan_mode::run(&mut call),
            StepKind::Confirm => confirm::run(&mut call).await,
            StepKind::EmitExecuting => emit_executing::run(&mut call),
            StepKind::Execute => execute::run(&mut call).await,
            StepKind::ContainException => contain_exception::run(&mut call),
            StepKind::Audit => Flow::Continue,
        };
        if let Flow::Finish(end) = flow {
            terminal = Some(end);
            break;
        }
    }
    trace.visit(StepKind::Audit);
    let terminal = terminal.unwrap_or_else(|| {
        // `contain_exception` always finishes the call; reaching here is a bug in the table.
        Terminal::new(
            ToolResult::internal_error("pipeline ended without a result"),
            AuditOutcome::Failed,
        )
    });
    audit::run(&call, terminal)
}

/// The message of a caught panic.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "the tool panicked".to_owned()
    }
}
