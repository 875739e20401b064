//! The gateway against a real MCP server over stdio (the `stdio_server` example, built on
//! milpa-mcp): discovery across pages, registration, forwarding through the whole pipeline,
//! content blocks, errors, progress and the child's environment.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use milpa::{BoxFuture, CallHandle, CallPeer, LogLevel, PeerError, ToolContext, ToolRegistry};
use milpa_gateway::{Confirm, ToolOverride, Transport, Upstream, UpstreamConfig};
use serde_json::{Value, json};

/// The example server, built by `cargo test` next to this test's binary.
fn example_server() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let debug = exe.parent().unwrap().parent().unwrap();
    let server = debug.join("examples").join("stdio_server");
    assert!(
        server.exists(),
        "{} is built by cargo test",
        server.display()
    );
    server
}

fn config() -> UpstreamConfig {
    let mut config = UpstreamConfig::stdio("ex", vec![example_server().display().to_string()]);
    if let Transport::Stdio { env, .. } = &mut config.transport {
        env.push(("EXAMPLE_LEVEL".into(), "debug".into()));
    }
    config
}

async fn registry_with(config: UpstreamConfig) -> (ToolRegistry, Upstream) {
    let upstream = Upstream::start(config).await.expect("the example starts");
    let registry = ToolRegistry::new();
    assert!(milpa_gateway::register(&registry, &upstream).is_empty());
    (registry, upstream)
}

#[tokio::test]
async fn discovery_follows_every_page_and_tools_keep_their_schema_and_safety() {
    let (registry, upstream) = registry_with(config()).await;
    assert_eq!(upstream.state().to_string(), "ready");
    // Two tools per page: three pages.
    let names: Vec<String> = registry.tool_names().map(|n| n.to_string()).collect();
    assert_eq!(
        names,
        [
            "ex__echo",
            "ex__pixel",
            "ex__count_to",
            "ex__environment",
            "ex__boom",
            "ex__wipe"
        ]
    );
    let echo = registry.get("ex__echo").unwrap();
    assert_eq!(echo.description(), "Echoes its text");
    assert_eq!(
        echo.input_schema()["properties"]["text"]["description"],
        "What to echo"
    );
    assert_eq!(echo.upstream(), Some("ex"));
    assert!(!echo.is_mutating(), "the upstream says readOnlyHint");
    assert!(registry.get("ex__wipe").unwrap().is_mutating());
    assert_eq!(
        registry.get("ex__pixel").unwrap().options().output_schema,
        Some(json!({"type": "object", "properties": {"width": {"type": "integer"}}}))
    );
    assert_eq!(
        registry.get("ex__echo").unwrap().options().output_schema,
        None
    );
}

#[tokio::test]
async fn overrides_by_glob_change_safety_scopes_and_hide_tools() {
    let mut config = config();
    config.prefix = Some(String::new());
    let mut confirm = ToolOverride::default();
    confirm.confirm = Some(Confirm::Human);
    confirm.mutating = Some(true);
    confirm.scopes = Some(vec!["ex:write".into()]);
    let mut hide = ToolOverride::default();
    hide.hide = Some(true);
    config.overrides = vec![("e*".into(), confirm), ("boom".into(), hide)];
    let (registry, _upstream) = registry_with(config).await;
    let echo = registry.get("echo").unwrap();
    assert!(echo.requires_human_approval() && echo.is_mutating());
    assert_eq!(echo.scopes(), ["ex:write"]);
    assert!(!registry.has("boom"));
    assert!(!registry.get("pixel").unwrap().requires_human_approval());
}

#[tokio::test]
async fn calls_are_validated_here_and_their_content_comes_back_unchanged() {
    let (registry, _upstream) = registry_with(config()).await;
    let ctx = ToolContext::cli();
    let echoed = registry
        .call("ex__echo", json!({"text": "hola"}), &ctx)
        .await;
    assert!(echoed.success, "{echoed:?}");
    assert_eq!(
        echoed.data["content"],
        json!([{"type": "text", "text": "hola"}])
    );
    assert_eq!(echoed.data["structuredContent"], json!({"result": "hola"}));

    let pixel = registry.call("ex__pixel", json!({}), &ctx).await;
    assert_eq!(
        pixel.data["content"][1],
        json!({"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"})
    );
    assert_eq!(pixel.data["structuredContent"], json!({"width": 1}));

    let boom = registry.call("ex__boom", json!({}), &ctx).await;
    assert!(!boom.success);
    assert_eq!(boom.error.as_deref(), Some("the disk is on fire"));
    assert_eq!(boom.data["content"][0]["text"], "the disk is on fire");

    // Our pipeline refuses what the upstream's schema refuses, before forwarding.
    let invalid = registry.call("ex__echo", json!({"text": 1}), &ctx).await;
    assert_eq!(
        invalid.meta.code(),
        Some(&milpa::ErrorCode::ValidationError),
        "{invalid:?}"
    );
}

#[tokio::test]
async fn the_child_sees_only_path_home_lang_and_its_configured_variables() {
    // SAFETY of the test: a variable milpa has must not reach the upstream.
    let (registry, _upstream) = registry_with(config()).await;
    let result = registry
        .call("ex__environment", json!({}), &ToolContext::cli())
        .await;
    let names: Vec<&str> = result.data["structuredContent"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(names.contains(&"EXAMPLE_LEVEL"), "{names:?}");
    assert!(names.contains(&"PATH"), "{names:?}");
    assert!(
        names
            .iter()
            .all(|n| ["PATH", "HOME", "LANG", "EXAMPLE_LEVEL"].contains(n)),
        "{names:?}"
    );
}

/// A caller that records the progress it is sent.
#[derive(Default)]
struct RecordingPeer {
    progress: Mutex<Vec<(f64, Option<f64>)>>,
}

impl CallPeer for RecordingPeer {
    fn progress(&self, progress: f64, total: Option<f64>, _message: Option<&str>) {
        self.progress.lock().unwrap().push((progress, total));
    }
    fn log(&self, _level: LogLevel, _logger: Option<&str>, _data: Value) {}
    fn request<'a>(
        &'a self,
        _method: &'a str,
        _params: Value,
    ) -> BoxFuture<'a, Result<Value, PeerError>> {
        Box::pin(async { Err(PeerError::new("no client")) })
    }
    fn is_cancelled(&self) -> bool {
        false
    }
    fn cancelled(&self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::pending())
    }
}

#[tokio::test]
async fn upstream_progress_reaches_our_caller() {
    let (registry, _upstream) = registry_with(config()).await;
    let peer = Arc::new(RecordingPeer::default());
    let ctx = ToolContext::cli().with_call_handle(CallHandle::new(peer.clone()));
    let counted = registry.call("ex__count_to", json!({"n": 3}), &ctx).await;
    assert!(counted.success, "{counted:?}");
    assert_eq!(
        *peer.progress.lock().unwrap(),
        [(1.0, Some(3.0)), (2.0, Some(3.0)), (3.0, Some(3.0))]
    );
}
