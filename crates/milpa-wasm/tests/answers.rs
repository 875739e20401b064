//! How a guest's answer becomes a result: JSON is data; text that is not JSON, a result
//! over the cap, `invalid-args` and `failed` each have their code.

mod common;

use milpa_wasm::Sandbox;
use serde_json::json;

#[tokio::test]
async fn a_result_that_is_not_json_is_invalid_result() {
    let Some(tool) = common::load("probe", Sandbox::new()).await else {
        return;
    };
    let result = common::call(&tool, json!({"do": "not_json"})).await;
    assert_eq!(common::code(&result), "INVALID_RESULT", "{result:?}");
    let message = result.error.unwrap();
    assert!(message.contains("not JSON"), "{message}");
    assert!(message.contains("\"this is not JSON\""), "{message}");
}

#[tokio::test]
async fn a_result_over_the_cap_is_refused() {
    let Some(tool) = common::load("probe", Sandbox::new().with_max_result_bytes(1000)).await else {
        return;
    };
    let fits = common::call(&tool, json!({"do": "big", "bytes": 998})).await;
    assert!(fits.success, "{fits:?}");
    assert_eq!(fits.data.as_str().map(str::len), Some(998));
    let result = common::call(&tool, json!({"do": "big", "bytes": 999})).await;
    assert_eq!(common::code(&result), "RESULT_TOO_LARGE", "{result:?}");
    let message = result.error.unwrap();
    assert!(
        message.contains("1001 bytes") && message.contains("max_result_bytes (1000)"),
        "{message}"
    );
}

#[tokio::test]
async fn invalid_args_is_a_validation_error() {
    let Some(tool) = common::load("probe", Sandbox::new()).await else {
        return;
    };
    let result = common::call(&tool, json!({"do": "invalid"})).await;
    assert_eq!(common::code(&result), "VALIDATION_ERROR", "{result:?}");
    assert_eq!(result.error.as_deref(), Some("text: must not be empty"));
}

#[tokio::test]
async fn failed_is_a_failed_call_with_the_end_of_stderr() {
    let Some(tool) = common::load("probe", Sandbox::new()).await else {
        return;
    };
    let result = common::call(&tool, json!({"do": "stderr"})).await;
    assert_eq!(common::code(&result), "TOOL_FAILED", "{result:?}");
    assert_eq!(result.error.as_deref(), Some("the guest gave up"));
    assert_eq!(result.meta.get("stderr"), Some(&json!("about to fail")));
}
