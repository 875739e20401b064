//! [`Wiring`]: the collaborators every stage of a call borrows (policy gate, limiter,
//! stores, dispatcher, audit sink, redactor, clock, caps), apart from the tool table.
//!
//! Stages and inspection read the registry only through this (and the resolved tool), so
//! what a stage can touch is spelled out here rather than "the whole registry".

use std::sync::Arc;
use std::time::Duration;

use crate::approval::ApprovalQueue;
use crate::audit::{AuditLimits, AuditSink, Redactor};
use crate::confirm::ConfirmationStore;
use crate::events::Dispatcher;
use crate::pipeline::clock::PipelineClock;
use crate::policy::PolicyGate;
use crate::rate_limit::{CallerBudget, RateLimiter};

/// A tool result's size cap when nothing else is configured: 4 MiB of JSON.
pub const DEFAULT_MAX_RESULT_BYTES: usize = 4 * 1024 * 1024;

/// What a call's stages read besides the resolved tool.
pub(crate) struct Wiring {
    pub gate: PolicyGate,
    pub rate_limiter: Option<Arc<dyn RateLimiter>>,
    /// Spent by every call before `resolve` looks its tool up; none by default.
    pub caller_budget: Option<CallerBudget>,
    pub confirmations: Arc<dyn ConfirmationStore>,
    pub confirmation_ttl: Duration,
    pub approvals: Arc<ApprovalQueue>,
    pub dispatcher: Option<Arc<Dispatcher>>,
    pub audit: Arc<dyn AuditSink>,
    pub redactor: Redactor,
    pub audit_limits: AuditLimits,
    pub max_result_bytes: usize,
    pub clock: PipelineClock,
}
