//! Where audit records go: [`TracingAuditSink`] (default), [`JsonLinesAuditSink`] (a file),
//! [`MemoryAuditSink`] (tests).

use std::io::Write;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tracing::Level;

use crate::audit::record::{AuditOutcome, AuditRecord};
use crate::escape::EscapeControl;
use crate::result::ErrorCode;

/// Receives every audit record. Called inline at the end of each call: keep it quick (a
/// sink that writes to a slow destination should buffer).
pub trait AuditSink: Send + Sync + 'static {
    /// Records one call.
    fn record(&self, record: &AuditRecord<'_>);
}

/// Emits each record as a `tracing` event with target `milpa::audit` (INFO for outcomes
/// that are not problems, WARN otherwise). Nothing is formatted when no subscriber listens.
///
/// The event's message, `[ToolAudit] <request id> | <channel> | <tool> | <principal> |
/// <ms>ms | <outcome>`, is printed raw by text subscribers, so its text fields are written
/// with their control characters escaped: a tool name holding a newline cannot forge a
/// second audit line. The structured fields carry the texts as they are (a JSON
/// subscriber escapes them itself; the text formatter quotes them).
#[derive(Debug, Default, Clone, Copy)]
pub struct TracingAuditSink;

macro_rules! audit_event {
    ($level:expr, $r:expr) => {
        tracing::event!(
            target: "milpa::audit",
            $level,
            request_id = $r.request_id,
            channel = $r.channel,
            tool = $r.tool,
            principal = $r.principal.unwrap_or("anonymous"),
            outcome = $r.outcome.as_str(),
            code = $r.code.map(ErrorCode::as_str),
            took_ms = $r.took_ms,
            timeout_exceeded = $r.timeout_exceeded,
            args = %serde_json::to_string(&$r.args_redacted()).unwrap_or_default(),
            "[ToolAudit] {} | {} | {} | {} | {}ms | {}",
            EscapeControl::all($r.request_id),
            EscapeControl::all($r.channel),
            EscapeControl::all($r.tool),
            EscapeControl::all($r.principal.unwrap_or("anonymous")),
            $r.took_ms,
            $r.outcome.as_str(),
        )
    };
}

impl AuditSink for TracingAuditSink {
    fn record(&self, record: &AuditRecord<'_>) {
        if record.outcome.is_problem() {
            audit_event!(Level::WARN, record);
        } else {
            audit_event!(Level::INFO, record);
        }
    }
}

/// Writes each record as one JSON line and flushes it, so a crash loses nothing written.
#[derive(Debug)]
pub struct JsonLinesAuditSink<W: Write + Send + 'static> {
    out: Mutex<W>,
}

impl<W: Write + Send + 'static> JsonLinesAuditSink<W> {
    /// A sink writing to `out` (a file opened for append, say).
    pub fn new(out: W) -> Self {
        JsonLinesAuditSink {
            out: Mutex::new(out),
        }
    }
}

impl<W: Write + Send + 'static> AuditSink for JsonLinesAuditSink<W> {
    fn record(&self, record: &AuditRecord<'_>) {
        let mut line = Vec::with_capacity(256);
        record.write_json(&mut line);
        line.push(b'\n');
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(error) = out.write_all(&line).and_then(|()| out.flush()) {
            tracing::error!(target: "milpa::audit", %error, "could not write an audit record");
        }
    }
}

/// An audit record that owns its data (args already redacted).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OwnedAuditRecord {
    /// The context's request id.
    pub request_id: String,
    /// The context's channel.
    pub channel: String,
    /// The tool name as called.
    pub tool: String,
    /// The caller.
    pub principal: Option<String>,
    /// How the call ended.
    pub outcome: AuditOutcome,
    /// Whether the result is a success.
    pub success: bool,
    /// The error code.
    pub code: Option<ErrorCode>,
    /// The error message.
    pub error: Option<String>,
    /// Pipeline time.
    pub took_ms: u64,
    /// Soft timeout exceeded.
    pub timeout_exceeded: bool,
    /// Redacted arguments.
    pub args: Value,
}

impl From<&AuditRecord<'_>> for OwnedAuditRecord {
    fn from(r: &AuditRecord<'_>) -> Self {
        OwnedAuditRecord {
            request_id: r.request_id.to_owned(),
            channel: r.channel.to_owned(),
            tool: r.tool.to_owned(),
            principal: r.principal.map(str::to_owned),
            outcome: r.outcome,
            success: r.success,
            code: r.code.cloned(),
            error: r.error.map(str::to_owned),
            took_ms: r.took_ms,
            timeout_exceeded: r.timeout_exceeded,
            args: r.redacted_args(),
        }
    }
}

/// Keeps records in memory (for tests and for hosts that ship them elsewhere in batches).
#[derive(Debug, Default)]
pub struct MemoryAuditSink {
    records: Mutex<Vec<OwnedAuditRecord>>,
}

impl MemoryAuditSink {
    /// An empty sink.
    pub fn new() -> Self {
        Self::default()
    }

    /// Everything recorded so far.
    pub fn records(&self) -> Vec<OwnedAuditRecord> {
        self.records
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Removes and returns everything recorded so far.
    pub fn take(&self) -> Vec<OwnedAuditRecord> {
        std::mem::take(&mut *self.records.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl AuditSink for MemoryAuditSink {
    fn record(&self, record: &AuditRecord<'_>) {
        self.records
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(record.into());
    }
}
