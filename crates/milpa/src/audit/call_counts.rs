//! [`CallCounts`], fed by [`CountingAuditSink`]: tool calls counted by tool, channel and
//! outcome, and the time taken by those whose tool ran, for a metrics endpoint to read
//! (milpa-mcp's `/metrics`).
//!
//! Counting happens where a call's outcome is known: its audit record. The counting sink
//! sits in front of the audit sink, so every record of a tool call is counted before it is
//! written (or folded, see [`FoldingAuditSink`](crate::audit::FoldingAuditSink)); reads of
//! resources and prompts are not tool calls and are not counted. A record costs a lookup of
//! its tool's counters by name in a map that changes only when a tool is counted for the
//! first time (read without a lock), and two or three relaxed atomic additions; nothing is
//! allocated.
//!
//! Every label is bounded, whatever callers send:
//!
//! - a tool is named only when the registry the counts [follow](CallCounts::follow) has a
//!   tool by that name when it is first counted, and at most [`MAX_COUNTED_TOOLS`] names
//!   are kept; any other name (an unknown tool, a refusal before the lookup) counts under
//!   no tool;
//! - a channel is named only when the registry's policy gate has a policy for it (the
//!   built-in channels and the configured ones); any other counts under no channel;
//! - outcomes are the [`AuditOutcome`]s.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use arc_swap::ArcSwap;
use parking_lot::Mutex;

use super::latency::{Latency, LatencyHistogram};
use super::{AuditOutcome, AuditRecord, AuditSink};
use crate::policy::Access;
use crate::registry::ToolRegistry;

/// How many tool names get counters of their own; a tool first counted after that counts
/// under no tool. Tools come and go with upstreams' lists, so the names ever counted, not
/// the tools registered now, are what this bounds.
pub const MAX_COUNTED_TOOLS: usize = 1024;

/// Every outcome, in the order of [`outcome_slot`].
const OUTCOMES: [AuditOutcome; 21] = [
    AuditOutcome::NotFound,
    AuditOutcome::InvalidArguments,
    AuditOutcome::Denied,
    AuditOutcome::RateLimited,
    AuditOutcome::Planned,
    AuditOutcome::ConfirmationRequested,
    AuditOutcome::InvalidConfirmation,
    AuditOutcome::CacheServed,
    AuditOutcome::Vetoed,
    AuditOutcome::Executed,
    AuditOutcome::Failed,
    AuditOutcome::TimedOut,
    AuditOutcome::Cancelled,
    AuditOutcome::ConfirmationDeclined,
    AuditOutcome::InvalidRequest,
    AuditOutcome::Unavailable,
    AuditOutcome::ApprovalPending,
    AuditOutcome::ApprovalGranted,
    AuditOutcome::ApprovalRejected,
    AuditOutcome::ApprovalRefused,
    AuditOutcome::DefinitionHeld,
];

/// Where `outcome` counts in a channel's row. A match with no wildcard: a new outcome does
/// not compile until it has its slot (and its place in [`OUTCOMES`], which a test checks).
#[inline]
fn outcome_slot(outcome: AuditOutcome) -> usize {
    match outcome {
        AuditOutcome::NotFound => 0,
        AuditOutcome::InvalidArguments => 1,
        AuditOutcome::Denied => 2,
        AuditOutcome::RateLimited => 3,
        AuditOutcome::Planned => 4,
        AuditOutcome::ConfirmationRequested => 5,
        AuditOutcome::InvalidConfirmation => 6,
        AuditOutcome::CacheServed => 7,
        AuditOutcome::Vetoed => 8,
        AuditOutcome::Executed => 9,
        AuditOutcome::Failed => 10,
        AuditOutcome::TimedOut => 11,
        AuditOutcome::Cancelled => 12,
        AuditOutcome::ConfirmationDeclined => 13,
        AuditOutcome::InvalidRequest => 14,
        AuditOutcome::Unavailable => 15,
        AuditOutcome::ApprovalPending => 16,
        AuditOutcome::ApprovalGranted => 17,
        AuditOutcome::ApprovalRejected => 18,
        AuditOutcome::ApprovalRefused => 19,
        AuditOutcome::DefinitionHeld => 20,
    }
}

/// Whether a call with this outcome ran its tool (and so is timed).
#[inline]
fn ran(outcome: AuditOutcome) -> bool {
    matches!(
        outcome,
        AuditOutcome::Executed
            | AuditOutcome::Failed
            | AuditOutcome::TimedOut
            | AuditOutcome::Cancelled
    )
}

/// The counters of one tool (or of the calls counted under no tool).
#[derive(Debug)]
struct ToolCounters {
    /// One row of outcomes per named channel, then one for every other channel.
    calls: Box<[AtomicU64]>,
    latency: Latency,
}

impl ToolCounters {
    fn new(channels: usize) -> ToolCounters {
        ToolCounters {
            calls: (0..(channels + 1) * OUTCOMES.len())
                .map(|_| AtomicU64::new(0))
                .collect(),
            latency: Latency::default(),
        }
    }

    #[inline]
    fn count(&self, channel: usize, record: &AuditRecord<'_>) {
        let slot = channel * OUTCOMES.len() + outcome_slot(record.outcome);
        self.calls[slot].fetch_add(record.count, Ordering::Relaxed);
        if ran(record.outcome) {
            self.latency.observe(record.took_ms);
        }
    }

    fn read(&self, tool: Option<Arc<str>>, channels: &[Arc<str>]) -> ToolCalls {
        let mut calls = Vec::new();
        for (slot, counter) in self.calls.iter().enumerate() {
            let count = counter.load(Ordering::Relaxed);
            if count == 0 {
                continue;
            }
            calls.push(CallCount {
                channel: channels.get(slot / OUTCOMES.len()).cloned(),
                outcome: OUTCOMES[slot % OUTCOMES.len()],
                count,
            });
        }
        ToolCalls {
            tool,
            calls,
            latency: self.latency.read(),
        }
    }
}

/// The tools counted so far, by name.
type ToolMap = HashMap<Arc<str>, Arc<ToolCounters>, foldhash::fast::RandomState>;

/// What the counts know once they follow a registry.
struct Followed {
    registry: Weak<ToolRegistry>,
    /// The channels with a row of their own, in the gate's order.
    channels: Box<[Arc<str>]>,
    /// Replaced whole (under `adding`) when a tool is counted for the first time.
    tools: ArcSwap<ToolMap>,
    /// Calls of names that are not (or no longer can be) a counted tool.
    unnamed: Arc<ToolCounters>,
    adding: Mutex<()>,
}

impl Followed {
    /// The row of `channel`: its own when the gate names it, else the last.
    #[inline]
    fn channel_row(&self, channel: &str) -> usize {
        self.channels
            .iter()
            .position(|named| **named == *channel)
            .unwrap_or(self.channels.len())
    }

    /// The counters of a name not counted yet: new ones when the registry has a tool by
    /// that name and there is room, else the unnamed ones.
    #[cold]
    fn counters_of_new(&self, name: &str) -> Arc<ToolCounters> {
        let registered = self
            .registry
            .upgrade()
            .is_some_and(|registry| registry.has(name));
        if !registered {
            return Arc::clone(&self.unnamed);
        }
        let _adding = self.adding.lock();
        let tools = self.tools.load();
        if let Some(counters) = tools.get(name) {
            return Arc::clone(counters);
        }
        if tools.len() >= MAX_COUNTED_TOOLS {
            return Arc::clone(&self.unnamed);
        }
        let counters = Arc::new(ToolCounters::new(self.channels.len()));
        let mut grown = ToolMap::clone(&tools);
        grown.insert(Arc::from(name), Arc::clone(&counters));
        self.tools.store(Arc::new(grown));
        counters
    }
}

/// Tool calls counted by tool, channel and outcome, and timed; fed by a
/// [`CountingAuditSink`], read with [`read`](Self::read). See the module documentation.
///
/// ```
/// use std::sync::Arc;
/// use milpa::audit::{CallCounts, CountingAuditSink, MemoryAuditSink};
/// use milpa::{ToolContext, ToolDefinition, ToolRegistry};
/// use serde_json::json;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let counts = Arc::new(CallCounts::new());
/// let sink = CountingAuditSink::new(Arc::new(MemoryAuditSink::new()), Arc::clone(&counts));
/// let mut registry = ToolRegistry::builder().audit_sink(Arc::new(sink)).build();
/// registry.register(ToolDefinition::builder("ping").sync(|_, _| json!("pong"))).unwrap();
/// let registry = Arc::new(registry);
/// counts.follow(&registry);
///
/// registry.call("ping", json!({}), &ToolContext::cli()).await;
/// registry.call("pong", json!({}), &ToolContext::cli()).await;
/// let tools = counts.read();
/// let ping = tools.iter().find(|t| t.tool.as_deref() == Some("ping")).unwrap();
/// assert_eq!(ping.calls[0].outcome.as_str(), "executed");
/// assert_eq!(ping.calls[0].channel.as_deref(), Some("cli"));
/// assert_eq!(ping.latency.count, 1);
/// // An unknown name is counted, under no tool.
/// let unknown = tools.iter().find(|t| t.tool.is_none()).unwrap();
/// assert_eq!(unknown.calls[0].outcome.as_str(), "not_found");
/// # });
/// ```
#[derive(Default)]
pub struct CallCounts {
    followed: OnceLock<Followed>,
}

impl std::fmt::Debug for CallCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = f.debug_struct("CallCounts");
        if let Some(followed) = self.followed.get() {
            out.field("channels", &followed.channels)
                .field("tools", &followed.tools.load().len());
        }
        out.finish_non_exhaustive()
    }
}

impl CallCounts {
    /// Counts that count nothing until they [follow](Self::follow) a registry.
    pub fn new() -> CallCounts {
        CallCounts::default()
    }

    /// Counts the calls of `registry` from now on: its tools' names and its policy gate's
    /// channels become labels (see the module documentation). Records seen before are not
    /// counted (a sink is wired before its registry is built), and a second call changes
    /// nothing. The counts hold the registry weakly: a registry dropped leaves later names
    /// unnamed.
    pub fn follow(&self, registry: &Arc<ToolRegistry>) {
        let channels: Box<[Arc<str>]> = registry.policy_gate().channels().map(Arc::from).collect();
        let unnamed = Arc::new(ToolCounters::new(channels.len()));
        let _ = self.followed.set(Followed {
            registry: Arc::downgrade(registry),
            channels,
            tools: ArcSwap::default(),
            unnamed,
            adding: Mutex::new(()),
        });
    }

    /// Counts one audit record (nothing unless it is a tool call's and the counts follow a
    /// registry).
    #[inline]
    pub fn count(&self, record: &AuditRecord<'_>) {
        if record.kind != Access::CallTool {
            return;
        }
        let Some(followed) = self.followed.get() else {
            return;
        };
        let channel = followed.channel_row(record.channel);
        let tools = followed.tools.load();
        match tools.get(record.tool) {
            Some(counters) => counters.count(channel, record),
            None => {
                drop(tools);
                followed.counters_of_new(record.tool).count(channel, record);
            }
        }
    }

    /// Every tool's counts as they stand, by tool name, then what was counted under no
    /// tool (when anything was). Counts that are zero are left out.
    pub fn read(&self) -> Vec<ToolCalls> {
        let Some(followed) = self.followed.get() else {
            return Vec::new();
        };
        let tools = followed.tools.load();
        let mut named: Vec<(&Arc<str>, &Arc<ToolCounters>)> = tools.iter().collect();
        named.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let mut read: Vec<ToolCalls> = named
            .into_iter()
            .map(|(name, counters)| counters.read(Some(Arc::clone(name)), &followed.channels))
            .collect();
        let unnamed = followed.unnamed.read(None, &followed.channels);
        if !unnamed.calls.is_empty() {
            read.push(unnamed);
        }
        read
    }
}

/// One tool's counts, read by [`CallCounts::read`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolCalls {
    /// The tool; `None` for the calls of names that are no counted tool.
    pub tool: Option<Arc<str>>,
    /// The non-zero counts, by channel and outcome.
    pub calls: Vec<CallCount>,
    /// How long the calls that ran the tool took (executed, failed, timed out or cancelled
    /// while running), from the audit records' `took_ms`.
    pub latency: LatencyHistogram,
}

/// How many calls of one tool, on one channel, ended one way.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallCount {
    /// The channel; `None` for every channel the policy gate has no policy for.
    pub channel: Option<Arc<str>>,
    /// How the calls ended.
    pub outcome: AuditOutcome,
    /// How many.
    pub count: u64,
}

/// Counts each tool call's audit record into [`CallCounts`], then hands it to the sink it
/// wraps. Put it outermost, so that it sees every record before any folding.
pub struct CountingAuditSink {
    inner: Arc<dyn AuditSink>,
    counts: Arc<CallCounts>,
}

impl std::fmt::Debug for CountingAuditSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CountingAuditSink")
            .field("counts", &self.counts)
            .finish_non_exhaustive()
    }
}

impl CountingAuditSink {
    /// Counts into `counts` in front of `inner`.
    pub fn new(inner: Arc<dyn AuditSink>, counts: Arc<CallCounts>) -> CountingAuditSink {
        CountingAuditSink { inner, counts }
    }
}

impl AuditSink for CountingAuditSink {
    #[inline]
    fn record(&self, record: &AuditRecord<'_>) {
        self.counts.count(record);
        self.inner.record(record);
    }

    fn flush(&self) {
        self.inner.flush();
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::audit::{MemoryAuditSink, Redactor};
    use crate::context::ToolContext;
    use crate::definition::{ToolDefinition, ToolError};

    #[test]
    fn the_outcome_table_follows_the_slots() {
        for (slot, outcome) in OUTCOMES.iter().enumerate() {
            assert_eq!(outcome_slot(*outcome), slot, "{outcome:?}");
        }
    }

    fn registry(counts: &Arc<CallCounts>) -> Arc<ToolRegistry> {
        let sink = CountingAuditSink::new(Arc::new(MemoryAuditSink::new()), Arc::clone(counts));
        let mut registry = ToolRegistry::builder()
            .audit_sink(Arc::new(sink))
            .channel_policy("ops-bot", crate::policy::ChannelPolicy::CLI)
            .build();
        registry
            .register(ToolDefinition::builder("ok").sync(|_, _| json!("fine")))
            .unwrap();
        registry
            .register(
                ToolDefinition::builder("boom")
                    .sync(|_, _| Err::<serde_json::Value, _>(ToolError::new("it broke"))),
            )
            .unwrap();
        Arc::new(registry)
    }

    fn count_of(
        read: &[ToolCalls],
        tool: Option<&str>,
        channel: Option<&str>,
        outcome: &str,
    ) -> u64 {
        read.iter()
            .filter(|t| t.tool.as_deref() == tool)
            .flat_map(|t| &t.calls)
            .filter(|c| c.channel.as_deref() == channel && c.outcome.as_str() == outcome)
            .map(|c| c.count)
            .sum()
    }

    #[tokio::test]
    async fn calls_count_by_tool_channel_and_outcome() {
        let counts = Arc::new(CallCounts::new());
        let registry = registry(&counts);
        // Before `follow` nothing is counted.
        registry.call("ok", json!({}), &ToolContext::cli()).await;
        assert!(counts.read().is_empty());

        counts.follow(&registry);
        let cli = ToolContext::cli();
        let bot = ToolContext::builder("ops-bot").build();
        let stranger = ToolContext::builder("pager").build();
        registry.call("ok", json!({}), &cli).await;
        registry.call("ok", json!({}), &cli).await;
        registry.call("ok", json!({"x": 1}), &bot).await;
        registry.call("boom", json!({}), &cli).await;
        registry.call("ok", json!({}), &stranger).await;
        for name in ["nope", "also-nope", "ok\n"] {
            registry.call(name, json!({}), &cli).await;
        }

        let read = counts.read();
        assert_eq!(count_of(&read, Some("ok"), Some("cli"), "executed"), 2);
        assert_eq!(count_of(&read, Some("ok"), Some("ops-bot"), "executed"), 1);
        assert_eq!(count_of(&read, Some("boom"), Some("cli"), "failed"), 1);
        // A channel without a policy fails closed (anonymous: denied), counted under no
        // channel.
        assert_eq!(count_of(&read, Some("ok"), None, "denied"), 1);
        // Unknown names are one bucket, whatever they were.
        assert_eq!(count_of(&read, None, Some("cli"), "not_found"), 3);
        assert_eq!(
            read.iter().map(|t| t.tool.as_deref()).collect::<Vec<_>>(),
            [Some("boom"), Some("ok"), None]
        );
        let ok = read
            .iter()
            .find(|t| t.tool.as_deref() == Some("ok"))
            .unwrap();
        assert_eq!(
            ok.latency.count, 3,
            "the denied call ran nothing: not timed"
        );
        let unnamed = read.iter().find(|t| t.tool.is_none()).unwrap();
        assert_eq!(unnamed.latency.count, 0);
    }

    #[tokio::test]
    async fn past_the_bound_new_tools_count_under_no_tool() {
        let counts = Arc::new(CallCounts::new());
        let sink = CountingAuditSink::new(Arc::new(MemoryAuditSink::new()), Arc::clone(&counts));
        let mut registry = ToolRegistry::builder().audit_sink(Arc::new(sink)).build();
        for n in 0..=MAX_COUNTED_TOOLS {
            registry
                .register(ToolDefinition::builder(format!("t{n}")).sync(|_, _| json!(1)))
                .unwrap();
        }
        let registry = Arc::new(registry);
        counts.follow(&registry);
        for n in 0..=MAX_COUNTED_TOOLS {
            registry
                .call(&format!("t{n}"), json!({}), &ToolContext::cli())
                .await;
        }
        // The first tool keeps its counters when called again.
        registry.call("t0", json!({}), &ToolContext::cli()).await;
        let read = counts.read();
        assert_eq!(
            read.len(),
            MAX_COUNTED_TOOLS + 1,
            "named ones, then the unnamed"
        );
        assert_eq!(count_of(&read, Some("t0"), Some("cli"), "executed"), 2);
        let last = format!("t{MAX_COUNTED_TOOLS}");
        assert_eq!(count_of(&read, Some(&last), Some("cli"), "executed"), 0);
        assert_eq!(count_of(&read, None, Some("cli"), "executed"), 1);
    }

    #[test]
    fn reads_and_prompts_are_not_tool_calls() {
        let counts = Arc::new(CallCounts::new());
        let registry = registry(&counts);
        counts.follow(&registry);
        let redactor = Redactor::default();
        let args = json!({});
        let read = AuditRecord {
            request_id: "r",
            channel: "cli",
            tool: "ok",
            kind: Access::ReadResource,
            principal: None,
            outcome: AuditOutcome::Executed,
            success: true,
            code: None,
            error: None,
            took_ms: 3,
            timeout_exceeded: false,
            args: &args,
            redactor: &redactor,
            count: 1,
            ip: None,
            max_args_bytes: 1024,
        };
        counts.count(&read);
        assert!(counts.read().is_empty());
        // A folded record stands for `count` calls.
        counts.count(&AuditRecord {
            kind: Access::CallTool,
            outcome: AuditOutcome::Denied,
            count: 7,
            ..read
        });
        assert_eq!(
            count_of(&counts.read(), Some("ok"), Some("cli"), "denied"),
            7
        );
    }
}
