//! The executor visits stages in `StepKind::ORDER`, and each terminal path stops where it
//! should and then audits.

mod support;

use std::sync::Arc;

use milpa::events::Dispatcher;
use milpa::rate_limit::{InMemoryRateLimiter, Quota};
use milpa::{StepKind, ToolContext, ToolRegistry};
use serde_json::{Value, json};
use std::time::Duration;
use support::Runs;

use StepKind::*;

fn assert_follows_the_table(steps: &[StepKind]) {
    let positions: Vec<usize> = steps
        .iter()
        .map(|s| StepKind::ORDER.iter().position(|o| o == s).unwrap())
        .collect();
    assert!(
        positions.windows(2).all(|w| w[0] < w[1]),
        "out of order: {steps:?}"
    );
    assert_eq!(
        steps.last(),
        Some(&Audit),
        "every path ends in audit: {steps:?}"
    );
    assert_eq!(steps.first(), Some(&Resolve));
}

#[tokio::test]
async fn each_terminal_path_visits_a_prefix_of_the_table_then_audit() {
    let runs = Runs::default();
    let dispatcher = Arc::new(Dispatcher::new());
    let mut registry = ToolRegistry::builder()
        .dispatcher(dispatcher.clone())
        .rate_limiter(Arc::new(InMemoryRateLimiter::new()))
        .tool_quota("limited", Quota::new(1, Duration::from_secs(60)))
        .build();
    support::register_every_path(&mut registry, &dispatcher, &runs);
    let cli = ToolContext::cli();
    let guest = ToolContext::mcp("r", Some("guest".into()), Vec::<String>::new());
    let plan = cli.as_plan();
    registry.call("limited", json!({}), &cli).await;
    let full = vec![
        Resolve,
        Validate,
        Clamp,
        Authorize,
        RateLimit,
        PlanMode,
        Confirm,
        EmitExecuting,
    ];
    let cases: Vec<(&str, Value, &ToolContext, Vec<StepKind>)> = vec![
        ("missing", json!({}), &cli, vec![Resolve, Audit]),
        ("add", json!({}), &cli, vec![Resolve, Validate, Audit]),
        (
            "scoped",
            json!({}),
            &guest,
            vec![Resolve, Validate, Clamp, Authorize, Audit],
        ),
        (
            "limited",
            json!({}),
            &cli,
            vec![Resolve, Validate, Clamp, Authorize, RateLimit, Audit],
        ),
        (
            "add",
            json!({"a": 1, "b": 2}),
            &plan,
            vec![
                Resolve, Validate, Clamp, Authorize, RateLimit, PlanMode, Audit,
            ],
        ),
        (
            "confirm",
            json!({}),
            &cli,
            vec![
                Resolve, Validate, Clamp, Authorize, RateLimit, PlanMode, Confirm, Audit,
            ],
        ),
        (
            "cached",
            json!({}),
            &cli,
            [full.clone(), vec![Audit]].concat(),
        ),
        (
            "vetoed",
            json!({}),
            &cli,
            [full.clone(), vec![Audit]].concat(),
        ),
        (
            "add",
            json!({"a": 1, "b": 2}),
            &cli,
            StepKind::ORDER.to_vec(),
        ),
        ("boom", json!({}), &cli, StepKind::ORDER.to_vec()),
    ];
    for (tool, args, ctx, expected) in cases {
        let (_, trace) = registry.call_traced(tool, args, ctx).await;
        let steps = trace.steps();
        assert_follows_the_table(&steps);
        assert_eq!(steps, expected, "{tool}");
    }
}

#[test]
fn the_table_has_the_eleven_stages_in_the_spec_order() {
    let names: Vec<&str> = StepKind::ORDER.iter().map(|s| s.as_str()).collect();
    assert_eq!(
        names,
        [
            "resolve",
            "validate",
            "clamp",
            "authorize",
            "rate_limit",
            "plan_mode",
            "confirm",
            "emit_executing",
            "execute",
            "contain_exception",
            "audit"
        ]
    );
}
