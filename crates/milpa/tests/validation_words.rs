//! A refused argument said in the schema's words: the result's `message` puts the
//! schema's failures into words a person (or a model) reads, its `error` and code stay the
//! original's; a value the schema let through but the Rust parameter cannot hold says what
//! the parameter takes instead of serde's `expected u64`.

mod support;

use milpa::audit::AuditOutcome;
use milpa::{ErrorCode, ToolContext, ToolDefinition, ToolRegistry, tool};
use serde_json::{Value, json};
use support::{Runs, audited, echo_args, echoing, only_record};

fn notes_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": {"type": "integer", "minimum": 0},
            "text": {"type": "string", "minLength": 1, "maxLength": 20},
            "mode": {"type": "string", "enum": ["fast", "slow"]},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2}
        },
        "required": ["id"],
        "additionalProperties": false
    })
}

fn notes_tool(runs: &Runs) -> ToolDefinition {
    echoing(echo_args("note").input_schema(notes_schema()), runs)
}

#[tokio::test]
async fn a_schema_refusal_keeps_the_original_error_and_says_it_in_the_schemas_words() {
    let runs = Runs::default();
    let (mut registry, sink) = audited(ToolRegistry::builder());
    registry.register(notes_tool(&runs)).unwrap();
    let result = registry
        .call("note", json!({"id": "abc"}), &ToolContext::cli())
        .await;
    assert!(!result.success);
    assert_eq!(result.code(), Some(&ErrorCode::ValidationError));
    assert_eq!(
        result.error.as_deref(),
        Some("id: Expected integer, got string")
    );
    assert_eq!(
        result.message.as_deref(),
        Some("'id' must be an integer ≥ 0 (got a string)")
    );
    assert_eq!(runs.count(), 0);
    assert_eq!(only_record(&sink).outcome, AuditOutcome::InvalidArguments);
    // The JSON keeps the original's keys, in their order.
    let json = serde_json::to_value(&result).unwrap();
    let keys: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["success", "data", "message", "error", "meta"]);
    assert_eq!(json["data"], Value::Null);
    assert_eq!(json["meta"]["code"], "VALIDATION_ERROR");
}

#[tokio::test]
async fn every_failure_gets_a_line_in_the_originals_order() {
    let runs = Runs::default();
    let mut registry = ToolRegistry::new();
    registry.register(notes_tool(&runs)).unwrap();
    let cases = [
        (
            json!({"id": -1}),
            "id: Value too small (min: 0)",
            "'id' must be an integer ≥ 0 (got -1)",
        ),
        (
            json!({"id": 1, "mode": "medium"}),
            "mode: Value must be one of: fast, slow",
            r#"'mode' must be one of "fast", "slow""#,
        ),
        (
            json!({"id": 1, "text": ""}),
            "text: String too short (min: 1)",
            "'text' must be a string of 1 to 20 characters (got 0 characters)",
        ),
        (
            json!({"id": 1, "tags": ["a", 2]}),
            "tags[1]: Expected string, got integer",
            "'tags[1]' must be a string (got an integer)",
        ),
        (
            json!({"text": 5, "zz": true}),
            "Missing required field: id; text: Expected string, got integer; Unknown property: zz",
            "'id' is required (an integer ≥ 0)\n\
             'text' must be a string of 1 to 20 characters (got an integer)\n\
             unknown argument 'zz' (this tool takes id, text, mode, tags)",
        ),
    ];
    for (args, error, words) in cases {
        let result = registry.call("note", args, &ToolContext::cli()).await;
        assert_eq!(result.error.as_deref(), Some(error));
        assert_eq!(result.message.as_deref(), Some(words));
    }
    assert_eq!(runs.count(), 0);
}

#[tokio::test]
async fn the_words_never_repeat_a_string_the_caller_sent() {
    let runs = Runs::default();
    let mut registry = ToolRegistry::new();
    registry.register(notes_tool(&runs)).unwrap();
    let secret = "hunter2-SECRET";
    for args in [
        json!({"id": secret}),
        json!({"id": 1, "mode": secret}),
        json!({"id": 1, "text": secret.repeat(3)}),
        json!({"id": 1, "tags": [secret, secret, secret]}),
    ] {
        let result = registry.call("note", args, &ToolContext::cli()).await;
        let message = result.message.as_deref().unwrap();
        assert!(!message.contains(secret), "{message}");
    }
}

#[tokio::test]
async fn other_refusals_and_successes_carry_no_words() {
    let runs = Runs::default();
    let mut registry = ToolRegistry::new();
    registry.register(notes_tool(&runs)).unwrap();
    let ok = registry
        .call("note", json!({"id": 3}), &ToolContext::cli())
        .await;
    assert!(ok.success);
    assert_eq!(ok.message, None);
    let not_object = registry.call("note", json!([1]), &ToolContext::cli()).await;
    assert_eq!(not_object.code(), Some(&ErrorCode::ValidationError));
    assert_eq!(not_object.message, None);
    let missing = registry.call("nope", json!({}), &ToolContext::cli()).await;
    assert_eq!(missing.message, None);
}

/// Halves a byte.
#[tool]
fn halve(n: u8) -> u8 {
    n / 2
}

/// Counts down from a number the schema lets through as any integer.
#[tool]
fn countdown(from: i32, step: Option<u16>) -> i64 {
    i64::from(from) / i64::from(step.unwrap_or(1).max(1))
}

#[tokio::test]
async fn a_value_the_parameter_cannot_hold_says_what_it_takes_not_serdes_words() {
    let mut registry = ToolRegistry::new();
    registry.register(halve_tool()).unwrap();
    registry.register(countdown_tool()).unwrap();
    let cases = [
        (
            "countdown",
            json!({"from": 3_000_000_000u64}),
            "from: Expected an integer from -2147483648 to 2147483647, got 3000000000",
        ),
        (
            "countdown",
            json!({"from": 1e30}),
            "from: Expected an integer from -2147483648 to 2147483647, got 1e+30",
        ),
    ];
    for (tool, args, error) in cases {
        let result = registry.call(tool, args, &ToolContext::cli()).await;
        assert_eq!(result.code(), Some(&ErrorCode::ValidationError), "{tool}");
        let message = result.error.as_deref().unwrap();
        assert_eq!(message, error);
        assert!(!message.contains("expected i32") && !message.contains("expected u16"));
    }
    // A `u8`'s and a `u16`'s schemas bound them: the schema refuses first, in both sets of
    // words.
    let result = registry
        .call("halve", json!({"n": 300}), &ToolContext::cli())
        .await;
    assert_eq!(result.code(), Some(&ErrorCode::ValidationError));
    assert_eq!(
        result.error.as_deref(),
        Some("n: Value too large (max: 255)")
    );
    assert_eq!(
        result.message.as_deref(),
        Some("'n' must be an integer from 0 to 255 (got 300)")
    );
    let result = registry
        .call(
            "countdown",
            json!({"from": 1, "step": 70000}),
            &ToolContext::cli(),
        )
        .await;
    assert_eq!(
        result.message.as_deref(),
        Some("'step' must be an integer from 0 to 65535 or null (got 70000)")
    );
    let fine = registry
        .call(
            "countdown",
            json!({"from": 10, "step": 2}),
            &ToolContext::cli(),
        )
        .await;
    assert_eq!(fine.data, json!(5));
}
