//! Manifests: which one is read, what each section does, and errors that name file and line.

mod common;

use common::{Sandbox, run, run_manifest};
use serde_json::json;

/// Runs `milpa --manifest m.toml tools` and returns stderr, asserting exit code 2.
fn manifest_error(manifest: &str) -> String {
    let sb = Sandbox::new();
    let r = run_manifest(&sb, manifest, &["tools"]);
    assert_eq!(
        r.code, 2,
        "expected a manifest error, got: {}{}",
        r.stdout, r.stderr
    );
    assert!(r.stdout.is_empty());
    r.stderr.trim_end().to_owned()
}

#[test]
fn unknown_keys_are_refused_with_their_line() {
    let e =
        manifest_error("[server]\nname = \"ops\"\n\n[[tools]]\nname = \"t\"\ncomand = [\"ls\"]\n");
    assert!(
        e.starts_with("milpa: m.toml:6: unknown field `comand`, expected one of"),
        "{e}"
    );
    let e = manifest_error("[sever]\nname = \"x\"\n");
    assert!(
        e.starts_with("milpa: m.toml:1: unknown field `sever`"),
        "{e}"
    );
    let e = manifest_error("[channels.mcp]\nrequire_auth = true\nallow_everything = true\n");
    assert!(
        e.starts_with("milpa: m.toml:3: unknown field `allow_everything`"),
        "{e}"
    );
    let e = manifest_error(
        "[[tools]]\nname = \"t\"\ncommand = [\"ls\", \"{p}\"]\n[tools.params.p]\ntype = \"string\"\nrequird = true\n",
    );
    assert!(
        e.starts_with("milpa: m.toml:6: unknown field `requird`"),
        "{e}"
    );
    let e = manifest_error("[[auth.tokens]]\ntoken = \"s3cret\"\nprincipal = \"a\"\n");
    assert!(
        e.starts_with("milpa: m.toml:2: unknown field `token`"),
        "{e}"
    );
    let e = manifest_error("[[rules]]\ntool = \"*\"\neffect = \"deny\"\nchanel = \"mcp\"\n");
    assert!(
        e.starts_with("milpa: m.toml:4: unknown field `chanel`"),
        "{e}"
    );
    let e = manifest_error("[verification]\nenabled = true\nresolve_scope = []\n");
    assert!(
        e.starts_with("milpa: m.toml:3: unknown field `resolve_scope`"),
        "{e}"
    );
    let e = manifest_error("[confirmation]\nttl = 5\n");
    assert!(e.starts_with("milpa: m.toml:2: unknown field `ttl`"), "{e}");
    let e = manifest_error("[rate_limit]\nmax_tokens = 5\nwindow_seconds = 1\nburst = 2\n");
    assert!(
        e.starts_with("milpa: m.toml:4: unknown field `burst`"),
        "{e}"
    );
}

#[test]
fn wrong_types_and_values_are_refused_with_their_line() {
    let e = manifest_error("\n[rate_limit]\nmax_tokens = \"lots\"\nwindow_seconds = 60\n");
    assert!(
        e.starts_with("milpa: m.toml:3: invalid type: string \"lots\""),
        "{e}"
    );
    let e = manifest_error("[rate_limit]\nmax_tokens = 0\nwindow_seconds = 60\n");
    assert!(
        e.starts_with("milpa: m.toml:2: rate_limit.max_tokens must be at least 1"),
        "{e}"
    );
    let e = manifest_error("[rate_limit]\nmax_tokens = 10\n");
    assert!(e.contains("missing field `window_seconds`"), "{e}");
    let e = manifest_error("[[tools]]\nname = \"t\"\ncommand = \"ls -l\"\n");
    assert!(
        e.starts_with("milpa: m.toml:3: invalid type: string \"ls -l\", expected a sequence"),
        "{e}"
    );
    let e = manifest_error("[[tools]]\nname = \"t\"\ncommand = []\n");
    assert!(
        e.starts_with("milpa: m.toml:3: tool `t`: command must name a program"),
        "{e}"
    );
    let e = manifest_error("[[tools]]\nname = \"t\"\ncommand = [\"\", \"x\"]\n");
    assert!(
        e.starts_with("milpa: m.toml:3: tool `t`: command must name a program"),
        "{e}"
    );
    let e = manifest_error("[[tools]]\nname = \"t\"\ncommand = [\"ls\"]\ntimeout_seconds = 0\n");
    assert!(
        e.starts_with("milpa: m.toml:4: tool `t`: timeout_seconds must be at least 1"),
        "{e}"
    );
    let e = manifest_error(
        "[[tools]]\nname = \"t\"\ncommand = [\"ls\", \"{p}\"]\n[tools.params.p]\ntype = \"array\"\n",
    );
    assert!(
        e.starts_with("milpa: m.toml:5: unknown variant `array`"),
        "{e}"
    );
    let e = manifest_error("[[rules]]\ntool = \"*\"\neffect = \"maybe\"\n");
    assert!(
        e.starts_with("milpa: m.toml:3: unknown variant `maybe`"),
        "{e}"
    );
    let e = manifest_error("[channels.mcp]\nrequire_auth = \"yes\"\n");
    assert!(e.starts_with("milpa: m.toml:2: invalid type"), "{e}");
    let e = manifest_error("[[tools]]\nname = \"t\"\n");
    assert!(
        e.starts_with("milpa: m.toml:2: tool `t`: set `command` (a program to run) or `wasm`"),
        "{e}"
    );
    let e = manifest_error("this is not toml\n");
    assert!(e.starts_with("milpa: m.toml:1:"), "{e}");
}

#[test]
fn semantic_errors_point_at_the_entry() {
    let e = manifest_error(
        "[[tools]]\nname = \"t\"\ncommand = [\"ls\", \"{pth}\"]\n\n[tools.params.path]\ntype = \"string\"\n",
    );
    assert!(
        e.starts_with("milpa: m.toml:3: tool `t`: placeholder {pth} names no param (params: path)"),
        "{e}"
    );
    let e = manifest_error("[[tools]]\nname = \"t\"\ncommand = [\"{prog}\"]\n");
    assert!(
        e.contains("m.toml:3: tool `t`: the program (command[0]) cannot be a placeholder"),
        "{e}"
    );
    let e = manifest_error(
        "[[tools]]\nname = \"t\"\ncommand = [\"ls\"]\n\n[[tools]]\nname = \"t\"\ncommand = [\"ls\"]\n",
    );
    assert!(
        e.starts_with("milpa: m.toml:6: tool `t` is declared twice"),
        "{e}"
    );
    let e = manifest_error("[[tools]]\nname = \"bad name\"\ncommand = [\"ls\"]\n");
    assert!(e.starts_with("milpa: m.toml:2: Invalid tool name"), "{e}");
    let e = manifest_error("[[auth.tokens]]\nprincipal = \"alice\"\nsha256 = \"s3cret\"\n");
    assert!(
        e.starts_with("milpa: m.toml:3: auth.tokens.sha256 must be the 64 hex digits"),
        "{e}"
    );
    let hash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    // The local callers' names are milpa's own: a token cannot take one.
    for reserved in [
        "stdio",
        "cli",
        "local-shell",
        "local-user",
        "local-approver",
    ] {
        let e = manifest_error(&format!(
            "[server]\nname = \"ops\"\n\n[[auth.tokens]]\nsha256 = \"{hash}\"\nprincipal = \"{reserved}\"\n"
        ));
        assert!(
            e.starts_with(&format!(
                "milpa: m.toml:6: auth.tokens.principal `{reserved}` is a name milpa keeps for \
                 its local callers (stdio, cli, local-...)"
            )),
            "{e}"
        );
    }
    let e = manifest_error(&format!(
        "[[auth.tokens]]\nprincipal = \"a\"\nsha256 = \"{hash}\"\n\n[[auth.tokens]]\nprincipal = \"b\"\nsha256 = \"{}\"\n",
        hash.to_uppercase()
    ));
    assert!(
        e.starts_with("milpa: m.toml:7: auth.tokens: the same token is listed twice"),
        "{e}"
    );
    let e = manifest_error(
        "[[tools]]\nname = \"t\"\ncommand = [\"ls\", \"{n}\"]\n[tools.params.n]\ntype = \"integer\"\ndefault = \"five\"\n",
    );
    assert!(
        e.starts_with("milpa: m.toml:2: tool `t`: param `n`: default is not a integer"),
        "{e}"
    );
}

#[test]
fn a_missing_manifest_file_is_a_usage_error() {
    let sb = Sandbox::new();
    let r = run(sb.milpa().args(["--manifest", "absent.toml", "tools"]));
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("absent.toml: cannot read"),
        "{}",
        r.stderr
    );
}

#[test]
fn milpa_toml_in_the_working_folder_is_the_default() {
    let sb = Sandbox::new();
    sb.write(
        "milpa.toml",
        "[[tools]]\nname = \"hello\"\ndescription = \"Says hello\"\ncommand = [\"echo\", \"hello\"]\n",
    );
    let r = run(sb.milpa().args(["tools", "--json"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let names: Vec<String> = r
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    // The manifest replaces the demo toolset.
    assert_eq!(names, ["hello"]);
    let r = run(sb.milpa().args(["call", "hello"]));
    assert_eq!((r.code, r.stdout.as_str()), (0, "✓ hello\n"));
}

#[test]
fn the_example_manifest_loads() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/milpa.toml");
    let sb = Sandbox::new();
    let r = run(sb.milpa().args(["--manifest", example, "tools", "--json"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let names: Vec<String> = r
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        names,
        [
            "request_verification",
            "resolve_verification",
            "disk_usage",
            "uptime",
            "log_tail",
            "restart_service",
            "flush_dns_cache"
        ]
    );
    let tail = &r.json()[4]["inputSchema"];
    assert_eq!(tail["additionalProperties"], false);
    assert_eq!(tail["required"], json!(["file"]));
    assert_eq!(tail["properties"]["lines"]["default"], 50);
    // Its policy is live: the rate limiter and the rule show in the plan.
    let r = run(sb.milpa().args([
        "--manifest",
        example,
        "tools",
        "inspect",
        "restart_service",
        "--channel",
        "mcp",
        "--actor",
        "dashboard",
        "--scope",
        "ops:read",
        "--json",
    ]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let plan = r.json();
    assert_eq!(plan["wiring"]["rateLimiter"], "present", "{plan}");
    assert_eq!(plan["wiring"]["ruleProvider"], "present");
    // The web override blocks mutating tools; mcp still requires a principal.
    let r = run(sb.milpa().args([
        "--manifest",
        example,
        "call",
        "restart_service",
        r#"{"unit":"x.service"}"#,
        "--channel",
        "web",
        "--actor",
        "alice",
        "--scope",
        "ops:write",
        "--json",
    ]));
    assert_eq!(r.code, 1);
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .contains("block_mutating"),
        "{}",
        r.stdout
    );
    // The rule denies the dashboard on mcp with its description.
    let r = run(sb.milpa().args([
        "--manifest",
        example,
        "call",
        "restart_service",
        r#"{"unit":"x.service"}"#,
        "--channel",
        "mcp",
        "--actor",
        "dashboard",
        "--scope",
        "ops:write",
        "--json",
    ]));
    assert_eq!(r.json()["error"], "Restarts are not for the dashboard.");
    // The pattern is enforced before anything runs.
    let r = run(sb.milpa().args([
        "--manifest",
        example,
        "call",
        "restart_service",
        r#"{"unit":"; reboot"}"#,
        "--json",
    ]));
    assert_eq!(r.json()["meta"]["code"], "VALIDATION_ERROR");
}

#[test]
fn rate_limits_and_confirmation_ttl_come_from_the_manifest() {
    let sb = Sandbox::new();
    let manifest = r#"
[rate_limit]
max_tokens = 1
window_seconds = 3600

[confirmation]
ttl_seconds = 5

[[tools]]
name = "hi"
command = ["echo", "hi"]

[[tools]]
name = "rm_thing"
command = ["true"]
mutating = true
confirm = true
"#;
    // One token: a read call passes, a second in the same process would not; across
    // processes the in-memory limiter starts afresh, so show it through a mutating call
    // (cost 5 > 1).
    let r = run_manifest(&sb, manifest, &["call", "hi", "--json"]);
    assert_eq!(r.code, 0);
    let r = run_manifest(&sb, manifest, &["call", "rm_thing", "--json"]);
    assert_eq!(r.code, 1);
    assert_eq!(r.json()["meta"]["code"], "RATE_LIMITED");
    let sb = Sandbox::new();
    let r = run_manifest(
        &sb,
        &manifest.replace("max_tokens = 1", "max_tokens = 10"),
        &["call", "rm_thing", "--json"],
    );
    let expires = r.json()["data"]["expires_at"].as_str().unwrap().to_owned();
    assert!(!expires.is_empty());
    // The manifest's TTL, not the default (60 s), is what the confirm step uses.
    let r = run_manifest(&sb, manifest, &["tools", "inspect", "rm_thing"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("expires after 5s"), "{}", r.stdout);
}

#[test]
fn channel_overrides_keep_unnamed_keys_and_new_channels_fail_closed() {
    let sb = Sandbox::new();
    let manifest = r#"
[channels.telegram]
block_mutating = true

[channels.kiosk]
block_mutating = true

[[tools]]
name = "write"
command = ["true"]
mutating = true

[[tools]]
name = "read"
command = ["echo", "ok"]
"#;
    let r = run_manifest(
        &sb,
        manifest,
        &[
            "call",
            "write",
            "--channel",
            "telegram",
            "--actor",
            "u",
            "--json",
        ],
    );
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .contains("block_mutating")
    );
    // kiosk started from the fail-closed policy: anonymous is denied…
    let r = run_manifest(
        &sb,
        manifest,
        &["call", "read", "--channel", "kiosk", "--json"],
    );
    assert!(r.json()["error"].as_str().unwrap().contains("require_auth"));
    // …a principal may read, and no warning about an unknown channel is printed.
    let r = run_manifest(
        &sb,
        manifest,
        &[
            "call",
            "read",
            "--channel",
            "kiosk",
            "--actor",
            "k",
            "--json",
        ],
    );
    assert_eq!(r.code, 0);
    assert!(
        !r.stderr.contains("not a registered channel"),
        "{}",
        r.stderr
    );
}

#[test]
fn verification_tools_follow_the_manifest() {
    let sb = Sandbox::new();
    let on = "[verification]\nresolve_scopes = [\"approve\"]\n";
    let r = run_manifest(&sb, on, &["tools", "--json"]);
    assert_eq!(r.json().as_array().unwrap().len(), 2);
    // resolve_scopes becomes the scope resolve_verification requires.
    let r = run_manifest(&sb, on, &["tools", "inspect", "resolve_verification"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("Lets you call it: it needs the scope approve, which you hold."),
        "{}",
        r.stdout
    );
    let r = run_manifest(
        &sb,
        "[verification]\nenabled = false\n",
        &["tools", "--json"],
    );
    assert_eq!(r.json(), json!([]));
    let r = run_manifest(&sb, "", &["tools", "--json"]);
    assert_eq!(r.json(), json!([]));
}

#[test]
fn allow_leading_dash_is_a_param_key_of_its_own() {
    // A boolean, off by default; it changes what the tool accepts, not its schema.
    let manifest = "[[tools]]\nname = \"t\"\ncommand = [\"ls\", \"{p}\"]\n[tools.params.p]\ntype = \"string\"\nallow_leading_dash = true\n";
    let sb = Sandbox::new();
    let r = run_manifest(&sb, manifest, &["tools", "inspect", "t", "--json"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(!r.stdout.contains("leading"), "{}", r.stdout);
    let e = manifest_error(
        "[[tools]]\nname = \"t\"\ncommand = [\"ls\", \"{p}\"]\n[tools.params.p]\ntype = \"string\"\nallow_leading_dash = \"yes\"\n",
    );
    assert!(e.starts_with("milpa: m.toml:6: invalid type"), "{e}");
    let e = manifest_error(
        "[[tools]]\nname = \"t\"\ncommand = [\"ls\", \"{p}\"]\n[tools.params.p]\ntype = \"string\"\nallow_dash = true\n",
    );
    assert!(
        e.starts_with("milpa: m.toml:6: unknown field `allow_dash`"),
        "{e}"
    );
}

#[test]
fn confirm_takes_false_true_or_human_and_nothing_else() {
    let tool = |confirm: &str| {
        format!(
            "[[tools]]\nname = \"t\"\ncommand = [\"true\"]\nmutating = true\nconfirm = {confirm}\n"
        )
    };
    let e = manifest_error(&tool("\"person\""));
    assert_eq!(
        e,
        "milpa: m.toml:5: confirm = \"person\" is not a confirmation mode; expected false, \
         true (the caller confirms) or \"human\" (a person approves)"
    );
    let e = manifest_error(&tool("\"yes\""));
    assert!(e.starts_with("milpa: m.toml:5: confirm = \"yes\""), "{e}");
    let e = manifest_error(&tool("2"));
    assert!(
        e.starts_with("milpa: m.toml:5: invalid type: integer `2`"),
        "{e}"
    );

    let sb = Sandbox::new();
    let human = tool("\"human\"");
    let r = run_manifest(&sb, &human, &["tools"]);
    assert!(r.stdout.contains("mutating,approval"), "{}", r.stdout);
    let r = run_manifest(&sb, &human, &["call", "t", "--json"]);
    assert_eq!(r.json()["meta"]["code"], "APPROVAL_PENDING");
    let r = run_manifest(&sb, &tool("true"), &["call", "t", "--json"]);
    assert_eq!(r.json()["meta"]["requires_confirmation"], true);
    let r = run_manifest(&sb, &tool("false"), &["call", "t", "--json"]);
    assert_eq!(r.json()["success"], true);
}

#[test]
fn approvals_settings_and_the_human_channel_flag_come_from_the_manifest() {
    let e = manifest_error("[approvals]\nttl_seconds = 60\nttl = 5\n");
    assert!(e.starts_with("milpa: m.toml:3: unknown field `ttl`"), "{e}");
    let e = manifest_error("[approvals]\nttl_seconds = 0\n");
    assert!(
        e.starts_with("milpa: m.toml:2: approvals.ttl_seconds must be at least 1"),
        "{e}"
    );
    let e = manifest_error("[approvals]\nnotify_command = [\"notify-send\", \"{who}\"]\n");
    assert!(
        e.starts_with("milpa: m.toml:2: approvals.notify_command: unknown placeholder {who}"),
        "{e}"
    );
    let e = manifest_error("[channels.mcp]\nrequire_human_approval = true\n");
    assert!(
        e.starts_with("milpa: m.toml:2: unknown field `require_human_approval`"),
        "{e}"
    );

    let sb = Sandbox::new();
    let manifest = r#"
[approvals]
ttl_seconds = 120

[channels.cli]
require_human_approval_for_mutating = true

[[tools]]
name = "write"
command = ["true"]
mutating = true

[[tools]]
name = "read"
command = ["true"]
"#;
    // Every mutating tool on the channel waits for a person; the TTL is the manifest's.
    let r = run_manifest(&sb, manifest, &["call", "write", "--json"]);
    assert_eq!(r.json()["meta"]["code"], "APPROVAL_PENDING", "{}", r.stdout);
    let r = run_manifest(&sb, manifest, &["call", "read", "--json"]);
    assert_eq!(r.json()["success"], true);
    let r = run_manifest(&sb, manifest, &["tools", "inspect", "write"]);
    assert!(
        r.stdout.contains(
            "Waits for a person's approval (the cli channel makes every tool that changes \
             things wait for a person)"
        ) && r.stdout.contains("(it expires after 120s)"),
        "{}",
        r.stdout
    );
    // The example manifest documents every [approvals] key, and it parses.
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/milpa.toml");
    let r = run(sb.milpa().args(["--manifest", example, "tools"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let text = std::fs::read_to_string(example).unwrap();
    for key in [
        "[approvals]",
        "ttl_seconds = 3600",
        "notify_command",
        "notify_env",
        "notify_timeout_seconds",
        "require_human_approval_for_mutating",
        "confirm = \"human\"",
    ] {
        assert!(text.contains(key), "the example lacks {key}");
    }
}

#[test]
fn the_example_manifest_works_as_written() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/milpa.toml");
    let sb = Sandbox::new();
    // Its Cedar rule matches the channel agents' calls arrive on (HTTP and stdio: `mcp`).
    let r = run(sb.milpa().args([
        "--manifest",
        example,
        "call",
        "restart_service",
        r#"{"unit": "sshd.service"}"#,
        "--channel",
        "mcp",
        "--actor",
        "alice",
        "--scope",
        "ops:write",
        "--json",
    ]));
    assert_eq!(r.code, 1, "{}", r.stdout);
    let error = r.json()["error"].as_str().unwrap().to_owned();
    assert!(
        error.starts_with("Denied by policy 'no-sshd-restarts-by-agents'"),
        "{error}"
    );
    let text = std::fs::read_to_string(example).unwrap();
    // Someone can decide parked calls on the page.
    assert!(text.contains("scopes = [\"approvals:grant\"]"));
    // And nothing in it takes the machine down.
    for word in ["reboot", "poweroff", "shutdown", "halt"] {
        assert!(
            !text.contains(&format!("\"{word}\"")),
            "the example runs {word}"
        );
    }
}

#[test]
fn check_finds_what_serve_would_refuse_without_starting_anything() {
    let sb = Sandbox::new();
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/milpa.toml");
    let r = run(sb.milpa().args(["--manifest", example, "check", "--json"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["ok"], true);
    assert_eq!(r.json()["tools"], 7);
    // Nothing was started or stored: no state file appears.
    assert!(!sb.path().join("state.db").exists());

    // An upstream whose program is nowhere: named with its line, not launched.
    sb.write(
        "up.toml",
        "[[upstreams]]\nname = \"files\"\ncommand = [\"no-such-mcp-server\", \"--stdio\"]\n",
    );
    let r = run(sb.milpa().args(["--manifest", "up.toml", "check"]));
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .contains("up.toml:3: upstream `files`: program `no-such-mcp-server` is not found"),
        "{}",
        r.stderr
    );
    // A bearer token variable that is not set.
    sb.write(
        "http.toml",
        "[[upstreams]]\nname = \"api\"\nurl = \"http://127.0.0.1:9/mcp\"\nbearer_env = \"MILPA_TEST_NO_SUCH_TOKEN\"\n",
    );
    let r = run(sb.milpa().args(["--manifest", "http.toml", "check"]));
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .contains("http.toml:4: upstream `api`: bearer_env names `MILPA_TEST_NO_SUCH_TOKEN`, which is not set"),
        "{}",
        r.stderr
    );
    // A Cedar policy that does not parse, with its file and line.
    sb.write(
        "bad.cedar",
        "permit(principal, action, resource) when { nonsense };\n",
    );
    sb.write("cedar.toml", "[policy]\ncedar = \"bad.cedar\"\n");
    let r = run(sb.milpa().args(["--manifest", "cedar.toml", "check"]));
    assert_eq!(r.code, 2, "{}", r.stdout);
    assert!(r.stderr.contains("bad.cedar"), "{}", r.stderr);
    // A sound one, as text.
    sb.write(
        "ok.toml",
        "[[tools]]\nname = \"hi\"\ndescription = \"Says hi\"\ncommand = [\"echo\", \"hi\"]\n",
    );
    let r = run(sb.milpa().args(["--manifest", "ok.toml", "check"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.stdout,
        "ok.toml is sound: 1 tool(s), 0 resource(s), 0 template(s), 0 prompt(s)\n"
    );
}
