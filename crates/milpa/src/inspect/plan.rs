//! [`InvocationPlan`] and its builder.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::context::{Mode, ToolContext};
use crate::inspect::StageFacts;
use crate::pipeline::{self, StepKind};
use crate::policy::{CallerDenial, blocks_mutating, caller_denial};
use crate::registry::ToolRegistry;

/// The version of the plan's JSON shape.
pub const SCHEMA_VERSION: &str = "1.0";

/// What a stage is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StepRole {
    /// May refuse the call.
    Guard,
    /// Changes the arguments.
    Transform,
    /// May end the call with a non-error answer (a plan, a confirmation request).
    Branch,
    /// Lets listeners in.
    Hook,
    /// Runs the tool.
    Execution,
    /// Wraps another stage.
    Boundary,
    /// Happens on every terminal path.
    Outcome,
}

/// Whether a stage does anything for this tool and caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StepPresence {
    /// Runs.
    Active,
    /// May act, depending on data known only at call time (a token, a listener's answer).
    Conditional,
    /// The rule exists, but the static facts make it impossible to act.
    Dormant,
    /// Not wired or not declared: nothing to do.
    Skipped,
}

/// One stage as the plan describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvocationStep {
    /// Which stage.
    pub kind: StepKind,
    /// What it is for.
    pub role: StepRole,
    /// Whether it acts for this tool and caller.
    pub presence: StepPresence,
    /// Whether it can end the call.
    pub blocking: bool,
    /// Whether it changes something (arguments, or the world).
    pub mutates: bool,
    /// The stage it wraps, if any.
    pub wraps: Option<StepKind>,
    /// Where its behaviour comes from, in plain English.
    pub source: String,
}

/// Whether an optional collaborator is wired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WiringState {
    /// Wired.
    Present,
    /// Not wired.
    Absent,
}

impl From<bool> for WiringState {
    fn from(present: bool) -> Self {
        if present {
            WiringState::Present
        } else {
            WiringState::Absent
        }
    }
}

/// Which optional collaborators the registry has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegistryWiring {
    /// A rate limiter.
    pub rate_limiter: WiringState,
    /// An event dispatcher.
    pub dispatcher: WiringState,
    /// A policy rule provider.
    pub rule_provider: WiringState,
}

/// The caller as the plan saw it (never invented).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanContext {
    /// The principal, `null` when anonymous.
    pub actor: Option<String>,
    /// The scopes held.
    pub scopes: Vec<String>,
    /// Execute or plan.
    pub mode: Mode,
}

/// What the pipeline would do for one tool and one caller.
///
/// ```
/// use milpa::inspect::{InvocationPlan, StepPresence};
/// use milpa::{StepKind, ToolContext, ToolDefinition, ToolRegistry};
///
/// let mut registry = ToolRegistry::new();
/// registry.register(ToolDefinition::builder("wipe").mutating(true).requires_confirmation(true).sync(|_, _| serde_json::Value::Null)).unwrap();
/// let anonymous = ToolContext::builder("mcp").build();
/// let plan = InvocationPlan::build(&registry, "wipe", &anonymous).unwrap();
/// assert_eq!(plan.step(StepKind::Confirm).presence, StepPresence::Conditional);
/// assert!(plan.assumptions[0].contains("authorize would deny"));
/// assert_eq!(plan.to_json()["schemaVersion"], "1.0");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvocationPlan {
    /// Always [`SCHEMA_VERSION`].
    #[serde(rename = "schemaVersion")]
    pub schema_version: String,
    /// The tool.
    pub operation: String,
    /// The caller's channel.
    pub channel: String,
    /// The caller.
    pub context: PlanContext,
    /// What the plan takes for granted or predicts, in plain English.
    pub assumptions: Vec<String>,
    /// Which optional collaborators are wired.
    pub wiring: RegistryWiring,
    /// The eleven stages, in execution order.
    pub steps: Vec<InvocationStep>,
}

impl InvocationPlan {
    /// The plan for `tool` called in `ctx`, or `None` when no such tool is registered.
    pub fn build(registry: &ToolRegistry, tool: &str, ctx: &ToolContext) -> Option<InvocationPlan> {
        InvocationPlanBuilder::new(registry).build(tool, ctx)
    }

    /// The description of one stage.
    pub fn step(&self, kind: StepKind) -> &InvocationStep {
        &self.steps[kind as usize]
    }

    /// The plan as JSON (the contract shape, `schemaVersion` "1.0").
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// Builds plans from a live registry, reading only what it admits to having.
#[derive(Debug, Clone, Copy)]
pub struct InvocationPlanBuilder<'r> {
    registry: &'r ToolRegistry,
}

impl<'r> InvocationPlanBuilder<'r> {
    /// A builder reading `registry`.
    pub fn new(registry: &'r ToolRegistry) -> Self {
        InvocationPlanBuilder { registry }
    }

    /// The plan for the tool registered as `name`, called in `ctx`; `None` when no such tool
    /// is registered (a plan describes what the executor would do, and it would not run an
    /// unregistered tool).
    pub fn build(&self, name: &str, ctx: &ToolContext) -> Option<InvocationPlan> {
        let tool = self.registry.lookup(name)?;
        let facts = StageFacts::new(self.registry.wiring(), tool.registered(), ctx);
        let tool = facts.tool;
        Some(InvocationPlan {
            schema_version: SCHEMA_VERSION.to_owned(),
            operation: tool.name().to_owned(),
            channel: ctx.channel().to_owned(),
            context: PlanContext {
                actor: ctx.principal().map(str::to_owned),
                scopes: ctx.scopes().to_vec(),
                mode: ctx.mode(),
            },
            assumptions: assumptions(&facts),
            wiring: RegistryWiring {
                rate_limiter: facts.rate_limiter.into(),
                dispatcher: facts.dispatcher.into(),
                rule_provider: facts.rule_provider.into(),
            },
            steps: pipeline::describe(&facts),
        })
    }
}

/// What the plan predicts about the caller, without inventing one.
fn assumptions(facts: &StageFacts<'_>) -> Vec<String> {
    let channel = facts.ctx.channel();
    let mut out = Vec::new();
    if !facts.channel_registered {
        out.push(format!(
            "channel '{channel}' has no policy of its own → the fail-closed policy applies (require_auth)"
        ));
    }
    // The gate's own checks, in its order: the first that denies is the one authorize reports.
    match caller_denial(&facts.policy, facts.ctx, facts.tool) {
        Some(CallerDenial::Unauthenticated) => {
            out.push(format!(
                "actor anonymous; channel '{channel}' requires auth → authorize would deny"
            ));
        }
        Some(CallerDenial::MissingScope) => {
            out.push(format!(
                "actor holds none of the tool's scopes ({}) → authorize would deny",
                facts.tool.scopes().join(", ")
            ));
        }
        None if blocks_mutating(&facts.policy, facts.tool) => {
            out.push(format!(
                "channel '{channel}' blocks mutating tools (block_mutating) → authorize would deny{}",
                if facts.rule_provider { " unless a rule allows it" } else { "" }
            ));
        }
        None => {}
    }
    if facts.rule_provider {
        out.push("a rule provider is wired: its verdict is known only at call time".to_owned());
    }
    out
}
