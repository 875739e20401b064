//! [`FoldingAuditSink`]: repeated refusals of one caller become one record with a count.
//!
//! A refused call costs the caller a few bytes and the audit a whole record: a batch of
//! unknown-tool calls from an anonymous client wrote about eight bytes of audit per byte
//! sent. This sink sits in front of any other and folds: the first refusal of a caller
//! (its principal, or anonymous and its address), for one tool name, outcome and code, is
//! written at once as usual; the same refusals that follow within the window are only
//! counted; when the window has closed (seen at the next record of any kind, at
//! [`flush`](AuditSink::flush) or when the sink is dropped) one summary record is written,
//! the first folded refusal's record with `count` = how many it stands for. So every refusal
//! is accounted for: the counts of the records add up to the calls. The summary goes
//! through the inner sink like any record, so a hash-chained sink chains it.
//!
//! What a crash can lose: the pending counts of the windows still open (at most one
//! window's worth of refusals per caller and tool, never a first refusal, never a call that
//! ran). Only refusals fold ([`AuditOutcome`]s for a call that ran nothing because it was
//! not found, invalid, denied, rate limited or carried a bad token); everything else is
//! written through at once, after the summaries of windows that closed.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::Value;

use super::{AuditOutcome, AuditRecord, AuditSink, Redactor};
use crate::policy::Access;
use crate::result::ErrorCode;

/// How long refusals of one caller fold into one record when nothing else is configured.
pub const DEFAULT_FOLD_WINDOW: Duration = Duration::from_secs(1);

/// How many callers×tools fold at once; refusals past that are written one by one (the
/// sink's memory is bounded, and nothing is dropped).
pub const DEFAULT_MAX_FOLDING: usize = 4096;

/// Folds repeated refusals in front of another sink (see the module docs).
pub struct FoldingAuditSink {
    inner: Arc<dyn AuditSink>,
    window: Duration,
    max_folding: usize,
    /// Windows open; read without the lock so a record with nothing open pays nothing.
    open: AtomicUsize,
    windows: Mutex<HashMap<FoldKey, Window>>,
    /// Summaries carry arguments already redacted: redacting them again changes nothing.
    redactor: Redactor,
}

impl std::fmt::Debug for FoldingAuditSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FoldingAuditSink")
            .field("window", &self.window)
            .field("max_folding", &self.max_folding)
            .finish_non_exhaustive()
    }
}

/// Whose refusals of what fold together.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct FoldKey {
    channel: String,
    principal: Option<String>,
    /// Only for anonymous callers: an authenticated one is its principal wherever it is.
    ip: Option<String>,
    tool: String,
    kind: Access,
    outcome: AuditOutcome,
    code: Option<ErrorCode>,
}

struct Window {
    opened: Instant,
    folded: Option<Folded>,
}

/// The first refusal folded into a window, and how many there were.
struct Folded {
    count: u64,
    request_id: String,
    success: bool,
    error: Option<String>,
    took_ms: u64,
    timeout_exceeded: bool,
    args: Value,
    max_args_bytes: usize,
}

impl FoldingAuditSink {
    /// Folds in front of `inner` with the default window (1 s) and bound.
    pub fn new(inner: Arc<dyn AuditSink>) -> Self {
        Self::with_window(inner, DEFAULT_FOLD_WINDOW)
    }

    /// Folds in front of `inner` with refusals folding for `window` after the first.
    pub fn with_window(inner: Arc<dyn AuditSink>, window: Duration) -> Self {
        FoldingAuditSink {
            inner,
            window,
            max_folding: DEFAULT_MAX_FOLDING,
            open: AtomicUsize::new(0),
            windows: Mutex::new(HashMap::new()),
            redactor: Redactor::with_fields(std::iter::empty::<&str>()),
        }
    }

    /// Sets how many callers×tools may fold at once.
    pub fn with_max_folding(mut self, max: usize) -> Self {
        self.max_folding = max;
        self
    }

    /// Writes the summaries of windows closed at `now` (all of them with `now = None`).
    fn close_windows(&self, windows: &mut HashMap<FoldKey, Window>, now: Option<Instant>) {
        let window = self.window;
        let closed: Vec<FoldKey> = windows
            .iter()
            .filter(|(_, w)| now.is_none_or(|now| now.duration_since(w.opened) >= window))
            .map(|(k, _)| k.clone())
            .collect();
        for key in closed {
            if let Some(w) = windows.remove(&key) {
                self.write_summary(&key, w);
            }
        }
        self.open.store(windows.len(), Ordering::Release);
    }

    fn write_summary(&self, key: &FoldKey, window: Window) {
        let Some(folded) = window.folded else {
            return;
        };
        self.inner.record(&AuditRecord {
            request_id: &folded.request_id,
            channel: &key.channel,
            tool: &key.tool,
            kind: key.kind,
            principal: key.principal.as_deref(),
            outcome: key.outcome,
            success: folded.success,
            code: key.code.as_ref(),
            error: folded.error.as_deref(),
            took_ms: folded.took_ms,
            timeout_exceeded: folded.timeout_exceeded,
            args: &folded.args,
            redactor: &self.redactor,
            count: folded.count,
            ip: key.ip.as_deref(),
            max_args_bytes: folded.max_args_bytes,
        });
    }
}

/// Refusals: the call ran nothing because of what the caller sent or may do.
fn folds(outcome: AuditOutcome) -> bool {
    matches!(
        outcome,
        AuditOutcome::NotFound
            | AuditOutcome::InvalidArguments
            | AuditOutcome::Denied
            | AuditOutcome::RateLimited
            | AuditOutcome::InvalidConfirmation
    )
}

impl AuditSink for FoldingAuditSink {
    fn record(&self, record: &AuditRecord<'_>) {
        if !folds(record.outcome) || record.count != 1 {
            if self.open.load(Ordering::Acquire) != 0 {
                let mut windows = self.windows.lock();
                self.close_windows(&mut windows, Some(Instant::now()));
                // Written under the lock, so it cannot overtake a summary of an earlier
                // window being written by another thread.
                self.inner.record(record);
                return;
            }
            self.inner.record(record);
            return;
        }
        let now = Instant::now();
        let key = FoldKey {
            channel: record.channel.to_owned(),
            principal: record.principal.map(str::to_owned),
            ip: match record.principal {
                None => record.ip.map(str::to_owned),
                Some(_) => None,
            },
            tool: record.tool.to_owned(),
            kind: record.kind,
            outcome: record.outcome,
            code: record.code.cloned(),
        };
        let mut windows = self.windows.lock();
        self.close_windows(&mut windows, Some(now));
        if let Some(window) = windows.get_mut(&key) {
            // Open (closed ones were just written): count it.
            match &mut window.folded {
                Some(folded) => folded.count += 1,
                None => {
                    window.folded = Some(Folded {
                        count: 1,
                        request_id: record.request_id.to_owned(),
                        success: record.success,
                        error: record.error.map(str::to_owned),
                        took_ms: record.took_ms,
                        timeout_exceeded: record.timeout_exceeded,
                        args: record.redacted_args(),
                        max_args_bytes: record.max_args_bytes,
                    })
                }
            }
            return;
        }
        if windows.len() < self.max_folding {
            windows.insert(
                key,
                Window {
                    opened: now,
                    folded: None,
                },
            );
            self.open.store(windows.len(), Ordering::Release);
        }
        self.inner.record(record);
    }

    fn flush(&self) {
        {
            let mut windows = self.windows.lock();
            self.close_windows(&mut windows, None);
        }
        self.inner.flush();
    }
}

impl Drop for FoldingAuditSink {
    fn drop(&mut self) {
        let windows = self.windows.get_mut();
        let pending = std::mem::take(windows);
        for (key, window) in pending {
            self.write_summary(&key, window);
        }
    }
}
