//! The result-size cap: a tool result larger than `max_result_bytes` (JSON bytes, escapes
//! counted) fails the call with `RESULT_TOO_LARGE`, audited as failed.

mod support;

use milpa::audit::AuditOutcome;
use milpa::{ErrorCode, ToolContext, ToolDefinition, ToolRegistry, ToolResult};
use serde_json::{Value, json};
use support::{audited, only_record};

fn text_tool() -> ToolDefinition {
    ToolDefinition::builder("emit").sync(|args, _| {
        let unit = args["unit"].as_str().unwrap_or("x");
        Value::String(unit.repeat(args["count"].as_u64().unwrap_or(0) as usize))
    })
}

#[tokio::test]
async fn a_result_over_the_default_cap_fails_and_is_audited() {
    let (mut registry, sink) = audited(ToolRegistry::builder());
    registry.register(text_tool()).unwrap();
    let result = registry
        .call(
            "emit",
            json!({"count": 5 * 1024 * 1024}),
            &ToolContext::cli(),
        )
        .await;
    assert!(!result.success);
    assert_eq!(result.code(), Some(&ErrorCode::ResultTooLarge));
    assert_eq!(
        result.error.as_deref(),
        Some(
            "Tool 'emit' returned a result larger than 4194304 bytes (the registry's max_result_bytes); it was not returned"
        )
    );
    assert_eq!(result.data, Value::Null);
    let record = only_record(&sink);
    assert_eq!(record.outcome, AuditOutcome::Failed);
    assert_eq!(record.code, Some(ErrorCode::ResultTooLarge));
    assert_eq!(
        serde_json::to_value(&result).unwrap()["meta"]["code"],
        "RESULT_TOO_LARGE"
    );

    // Just under the cap passes.
    let ok = registry
        .call(
            "emit",
            json!({"count": 4 * 1024 * 1024 - 2}),
            &ToolContext::cli(),
        )
        .await;
    assert!(ok.success);
}

#[tokio::test]
async fn the_cap_counts_escaped_bytes_and_every_part_of_the_result() {
    let (mut registry, _) = audited(ToolRegistry::builder().max_result_bytes(1000));
    registry.register(text_tool()).unwrap();
    registry
        .register(ToolDefinition::builder("chatty").sync(|args, _| {
            let n = args["n"].as_u64().unwrap_or(0) as usize;
            ToolResult::success(json!(1))
                .with_message("m".repeat(n))
                .with_meta("extra", json!(["z".repeat(n)]))
        }))
        .unwrap();
    let ctx = ToolContext::cli();
    // 200 NULs are 200 bytes of text but 1 202 bytes of JSON.
    let nuls = registry
        .call("emit", json!({"unit": "\u{0}", "count": 200}), &ctx)
        .await;
    assert_eq!(nuls.code(), Some(&ErrorCode::ResultTooLarge));
    let plain = registry
        .call("emit", json!({"unit": "a", "count": 200}), &ctx)
        .await;
    assert!(plain.success);
    // Message and meta count too.
    let small = registry.call("chatty", json!({"n": 100}), &ctx).await;
    assert!(small.success);
    let large = registry.call("chatty", json!({"n": 600}), &ctx).await;
    assert_eq!(large.code(), Some(&ErrorCode::ResultTooLarge));
}
