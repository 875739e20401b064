//! A call answers with the guest's JSON, sees the caller's context, and starts from a
//! fresh instance every time.

mod common;

use milpa_wasm::Sandbox;
use serde_json::json;

#[tokio::test]
async fn a_call_sees_its_arguments_and_the_callers_context() {
    let Some(tool) = common::load("probe", Sandbox::new()).await else {
        return;
    };
    let result = common::call(&tool, json!({"do": "echo", "n": 7})).await;
    assert!(result.success, "{result:?}");
    assert_eq!(result.data["args"], json!({"do": "echo", "n": 7}));
    assert_eq!(result.data["principal"], "alice");
    assert_eq!(result.data["channel"], "cli");
    assert_eq!(result.data["request_id"], "req-1");
}

#[tokio::test]
async fn every_call_gets_a_fresh_instance() {
    let Some(tool) = common::load("probe", Sandbox::new()).await else {
        return;
    };
    for _ in 0..3 {
        let result = common::call(&tool, json!({"do": "echo"})).await;
        assert_eq!(result.data["calls"], 1, "{result:?}");
    }
}

#[tokio::test]
async fn the_environment_is_only_what_the_sandbox_sets() {
    let Some(tool) = common::load("probe", Sandbox::new().with_env("GREETING", "hola")).await
    else {
        return;
    };
    let result = common::call(&tool, json!({"do": "echo"})).await;
    assert_eq!(result.data["greeting"], "hola");
    assert_eq!(
        result.data["home"], "",
        "nothing is inherited from the host"
    );
}
