//! `resolve` and `validate`: unknown tools, schema failures, and what reaches the tool.

mod support;

use milpa::audit::AuditOutcome;
use milpa::{ErrorCode, RegistryError, ToolContext, ToolDefinition, ToolRegistry};
use serde_json::json;
use support::{Runs, add_tool, audited, echo_args, echoing, only_record};

#[tokio::test]
async fn an_unknown_tool_is_tool_not_found_and_audited() {
    let (registry, sink) = audited(ToolRegistry::builder());
    let result = registry
        .call("missing", json!({}), &ToolContext::cli())
        .await;
    assert_eq!(result.error.as_deref(), Some("Tool not found: missing"));
    assert_eq!(result.code(), Some(&ErrorCode::ToolNotFound));
    assert_eq!(only_record(&sink).outcome, AuditOutcome::NotFound);
}

#[tokio::test]
async fn schema_failures_use_the_original_messages_joined_with_semicolons() {
    let runs = Runs::default();
    let (mut registry, sink) = audited(ToolRegistry::builder());
    registry.register(add_tool(&runs)).unwrap();
    let result = registry
        .call("add", json!({"a": "2"}), &ToolContext::cli())
        .await;
    assert_eq!(result.code(), Some(&ErrorCode::ValidationError));
    assert_eq!(
        result.error.as_deref(),
        Some("Missing required field: b; a: Expected integer, got string")
    );
    assert_eq!(runs.count(), 0);
    assert_eq!(only_record(&sink).outcome, AuditOutcome::InvalidArguments);
}

#[tokio::test]
async fn floats_bools_null_and_objects_are_named_like_the_original() {
    let runs = Runs::default();
    let mut registry = ToolRegistry::new();
    registry.register(add_tool(&runs)).unwrap();
    let cases = [
        (json!({"a": 1.5, "b": 1}), "a: Expected integer, got double"),
        (
            json!({"a": true, "b": 1}),
            "a: Expected integer, got boolean",
        ),
        (json!({"a": null, "b": 1}), "a: Expected integer, got NULL"),
        (
            json!({"a": {}, "b": []}),
            "a: Expected integer, got object; b: Expected integer, got array",
        ),
    ];
    for (args, message) in cases {
        let result = registry.call("add", args, &ToolContext::cli()).await;
        assert_eq!(result.error.as_deref(), Some(message));
    }
    assert_eq!(runs.count(), 0);
}

#[tokio::test]
async fn arguments_must_be_an_object_and_null_means_none() {
    let runs = Runs::default();
    let mut registry = ToolRegistry::new();
    registry
        .register(echoing(echo_args("echo"), &runs))
        .unwrap();
    let result = registry
        .call("echo", json!([1, 2]), &ToolContext::cli())
        .await;
    assert_eq!(
        result.error.as_deref(),
        Some("Arguments must be a JSON object, got array")
    );
    let result = registry
        .call("echo", serde_json::Value::Null, &ToolContext::cli())
        .await;
    assert!(result.success);
    assert_eq!(result.data, json!({}));
}

#[tokio::test]
async fn nullable_properties_accept_null_and_enums_list_their_options() {
    let runs = Runs::default();
    let mut registry = ToolRegistry::new();
    let schema = json!({
        "type": "object",
        "properties": {
            "note": {"type": "string", "nullable": true},
            "mode": {"type": "string", "enum": ["fast", "safe"]}
        },
        "required": ["note"]
    });
    registry
        .register(echoing(echo_args("t").input_schema(schema), &runs))
        .unwrap();
    let ok = registry
        .call("t", json!({"note": null}), &ToolContext::cli())
        .await;
    assert!(ok.success, "{ok:?}");
    let bad = registry
        .call(
            "t",
            json!({"note": "x", "mode": "slow"}),
            &ToolContext::cli(),
        )
        .await;
    assert_eq!(
        bad.error.as_deref(),
        Some("mode: Value must be one of: fast, safe")
    );
}

#[tokio::test]
async fn unknown_properties_are_refused_but_confirm_token_is_not_an_argument() {
    let runs = Runs::default();
    let mut registry = ToolRegistry::new();
    let schema = json!({"type": "object", "properties": {"x": {"type": "integer"}}, "additionalProperties": false});
    registry
        .register(echoing(echo_args("strict").input_schema(schema), &runs))
        .unwrap();
    let bad = registry
        .call("strict", json!({"x": 1, "y": 2}), &ToolContext::cli())
        .await;
    assert_eq!(bad.error.as_deref(), Some("Unknown property: y"));
    // The tool needs no confirmation: a stray token is taken off and ignored.
    let ok = registry
        .call(
            "strict",
            json!({"x": 1, "confirm_token": "abc"}),
            &ToolContext::cli(),
        )
        .await;
    assert_eq!(ok.data, json!({"x": 1}));
}

#[tokio::test]
async fn nested_values_are_validated_with_their_path() {
    let runs = Runs::default();
    let mut registry = ToolRegistry::new();
    let schema = json!({
        "type": "object",
        "properties": {"post": {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string", "maxLength": 3}}}}}
    });
    registry
        .register(echoing(echo_args("post").input_schema(schema), &runs))
        .unwrap();
    let bad = registry
        .call(
            "post",
            json!({"post": {"tags": ["ok", "toolong", 7]}}),
            &ToolContext::cli(),
        )
        .await;
    assert_eq!(
        bad.error.as_deref(),
        Some("post.tags[1]: String too long (max: 3); post.tags[2]: Expected string, got integer")
    );
}

#[test]
fn registration_refuses_duplicates_bad_names_and_invalid_schemas() {
    let runs = Runs::default();
    let mut registry = ToolRegistry::new();
    registry.register(add_tool(&runs)).unwrap();
    let again = registry.register(add_tool(&runs)).unwrap_err();
    assert_eq!(again.to_string(), "Tool already registered: add");
    assert!(matches!(
        registry.register(ToolDefinition::builder("bad name").sync(|_, _| json!(1))),
        Err(RegistryError::InvalidName(_))
    ));
    let invalid = ToolDefinition::builder("invalid")
        .input_schema(json!({"type": "object", "properties": {"x": {"type": "nonsense"}}}))
        .sync(|_, _| json!(1));
    assert!(matches!(
        registry.register(invalid),
        Err(RegistryError::InvalidSchema { .. })
    ));
    let array = ToolDefinition::builder("array")
        .input_schema(json!({"type": "array"}))
        .sync(|_, _| json!(1));
    assert!(matches!(
        registry.register(array),
        Err(RegistryError::InvalidSchema { .. })
    ));
    assert_eq!(registry.len(), 1);
}
