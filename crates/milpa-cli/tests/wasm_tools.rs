//! Manifest tools of `wasm = "…"`: WebAssembly components in a sandbox, through the whole
//! pipeline of the real `milpa` binary (scopes, confirmation, audit), refused at start or
//! by `milpa check` when their imports ask for more than their grants, and described by
//! `milpa tools inspect`.
//!
//! The components are built from C during the test (the example's `slugify.c`, the
//! milpa-wasm test guests) with clang and wasi-libc, as milpa-wasm's own tests build them.
//! Without clang a test prints a skip line and returns, unless `CI=true`, where it fails.

#![cfg(feature = "wasm")]

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use common::{Sandbox, run_manifest, trail_until};
use serde_json::{Value, json};

/// The repository's root (two levels above this crate).
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Whether clang can build a guest; false means skip (outside CI).
fn have_clang() -> bool {
    let found = std::process::Command::new("clang")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if !found {
        assert!(
            !std::env::var("CI").is_ok_and(|ci| ci == "true"),
            "clang is required for the wasm tool tests under CI (scripts/install-test-deps.sh installs it)"
        );
        eprintln!(
            "skipped: clang not found (apt-get install clang lld libclang-rt-dev-wasm32 wasi-libc)"
        );
    }
    found
}

/// The component of the C file `source` (relative to the repository), of the tool world
/// or of `world` in milpa-wasm's test guests' `world.wit`; built once per test binary.
/// `None`: skip.
fn component(source: &str, world: Option<&str>) -> Option<Vec<u8>> {
    static BUILT: OnceLock<Mutex<HashMap<String, Vec<u8>>>> = OnceLock::new();
    if !have_clang() {
        return None;
    }
    let mut built = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(bytes) = built.get(source) {
        return Some(bytes.clone());
    }
    let out_dir = tempfile::tempdir().unwrap();
    let module = out_dir.path().join("tool.core.wasm");
    let source_path = repo().join(source);
    let out = milpa_wasm::componentize::clang_command(&source_path, &module)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "clang failed for {source}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let module = std::fs::read(&module).unwrap();
    let bytes = match world {
        None => milpa_wasm::componentize::componentize(&module),
        Some(world) => {
            let deps =
                milpa_wasm::componentize::wasi_wit_deps(Path::new(env!("CARGO_MANIFEST_DIR")))
                    .unwrap();
            milpa_wasm::componentize::componentize_world(
                &module,
                &repo().join("crates/milpa-wasm/tests/guests/wit/world.wit"),
                &deps,
                world,
            )
        }
    }
    .unwrap_or_else(|error| panic!("componentize {source}: {error}"));
    built.insert(source.to_owned(), bytes.clone());
    Some(bytes)
}

/// Writes the component of `source` to `tools/{name}.wasm` in the sandbox; `None`: skip.
fn install(sb: &Sandbox, name: &str, source: &str, world: Option<&str>) -> Option<()> {
    let bytes = component(source, world)?;
    let path = sb.path().join("tools").join(format!("{name}.wasm"));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
    Some(())
}

const SLUGIFY: &str = "examples/wasm-tool/slugify.c";
const PROBE: &str = "crates/milpa-wasm/tests/guests/probe.c";
const FETCH: &str = "crates/milpa-wasm/tests/guests/fetch.c";

/// A manifest with the slugify tool and `extra` lines in its `[[tools]]` entry.
fn slugify_manifest(extra: &str) -> String {
    format!(
        "[[tools]]\nname = \"slugify\"\ndescription = \"Makes a URL slug of a text\"\n\
         wasm = \"tools/slugify.wasm\"\n{extra}\n\
         [tools.params.text]\ntype = \"string\"\nrequired = true\n"
    )
}

/// A manifest with the probe guest (`do` and `path` arguments) and `sandbox` as its
/// `[tools.sandbox]` lines.
fn probe_manifest(sandbox: &str) -> String {
    format!(
        "[[tools]]\nname = \"probe\"\nwasm = \"tools/probe.wasm\"\n\
         [tools.params.do]\ntype = \"string\"\nrequired = true\n\
         [tools.params.path]\ntype = \"string\"\n\
         [tools.sandbox]\n{sandbox}\n"
    )
}

#[test]
fn a_call_prints_the_slug_and_is_audited() {
    let sb = Sandbox::new();
    let Some(()) = install(&sb, "slugify", SLUGIFY, None) else {
        return;
    };
    let manifest = slugify_manifest("");
    let r = run_manifest(
        &sb,
        &manifest,
        &["call", "slugify", r#"{"text":"Hello World"}"#],
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("hello-world"), "{}", r.stdout);
    let r = run_manifest(
        &sb,
        &manifest,
        &["call", "slugify", r#"{"text":"Hello World"}"#, "--json"],
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.json()["data"], json!({"slug": "hello-world"}));
    // The tool's invalid-args answer is the pipeline's validation error.
    let r = run_manifest(
        &sb,
        &manifest,
        &["call", "slugify", r#"{"text":"!!!"}"#, "--json"],
    );
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert_eq!(r.json()["meta"]["code"], "VALIDATION_ERROR");
    // A missing argument is refused by the schema before the component runs.
    let r = run_manifest(&sb, &manifest, &["call", "slugify", "{}", "--json"]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert_eq!(r.json()["meta"]["code"], "VALIDATION_ERROR");

    let records = trail_until(
        || run_manifest(&sb, &manifest, &["audit", "--json", "--tool", "slugify"]),
        |records| records.iter().filter(|r| r["tool"] == "slugify").count() >= 4,
    );
    let with = |outcome: &str, code: Value| -> Vec<&Value> {
        records
            .iter()
            .filter(|r| r["outcome"] == outcome && r["code"] == code)
            .collect()
    };
    // The two slugs; the component that ran and answered invalid-args; the call the
    // schema refused before anything ran.
    let slugs = with("executed", Value::Null);
    assert_eq!(slugs.len(), 2, "{records:#?}");
    assert!(slugs.iter().all(|r| r["channel"] == "cli"), "{records:#?}");
    assert_eq!(
        with("executed", json!("VALIDATION_ERROR")).len(),
        1,
        "{records:#?}"
    );
    assert_eq!(
        with("invalid_arguments", json!("VALIDATION_ERROR")).len(),
        1,
        "{records:#?}"
    );
}

#[test]
fn a_scoped_wasm_tool_refuses_a_caller_without_the_scope() {
    let sb = Sandbox::new();
    let Some(()) = install(&sb, "slugify", SLUGIFY, None) else {
        return;
    };
    let manifest = slugify_manifest("scopes = [\"text:write\"]");
    let as_bob = |scope: &str| {
        run_manifest(
            &sb,
            &manifest,
            &[
                "call",
                "slugify",
                r#"{"text":"Hello World"}"#,
                "--actor",
                "bob",
                "--scope",
                scope,
                "--json",
            ],
        )
    };
    let r = as_bob("text:read");
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .starts_with("Missing required scope"),
        "{}",
        r.stdout
    );
    assert!(r.json()["data"].is_null(), "{}", r.stdout);
    let r = as_bob("text:write");
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.json()["data"]["slug"], "hello-world");
}

#[test]
fn a_confirmed_wasm_tool_waits_for_its_token_then_runs_once() {
    let sb = Sandbox::new();
    let Some(()) = install(&sb, "slugify", SLUGIFY, None) else {
        return;
    };
    let manifest = slugify_manifest("confirm = true");
    let args = r#"{"text":"Hello World"}"#;
    let r = run_manifest(&sb, &manifest, &["call", "slugify", args, "--json"]);
    assert_eq!(r.code, 3, "{}{}", r.stdout, r.stderr);
    let first = r.json();
    assert_eq!(first["meta"]["requires_confirmation"], true);
    let token = first["data"]["confirm_token"].as_str().unwrap().to_owned();
    assert!(first["data"].get("slug").is_none(), "{first}");
    let replay = || {
        run_manifest(
            &sb,
            &manifest,
            &["call", "slugify", args, "--confirm-token", &token, "--json"],
        )
    };
    let r = replay();
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.json()["data"]["slug"], "hello-world");
    // The token is spent: a second replay does not run the tool.
    let r = replay();
    assert_ne!(r.code, 0, "{}", r.stdout);
    assert!(r.json()["data"].get("slug").is_none(), "{}", r.stdout);
}

#[test]
fn escapes_fail_inside_the_sandbox_with_their_code_and_grants_work() {
    let sb = Sandbox::new();
    let Some(()) = install(&sb, "probe", PROBE, None) else {
        return;
    };
    sb.write("data/note.txt", "plain words");
    let manifest = probe_manifest("fs_read = [\"data\"]\nmemory_mib = 16");
    let call = |args: Value| {
        run_manifest(
            &sb,
            &manifest,
            &["call", "probe", &args.to_string(), "--json"],
        )
    };
    // No grant reaches /etc/passwd.
    let r = call(json!({"do": "read", "path": "/etc/passwd"}));
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert_eq!(r.json()["meta"]["code"], "TOOL_FAILED");
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .starts_with("/etc/passwd: "),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("root:"));
    // Memory past its cap is a sandbox limit, named.
    let r = call(json!({"do": "memory"}));
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert_eq!(r.json()["meta"]["code"], "SANDBOX_LIMIT");
    assert_eq!(r.json()["meta"]["sandbox_limit"], "memory");
    // The granted folder (relative to the manifest) is read; it is read-only.
    let data = sb.path().join("data").canonicalize().unwrap();
    let r = call(json!({"do": "read", "path": data.join("note.txt")}));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.json()["data"]["content"], "plain words");
    let r = call(json!({"do": "write", "path": data.join("new.txt")}));
    assert_eq!(r.json()["meta"]["code"], "TOOL_FAILED", "{}", r.stdout);
    assert!(!data.join("new.txt").exists());
}

#[test]
fn check_refuses_an_import_the_grants_cannot_satisfy_naming_it_and_the_line() {
    let sb = Sandbox::new();
    let Some(()) = install(&sb, "fetch", FETCH, Some("fetch")) else {
        return;
    };
    let manifest = "[[tools]]\nname = \"fetch\"\nwasm = \"tools/fetch.wasm\"\n";
    let r = run_manifest(&sb, manifest, &["check"]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .starts_with("milpa: m.toml:3: tool `fetch`: refused the component"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("imports `wasi:http/"), "{}", r.stderr);
    assert!(r.stderr.contains("`allow_hosts`"), "{}", r.stderr);
    // Start-up refuses it the same way.
    let r = run_manifest(&sb, manifest, &["tools"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("m.toml:3:"), "{}", r.stderr);
    // With a host granted, it is sound.
    let granted = format!("{manifest}[tools.sandbox]\nallow_hosts = [\"127.0.0.1\"]\n");
    let r = run_manifest(&sb, &granted, &["check"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("1 tool(s)"), "{}", r.stdout);
}

#[test]
fn a_missing_or_broken_component_is_a_manifest_error_naming_its_line() {
    let sb = Sandbox::new();
    let manifest =
        "[server]\nname = \"x\"\n\n[[tools]]\nname = \"gone\"\nwasm = \"tools/gone.wasm\"\n";
    let r = run_manifest(&sb, manifest, &["check"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .starts_with("milpa: m.toml:6: tool `gone`: could not read the component"),
        "{}",
        r.stderr
    );
    sb.write("tools/gone.wasm", "not wasm at all");
    let r = run_manifest(&sb, manifest, &["call", "gone"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .starts_with("milpa: m.toml:6: tool `gone`: could not compile the component"),
        "{}",
        r.stderr
    );
}

#[test]
fn inspect_shows_the_grants() {
    let sb = Sandbox::new();
    let Some(()) = install(&sb, "probe", PROBE, None) else {
        return;
    };
    std::fs::create_dir_all(sb.path().join("data")).unwrap();
    let manifest = probe_manifest(
        "fs_read = [\"data\"]\nallow_hosts = [\"api.example.com\"]\nmemory_mib = 16\n\
         env = { TOKEN = \"${WASM_TEST_SECRET:-s3cret}\" }",
    );
    let r = run_manifest(&sb, &manifest, &["tools", "inspect", "probe"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("Sandbox: the WebAssembly component"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("tools/probe.wasm"), "{}", r.stdout);
    assert!(
        r.stdout.contains("reads the folders: ") && r.stdout.contains("/data"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("reads and writes the folders: none"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("outgoing HTTP to api.example.com only"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("TOKEN (values not shown)"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("16 MiB of memory"), "{}", r.stdout);
    assert!(!r.stdout.contains("s3cret"), "{}", r.stdout);

    let r = run_manifest(&sb, &manifest, &["tools", "inspect", "probe", "--json"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let sandbox = &r.json()["sandbox"];
    assert_eq!(sandbox["memory_mib"], 16);
    assert_eq!(sandbox["allow_hosts"], json!(["api.example.com"]));
    assert_eq!(sandbox["env"], json!(["TOKEN"]));
    assert_eq!(sandbox["fs_write"], json!([]));
    assert!(
        sandbox["fs_read"][0].as_str().unwrap().ends_with("/data"),
        "{sandbox}"
    );
    assert!(!r.stdout.contains("s3cret"));
    // A command tool has no sandbox section.
    let r = run_manifest(
        &sb,
        "[[tools]]\nname = \"t\"\ncommand = [\"true\"]\n",
        &["tools", "inspect", "t", "--json"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.json().get("sandbox").is_none());
}

#[test]
fn serve_answers_over_mcp_and_keeps_serving_after_a_guest_is_stopped() {
    let sb = Sandbox::new();
    let (Some(()), Some(())) = (
        install(&sb, "slugify", SLUGIFY, None),
        install(&sb, "probe", PROBE, None),
    ) else {
        return;
    };
    sb.write(
        "m.toml",
        &format!(
            "{}\n{}",
            slugify_manifest(""),
            probe_manifest("memory_mib = 16").replace(
                "wasm = \"tools/probe.wasm\"",
                "wasm = \"tools/probe.wasm\"\ntimeout_seconds = 1"
            )
        ),
    );
    let mut command = common::http::milpa_command(&sb);
    command.args(["--manifest", "m.toml", "serve"]);
    let mut server = common::stdio::StdioClient::start(command, &sb.path().join("serve.log"));
    let names = server.wait_for_tool("slugify");
    assert!(names.iter().any(|name| name == "probe"), "{names:?}");
    let r = server.call("slugify", json!({"text": "Hello World"}));
    assert_ne!(r["isError"], true, "{r}");
    assert!(r.to_string().contains("hello-world"), "{r}");
    // A guest in a tight loop is stopped at its timeout; the server keeps serving.
    let started = std::time::Instant::now();
    let r = server.call("probe", json!({"do": "loop"}));
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(r["_meta"]["milpa"]["code"], "TIMEOUT", "{r}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    let r = server.call("slugify", json!({"text": "Still Here"}));
    assert!(r.to_string().contains("still-here"), "{r}");
}

#[test]
fn sandbox_variables_are_read_from_milpas_environment_and_nothing_else_is_seen() {
    let sb = Sandbox::new();
    let Some(()) = install(&sb, "probe", PROBE, None) else {
        return;
    };
    let manifest = probe_manifest("env = { GREETING = \"${WASM_TEST_GREETING}\" }");
    let call = |greeting: Option<&str>| {
        let mut command = sb.with_manifest(&manifest);
        command.env_remove("WASM_TEST_GREETING");
        if let Some(greeting) = greeting {
            command.env("WASM_TEST_GREETING", greeting);
        }
        common::run(command.args(["call", "probe", r#"{"do":"echo"}"#, "--json"]))
    };
    let r = call(Some("buenos dias"));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.json()["data"]["greeting"], "buenos dias");
    // milpa's own environment (HOME) does not reach the guest.
    assert_eq!(r.json()["data"]["home"], "");
    // An unset variable without a default is refused at start, naming the line.
    let r = call(None);
    assert_eq!(r.code, 2, "{}", r.stdout);
    assert!(
        r.stderr.starts_with("milpa: m.toml:9: tool `probe`: sandbox.env.GREETING: the variable `WASM_TEST_GREETING` is not set"),
        "{}",
        r.stderr
    );
}
