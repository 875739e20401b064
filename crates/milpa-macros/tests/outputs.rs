//! Return types: data, `()`, `Value`, `ToolResult`, `ToolOutput`, `Json<T>`, `Result`s, and
//! output schemas.

use milpa::{ErrorCode, Json, ToolContext, ToolError, ToolOutput, ToolRegistry, ToolResult, tool};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};

#[derive(Serialize, JsonSchema)]
struct Note {
    id: u64,
    title: String,
}

/// Returns nothing.
#[tool]
fn unit() {}

/// Returns JSON as is.
#[tool]
fn raw() -> Value {
    json!({"raw": true})
}

/// Builds its own result.
#[tool]
fn own_result() -> ToolResult {
    ToolResult::success(json!([1, 2])).with_message("two numbers")
}

/// Builds its own output.
#[tool]
fn own_output() -> ToolOutput {
    ToolOutput::Data(json!("out"))
}

/// Returns a struct.
#[tool]
fn note() -> Note {
    Note {
        id: 1,
        title: "a".into(),
    }
}

/// Returns a struct with its schema.
#[tool]
fn typed_note() -> Json<Note> {
    Json(Note {
        id: 2,
        title: "b".into(),
    })
}

/// Returns a number with its schema.
#[tool]
fn typed_number() -> Result<Json<Vec<u8>>, ToolError> {
    Ok(Json(vec![1, 2]))
}

/// Infers the schema when asked.
#[tool(output_schema)]
fn inferred() -> Result<Note, ToolError> {
    Ok(Note {
        id: 3,
        title: "c".into(),
    })
}

/// Declares the schema by hand.
#[tool(output_schema = {"type": "object", "properties": {"n": {"type": "integer"}}})]
fn declared() -> Value {
    json!({"n": 1})
}

/// Fails with a standard error.
#[tool]
fn io_failure() -> Result<String, std::io::Error> {
    Err(std::io::Error::other("disk on fire"))
}

/// Fails with an alias `Result`.
#[tool]
fn alias_failure() -> std::io::Result<u8> {
    Err(std::io::Error::other("nope"))
}

fn registry() -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    for definition in [
        unit_tool(),
        raw_tool(),
        own_result_tool(),
        own_output_tool(),
        note_tool(),
        typed_note_tool(),
        typed_number_tool(),
        inferred_tool(),
        declared_tool(),
        io_failure_tool(),
        alias_failure_tool(),
    ] {
        registry.register(definition).unwrap();
    }
    registry
}

#[tokio::test]
async fn return_values_become_data() {
    let registry = registry();
    let ctx = ToolContext::cli();
    let call = |name: &'static str| registry.call(name, json!({}), &ctx);
    assert_eq!(call("unit").await.data, Value::Null);
    assert!(call("unit").await.success);
    assert_eq!(call("raw").await.data, json!({"raw": true}));
    let own = call("own_result").await;
    assert_eq!(own.data, json!([1, 2]));
    assert_eq!(own.message.as_deref(), Some("two numbers"));
    assert_eq!(call("own_output").await.data, json!("out"));
    assert_eq!(call("note").await.data, json!({"id": 1, "title": "a"}));
    assert_eq!(
        call("typed_note").await.data,
        json!({"id": 2, "title": "b"})
    );
    assert_eq!(call("typed_number").await.data, json!([1, 2]));
    assert_eq!(call("inferred").await.data, json!({"id": 3, "title": "c"}));
}

#[tokio::test]
async fn std_errors_are_internal_errors() {
    let registry = registry();
    let ctx = ToolContext::cli();
    let failed = registry.call("io_failure", json!({}), &ctx).await;
    assert!(!failed.success);
    assert_eq!(failed.code(), Some(&ErrorCode::InternalError));
    assert_eq!(failed.error.as_deref(), Some("disk on fire"));
    let alias = registry.call("alias_failure", json!({}), &ctx).await;
    assert_eq!(alias.error.as_deref(), Some("nope"));
}

#[test]
fn output_schemas() {
    assert_eq!(note_tool().options().output_schema, None);
    assert_eq!(raw_tool().options().output_schema, None);
    let object = typed_note_tool().options().output_schema.clone().unwrap();
    assert_eq!(
        object,
        inferred_tool().options().output_schema.clone().unwrap()
    );
    insta::assert_json_snapshot!("object_output_schema", object);
    let wrapped = typed_number_tool().options().output_schema.clone().unwrap();
    insta::assert_json_snapshot!("wrapped_output_schema", wrapped);
    assert_eq!(
        declared_tool().options().output_schema,
        Some(json!({"type": "object", "properties": {"n": {"type": "integer"}}}))
    );
}
