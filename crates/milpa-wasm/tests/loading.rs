//! Loading: only a regular component file is read, a core module or junk is refused with
//! the file's name, and imports beyond the grants are refused naming the import.

mod common;

use milpa_wasm::{ImportRefused, LoadError, Sandbox, WasmRuntime, WasmTool};

#[tokio::test]
async fn a_component_file_loads_and_lists_its_imports() {
    let Some(bytes) = common::guest("probe") else {
        return;
    };
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("probe.wasm");
    std::fs::write(&path, bytes).unwrap();
    let tool = WasmTool::load(&path, Sandbox::new()).await.unwrap();
    assert_eq!(tool.path(), path);
    assert!(
        tool.imports()
            .iter()
            .any(|import| import.starts_with("wasi:filesystem/preopens@")),
        "{:?}",
        tool.imports()
    );
    assert!(!tool.imports().iter().any(|i| i.starts_with("wasi:http/")));
}

#[tokio::test]
async fn junk_and_core_modules_are_refused_by_name() {
    let folder = tempfile::tempdir().unwrap();
    let junk = folder.path().join("junk.wasm");
    std::fs::write(&junk, b"not wasm at all").unwrap();
    let error = WasmTool::load(&junk, Sandbox::new()).await.unwrap_err();
    assert!(matches!(error, LoadError::Compile { .. }), "{error}");
    assert!(error.to_string().contains("junk.wasm"), "{error}");
    assert!(!error.to_string().contains('\n'), "{error}");

    // A core module (what clang makes) is not a component until componentized.
    let core = folder.path().join("core.wasm");
    let Some(_) = common::guest("probe") else {
        return;
    };
    let out = common::clang_command(&common::guests_dir().join("probe.c"), &core)
        .output()
        .unwrap();
    assert!(out.status.success());
    let error = WasmTool::load(&core, Sandbox::new()).await.unwrap_err();
    assert!(matches!(error, LoadError::Compile { .. }), "{error}");
}

#[tokio::test]
async fn folders_and_missing_files_are_not_read() {
    let folder = tempfile::tempdir().unwrap();
    let error = WasmTool::load(folder.path(), Sandbox::new())
        .await
        .unwrap_err();
    assert!(matches!(error, LoadError::NotAFile { .. }), "{error}");
    let error = WasmTool::load(folder.path().join("none.wasm"), Sandbox::new())
        .await
        .unwrap_err();
    assert!(matches!(error, LoadError::Read { .. }), "{error}");
}

#[tokio::test]
async fn http_imports_need_allow_hosts() {
    let Some(bytes) = common::guest_with_world("fetch", "fetch") else {
        return;
    };
    let runtime = WasmRuntime::shared().unwrap();
    let error = WasmTool::from_bytes(&runtime, "fetch.wasm", bytes.clone(), Sandbox::new())
        .await
        .unwrap_err();
    match &error {
        LoadError::Imports {
            source: ImportRefused::NeedsGrant { import, grant },
            ..
        } => {
            assert!(import.starts_with("wasi:http/"), "{import}");
            assert_eq!(*grant, "allow_hosts");
        }
        other => panic!("expected an import refusal, got {other}"),
    }
    assert!(error.to_string().contains("wasi:http/"), "{error}");
    let granted = Sandbox::new().allow_host("127.0.0.1");
    WasmTool::from_bytes(&runtime, "fetch.wasm", bytes, granted)
        .await
        .unwrap();
}
