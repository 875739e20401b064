//! [`AuditRecord`]: what happened to one call.

use std::time::SystemTime;

use serde::ser::Serializer;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::audit::limits::clip;
use crate::audit::redact::{RedactedValue, Redactor};
use crate::json_size;
use crate::json_write::{FieldVisitor, ObjectWriter, SerdeFields};
use crate::policy::Access;
use crate::result::ErrorCode;

/// How a call ended. Every terminal path of the pipeline has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
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
    /// The person asked to confirm the call declined or cancelled it (the record's `error`
    /// says which); the token was revoked and nothing ran.
    ConfirmationDeclined,
    /// The request was refused at the protocol level, before a tool could be resolved
    /// (arguments not an object, name missing).
    InvalidRequest,
    /// A collaborator the call needs (the rate limiter, the confirmation store) failed; the
    /// call was refused rather than let through unchecked.
    Unavailable,
    /// The call was parked for a person's approval, or replayed while still waiting;
    /// nothing ran.
    ApprovalPending,
    /// A person granted a parked call or a verification request (the record's principal is
    /// the approver, its arguments name the approval).
    ApprovalGranted,
    /// A person rejected one.
    ApprovalRejected,
    /// A decision on an approval was refused (self-approval, missing scope, unknown,
    /// expired or already decided id); nothing was recorded but this.
    ApprovalRefused,
    /// An upstream tool or prompt no longer matched its pinned definition and was held for
    /// a person (the record's arguments name the approval); nothing was called.
    DefinitionHeld,
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
            AuditOutcome::ConfirmationDeclined => "confirmation_declined",
            AuditOutcome::InvalidRequest => "invalid_request",
            AuditOutcome::Unavailable => "unavailable",
            AuditOutcome::ApprovalPending => "approval_pending",
            AuditOutcome::ApprovalGranted => "approval_granted",
            AuditOutcome::ApprovalRejected => "approval_rejected",
            AuditOutcome::ApprovalRefused => "approval_refused",
            AuditOutcome::DefinitionHeld => "definition_held",
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
                | AuditOutcome::ApprovalPending
                | AuditOutcome::ApprovalGranted
                | AuditOutcome::ApprovalRejected
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
    /// The tool name as called (for a read, the URI; for a prompt, its name).
    pub tool: &'a str,
    /// What the request was: a tool call, a resource read, a prompt. Written as `kind`
    /// only when it is not a tool call (a call's record keeps the shape it always had).
    pub kind: Access,
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
    /// How many refusals this record stands for: 1 for an ordinary record, more for the
    /// summary a [`FoldingAuditSink`](crate::audit::FoldingAuditSink) writes for repeated
    /// refusals of one caller. Written as `count` only when it is not 1.
    pub count: u64,
    /// The caller's address, when the transport knows it. Not written (the record's shape
    /// is fixed); it tells anonymous callers apart when refusals are folded.
    pub ip: Option<&'a str>,
    /// The most bytes of JSON the arguments may take in the record: larger ones are written
    /// as their redacted JSON cut to this size, a string ending in `…(+N bytes)` (see
    /// [`AuditLimits`](crate::audit::AuditLimits)).
    pub max_args_bytes: usize,
}

impl AuditRecord<'_> {
    /// The arguments as recorded: secrets replaced, and cut (as a string) when over
    /// [`max_args_bytes`](Self::max_args_bytes).
    pub fn redacted_args(&self) -> Value {
        match self.args_redacted() {
            RecordedArgs::Whole(redacted) => self.redactor.redact(redacted.value),
            RecordedArgs::Cut(text) => Value::String(text),
        }
    }
}

/// The arguments as a record writes them (see [`AuditRecord::redacted_args`]). Measured
/// when the record is written, not when it is built: a sink that writes nothing (`tracing`
/// with no subscriber) pays nothing for the cap.
pub(crate) enum RecordedArgs<'a> {
    /// Within the cap: written whole, redacted as they are written.
    Whole(RedactedValue<'a>),
    /// Over the cap: the redacted JSON, cut, with its marker.
    Cut(String),
}

impl Serialize for RecordedArgs<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            RecordedArgs::Whole(redacted) => redacted.serialize(serializer),
            RecordedArgs::Cut(text) => serializer.serialize_str(text),
        }
    }
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` (RFC 3339, UTC, milliseconds) without allocating: one is
/// written for every audit record, and the date part changes once a second.
struct Timestamp([u8; 24]);

impl Timestamp {
    fn now() -> Timestamp {
        thread_local! {
            // The second last formatted, and its `YYYY-MM-DDTHH:MM:SS`.
            static LAST: std::cell::Cell<(u64, [u8; 19])> = const { std::cell::Cell::new((u64::MAX, [0; 19])) };
        }
        let since = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        let (secs, millis) = (since.as_secs(), since.subsec_millis());
        let (last, mut prefix) = LAST.get();
        if last != secs {
            prefix = Self::seconds_prefix(secs);
            LAST.set((secs, prefix));
        }
        let mut out = [0u8; 24];
        out[..19].copy_from_slice(&prefix);
        out[19] = b'.';
        out[20] = b'0' + (millis / 100) as u8;
        out[21] = b'0' + (millis / 10 % 10) as u8;
        out[22] = b'0' + (millis % 10) as u8;
        out[23] = b'Z';
        Timestamp(out)
    }

    fn seconds_prefix(secs: u64) -> [u8; 19] {
        let format =
            time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]");
        let text = time::OffsetDateTime::from_unix_timestamp(secs as i64)
            .ok()
            .and_then(|t| t.format(&format).ok())
            .unwrap_or_default();
        let mut prefix = [b'0'; 19];
        if text.len() == 19 {
            prefix.copy_from_slice(text.as_bytes());
        }
        prefix
    }

    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).unwrap_or("")
    }
}

impl Serialize for AuditRecord<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.serialize_at(&Timestamp::now(), serializer)
    }
}

impl AuditRecord<'_> {
    fn serialize_at<S: Serializer>(
        &self,
        ts: &Timestamp,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let mut fields = SerdeFields::new(serializer.serialize_map(Some(12))?);
        self.visit_fields(ts, &mut fields);
        fields.end()
    }

    /// The record's keys, in order: the one list both `Serialize` and `write_json` follow.
    #[inline(always)]
    fn visit_fields(&self, ts: &Timestamp, fields: &mut impl FieldVisitor) {
        fields.string("ts", ts.as_str());
        fields.string("request_id", self.request_id);
        fields.string("channel", self.channel);
        fields.string("tool", self.tool);
        fields.optional_string("principal", self.principal);
        fields.string("outcome", self.outcome.as_str());
        fields.boolean("success", self.success);
        fields.optional_string("code", self.code.map(ErrorCode::as_str));
        fields.optional_string("error", self.error);
        fields.unsigned("took_ms", self.took_ms);
        fields.boolean("timeout_exceeded", self.timeout_exceeded);
        fields.value("args", &self.args_redacted());
        if self.count != 1 {
            fields.unsigned("count", self.count);
        }
        if self.kind != Access::CallTool {
            fields.string("kind", self.kind.as_str());
        }
    }

    /// The arguments, redacted as they are written, and cut when over the cap.
    pub(crate) fn args_redacted(&self) -> RecordedArgs<'_> {
        let redacted = RedactedValue {
            value: self.args,
            redactor: self.redactor,
        };
        if json_size::within(self.args, self.max_args_bytes).is_some() {
            return RecordedArgs::Whole(redacted);
        }
        let text = serde_json::to_string(&redacted).unwrap_or_default();
        RecordedArgs::Cut(clip(&text, self.max_args_bytes).into_owned())
    }

    /// Appends the record as JSON (the bytes `serde_json` writes for it), without a newline.
    ///
    /// Sinks that write JSON lines use this: it is the record's `Serialize` written by hand,
    /// a few times cheaper than `serde_json` (both follow one list of keys).
    ///
    /// ```
    /// use milpa::audit::{AuditOutcome, AuditRecord, Redactor};
    /// use serde_json::json;
    ///
    /// let redactor = Redactor::default();
    /// let args = json!({"password": "hunter2", "n": 1});
    /// let record = AuditRecord {
    ///     request_id: "r1", channel: "cli", tool: "t", kind: Default::default(), principal: None,
    ///     outcome: AuditOutcome::Executed, success: true, code: None, error: None,
    ///     took_ms: 0, timeout_exceeded: false, args: &args, redactor: &redactor,
    ///     count: 1, ip: None, max_args_bytes: 16 * 1024,
    /// };
    /// let mut line = Vec::new();
    /// record.write_json(&mut line);
    /// let back: serde_json::Value = serde_json::from_slice(&line).unwrap();
    /// assert_eq!(back["args"], json!({"password": "***REDACTED***", "n": 1}));
    /// ```
    pub fn write_json(&self, out: &mut Vec<u8>) {
        self.write_json_at(&Timestamp::now(), out);
    }

    fn write_json_at(&self, ts: &Timestamp, out: &mut Vec<u8>) {
        let mut fields = ObjectWriter::open(out);
        self.visit_fields(ts, &mut fields);
        fields.close();
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Serializes through `Serialize` at a given time.
    struct At<'a>(&'a AuditRecord<'a>, &'a Timestamp);

    impl Serialize for At<'_> {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            self.0.serialize_at(self.1, serializer)
        }
    }

    #[test]
    fn the_hand_written_line_is_what_serde_writes() {
        let redactor = Redactor::default();
        let code = ErrorCode::Forbidden;
        let custom = ErrorCode::parse("MY_CODE");
        let cases = [
            json!({"a": 1, "password": "x", "nested": {"token": [1, 2]}}),
            json!(null),
            json!("a \"quoted\"\nline"),
            json!({"é": "日本", "list": [true, null, 1.5, -3]}),
        ];
        let outcomes = [
            AuditOutcome::Executed,
            AuditOutcome::RateLimited,
            AuditOutcome::Cancelled,
        ];
        let ts = Timestamp::now();
        for (i, args) in cases.iter().enumerate() {
            for outcome in outcomes {
                let record = AuditRecord {
                    request_id: if i % 2 == 0 { "req-1" } else { "req \"2\"" },
                    channel: "mcp",
                    tool: "notes.add",
                    kind: Default::default(),
                    principal: if i % 2 == 0 { Some("alice\\bob") } else { None },
                    outcome,
                    success: i % 2 == 1,
                    code: match i {
                        0 => Some(&code),
                        2 => Some(&custom),
                        _ => None,
                    },
                    error: if i == 0 { Some("Forbidden:\tno") } else { None },
                    took_ms: (i as u64) * 1_000_003,
                    timeout_exceeded: i == 3,
                    args,
                    redactor: &redactor,
                    count: if i == 1 { 7 } else { 1 },
                    ip: None,
                    max_args_bytes: usize::MAX,
                };
                let mut line = Vec::new();
                record.write_json_at(&ts, &mut line);
                let expected = serde_json::to_vec(&At(&record, &ts)).unwrap();
                assert_eq!(
                    String::from_utf8(line).unwrap(),
                    String::from_utf8(expected).unwrap()
                );
            }
        }
    }

    #[test]
    fn timestamps_are_rfc3339_utc_with_milliseconds() {
        let ts = Timestamp::now();
        let text = ts.as_str();
        assert_eq!(text.len(), 24, "{text}");
        for (i, c) in text.bytes().enumerate() {
            let expected_separator = match i {
                4 | 7 => Some(b'-'),
                10 => Some(b'T'),
                13 | 16 => Some(b':'),
                19 => Some(b'.'),
                23 => Some(b'Z'),
                _ => None,
            };
            match expected_separator {
                Some(sep) => assert_eq!(c, sep, "{text}"),
                None => assert!(c.is_ascii_digit(), "{text}"),
            }
        }
        assert!(text.starts_with("20"), "{text}");
        assert_eq!(
            Timestamp::seconds_prefix(1_700_000_000),
            *b"2023-11-14T22:13:20"
        );
    }
}
