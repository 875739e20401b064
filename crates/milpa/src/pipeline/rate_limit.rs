//! Stage 5, `rate_limit`: charge `channel:principal:tool` (5 tokens for a mutating tool, 1
//! otherwise). Runs before plan mode and confirmation, so both are charged too.

use crate::audit::AuditOutcome;
use crate::inspect::StageFacts;
use crate::inspect::{InvocationStep, StepPresence, StepRole};
use crate::pipeline::{Call, Flow};
use crate::pipeline::{StepKind, step};
use crate::rate_limit::{COST_MUTATING, COST_READ, RateDecision, RateKey};
use crate::result::ToolResult;

pub(crate) async fn run(call: &mut Call<'_>) -> Flow {
    let Some(limiter) = call.wiring.rate_limiter.as_ref() else {
        return Flow::Continue;
    };
    let tool = call.tool();
    let key = RateKey {
        channel: call.ctx.channel(),
        principal: call.ctx.raw_principal().unwrap_or(""),
        tool: call.name,
    };
    let cost = if tool.definition.is_mutating() {
        COST_MUTATING
    } else {
        COST_READ
    };
    match limiter.consume(key, cost, tool.quota).await {
        Ok(RateDecision::Allowed { .. }) => Flow::Continue,
        // Fail closed: a call the limiter could not charge does not run.
        Err(error) => call.finish(
            ToolResult::unavailable("rate limiter", &error),
            AuditOutcome::Unavailable,
        ),
        Ok(RateDecision::Denied { retry_after }) => {
            let reason = format!(
                "Rate limit exceeded for '{key}': max {} tokens per {}s.",
                tool.quota.max_tokens,
                tool.quota.window.as_secs()
            );
            let retry = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
            call.finish(
                ToolResult::rate_limited(reason, Some(retry)),
                AuditOutcome::RateLimited,
            )
        }
    }
}

pub(crate) fn describe(facts: &StageFacts<'_>) -> InvocationStep {
    if !facts.rate_limiter {
        return step(
            StepKind::RateLimit,
            StepRole::Guard,
            StepPresence::Skipped,
            false,
            false,
            "no rate limiter wired",
        );
    }
    let mutating = facts.tool.is_mutating();
    let cost = if mutating { COST_MUTATING } else { COST_READ };
    step(
        StepKind::RateLimit,
        StepRole::Guard,
        StepPresence::Active,
        true,
        false,
        format!(
            "rate limiter present; key channel:principal:tool; cost {cost} ({}) of {} tokens per {}s (GCRA); charged before plan mode and confirmation",
            if mutating { "mutating" } else { "read" },
            facts.quota().max_tokens,
            facts.quota().window.as_secs()
        ),
    )
}
