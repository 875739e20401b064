//! `plan_mode`: validate and authorize, then return the plan; the tool never runs.

mod support;

use milpa::audit::AuditOutcome;
use milpa::{ErrorCode, ToolContext, ToolRegistry};
use serde_json::json;
use std::time::Duration;
use support::{Runs, audited, echo_args, echoing, only_record, two_ints};

#[tokio::test]
async fn plan_mode_returns_the_plan_and_runs_nothing() {
    let runs = Runs::default();
    let (mut registry, sink) = audited(ToolRegistry::builder());
    registry
        .register(echoing(
            echo_args("deploy")
                .input_schema(two_ints())
                .scopes(["ops:deploy"])
                .mutating(true)
                .requires_confirmation(true)
                .timeout(Duration::from_secs(5)),
            &runs,
        ))
        .unwrap();
    let ctx = ToolContext::cli().as_plan();
    let result = registry.call("deploy", json!({"a": 1, "b": 2}), &ctx).await;
    assert!(result.success);
    assert_eq!(
        result.data,
        json!({"plan": {
            "tool": "deploy",
            "mutating": true,
            "requires_confirmation": true,
            "scopes_required": ["ops:deploy"],
            "timeout": 5,
            "args": {"a": 1, "b": 2}
        }})
    );
    assert_eq!(runs.count(), 0);
    assert_eq!(only_record(&sink).outcome, AuditOutcome::Planned);
}

#[tokio::test]
async fn plan_mode_still_validates_and_authorizes() {
    let runs = Runs::default();
    let mut registry = ToolRegistry::new();
    registry
        .register(echoing(
            echo_args("deploy")
                .input_schema(two_ints())
                .scopes(["ops:deploy"]),
            &runs,
        ))
        .unwrap();
    let invalid = registry
        .call("deploy", json!({"a": 1}), &ToolContext::cli().as_plan())
        .await;
    assert_eq!(invalid.code(), Some(&ErrorCode::ValidationError));
    let ctx = ToolContext::mcp("r", Some("bot".into()), ["other"]).as_plan();
    let denied = registry.call("deploy", json!({"a": 1, "b": 2}), &ctx).await;
    assert_eq!(denied.code(), Some(&ErrorCode::Forbidden));
}
