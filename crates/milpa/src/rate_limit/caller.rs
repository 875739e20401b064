//! [`CallerBudget`]: a budget per caller that every call spends before its tool is even
//! looked up, so a caller flooding unknown or refused names is stopped as cheaply as one
//! calling a real tool (the per-tool limiter of stage 5 charges only resolved calls).
//!
//! The caller is its channel and principal or, when anonymous, its address (calls with
//! neither share one budget per channel). Each call costs one token. The budget lives in
//! this process (an [`InMemoryRateLimiter`]): it bounds what one server spends on a
//! caller, while the shared per-tool limits are the ones replicas agree on.

use crate::context::ToolContext;
use crate::rate_limit::{InMemoryRateLimiter, Quota, RateDecision, RateKey};

/// A per-caller budget checked in the resolve stage (see the module docs). Wire one with
/// [`ToolRegistryBuilder::caller_budget`](crate::ToolRegistryBuilder::caller_budget).
#[derive(Debug)]
pub(crate) struct CallerBudget {
    quota: Quota,
    limiter: InMemoryRateLimiter,
}

impl CallerBudget {
    pub(crate) fn new(quota: Quota) -> Self {
        CallerBudget {
            quota,
            limiter: InMemoryRateLimiter::new(),
        }
    }

    /// The budget.
    pub(crate) fn quota(&self) -> Quota {
        self.quota
    }

    /// Spends one token of `ctx`'s caller.
    pub(crate) fn charge(&self, ctx: &ToolContext) -> RateDecision {
        let key = match ctx.raw_principal() {
            // An authenticated caller is itself wherever it calls from.
            Some(principal) => RateKey {
                channel: ctx.channel(),
                principal,
                tool: "",
            },
            // Anonymous: its address, in the slot no principal uses.
            None => RateKey {
                channel: ctx.channel(),
                principal: "",
                tool: ctx.ip().unwrap_or(""),
            },
        };
        self.limiter.charge(key, 1, self.quota)
    }

    /// How a refusal names the caller: `channel:principal`, or `channel:anonymous@ip`.
    pub(crate) fn caller_name(ctx: &ToolContext) -> String {
        match (ctx.raw_principal(), ctx.ip()) {
            (Some(principal), _) => format!("{}:{principal}", ctx.channel()),
            (None, Some(ip)) => format!("{}:anonymous@{ip}", ctx.channel()),
            (None, None) => format!("{}:anonymous", ctx.channel()),
        }
    }
}
