//! The library entry point: a program's own tools behind the same subcommands.

use std::process::ExitCode;
use std::sync::Arc;

use milpa::{ToolDefinition, ToolRegistry};
use milpa_cli::setup::Setup;
use serde_json::json;

fn twice(registry: &mut ToolRegistry, _setup: &Setup<'_>) -> Result<(), milpa::RegistryError> {
    registry.register(
        ToolDefinition::builder("twice")
            .description("Doubles n")
            .input_schema(json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}))
            .sync(|args, _| json!(args["n"].as_i64().unwrap_or(0) * 2)),
    )
}

fn run(manifest: &str, args: &[&str]) -> ExitCode {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.toml");
    std::fs::write(&path, manifest).unwrap();
    // In process, so no environment of its own: the store is named.
    let mut argv = vec![
        "milpa",
        "--store",
        "memory",
        "--manifest",
        path.to_str().unwrap(),
    ];
    argv.extend_from_slice(args);
    milpa_cli::run_with(argv, twice)
}

#[test]
fn the_programs_tools_and_the_manifests_tools_are_served_together() {
    let manifest = "[[tools]]\nname = \"hello\"\ncommand = [\"echo\", \"hello\"]\n";
    assert_eq!(
        run(manifest, &["call", "twice", r#"{"n": 21}"#]),
        ExitCode::SUCCESS
    );
    assert_eq!(run(manifest, &["call", "hello"]), ExitCode::SUCCESS);
    // The demo toolset is the binary's, not the library's.
    assert_eq!(
        run(manifest, &["call", "echo", r#"{"text": "x"}"#]),
        ExitCode::from(1)
    );
    assert_eq!(
        run(manifest, &["call", "twice", r#"{"n": "x"}"#]),
        ExitCode::from(1)
    );
    assert_eq!(
        run(manifest, &["call", "twice", "not json"]),
        ExitCode::from(2)
    );
    assert_eq!(
        run(manifest, &["tools", "inspect", "twice", "--json"]),
        ExitCode::SUCCESS
    );
}

#[test]
fn a_clash_between_program_and_manifest_is_a_manifest_error() {
    let manifest = "\n[[tools]]\nname = \"twice\"\ncommand = [\"true\"]\n";
    assert_eq!(run(manifest, &["tools"]), ExitCode::from(2));
}

#[test]
fn the_demo_toolset_registers_through_the_same_seam() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.toml");
    std::fs::write(&path, "").unwrap();
    let code = milpa_cli::run_with(
        [
            "milpa",
            "--store",
            "memory",
            "--manifest",
            path.to_str().unwrap(),
            "call",
            "add",
            r#"{"a": 2, "b": 3}"#,
        ],
        |registry, _| {
            milpa_cli::demo::register(registry)?;
            registry
                .register_provider(Arc::new(milpa_cli::demo::DemoTools::default()))
                .map(|_| ())
        },
    );
    // Registering the demo twice clashes: exit 2.
    assert_eq!(code, ExitCode::from(2));
}
