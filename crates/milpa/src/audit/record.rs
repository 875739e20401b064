//! [`AuditRecord`]: what happened to one call.

use std::time::SystemTime;

use serde::ser::{SerializeStruct, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::audit::redact::{RedactedValue, Redactor};
use crate::result::ErrorCode;

/// How a call ended. Every terminal path of the pipeline has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditOutcome {
    /// No tool by that name.
    NotFound,
    /// The arguments failed validation.
    InvalidArguments,
    /// The policy gate denied the call.
    Denied,
    /// The caller's budget was spent.
    RateLimited,
    /// Plan mode: the plan was returned, nothing ran.
    Planned,
    /// A confirmation token was issued, nothing ran.
    ConfirmationRequested,
    /// A confirmation token was refused.
    InvalidConfirmation,
    /// A `tool.executing` listener answered; the tool did not run.
    CacheServed,
    /// A `tool.executing` listener vetoed the call.
    Vetoed,
    /// The tool ran and returned (its result may still be a failure it chose).
    Executed,
    /// The tool returned an error or panicked.
    Failed,
    /// The tool ran past its hard timeout and was cancelled.
    TimedOut,
    /// The caller cancelled the call (or went away) while it ran.
    Cancelled,
}

impl AuditOutcome {
    /// The wire name, e.g. `"rate_limited"`.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditOutcome::NotFound => "not_found",
            AuditOutcome::InvalidArguments => "invalid_arguments",
            AuditOutcome::Denied => "denied",
            AuditOutcome::RateLimited => "rate_limited",
            AuditOutcome::Planned => "planned",
            AuditOutcome::ConfirmationRequested => "confirmation_requested",
            AuditOutcome::InvalidConfirmation => "invalid_confirmation",
            AuditOutcome::CacheServed => "cache_served",
            AuditOutcome::Vetoed => "vetoed",
            AuditOutcome::Executed => "executed",
            AuditOutcome::Failed => "failed",
            AuditOutcome::TimedOut => "timed_out",
            AuditOutcome::Cancelled => "cancelled",
        }
    }

    /// Whether the outcome is a refusal or a failure (logged at WARN by the tracing sink).
    pub fn is_problem(self) -> bool {
        !matches!(
            self,
            AuditOutcome::Planned
                | AuditOutcome::ConfirmationRequested
                | AuditOutcome::CacheServed
                | AuditOutcome::Executed
        )
    }
}

/// One call's audit record. It borrows from the call so that building it costs nothing;
/// arguments are redacted when it is serialized (see [`AuditRecord::redacted_args`]).
#[derive(Debug, Clone, Copy)]
pub struct AuditRecord<'a> {
    /// The context's request id.
    pub request_id: &'a str,
    /// The context's channel.
    pub channel: &'a str,
    /// The tool name as called.
    pub tool: &'a str,
    /// The caller (`None` when anonymous).
    pub principal: Option<&'a str>,
    /// How the call ended.
    pub outcome: AuditOutcome,
    /// Whether the returned result is a success.
    pub success: bool,
    /// The result's error code, if any.
    pub code: Option<&'a ErrorCode>,
    /// The result's error message, if any.
    pub error: Option<&'a str>,
    /// Whole-pipeline time in milliseconds.
    pub took_ms: u64,
    /// Whether the tool ran past its soft timeout.
    pub timeout_exceeded: bool,
    /// The arguments (unredacted: serialize the record, or call `redacted_args`).
    pub args: &'a Value,
    /// The redaction rules for `args`.
    pub redactor: &'a Redactor,
}

impl AuditRecord<'_> {
    /// The arguments with secrets replaced.
    pub fn redacted_args(&self) -> Value {
        self.redactor.redact(self.args)
    }
}

impl Serialize for AuditRecord<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let ts = time::OffsetDateTime::from(SystemTime::now())
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
        let mut s = serializer.serialize_struct("AuditRecord", 12)?;
        s.serialize_field("ts", &ts)?;
        s.serialize_field("request_id", self.request_id)?;
        s.serialize_field("channel", self.channel)?;
        s.serialize_field("tool", self.tool)?;
        s.serialize_field("principal", &self.principal)?;
        s.serialize_field("outcome", &self.outcome)?;
        s.serialize_field("success", &self.success)?;
        s.serialize_field("code", &self.code)?;
        s.serialize_field("error", &self.error)?;
        s.serialize_field("took_ms", &self.took_ms)?;
        s.serialize_field("timeout_exceeded", &self.timeout_exceeded)?;
        s.serialize_field(
            "args",
            &RedactedValue {
                value: self.args,
                redactor: self.redactor,
            },
        )?;
        s.end()
    }
}
