//! The C example in `examples/wasm-tool/` builds with the README's clang line and answers
//! as the README says.

mod common;

use milpa_wasm::{Sandbox, WasmRuntime, WasmTool};
use serde_json::json;

#[tokio::test]
async fn slugify_builds_and_answers() {
    // Skips (or, under CI, fails) like every guest when clang is missing.
    if common::guest("echo").is_none() {
        return;
    }
    let source =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/wasm-tool/slugify.c");
    let folder = tempfile::tempdir().unwrap();
    let module = folder.path().join("slugify.core.wasm");
    let out = common::clang_command(&source, &module).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let component =
        milpa_wasm::componentize::componentize(&std::fs::read(&module).unwrap()).unwrap();
    let runtime = WasmRuntime::shared().unwrap();
    let tool = WasmTool::from_bytes(&runtime, "slugify.wasm", component, Sandbox::new())
        .await
        .unwrap();

    let result = common::call(&tool, json!({"text": "Hello, World!"})).await;
    assert_eq!(result.data, json!({"slug": "hello-world"}), "{result:?}");
    let result = common::call(&tool, json!({"text": "  \"Quoted\"\tand\\slashed 42 "})).await;
    assert_eq!(
        result.data,
        json!({"slug": "quoted-and-slashed-42"}),
        "{result:?}"
    );
    let result = common::call(&tool, json!({"text": "!!!"})).await;
    assert_eq!(common::code(&result), "VALIDATION_ERROR");
    let result = common::call(&tool, json!({})).await;
    assert_eq!(result.error.as_deref(), Some("text: a string is required"));
}
