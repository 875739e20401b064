//! `[[resources]]` and `[[prompts]]` run by the real binary: files, folders (no `..`, no
//! symlink out), commands, size caps, prompt templates, and `milpa read` / `milpa prompt`
//! through the same gates as `milpa call`.

mod common;

use common::stdio::StdioClient;
use common::{Sandbox, run, run_manifest};
use serde_json::json;

const MANIFEST: &str = r#"
[[resources]]
uri = "docs://readme"
file = "README.md"
description = "The readme"

[[resources]]
uri = "docs://guide/"
folder = "guide"
scopes = ["docs:read"]

[[resources]]
uri = "status://hello"
command = ["sh", "-c", "echo hello from $0", "sh"]

[[resources]]
uri = "status://broken"
command = ["sh", "-c", "echo no disk >&2; exit 3"]

[[resources]]
uri = "docs://big"
file = "big.txt"
max_bytes = 10

[[prompts]]
name = "review"
description = "Review a change"
template = "Review this change for {focus}:\n{diff}"
[prompts.arguments.diff]
description = "The diff"
[prompts.arguments.focus]
required = false
"#;

fn sandbox() -> Sandbox {
    let sb = Sandbox::new();
    sb.write("README.md", "# Hello\n");
    sb.write("guide/intro.md", "Intro\n");
    sb.write("guide/deep/part.txt", "Part\n");
    sb.write("secret.txt", "outside\n");
    sb.write("big.txt", "0123456789abcdef");
    std::os::unix::fs::symlink(
        sb.path().join("secret.txt"),
        sb.path().join("guide/leak.txt"),
    )
    .unwrap();
    sb
}

#[test]
fn resources_list_their_files_folders_and_commands() {
    let sb = sandbox();
    let r = run_manifest(&sb, MANIFEST, &["resources", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let listed = r.json();
    let uris: Vec<&str> = listed["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert_eq!(
        uris,
        [
            "docs://readme",
            "docs://guide/deep/part.txt",
            "docs://guide/intro.md",
            "status://hello",
            "status://broken",
            "docs://big"
        ],
        "the symlink leading out is not listed"
    );
    assert_eq!(listed["resources"][0]["mimeType"], "text/markdown");
    assert_eq!(
        listed["resourceTemplates"][0]["uriTemplate"],
        "docs://guide/{+path}"
    );
    let table = run_manifest(&sb, MANIFEST, &["resources"]);
    assert!(
        table.stdout.contains("docs://guide/{+path}"),
        "{}",
        table.stdout
    );
}

#[test]
fn reads_go_through_the_gates_and_stay_inside_their_folder() {
    let sb = sandbox();
    let readme = run_manifest(&sb, MANIFEST, &["read", "docs://readme"]);
    assert_eq!(
        (readme.code, readme.stdout.as_str()),
        (0, "# Hello\n"),
        "{}",
        readme.stderr
    );
    let part = run_manifest(
        &sb,
        MANIFEST,
        &["read", "docs://guide/deep/part.txt", "--json"],
    );
    assert_eq!(
        part.json()["contents"][0],
        json!({"uri": "docs://guide/deep/part.txt", "mimeType": "text/plain", "text": "Part\n"})
    );
    let hello = run_manifest(&sb, MANIFEST, &["read", "status://hello"]);
    assert_eq!(hello.stdout, "hello from sh\n");

    for (uri, message) in [
        (
            "docs://guide/../secret.txt",
            "is not a path inside the folder",
        ),
        ("docs://guide/leak.txt", "leads out of the folder"),
        ("docs://big", "over the resource's 10-byte cap"),
        ("status://broken", "no disk"),
        ("docs://nope", "Resource not found: docs://nope"),
    ] {
        let r = run_manifest(&sb, MANIFEST, &["read", uri]);
        assert_eq!(r.code, 1, "{uri}: {}", r.stdout);
        assert!(r.stderr.contains(message), "{uri}: {}", r.stderr);
    }

    // The folder needs a scope: a caller without it is refused, as a call would be.
    let scoped = run_manifest(
        &sb,
        MANIFEST,
        &["read", "docs://guide/intro.md", "--actor", "ana", "--json"],
    );
    assert_eq!(scoped.code, 1);
    assert_eq!(scoped.json()["code"], "FORBIDDEN");
    assert_eq!(
        scoped.json()["error"],
        "Missing required scope for resource 'docs://guide/intro.md'. Need one of: docs:read — context has: (none)."
    );
    let anonymous_mcp = run_manifest(
        &sb,
        MANIFEST,
        &["read", "docs://readme", "--channel", "mcp"],
    );
    assert_eq!(anonymous_mcp.code, 1);
    assert!(
        anonymous_mcp
            .stderr
            .contains("requires an authenticated principal"),
        "{}",
        anonymous_mcp.stderr
    );
    // Every read left a record of its own kind in the store's trail.
    let trail = run_manifest(&sb, MANIFEST, &["audit", "--json"]);
    let records = trail.json();
    assert!(
        records
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["kind"] == "read_resource" && r["outcome"] == "denied"),
        "{records}"
    );
}

#[test]
fn prompts_render_their_templates_and_check_their_arguments() {
    let sb = sandbox();
    let listed = run_manifest(&sb, MANIFEST, &["prompts", "--json"]);
    assert_eq!(
        listed.json()["prompts"][0]["arguments"],
        json!([{"name": "diff", "description": "The diff", "required": true}, {"name": "focus", "required": false}])
    );
    let r = run_manifest(
        &sb,
        MANIFEST,
        &["prompt", "review", r#"{"diff": "+x", "focus": "safety"}"#],
    );
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (0, "user: Review this change for safety:\n+x\n"),
        "{}",
        r.stderr
    );
    let missing = run_manifest(&sb, MANIFEST, &["prompt", "review"]);
    assert_eq!(missing.code, 1);
    assert!(
        missing
            .stderr
            .contains("Missing required argument(s) for prompt 'review': diff"),
        "{}",
        missing.stderr
    );
    let unknown = run_manifest(
        &sb,
        MANIFEST,
        &["prompt", "review", r#"{"diff": "d", "extra": "e"}"#],
    );
    assert!(
        unknown
            .stderr
            .contains("Prompt 'review' has no argument 'extra'"),
        "{}",
        unknown.stderr
    );
    let not_strings = run_manifest(&sb, MANIFEST, &["prompt", "review", r#"{"diff": 1}"#]);
    assert_eq!(not_strings.code, 2);
}

#[test]
fn bad_entries_are_refused_with_their_line() {
    let sb = Sandbox::new();
    for (manifest, message) in [
        (
            "[[resources]]\nuri = \"docs://a\"\n",
            "give exactly one of file, folder or command",
        ),
        (
            "[[resources]]\nuri = \"docs://a\"\nfolder = \"x\"\n",
            "ends with `/`",
        ),
        (
            "[[resources]]\nuri = \"nouri\"\nfile = \"x\"\n",
            "starts with a scheme",
        ),
        (
            "[[prompts]]\nname = \"p\"\ndescription = \"d\"\ntemplate = \"{who}\"\n",
            "not among its arguments",
        ),
    ] {
        let r = run(sb.with_manifest(manifest).args(["resources"]));
        assert_eq!(r.code, 2, "{manifest}");
        assert!(r.stderr.contains(message), "{manifest}: {}", r.stderr);
        assert!(r.stderr.contains("m.toml:"), "{}", r.stderr);
    }
}

#[test]
fn the_demo_serves_a_resource_and_a_prompt() {
    let sb = Sandbox::new();
    let resources = run(sb.milpa().args(["resources", "--json"]));
    assert_eq!(resources.json()["resources"][0]["uri"], "notes://all");
    run(sb
        .milpa()
        .args(["call", "notes_add", r#"{"text": "buy milk"}"#]));
    let read = run(sb.milpa().args(["read", "notes://all"]));
    assert_eq!(
        read.stdout, "[{\"id\":1,\"text\":\"buy milk\"}]\n",
        "{}",
        read.stderr
    );
    let prompt = run(sb
        .milpa()
        .args(["prompt", "summarize_notes", r#"{"style": "one line"}"#]));
    assert!(
        prompt.stdout.contains("summarize the notes in one line"),
        "{}",
        prompt.stdout
    );
}

#[test]
fn a_served_folder_lists_files_added_while_it_runs_and_tells_the_client() {
    let sb = Sandbox::new();
    sb.write("guide/intro.md", "Intro\n");
    sb.write(
        "m.toml",
        r#"
[[resources]]
uri = "docs://guide/"
folder = "guide"
rescan_seconds = 1
"#,
    );
    let mut command = common::http::milpa_command(&sb);
    command.args(["--manifest", "m.toml", "serve"]);
    let mut server = StdioClient::start(command, &sb.path().join("serve.log"));
    let uris = |listed: &serde_json::Value| -> Vec<String> {
        listed["result"]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["uri"].as_str().unwrap().to_owned())
            .collect()
    };
    let listed = server.request("resources/list", json!({}));
    assert_eq!(uris(&listed), ["docs://guide/intro.md"]);

    sb.write("guide/new.md", "New\n");
    let note = server.wait_for(|m| m["method"] == "notifications/resources/list_changed");
    assert_eq!(note["params"], json!({}));
    let listed = server.request("resources/list", json!({}));
    assert_eq!(
        uris(&listed),
        ["docs://guide/intro.md", "docs://guide/new.md"]
    );

    std::fs::remove_file(sb.path().join("guide/intro.md")).unwrap();
    server.wait_for(|m| m["method"] == "notifications/resources/list_changed");
    let listed = server.request("resources/list", json!({}));
    assert_eq!(uris(&listed), ["docs://guide/new.md"]);
}

#[test]
fn rescan_seconds_is_for_folders_only() {
    let sb = Sandbox::new();
    sb.write("README.md", "# Hello\n");
    let refused = run_manifest(
        &sb,
        "[[resources]]\nuri = \"docs://readme\"\nfile = \"README.md\"\nrescan_seconds = 3\n",
        &["resources"],
    );
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused
            .stderr
            .contains("resource `docs://readme`: rescan_seconds is for folder resources"),
        "{}",
        refused.stderr
    );
}
