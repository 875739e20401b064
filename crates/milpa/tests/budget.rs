//! Token budgeting, on the spec's worked numbers.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use milpa::budget::{DEFAULT_MODEL_LIMIT, MODEL_LIMITS, TokenEstimator};
use milpa::{ToolContext, ToolDefinition, ToolRegistry, ToolSummary};
use serde_json::{Value, json};

/// A summary named `name` (one character) that costs exactly `tokens`.
fn sized(name: &str, tokens: u64) -> ToolSummary {
    assert_eq!(name.len(), 1);
    // `{"name":"a","description":"","inputSchema":{"type":"object"}}` is 61 bytes.
    let description = "x".repeat(tokens as usize * 4 - 61);
    let summary = ToolSummary {
        name: name.into(),
        description,
        input_schema: json!({"type": "object"}),
        version: None,
        output_schema: None,
    };
    assert_eq!(TokenEstimator::new().estimate_tool_tokens(&summary), tokens);
    summary
}

fn definition(summary: &ToolSummary) -> ToolDefinition {
    ToolDefinition::builder(summary.name.clone())
        .description(summary.description.clone())
        .sync(|_args: &Value, _ctx: &ToolContext| json!(null))
}

fn names(summaries: &[ToolSummary]) -> Vec<&str> {
    summaries.iter().map(|s| s.name.as_str()).collect()
}

#[test]
fn a_token_is_four_bytes_rounded_up() {
    let estimator = TokenEstimator::new();
    assert_eq!(estimator.estimate_tokens(""), 0);
    assert_eq!(estimator.estimate_tokens("abcd"), 1);
    assert_eq!(estimator.estimate_tokens("abcde"), 2);
    // Bytes, not characters: "é" is two bytes.
    assert_eq!(estimator.estimate_tokens("éé"), 1);
    assert_eq!(estimator.estimate_tokens("ééé"), 2);
}

#[test]
fn the_worked_example_is_89_bytes_and_23_tokens() {
    let summary = ToolSummary::from_definition(
        &ToolDefinition::builder("zero")
            .description("no params")
            .input_schema(json!({"type": "object", "properties": {}}))
            .sync(|_args: &Value, _ctx: &ToolContext| json!(null)),
    );
    let text = summary.to_compact_json();
    assert_eq!(
        text,
        r#"{"name":"zero","description":"no params","inputSchema":{"type":"object","properties":{}}}"#
    );
    assert_eq!(text.len(), 89);
    assert_eq!(TokenEstimator::new().estimate_tool_tokens(&summary), 23);
}

#[test]
fn slashes_are_counted_as_sent_unescaped() {
    let summary = ToolSummary {
        name: "a".into(),
        description: "a/b/c/d".into(),
        input_schema: json!({"type": "object"}),
        version: None,
        output_schema: None,
    };
    // 61 + 7 bytes: the original's `\/` escaping would have made it 71 (18 tokens).
    assert_eq!(summary.to_compact_json().len(), 68);
    assert_eq!(TokenEstimator::new().estimate_tool_tokens(&summary), 17);
}

#[test]
fn model_limits_use_the_longest_matching_prefix() {
    let estimator = TokenEstimator::new();
    assert_eq!(estimator.model_limit("gpt-4"), 8192);
    assert_eq!(estimator.model_limit("gpt-4o"), 128_000);
    assert_eq!(estimator.model_limit("gpt-4o-2024-05-13"), 128_000);
    assert_eq!(estimator.model_limit("gpt-4-32k-0613"), 32768);
    assert_eq!(estimator.model_limit("gpt-4-turbo-preview"), 128_000);
    assert_eq!(estimator.model_limit("gpt-4-0613"), 8192);
    assert_eq!(estimator.model_limit("claude-sonnet-4"), 200_000);
    assert_eq!(estimator.model_limit("claude-3-opus-20240229"), 200_000);
    assert_eq!(estimator.model_limit("claude-2.1"), 100_000);
    assert_eq!(estimator.model_limit("mistral-large"), 8192);
    assert_eq!(estimator.model_limit(""), DEFAULT_MODEL_LIMIT);
    assert_eq!(MODEL_LIMITS.len(), 13);

    let custom = TokenEstimator::new()
        .with_model_limit("llama-3", 8000)
        .with_model_limit("gpt-4", 10_000);
    assert_eq!(custom.model_limit("llama-3-70b"), 8000);
    assert_eq!(custom.model_limit("gpt-4-0613"), 10_000);
    assert_eq!(custom.model_limit("gpt-4o-mini"), 128_000);
}

#[test]
fn the_budget_is_thirty_percent_rounded_down() {
    let estimator = TokenEstimator::new();
    assert_eq!(estimator.tool_budget("gpt-3.5-turbo"), 1228);
    assert_eq!(estimator.tool_budget("gpt-4"), 2457);
    assert_eq!(estimator.tool_budget("claude-3-haiku"), 60_000);
    assert_eq!(estimator.tool_budget("unknown"), 2457);
}

#[test]
fn checking_a_budget_reports_use_overflow_and_percent() {
    let estimator = TokenEstimator::new();
    let tools = [sized("a", 500), sized("b", 500), sized("c", 500)];
    let check = estimator.check_budget(&tools, "gpt-3.5-turbo");
    assert!(!check.fits);
    assert_eq!(check.used, 1500);
    assert_eq!(check.budget, 1228);
    assert_eq!(check.overflow, 272);
    assert_eq!(check.percent, 122.15);
    assert_eq!(check.model_limit, 4096);

    let fits = estimator.check_budget(&tools[..2], "gpt-3.5-turbo");
    assert!(fits.fits);
    assert_eq!(fits.overflow, 0);
    assert_eq!(fits.percent, 81.43);

    let zero = TokenEstimator::new().with_model_limit("nano", 1);
    let check = zero.check_budget(&tools, "nano");
    assert_eq!(check.budget, 0);
    assert_eq!(check.percent, 100.0);
    let empty = zero.check_budget(&[], "nano");
    assert!(empty.fits);
}

#[test]
fn estimates_are_per_tool_and_summed() {
    let estimate = TokenEstimator::new().estimate_tools_tokens(&[sized("a", 20), sized("b", 30)]);
    assert_eq!(estimate.total, 50);
    assert_eq!(
        serde_json::to_value(&estimate).unwrap(),
        json!({"total": 50, "per_tool": [{"name": "a", "tokens": 20}, {"name": "b", "tokens": 30}]})
    );
}

#[test]
fn selection_skips_a_tool_that_does_not_fit_and_keeps_going() {
    let selection = TokenEstimator::new().select_within_budget(
        vec![sized("a", 800), sized("b", 600), sized("c", 400)],
        "gpt-3.5-turbo",
    );
    assert_eq!(names(&selection.selected), ["a", "c"]);
    assert_eq!(selection.excluded, ["b"]);
    assert_eq!(selection.tokens_used, 1200);
    assert_eq!(selection.budget, 1228);
}

#[test]
fn the_report_reads_as_the_original() {
    let estimator = TokenEstimator::new();
    let report = estimator.usage_report(&[sized("a", 30), sized("b", 50)], "gpt-4");
    assert_eq!(
        report,
        "=== Token Usage Report ===\n\
         Model: gpt-4\n\
         Context Limit: 8192 tokens\n\
         Tool Budget (30%): 2457 tokens\n\
         \n\
         Tools Registered: 2\n\
         Tokens Used: 80 tokens\n\
         Budget Usage: 3.26%\n\
         \n\
         Status: ✅ Within budget\n\
         \n\
         Top 10 Tools by Token Usage:\n  \
         - b: 50 tokens\n  \
         - a: 30 tokens"
    );

    let over = estimator.usage_report(
        &[sized("a", 500), sized("b", 500), sized("c", 500)],
        "gpt-3.5-turbo",
    );
    assert!(over.contains("\nBudget Usage: 122.15%\n"));
    assert!(over.contains("\nStatus: ⚠️ OVER BUDGET by 272 tokens\n\n"));
    // Ties keep their order.
    assert!(over.ends_with(
        "Top 10 Tools by Token Usage:\n  - a: 500 tokens\n  - b: 500 tokens\n  - c: 500 tokens"
    ));
}

#[test]
fn the_report_lists_at_most_ten_tools() {
    let names = "abcdefghijkl";
    let tools: Vec<ToolSummary> = names
        .chars()
        .enumerate()
        .map(|(i, c)| sized(&c.to_string(), 20 + i as u64))
        .collect();
    let report = TokenEstimator::new().usage_report(&tools, "gpt-4o");
    let listed: Vec<&str> = report
        .lines()
        .skip_while(|l| !l.starts_with("Top 10"))
        .skip(1)
        .collect();
    assert_eq!(listed.len(), 10);
    assert_eq!(listed[0], "  - l: 31 tokens");
    assert_eq!(listed[9], "  - c: 22 tokens");
    assert!(report.contains("\nTools Registered: 12\n"));
}

/// What `tracing` wrote, through a global subscriber installed once for this test binary.
///
/// Scoped subscribers (`with_default`) race with other test threads over tracing's
/// per-callsite interest cache, so the log lines are told apart by their model id instead.
fn global_logs() -> String {
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);
    impl Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    static BUFFER: OnceLock<Buffer> = OnceLock::new();
    let buffer = BUFFER.get_or_init(|| {
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::set_global_default(subscriber).unwrap();
        buffer
    });
    let bytes = buffer.0.lock().unwrap().clone();
    String::from_utf8(bytes).unwrap()
}

/// The lines logged for `model`.
fn logged_for(model: &str) -> Vec<String> {
    global_logs()
        .lines()
        .filter(|line| line.contains(&format!("model=\"{model}\"")))
        .map(str::to_owned)
        .collect()
}

fn registry_of(summaries: &[ToolSummary]) -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    for summary in summaries {
        registry.register(definition(summary)).unwrap();
    }
    registry
}

#[test]
fn the_registry_puts_priority_tools_first_in_registration_order() {
    let registry = registry_of(&[sized("a", 500), sized("b", 500), sized("c", 500)]);

    let plain = registry.tools_within_budget("gpt-3.5-turbo", None);
    assert_eq!(names(&plain.selected), ["a", "b"]);
    assert_eq!(plain.excluded, ["c"]);
    assert_eq!(plain.tokens_used, 1000);
    assert_eq!(plain.budget, 1228);

    let c_first = registry.tools_within_budget("gpt-3.5-turbo", Some(&["c"]));
    assert_eq!(names(&c_first.selected), ["c", "a"]);
    assert_eq!(c_first.excluded, ["b"]);

    // The priority list's own order does not matter.
    let both = registry.tools_within_budget("gpt-3.5-turbo", Some(&["c", "b", "unknown"]));
    assert_eq!(names(&both.selected), ["b", "c"]);
    assert_eq!(both.excluded, ["a"]);

    let all = registry.tools_within_budget("claude-sonnet-4", Some(&[]));
    assert_eq!(names(&all.selected), ["a", "b", "c"]);
    assert!(all.excluded.is_empty());
}

#[test]
fn the_registry_warns_when_it_leaves_tools_out() {
    let tools: Vec<ToolSummary> = "abcdefg"
        .chars()
        .map(|c| sized(&c.to_string(), 300))
        .collect();
    let registry = registry_of(&tools);
    global_logs();
    // Prefixed ids keep gpt-3.5-turbo's budget and tell the log lines apart.
    let selection = registry.tools_within_budget("gpt-3.5-turbo-warn-a", None);
    assert_eq!(selection.excluded, ["e", "f", "g"]);
    let lines = logged_for("gpt-3.5-turbo-warn-a");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("WARN"), "{lines:?}");
    assert!(
        lines[0].contains("[ToolRegistry] Token budget exceeded. Excluded 3 tools: e, f, g"),
        "{lines:?}"
    );

    let many = registry_of(&[
        sized("a", 1300),
        sized("b", 1300),
        sized("c", 1300),
        sized("d", 1300),
        sized("e", 1300),
        sized("f", 1300),
    ]);
    many.tools_within_budget("gpt-3.5-turbo-warn-b", None);
    let lines = logged_for("gpt-3.5-turbo-warn-b");
    assert!(
        lines[0].contains("Excluded 6 tools: a, b, c, d, e..."),
        "{lines:?}"
    );

    registry.tools_within_budget("gpt-4o-warn-c", None);
    assert!(logged_for("gpt-4o-warn-c").is_empty());
}

#[test]
fn the_registry_wrappers_measure_all_tools() {
    let registry = registry_of(&[sized("a", 30), sized("b", 50)]);
    assert_eq!(registry.estimate_tokens().total, 80);
    let check = registry.check_token_budget("gpt-4");
    assert!(check.fits);
    assert_eq!(check.used, 80);
    assert_eq!(
        registry.token_usage_report("gpt-4"),
        TokenEstimator::new().usage_report(&registry.tool_summaries(), "gpt-4")
    );
}
