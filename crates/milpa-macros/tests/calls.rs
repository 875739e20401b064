//! Calling macro-declared tools through the registry: sync and async, binding, errors.

use milpa::{ErrorCode, ToolContext, ToolError, ToolRegistry, tool};
use serde_json::json;

/// Adds two integers.
#[tool]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

/// Doubles a 32-bit integer.
#[tool]
fn double(n: i32) -> i32 {
    n.saturating_mul(2)
}

/// Greets someone, later.
#[tool]
async fn greet(name: &str, ctx: &ToolContext) -> String {
    tokio::task::yield_now().await;
    format!("hello {name} from {}", ctx.channel())
}

/// Finds a note.
#[tool]
fn find(id: u64) -> Result<String, ToolError> {
    if id == 1 {
        Ok("first".into())
    } else {
        Err(ToolError::with_code(
            ErrorCode::NotFound,
            format!("No note {id}"),
        ))
    }
}

fn registry() -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    registry.register(add_tool()).unwrap();
    registry.register(double_tool()).unwrap();
    registry.register(greet_tool()).unwrap();
    registry.register(find_tool()).unwrap();
    registry
}

#[tokio::test]
async fn sync_tool_returns_its_value() {
    let result = registry()
        .call("add", json!({"a": 2, "b": 40}), &ToolContext::cli())
        .await;
    assert!(result.success, "{result:?}");
    assert_eq!(result.data, json!(42));
}

#[tokio::test]
async fn async_tool_borrows_args_and_context() {
    let result = registry()
        .call("greet", json!({"name": "ana"}), &ToolContext::cli())
        .await;
    assert_eq!(result.data, json!("hello ana from cli"));
}

#[tokio::test]
async fn too_large_integer_is_a_validation_error_naming_the_field() {
    let result = registry()
        .call(
            "double",
            json!({"n": 3_000_000_000u64}),
            &ToolContext::cli(),
        )
        .await;
    assert!(!result.success);
    assert_eq!(result.code(), Some(&ErrorCode::ValidationError));
    assert_eq!(
        result.error.as_deref(),
        Some("n: Expected an integer from -2147483648 to 2147483647, got 3000000000")
    );
}

#[tokio::test]
async fn error_returns_keep_code_and_message() {
    let result = registry()
        .call("find", json!({"id": 9}), &ToolContext::cli())
        .await;
    assert!(!result.success);
    assert_eq!(result.code(), Some(&ErrorCode::NotFound));
    assert_eq!(result.error.as_deref(), Some("No note 9"));
    let ok = registry()
        .call("find", json!({"id": 1}), &ToolContext::cli())
        .await;
    assert_eq!(ok.data, json!("first"));
}

#[tokio::test]
async fn tools_can_be_declared_inside_a_function() {
    /// A unit of measure.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[serde(rename_all = "lowercase")]
    enum Unit {
        Celsius,
        Fahrenheit,
    }

    /// Converts a temperature.
    #[tool]
    fn convert(degrees: f64, to: Unit) -> f64 {
        match to {
            Unit::Celsius => (degrees - 32.0) * 5.0 / 9.0,
            Unit::Fahrenheit => degrees * 9.0 / 5.0 + 32.0,
        }
    }

    let mut registry = ToolRegistry::new();
    registry.register(convert_tool()).unwrap();
    let result = registry
        .call(
            "convert",
            json!({"degrees": 100, "to": "fahrenheit"}),
            &ToolContext::cli(),
        )
        .await;
    assert_eq!(result.data, json!(212.0));
    let refused = registry
        .call(
            "convert",
            json!({"degrees": 100, "to": "kelvin"}),
            &ToolContext::cli(),
        )
        .await;
    assert_eq!(refused.code(), Some(&ErrorCode::ValidationError));
}

#[tokio::test]
async fn tools_run_without_the_registry_too() {
    let definition = add_tool();
    let ctx = ToolContext::cli();
    let args = json!({"a": 1, "b": 2});
    let output = definition.tool().invoke(&args, &ctx).await;
    assert_eq!(output, Ok(milpa::ToolOutput::Data(json!(3))));
    // Without validation in front, a missing argument is still an error, not a panic.
    let output = definition.tool().invoke(&json!({"a": 1}), &ctx).await;
    let error = output.unwrap_err();
    assert_eq!(error.code(), &ErrorCode::ValidationError);
    assert_eq!(error.message(), "Missing required field: b");
}
