//! Where audit records go: [`TracingAuditSink`] (default), [`JsonLinesAuditSink`] (a file),
//! [`MemoryAuditSink`] (tests).

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tracing::Level;

use crate::audit::chain::{ChainHead, seal};
use crate::audit::record::{AuditOutcome, AuditRecord};
use crate::escape::EscapeControl;
use crate::policy::Access;
use crate::result::ErrorCode;

/// Receives every audit record. Called inline at the end of each call: keep it quick (a
/// sink that writes to a slow destination should buffer).
pub trait AuditSink: Send + Sync + 'static {
    /// Records one call.
    fn record(&self, record: &AuditRecord<'_>);

    /// Writes out whatever the sink has buffered, returning once it is stored (a durable
    /// sink: committed). Hosts call it before exiting; sinks that write as they go keep
    /// the default, which does nothing.
    fn flush(&self) {}
}

/// Emits each record as a `tracing` event with target `milpa::audit` (INFO for outcomes
/// that are not problems, WARN otherwise). Nothing is formatted when no subscriber listens.
///
/// The event's message, `[ToolAudit] <request id> | <channel> | <tool> | <principal> |
/// <ms>ms | <outcome>`, is printed raw by text subscribers, so its text fields are written
/// with their control characters escaped: a tool name holding a newline cannot forge a
/// second audit line.
///
/// Two shapes, for two kinds of subscriber:
///
/// - [`structured`](Self::structured) (the default): the message, plus every fact as a
///   field (`request_id`, `channel`, `tool`, `principal`, `outcome`, `code`, `took_ms`,
///   `timeout_exceeded`, `args`) carrying the texts as they are, for a JSON or OpenTelemetry
///   subscriber that indexes them (it escapes them itself; the text formatter quotes them).
/// - [`line`](Self::line): the message alone, ending `| args=<redacted JSON>` as the
///   original's log line does, for a text log read by people. The fields would only repeat
///   the message there, and writing them is a third of the event's cost: measured on
///   `milpa serve --store memory` over stdio (callgrind, one call at a time), the event
///   took 21 400 of a call's 58 600 instructions with the fields and 13 900 of 48 200
///   without them.
///
/// ```
/// use milpa::audit::TracingAuditSink;
///
/// let for_people = TracingAuditSink::line();
/// assert_ne!(for_people, TracingAuditSink::default());
/// assert_eq!(TracingAuditSink::default(), TracingAuditSink::structured());
/// ```
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TracingAuditSink {
    /// The message alone (with the arguments in it), no fields.
    line: bool,
}

impl TracingAuditSink {
    /// The message and every fact as a field: for structured subscribers.
    pub fn structured() -> TracingAuditSink {
        TracingAuditSink { line: false }
    }

    /// One line of text holding every fact, arguments included, and no fields: for a text
    /// log (the `milpa` command's standard error).
    pub fn line() -> TracingAuditSink {
        TracingAuditSink { line: true }
    }
}

/// The event with its fields; see [`TracingAuditSink::structured`].
macro_rules! structured_event {
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
            "{}",
            AuditMessage { record: $r, args: None },
        )
    };
}

/// The event that is one line; see [`TracingAuditSink::line`].
macro_rules! line_event {
    ($level:expr, $r:expr) => {
        tracing::event!(
            target: "milpa::audit",
            $level,
            "{}",
            AuditMessage {
                record: $r,
                args: Some(&serde_json::to_string(&$r.args_redacted()).unwrap_or_default()),
            },
        )
    };
}

impl AuditSink for TracingAuditSink {
    fn record(&self, record: &AuditRecord<'_>) {
        match (record.outcome.is_problem(), self.line) {
            (false, false) => structured_event!(Level::INFO, record),
            (true, false) => structured_event!(Level::WARN, record),
            (false, true) => line_event!(Level::INFO, record),
            (true, true) => line_event!(Level::WARN, record),
        }
    }
}

/// `[ToolAudit] <request id> | <channel> | <tool> | <principal> | <ms>ms | <outcome>`, then
/// ` | args=<json>` when the arguments are part of the line; every text escaped (the
/// arguments' JSON escapes control characters but not bidi overrides or line separators).
struct AuditMessage<'r, 'a> {
    record: &'r AuditRecord<'a>,
    args: Option<&'r str>,
}

impl fmt::Display for AuditMessage<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.record;
        // A read or a prompt says so before its name; a call's line is as it always was.
        let noun = match r.kind {
            Access::CallTool => "",
            Access::ReadResource => "resource ",
            Access::GetPrompt => "prompt ",
        };
        write!(
            f,
            "[ToolAudit] {} | {} | {noun}{} | {} | {}ms | {}",
            EscapeControl::all(r.request_id),
            EscapeControl::all(r.channel),
            EscapeControl::all(r.tool),
            EscapeControl::all(r.principal.unwrap_or("anonymous")),
            r.took_ms,
            r.outcome.as_str(),
        )?;
        match self.args {
            Some(args) => write!(f, " | args={}", EscapeControl::all(args)),
            None => Ok(()),
        }
    }
}

/// Writes each record as one sealed JSON line (see [`chain`](crate::audit::chain)) and
/// flushes it, so a crash loses nothing written and any later edit, removal or reordering
/// of a line shows in `verify_lines`.
#[derive(Debug)]
pub struct JsonLinesAuditSink<W: Write + Send + 'static> {
    state: Mutex<ChainedWriter<W>>,
}

/// The writer and the chain it continues, locked together: a record's `prev_hash` is the
/// hash of the line written just before it.
#[derive(Debug)]
struct ChainedWriter<W> {
    out: W,
    head: ChainHead,
    /// The sealed line being written, reused from record to record.
    line: Vec<u8>,
}

impl<W: Write + Send + 'static> JsonLinesAuditSink<W> {
    /// A sink writing to `out`, starting a new chain (its first record has seq 1). To
    /// continue a file's chain, use [`append_to`](JsonLinesAuditSink::append_to).
    pub fn new(out: W) -> Self {
        Self::continuing(out, ChainHead::genesis())
    }

    /// A sink writing to `out` whose first record follows `head` (the last record already
    /// written there).
    pub fn continuing(out: W, head: ChainHead) -> Self {
        JsonLinesAuditSink {
            state: Mutex::new(ChainedWriter {
                out,
                head,
                line: Vec::with_capacity(512),
            }),
        }
    }

    /// The last record written (genesis before the first).
    pub fn head(&self) -> ChainHead {
        self.state.lock().head.clone()
    }
}

impl JsonLinesAuditSink<File> {
    /// Opens `path` for appending (creating it when missing) and continues the chain of its
    /// last record. Refuses, with an error naming the file, when that last line is not a
    /// sealed record (a file written before records were chained, a torn last line, an
    /// edited last record): appending there would start a chain nobody can verify.
    pub fn append_to(path: &Path) -> io::Result<JsonLinesAuditSink<File>> {
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)?;
        let head = match last_line(&mut file)? {
            None => ChainHead::genesis(),
            Some(line) => ChainHead::of_sealed_line(&line).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "cannot continue the audit chain of {}: its last line is not a sealed \
                         audit record (check it with `milpa audit verify {}`)",
                        path.display(),
                        path.display()
                    ),
                )
            })?,
        };
        Ok(JsonLinesAuditSink::continuing(file, head))
    }
}

/// The last non-blank line of `file`, read backwards from its end in blocks (an audit file
/// may be large; its last record is all that is needed).
fn last_line(file: &mut File) -> io::Result<Option<String>> {
    const BLOCK: u64 = 8 * 1024;
    let mut end = file.seek(SeekFrom::End(0))?;
    let mut tail: Vec<u8> = Vec::new();
    loop {
        // Drop trailing blank space, then look for the newline before the last line.
        while tail.last().is_some_and(u8::is_ascii_whitespace) {
            tail.pop();
        }
        if !tail.is_empty()
            && let Some(newline) = tail.iter().rposition(|&b| b == b'\n')
        {
            tail.drain(..=newline);
            break;
        }
        if end == 0 {
            break;
        }
        let start = end.saturating_sub(BLOCK);
        let mut block = vec![0u8; (end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut block)?;
        block.extend_from_slice(&tail);
        tail = block;
        end = start;
    }
    if tail.is_empty() {
        return Ok(None);
    }
    String::from_utf8(tail)
        .map(Some)
        .map_err(|error| io::Error::new(io::ErrorKind::InvalidData, error))
}

impl<W: Write + Send + 'static> AuditSink for JsonLinesAuditSink<W> {
    fn record(&self, record: &AuditRecord<'_>) {
        // Serialized outside the lock; only the seal (one SHA-256) and the write are inside.
        let mut json = Vec::with_capacity(256);
        record.write_json(&mut json);
        let mut state = self.state.lock();
        let ChainedWriter { out, head, line } = &mut *state;
        line.clear();
        let next = seal(&json, head, line);
        line.push(b'\n');
        match out.write_all(line).and_then(|()| out.flush()) {
            Ok(()) => *head = next,
            Err(error) => {
                tracing::error!(target: "milpa::audit", %error, "could not write an audit record")
            }
        }
    }

    fn flush(&self) {
        let mut state = self.state.lock();
        if let Err(error) = state.out.flush() {
            tracing::error!(target: "milpa::audit", %error, "could not flush the audit file");
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
    /// How many refusals the record stands for (1 unless folded).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub count: u64,
    /// What the request was (a tool call unless written otherwise).
    #[serde(default, skip_serializing_if = "is_call")]
    pub kind: Access,
}

fn is_call(kind: &Access) -> bool {
    *kind == Access::CallTool
}

fn one() -> u64 {
    1
}

fn is_one(count: &u64) -> bool {
    *count == 1
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
            count: r.count,
            kind: r.kind,
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
        self.records.lock().clone()
    }

    /// Removes and returns everything recorded so far.
    pub fn take(&self) -> Vec<OwnedAuditRecord> {
        std::mem::take(&mut *self.records.lock())
    }
}

impl AuditSink for MemoryAuditSink {
    fn record(&self, record: &AuditRecord<'_>) {
        self.records.lock().push(record.into());
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::audit::{AuditOutcome, Redactor};

    /// Everything a fmt subscriber writes, without ANSI colours or timestamps.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0.lock().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn logged(sink: TracingAuditSink, record: &AuditRecord<'_>) -> String {
        let out = Captured::default();
        let writer = out.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .without_time()
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || sink.record(record));
        String::from_utf8(out.0.lock().clone()).unwrap()
    }

    /// The line holds what the structured event says, message and arguments alike: the
    /// text log loses no fact by dropping the fields.
    #[test]
    fn the_line_says_what_the_structured_event_says() {
        let redactor = Redactor::default();
        let args = json!({"password": "hunter2", "note": "a\u{2028}b"});
        let record = AuditRecord {
            request_id: "r\n1",
            channel: "mcp",
            tool: "notes_add",
            kind: Default::default(),
            principal: Some("ann"),
            outcome: AuditOutcome::Failed,
            success: false,
            code: Some(&ErrorCode::InternalError),
            error: Some("boom"),
            took_ms: 7,
            timeout_exceeded: false,
            args: &args,
            redactor: &redactor,
            count: 1,
            ip: None,
            max_args_bytes: 16 * 1024,
        };
        let structured = logged(TracingAuditSink::structured(), &record);
        let line = logged(TracingAuditSink::line(), &record);
        let message = "[ToolAudit] r\\n1 | mcp | notes_add | ann | 7ms | failed";
        assert!(
            structured.starts_with(&format!(" WARN milpa::audit: {message} request_id=")),
            "{structured:?}"
        );
        let args_field = structured
            .split(" args=")
            .nth(1)
            .expect("the structured event carries the arguments")
            .trim_end();
        assert_eq!(
            args_field,
            r#"{"password":"***REDACTED***","note":"a\u{2028}b"}"#.replace("\\u{2028}", "\u{2028}")
        );
        assert_eq!(
            line,
            format!(
                " WARN milpa::audit: {message} | args={}\n",
                EscapeControl::all(args_field)
            )
        );
        assert!(
            line.contains(r"a\u{2028}b") && !line.contains('\u{2028}'),
            "{line:?}"
        );
        assert_eq!(line.lines().count(), 1);
    }
}
