//! Audit: one structured [`AuditRecord`] for **every** terminal path of a call, secrets
//! redacted, sent to an [`AuditSink`].
//!
//! The original logged some paths and not others (not-found, plan, confirmation, veto were
//! silent). Here every path produces a record, so an audit trail can answer "what did this
//! principal try", not only "what ran".

mod call_counts;
pub mod chain;
mod folding;
mod latency;
mod limits;
pub(crate) mod outgoing;
mod record;
mod redact;
mod sink;
pub mod trail;

pub use call_counts::{CallCount, CallCounts, CountingAuditSink, MAX_COUNTED_TOOLS, ToolCalls};
pub use folding::{DEFAULT_FOLD_WINDOW, DEFAULT_MAX_FOLDING, FoldingAuditSink};
pub use latency::{LATENCY_BOUNDS_MS, LatencyHistogram};
pub use limits::{AuditLimits, MAX_TOOL_NAME_BYTES, clip};
pub use record::{AuditOutcome, AuditRecord};
pub use redact::{
    DEFAULT_SENSITIVE_FIELDS, DEFAULT_SENSITIVE_WORDS, REDACTED, REDACTED_IN_TEXT, RedactedValue,
    Redactor,
};
pub use sink::{
    AuditSink, JsonLinesAuditSink, MemoryAuditSink, OwnedAuditRecord, TracingAuditSink,
};
