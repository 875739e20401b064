//! Stage 1, `resolve`: find the tool by name. An unknown name is `TOOL_NOT_FOUND`.
//!
//! With a caller budget wired ([`ToolRegistryBuilder::caller_budget`](crate::ToolRegistryBuilder::caller_budget)),
//! the caller spends a token first, so a flood of unknown names is refused
//! (`RATE_LIMITED`) before any lookup. It is part of this stage, not a twelfth one.

use crate::audit::{AuditOutcome, MAX_TOOL_NAME_BYTES, clip};
use crate::inspect::StageFacts;
use crate::inspect::{InvocationStep, StepPresence, StepRole};
use crate::pipeline::{Call, Flow};
use crate::pipeline::{StepKind, step};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::rate_limit::{CallerBudget, Quota, RateDecision};

use crate::result::ToolResult;
use crate::tool_table::{RegisteredTool, ToolLookup};

/// Finds the tool: in the registered tools first (borrowed, the hot path), else among the
/// replaceable groups, whose tool the call then holds in `held` for as long as it runs (its
/// group may be replaced meanwhile).
#[inline]
pub(crate) fn run<'r>(
    call: &mut Call<'r>,
    tools: &'r ToolLookup,
    held: &'r OnceLock<Arc<RegisteredTool>>,
) -> Flow {
    if let Some(budget) = &call.wiring.caller_budget
        && let RateDecision::Denied { retry_after } = budget.charge(call.ctx)
    {
        return over_budget(call, budget.quota(), retry_after);
    }
    if call.name.len() > MAX_TOOL_NAME_BYTES {
        // No tool has such a name; the caller's text is quoted cut, never whole.
        return call.finish(
            ToolResult::tool_not_found(&clip(call.name, MAX_TOOL_NAME_BYTES)),
            AuditOutcome::NotFound,
        );
    }
    if let Some(tool) = tools.table.lookup(call.name) {
        call.tool = Some(tool);
        return Flow::Continue;
    }
    match tools.swappable(call.name) {
        Some(tool) => {
            call.tool = Some(held.get_or_init(|| tool));
            Flow::Continue
        }
        None => call.finish(
            ToolResult::tool_not_found(call.name),
            AuditOutcome::NotFound,
        ),
    }
}

/// The caller spent its budget: `RATE_LIMITED` with the rate-limit message, naming the
/// caller instead of a tool (none was looked up).
#[cold]
fn over_budget(call: &mut Call<'_>, quota: Quota, retry_after: Duration) -> Flow {
    let reason = format!(
        "Rate limit exceeded for '{}': max {} tokens per {}s.",
        CallerBudget::caller_name(call.ctx),
        quota.max_tokens,
        quota.window.as_secs()
    );
    let retry = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
    call.finish(
        ToolResult::rate_limited(reason, Some(retry)),
        AuditOutcome::RateLimited,
    )
}

pub(crate) fn describe(facts: &StageFacts<'_>) -> InvocationStep {
    let lookup = "registry lookup by name; an unknown name (or one over 128 bytes, quoted cut) ends the call with TOOL_NOT_FOUND";
    let source = match facts.caller_budget {
        None => lookup.to_owned(),
        Some(quota) => format!(
            "caller budget first: every call of this caller (channel and principal, or an anonymous caller's address) spends 1 of {} tokens per {}s before the lookup, past which it is RATE_LIMITED; then {lookup}",
            quota.max_tokens,
            quota.window.as_secs()
        ),
    };
    step(
        StepKind::Resolve,
        StepRole::Guard,
        StepPresence::Active,
        true,
        false,
        source,
    )
}
