//! The call pipeline as data: [`StepKind`] lists the eleven stages in order
//! (`with_stage_order!` writes the order once), and the executor (`execute_call`) walks
//! exactly that list. Each stage lives in its own module.
//!
//! ```text
//! resolve → validate → clamp → authorize → rate_limit → plan_mode → confirm
//!        → emit_executing → execute ⊂ contain_exception → audit
//! ```
//!
//! A stage either lets the call continue or finishes it with a terminal result; every
//! terminal path then goes through `audit` (record, then `tool.executed` / `tool.failed`).
//! Nothing before `authorize` can answer a call with anything but a refusal, and the only
//! place a listener can answer is `emit_executing`, after every gate.

pub(crate) mod approval_decision;
pub(crate) mod approval_gate;
pub(crate) mod audit;
pub(crate) mod authorize;
pub(crate) mod clamp;
pub(crate) mod clock;
pub(crate) mod confirm;
pub(crate) mod contain_exception;
pub(crate) mod definition_hold;
pub(crate) mod emit_executing;
pub(crate) mod execute;
pub(crate) mod plan_mode;
pub(crate) mod rate_limit;
pub(crate) mod redemption;
pub(crate) mod refusal;
pub(crate) mod resolve;
pub(crate) mod validate;

use std::any::Any;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::audit::AuditOutcome;
use crate::call_span;
use crate::context::ToolContext;
use crate::definition::{ToolError, ToolOutput};
use crate::inspect::StageFacts;
use crate::inspect::{InvocationStep, StepPresence, StepRole};
use crate::outcome::{Conclusion, SentToken, Ticket};
use crate::policy::{ChannelPolicy, Confirmation};
use crate::result::ToolResult;
use crate::tool_table::{RegisteredTool, ToolLookup};
use crate::wiring::Wiring;
use clock::Tick;

/// One stage of the pipeline, in execution order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
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

/// The stage order, written once. It expands into [`StepKind::ORDER`] and into the
/// executor's walk (`execute_call`), so the two cannot drift: `$callback!{ Resolve Validate
/// … Audit }`.
macro_rules! with_stage_order {
    ($callback:ident) => {
        $callback! {
            Resolve Validate Clamp Authorize RateLimit PlanMode Confirm EmitExecuting Execute
            ContainException Audit
        }
    };
}

macro_rules! stage_array {
    ($($step:ident)*) => {
        [$(StepKind::$step),*]
    };
}

impl StepKind {
    /// Every stage, in the order the executor runs them.
    pub const ORDER: [StepKind; 11] = with_stage_order!(stage_array);

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

/// The stages one call visited, in order.
///
/// Packed four bits a stage into one integer: recording a stage is a shift and an or. Only
/// [`ToolRegistry::call_traced`](crate::ToolRegistry::call_traced) records one (the trace is
/// what the stage-order test reads); a plain call watches through the no-op `()` observer.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct StageTrace {
    packed: u64,
}

/// Something that watches the executor visit stages. [`StageTrace`] records them; `()`
/// ignores them, so an untraced call pays nothing for the watching.
pub(crate) trait StageObserver {
    fn visit(&mut self, step: StepKind);
}

impl StageObserver for () {
    #[inline]
    fn visit(&mut self, _step: StepKind) {}
}

impl<O: StageObserver> StageObserver for &mut O {
    #[inline]
    fn visit(&mut self, step: StepKind) {
        (**self).visit(step);
    }
}

impl StageObserver for StageTrace {
    #[inline]
    fn visit(&mut self, step: StepKind) {
        self.packed = (self.packed << 4) | (step as u64 + 1);
    }
}

impl StageTrace {
    /// The visited stages.
    pub fn steps(&self) -> Vec<StepKind> {
        let mut steps = Vec::new();
        let mut packed = self.packed;
        while packed != 0 {
            let index = (packed & 0xf) as usize - 1;
            steps.push(StepKind::ORDER[index]);
            packed >>= 4;
        }
        steps.reverse();
        steps
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

/// What a stage decided. A finishing stage has put its [`Terminal`] in [`Call::terminal`]
/// (in place: results are a few hundred bytes, and moving them through every stage's return
/// value showed up in profiles).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    Continue,
    Finish,
}

/// What `execute` produced, before `contain_exception` judged it.
pub(crate) enum RawOutcome {
    /// The tool returned `output` after running `exec_nanos` nanoseconds. Kept as integer
    /// nanoseconds: turned into float seconds on every call, the division and conversion
    /// were a visible share of a trivial call (perf); only a flagged soft timeout needs them.
    Returned {
        output: ToolOutput,
        exec_nanos: u64,
    },
    Failed(ToolError),
    Panicked(String),
    TimedOut {
        after_secs: f64,
    },
}

impl RawOutcome {
    /// Judges what a contained run produced, timing it from `started` to `ended`.
    pub(crate) fn from_contained(
        outcome: contain_exception::Contained,
        started: Tick,
        ended: Tick,
        clock: &clock::PipelineClock,
    ) -> RawOutcome {
        match outcome {
            Ok(Ok(output)) => {
                let exec_nanos = clock.nanos_between(started, ended);
                RawOutcome::Returned { output, exec_nanos }
            }
            Ok(Err(error)) => RawOutcome::Failed(error),
            Err(panic) => RawOutcome::Panicked(panic),
        }
    }
}

/// The replay token a call carries: what the edge split off a legacy caller's arguments
/// ([`split_confirm_token`](crate::split_confirm_token)) or what
/// [`ToolRegistry::redeem`](crate::ToolRegistry::redeem) was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TokenArg {
    /// None was sent (or it was `null`).
    Absent,
    /// A string token.
    Given(String),
    /// Something that cannot be a token (a number, an object, …).
    Malformed,
    /// A string token whose parked arguments the call policy judged in `authorize` (read
    /// without spending the token); `confirm` redeems it and runs them only if what it
    /// redeems is what was judged.
    Judged(Box<JudgedReplay>),
    /// Redeemed by `confirm`: the parked arguments replaced the ones sent, which were
    /// ignored when they were other arguments (the result then says so).
    Redeemed { other_args_ignored: bool },
}

/// A replay's token and the parked arguments the call policy allowed (boxed in
/// [`TokenArg`]: only replays under a call policy carry one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JudgedReplay {
    pub token: String,
    pub args: Value,
}

impl From<SentToken> for TokenArg {
    #[inline]
    fn from(sent: SentToken) -> Self {
        match sent {
            SentToken::None => TokenArg::Absent,
            SentToken::Token(token) => TokenArg::Given(token),
            SentToken::Malformed => TokenArg::Malformed,
        }
    }
}

impl TokenArg {
    /// The token a replay sent, judged or not.
    #[inline]
    pub fn token(&self) -> Option<&str> {
        match self {
            TokenArg::Given(token) => Some(token),
            TokenArg::Judged(judged) => Some(&judged.token),
            _ => None,
        }
    }
}

/// The state of one call as it moves through the stages.
pub(crate) struct Call<'r> {
    pub wiring: &'r Wiring,
    pub ctx: &'r ToolContext,
    pub name: &'r str,
    pub started: Tick,
    pub tool: Option<&'r RegisteredTool>,
    pub args: Value,
    pub confirm_token: TokenArg,
    /// The ticket `confirm` issued (a confirmation token or a parked approval), which the
    /// executor hands back as a typed outcome. Boxed: only confirmed calls fill it.
    pub ticket: Option<Box<Ticket>>,
    pub policy: Option<ChannelPolicy>,
    pub raw: Option<RawOutcome>,
    pub terminal: Option<Terminal>,
    /// When the tool returned, so `audit` need not read the clock again.
    pub finished: Option<Tick>,
}

impl<'r> Call<'r> {
    /// The call is a replay: it carries a token (well formed or not).
    #[inline]
    pub fn is_replay(&self) -> bool {
        !matches!(self.confirm_token, TokenArg::Absent)
    }

    /// Ends the call with `ticket`, audited as `outcome`: the result audit records is the
    /// one rendered from the ticket (what a legacy caller gets).
    pub fn finish_with_ticket(&mut self, ticket: Ticket, outcome: AuditOutcome) -> Flow {
        let result = ticket.to_result();
        self.ticket = Some(Box::new(ticket));
        self.finish(result, outcome)
    }

    /// A confirmation replay sent arguments other than the parked ones (which ran).
    #[inline]
    pub fn replay_args_ignored(&self) -> bool {
        matches!(
            self.confirm_token,
            TokenArg::Redeemed {
                other_args_ignored: true
            }
        )
    }

    /// A call of `name` that has not visited any stage yet.
    // Always inlined: out of line, the call's state is built, then copied into place.
    #[inline(always)]
    pub fn new(wiring: &'r Wiring, name: &'r str, args: Value, ctx: &'r ToolContext) -> Self {
        Call::with_token(wiring, name, args, TokenArg::Absent, ctx)
    }

    /// A call of `name` carrying the replay token `token`.
    // Given to the constructor rather than assigned after: the assignment dropped the
    // `Absent` it replaced through `TokenArg`'s drop glue, 28 instructions of every call
    // (callgrind, trivial_cli).
    #[inline(always)]
    pub fn with_token(
        wiring: &'r Wiring,
        name: &'r str,
        args: Value,
        token: TokenArg,
        ctx: &'r ToolContext,
    ) -> Self {
        Call {
            wiring,
            ctx,
            name,
            started: wiring.clock.now(),
            tool: None,
            args,
            confirm_token: token,
            ticket: None,
            policy: None,
            raw: None,
            terminal: None,
            finished: None,
        }
    }

    /// The resolved tool (every stage after `resolve` may rely on it).
    #[inline]
    pub fn tool(&self) -> &'r RegisteredTool {
        self.tool
            .expect("stages after resolve run only for a resolved tool")
    }

    /// The channel policy, looked up once per call.
    #[inline]
    pub fn policy(&mut self) -> ChannelPolicy {
        match self.policy {
            Some(policy) => policy,
            None => {
                let policy = self
                    .wiring
                    .gate
                    .lookup_warning_if_unknown(self.ctx.channel());
                self.policy = Some(policy);
                policy
            }
        }
    }

    #[inline]
    pub fn requires_confirmation(&mut self) -> bool {
        let policy = self.policy();
        self.wiring
            .gate
            .requires_confirmation_under(&policy, &self.tool().definition)
    }

    /// Who must confirm this call: nobody, its caller or a person.
    // Always inlined: out of line (where `#[inline]` left it), a call and its spills were
    // half of its 34 instructions on every call (callgrind, `trivial_cli`).
    #[inline(always)]
    pub fn confirmation(&mut self) -> Confirmation {
        let policy = self.policy();
        self.wiring
            .gate
            .confirmation_under(&policy, &self.tool().definition)
    }

    /// Ends the call with `result`.
    #[inline]
    pub fn finish(&mut self, result: ToolResult, outcome: AuditOutcome) -> Flow {
        self.terminal = Some(Terminal::new(result, outcome));
        Flow::Finish
    }

    pub fn elapsed_ms(&self) -> u64 {
        let clock = &self.wiring.clock;
        let end = self.finished.unwrap_or_else(|| clock.now());
        clock.millis_between(self.started, end)
    }
}

/// Runs one call through every stage of [`StepKind::ORDER`], with its `execute_tool` span
/// ([`call_span`](crate::call_span)) open from the first stage to the end of `audit`.
///
/// The span is made when the call starts (its parent is what is current then: a caller's
/// span, or the trace context an MCP transport attached) and is not entered while the
/// stages run: entering it on every poll takes an `Instrumented` wrapper around the stages'
/// future, and any wrapper (even one used only when a subscriber wants the span) measured
/// 6–20% more instructions a call (moves of the stages' state and of the result). Creating
/// a span nobody wants is a check of a cached interest.
///
/// `token` is the replay token the edge split off (or `redeem` was given); the outcome is
/// the legacy [`ToolResult`] or the typed [`CallOutcome`](crate::CallOutcome), whichever
/// the caller asked for (see [`Conclusion`]).
pub(crate) async fn execute_call<C: Conclusion>(
    tools: &ToolLookup,
    wiring: &Wiring,
    name: &str,
    args: Value,
    token: TokenArg,
    ctx: &ToolContext,
    mut trace: impl StageObserver,
) -> C {
    // Where a tool of a replaceable group is kept while the call runs (see `resolve`).
    let held = std::sync::OnceLock::new();
    let span = call_span::start(name, ctx);
    let mut call = Call::with_token(wiring, name, args, token, ctx);
    // The walk is unrolled: `with_stage_order!` expands it into one block per stage, in
    // `StepKind::ORDER`. As a `for` loop matching on each step, the loop's own control (the
    // index, the comparisons, the jump table) was about 130 of a trivial call's 1 560
    // instructions (callgrind, `trivial_cli`). A stage missing from `stage!` below does not
    // compile.
    macro_rules! walk {
        ($($step:ident)*) => {
            'stages: {
                $(
                    if StepKind::$step == StepKind::Audit {
                        break 'stages;
                    }
                    trace.visit(StepKind::$step);
                    if stage!($step) == Flow::Finish {
                        break 'stages;
                    }
                )*
            }
        };
    }
    macro_rules! stage {
        // The only stage that reads the tool table.
        (Resolve) => {
            resolve::run(&mut call, tools, &held)
        };
        (Validate) => {
            validate::run(&mut call)
        };
        (Clamp) => {
            clamp::run(&mut call)
        };
        // A stage that can decide without awaiting is asked that first (see `run_now`).
        (Authorize) => {
            match authorize::run_now(&mut call) {
                Some(flow) => flow,
                // Boxed: the gate's rules and a call policy are the only callers of this
                // path (and allocate already). Its state was the largest of any stage, 352
                // of the call future's 1 016 bytes, moved with the future on every call.
                None => Box::pin(authorize::run(&mut call)).await,
            }
        };
        (RateLimit) => {
            rate_limit::run(&mut call).await
        };
        (PlanMode) => {
            plan_mode::run(&mut call)
        };
        (Confirm) => {
            match confirm::run_now(&mut call) {
                Some(flow) => flow,
                None => confirm::run(&mut call).await,
            }
        };
        (EmitExecuting) => {
            emit_executing::run(&mut call)
        };
        (Execute) => {
            execute::run(&mut call).await
        };
        (ContainException) => {
            contain_exception::run(&mut call)
        };
        // After the walk, on every path: below.
        (Audit) => {
            Flow::Continue
        };
    }
    with_stage_order!(walk);
    trace.visit(StepKind::Audit);
    // `audit` works on the result where it lies, and it is moved out of the call's state
    // once, here. The rest of the state is dropped first: were it dropped after, the result
    // would wait in a temporary (one more copy). And the state is taken apart here rather
    // than by a method taking the call by value, which would copy it whole.
    audit::run(&mut call);
    if !span.is_disabled()
        && let Some(terminal) = &call.terminal
    {
        call_span::record_result(&span, &terminal.result);
    }
    drop(call.args);
    // A fresh call (no token) has nothing to drop: the out-of-line drop glue of `TokenArg`
    // was 34 instructions of every trivial call (callgrind).
    if !matches!(call.confirm_token, TokenArg::Absent) {
        drop(call.confirm_token);
    } else {
        std::mem::forget(call.confirm_token);
    }
    drop(call.raw);
    let ticket = call.ticket.take();
    match call.terminal {
        Some(terminal) => match ticket {
            None => C::done(terminal.result),
            Some(ticket) => C::ticketed(terminal.result, *ticket),
        },
        // `audit::run` fills the slot first thing. (A fallback result here would merge with
        // the moved one and park both in a temporary: two more copies of every result.)
        None => unreachable!("audit always leaves a terminal"),
    }
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

/// Every stage's description for one tool and caller, in the executor's order.
pub(crate) fn describe(facts: &StageFacts<'_>) -> Vec<InvocationStep> {
    StepKind::ORDER
        .iter()
        .map(|step| match step {
            StepKind::Resolve => resolve::describe(facts),
            StepKind::Validate => validate::describe(facts),
            StepKind::Clamp => clamp::describe(facts),
            StepKind::Authorize => authorize::describe(facts),
            StepKind::RateLimit => rate_limit::describe(facts),
            StepKind::PlanMode => plan_mode::describe(facts),
            StepKind::Confirm => confirm::describe(facts),
            StepKind::EmitExecuting => emit_executing::describe(facts),
            StepKind::Execute => execute::describe(facts),
            StepKind::ContainException => contain_exception::describe(facts),
            StepKind::Audit => audit::describe(facts),
        })
        .collect()
}

/// A step description (the stages' `describe` functions build theirs with it).
pub(crate) fn step(
    kind: StepKind,
    role: StepRole,
    presence: StepPresence,
    blocking: bool,
    mutates: bool,
    source: impl Into<String>,
) -> InvocationStep {
    InvocationStep {
        kind,
        role,
        presence,
        blocking,
        mutates,
        wraps: None,
        source: source.into(),
    }
}

/// For stages after `plan_mode`: in plan mode the call never gets there.
pub(crate) fn unreachable_in_plan_mode(
    facts: &StageFacts<'_>,
    kind: StepKind,
    role: StepRole,
) -> Option<InvocationStep> {
    facts.ctx.is_plan_mode().then(|| {
        step(
            kind,
            role,
            StepPresence::Dormant,
            false,
            false,
            "plan mode returns before this stage",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_order_is_the_declaration_order() {
        for (index, step) in StepKind::ORDER.iter().enumerate() {
            assert_eq!(*step as usize, index);
        }
    }

    #[test]
    fn a_trace_reads_back_in_visit_order() {
        let mut trace = StageTrace::default();
        for step in [StepKind::Resolve, StepKind::Validate, StepKind::Audit] {
            trace.visit(step);
        }
        assert_eq!(
            trace.steps(),
            [StepKind::Resolve, StepKind::Validate, StepKind::Audit]
        );
        let mut full = StageTrace::default();
        StepKind::ORDER.iter().for_each(|s| full.visit(*s));
        assert_eq!(full.steps(), StepKind::ORDER);
    }
}
