//! One scrape: the facts read for it ([`Scrape`]), turned into metric families and written in
//! the Prometheus text format (version 0.0.4) by the `prometheus` crate.
//!
//! The facts are read first (some of them from the store, asynchronously); the crate's
//! registry then gathers them through a collector made for this scrape alone, which keeps
//! the families in name order, their series in label order, and leaves out families with
//! no series (a tool never called has none).

use std::collections::HashMap;

use milpa::StoreErrorKind;
use milpa::audit::{LatencyHistogram, ToolCalls};
use prometheus::core::{Collector, Desc};
use prometheus::proto::{
    Bucket, Counter, Gauge, Histogram, LabelPair, Metric, MetricFamily, MetricType,
};
use prometheus::{Encoder, Registry, TextEncoder};

use super::UpstreamReport;

/// The label value of calls of names that are no counted tool (tool names are letters,
/// digits, `_`, `-` and `.`, so no tool is called this).
pub(crate) const UNNAMED_TOOL: &str = "(unknown)";
/// The label value of calls on channels without a policy of their own.
pub(crate) const OTHER_CHANNEL: &str = "(other)";

/// Open things of one kind, by class of caller.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ByCaller {
    pub anonymous: usize,
    pub authenticated: usize,
}

/// Everything one scrape reports, read just before it is written.
#[derive(Debug, Default)]
pub(crate) struct Scrape {
    /// Tool calls by tool, channel and outcome, and their latency (empty when the server
    /// counts no calls).
    pub calls: Vec<ToolCalls>,
    /// Calls holding one of the server's call slots.
    pub in_flight: usize,
    /// Approvals waiting for a decision on this server; `None` when the store did not say.
    pub approvals_pending: Option<usize>,
    /// Each upstream's state.
    pub upstreams: Vec<UpstreamReport>,
    /// Store errors made so far, by kind.
    pub store_errors: Vec<(StoreErrorKind, u64)>,
    /// HTTP sessions open.
    pub sessions: ByCaller,
    /// Long-lived HTTP streams open.
    pub streams: ByCaller,
}

/// The families a scrape writes: name, help, type and label names.
const FAMILIES: [(&str, &str, MetricType, &[&str]); 9] = [
    (
        "milpa_tool_calls_total",
        "Tool calls, one per audit record, by tool, channel and how the call ended.",
        MetricType::COUNTER,
        &["tool", "channel", "outcome"],
    ),
    (
        "milpa_tool_call_duration_seconds",
        "Time of the tool calls that ran their tool (executed, failed, timed out, cancelled), from the audit records' took_ms.",
        MetricType::HISTOGRAM,
        &["tool"],
    ),
    (
        "milpa_calls_in_flight",
        "Calls (tools/call, resources/read, prompts/get) running now over HTTP.",
        MetricType::GAUGE,
        &[],
    ),
    (
        "milpa_approvals_pending",
        "Approvals waiting for a person's decision on this server (counted up to 1000).",
        MetricType::GAUGE,
        &[],
    ),
    (
        "milpa_upstream_up",
        "Whether each upstream MCP server is up (1) or starting or down (0).",
        MetricType::GAUGE,
        &["upstream"],
    ),
    (
        "milpa_upstream_restarts_total",
        "How many times each upstream was launched again after its process died.",
        MetricType::COUNTER,
        &["upstream"],
    ),
    (
        "milpa_store_errors_total",
        "Errors the state store answered (SQLite or Redis), by kind.",
        MetricType::COUNTER,
        &["kind"],
    ),
    (
        "milpa_http_sessions",
        "MCP sessions open over HTTP, by class of caller.",
        MetricType::GAUGE,
        &["caller"],
    ),
    (
        "milpa_http_streams",
        "Long-lived HTTP streams open (GET streams, subscriptions, streamed tool calls), by class of caller.",
        MetricType::GAUGE,
        &["caller"],
    ),
];

impl Scrape {
    /// The scrape in the Prometheus text format.
    pub(crate) fn into_text(self) -> Result<String, prometheus::Error> {
        let registry = Registry::new();
        registry.register(Box::new(ScrapeCollector::new(self)?))?;
        let mut text = Vec::new();
        TextEncoder::new().encode(&registry.gather(), &mut text)?;
        String::from_utf8(text).map_err(|e| prometheus::Error::Msg(e.to_string()))
    }

    /// Each family's series, in [`FAMILIES`]' order.
    fn series(&self) -> [Vec<Metric>; 9] {
        let classes = |open: ByCaller| {
            vec![
                gauge(&[("caller", "anonymous")], open.anonymous as f64),
                gauge(&[("caller", "authenticated")], open.authenticated as f64),
            ]
        };
        let mut calls = Vec::new();
        let mut latency = Vec::new();
        for tool in &self.calls {
            let name = tool.tool.as_deref().unwrap_or(UNNAMED_TOOL);
            for count in &tool.calls {
                let channel = count.channel.as_deref().unwrap_or(OTHER_CHANNEL);
                calls.push(counter(
                    &[
                        ("tool", name),
                        ("channel", channel),
                        ("outcome", count.outcome.as_str()),
                    ],
                    count.count,
                ));
            }
            if tool.latency.count > 0 {
                latency.push(histogram(&[("tool", name)], &tool.latency));
            }
        }
        [
            calls,
            latency,
            vec![gauge(&[], self.in_flight as f64)],
            self.approvals_pending
                .map(|pending| gauge(&[], pending as f64))
                .into_iter()
                .collect(),
            self.upstreams
                .iter()
                .map(|u| gauge(&[("upstream", &u.name)], if u.up { 1.0 } else { 0.0 }))
                .collect(),
            self.upstreams
                .iter()
                .map(|u| counter(&[("upstream", &u.name)], u.restarts))
                .collect(),
            self.store_errors
                .iter()
                .map(|(kind, made)| counter(&[("kind", kind.as_str())], *made))
                .collect(),
            classes(self.sessions),
            classes(self.streams),
        ]
    }
}

/// Hands one scrape's families to the registry.
struct ScrapeCollector {
    descs: Vec<Desc>,
    families: Vec<MetricFamily>,
}

impl ScrapeCollector {
    fn new(scrape: Scrape) -> Result<ScrapeCollector, prometheus::Error> {
        let mut descs = Vec::with_capacity(FAMILIES.len());
        let mut families = Vec::with_capacity(FAMILIES.len());
        for ((name, help, kind, labels), series) in FAMILIES.iter().zip(scrape.series()) {
            let desc = Desc::new(
                (*name).to_owned(),
                (*help).to_owned(),
                labels.iter().map(|l| (*l).to_owned()).collect(),
                HashMap::new(),
            )?;
            let mut family = MetricFamily::default();
            family.set_name(desc.fq_name.clone());
            family.set_help(desc.help.clone());
            family.set_field_type(*kind);
            family.set_metric(series);
            descs.push(desc);
            families.push(family);
        }
        Ok(ScrapeCollector { descs, families })
    }
}

impl Collector for ScrapeCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        self.families.clone()
    }
}

fn labelled(labels: &[(&str, &str)]) -> Metric {
    Metric::from_label(
        labels
            .iter()
            .map(|(name, value)| {
                let mut pair = LabelPair::default();
                pair.set_name((*name).to_owned());
                pair.set_value((*value).to_owned());
                pair
            })
            .collect(),
    )
}

fn counter(labels: &[(&str, &str)], value: u64) -> Metric {
    let mut metric = labelled(labels);
    let mut counter = Counter::default();
    counter.set_value(value as f64);
    metric.set_counter(counter);
    metric
}

fn gauge(labels: &[(&str, &str)], value: f64) -> Metric {
    let mut metric = labelled(labels);
    let mut gauge = Gauge::default();
    gauge.set_value(value);
    metric.set_gauge(gauge);
    metric
}

fn histogram(labels: &[(&str, &str)], latency: &LatencyHistogram) -> Metric {
    let mut metric = labelled(labels);
    let mut histogram = Histogram::default();
    histogram.set_bucket(
        latency
            .buckets
            .iter()
            .map(|(bound_ms, calls)| {
                let mut bucket = Bucket::default();
                bucket.set_upper_bound(*bound_ms as f64 / 1000.0);
                bucket.set_cumulative_count(*calls);
                bucket
            })
            .collect(),
    );
    histogram.set_sample_count(latency.count);
    histogram.set_sample_sum(latency.sum_ms as f64 / 1000.0);
    metric.set_histogram(histogram);
    metric
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::process::{Command, Stdio};
    use std::sync::Arc;

    use milpa::audit::{CallCounts, CountingAuditSink, MemoryAuditSink};
    use milpa::policy::ChannelPolicy;
    use milpa::{ToolContext, ToolDefinition, ToolRegistry};
    use serde_json::json;

    use super::*;

    /// Calls counted on a registry with a channel whose name needs escaping in a label.
    async fn counted_calls() -> Vec<ToolCalls> {
        let counts = Arc::new(CallCounts::new());
        let sink = CountingAuditSink::new(Arc::new(MemoryAuditSink::new()), Arc::clone(&counts));
        let mut registry = ToolRegistry::builder()
            .audit_sink(Arc::new(sink))
            .channel_policy("say \"hi\"\\\n", ChannelPolicy::CLI)
            .build();
        registry
            .register(ToolDefinition::builder("notes.add").sync(|_, _| json!(1)))
            .unwrap();
        let registry = Arc::new(registry);
        counts.follow(&registry);
        let odd = ToolContext::builder("say \"hi\"\\\n").build();
        registry.call("notes.add", json!({}), &odd).await;
        registry
            .call("notes.add", json!({}), &ToolContext::cli())
            .await;
        registry.call("nope", json!({}), &ToolContext::cli()).await;
        counts.read()
    }

    fn scrape(calls: Vec<ToolCalls>) -> Scrape {
        Scrape {
            calls,
            in_flight: 2,
            approvals_pending: Some(1),
            upstreams: vec![
                UpstreamReport::new("files", true, 3),
                UpstreamReport::new("git", false, 0),
            ],
            store_errors: StoreErrorKind::ALL.iter().map(|k| (*k, 0)).collect(),
            sessions: ByCaller {
                anonymous: 1,
                authenticated: 4,
            },
            streams: ByCaller::default(),
        }
    }

    #[tokio::test]
    async fn every_family_is_written_with_its_series() {
        let text = scrape(counted_calls().await).into_text().unwrap();
        for line in [
            "# TYPE milpa_tool_calls_total counter",
            r#"milpa_tool_calls_total{tool="notes.add",channel="cli",outcome="executed"} 1"#,
            r#"milpa_tool_calls_total{tool="notes.add",channel="say \"hi\"\\\n",outcome="executed"} 1"#,
            r#"milpa_tool_calls_total{tool="(unknown)",channel="cli",outcome="not_found"} 1"#,
            "# TYPE milpa_tool_call_duration_seconds histogram",
            r#"milpa_tool_call_duration_seconds_bucket{tool="notes.add",le="0.001"} 2"#,
            r#"milpa_tool_call_duration_seconds_bucket{tool="notes.add",le="300"} 2"#,
            r#"milpa_tool_call_duration_seconds_bucket{tool="notes.add",le="+Inf"} 2"#,
            r#"milpa_tool_call_duration_seconds_count{tool="notes.add"} 2"#,
            "milpa_calls_in_flight 2",
            "milpa_approvals_pending 1",
            r#"milpa_upstream_up{upstream="files"} 1"#,
            r#"milpa_upstream_up{upstream="git"} 0"#,
            r#"milpa_upstream_restarts_total{upstream="files"} 3"#,
            r#"milpa_store_errors_total{kind="corrupt"} 0"#,
            r#"milpa_http_sessions{caller="authenticated"} 4"#,
            r#"milpa_http_streams{caller="anonymous"} 0"#,
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "no line {line:?} in\n{text}"
            );
        }
        // The unknown name's call ran nothing: no latency series for it.
        assert!(!text.contains(r#"milpa_tool_call_duration_seconds_count{tool="(unknown)"}"#));
        // Families in name order, each with its help.
        let families: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .map(|l| l.split(' ').next().unwrap())
            .collect();
        assert!(families.is_sorted(), "{families:?}");
        assert_eq!(families.len(), 9);
        assert_eq!(text.matches("# HELP ").count(), 9);
    }

    #[test]
    fn what_is_not_known_is_left_out() {
        let text = Scrape {
            approvals_pending: None,
            ..scrape(Vec::new())
        }
        .into_text()
        .unwrap();
        assert!(!text.contains("milpa_approvals_pending"), "{text}");
        assert!(!text.contains("milpa_tool_calls_total"), "{text}");
        assert!(text.contains("milpa_calls_in_flight 2"), "{text}");
    }

    /// Whether this runs under CI (`CI` set, as CI services set it: `true`, `1`, …).
    fn under_ci() -> bool {
        std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
    }

    /// promtool (Debian's `prometheus` package) finds nothing to say: no parse error, no
    /// lint problem. Skipped where it is not installed, except under CI (`CI=true`).
    #[tokio::test]
    async fn promtool_accepts_the_text() {
        let text = scrape(counted_calls().await).into_text().unwrap();
        let promtool = Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut promtool = match promtool {
            Ok(child) => child,
            Err(error) if under_ci() => {
                panic!("promtool must run under CI: {error} (Debian package `prometheus`)")
            }
            Err(error) => {
                eprintln!("skipping: promtool: {error} (install the `prometheus` package)");
                return;
            }
        };
        promtool
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        let out = promtool.wait_with_output().unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{said}\n{text}");
        assert_eq!(said.trim(), "", "promtool's findings on\n{text}");
    }
}
