//! The subcommands and global flags on the built-in demo toolset: output, exit codes.

mod common;

use common::{Sandbox, run};
use serde_json::json;

#[test]
fn tools_lists_the_demo_toolset_as_a_table() {
    let sb = Sandbox::new();
    let r = run(sb.milpa().arg("tools"));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert!(lines[0].starts_with("NAME"), "{}", r.stdout);
    for name in [
        "echo",
        "add",
        "notes_add",
        "notes_list",
        "notes_delete",
        "request_verification",
        "resolve_verification",
    ] {
        assert!(
            lines
                .iter()
                .any(|l| l.split_whitespace().next() == Some(name)),
            "{name} missing from\n{}",
            r.stdout
        );
    }
    let delete = lines
        .iter()
        .find(|l| l.starts_with("notes_delete"))
        .unwrap();
    assert!(delete.contains("mutating,confirm") && delete.contains("notes:write"));
}

#[test]
fn tools_json_prints_the_summaries() {
    let sb = Sandbox::new();
    let r = run(sb.milpa().args(["tools", "--json"]));
    assert_eq!(r.code, 0);
    let tools = r.json();
    let add = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "add")
        .unwrap();
    assert_eq!(add["inputSchema"]["required"], json!(["a", "b"]));
    assert_eq!(add["inputSchema"]["properties"]["a"]["type"], "integer");
}

#[test]
fn the_main_job_adds_two_numbers() {
    let sb = Sandbox::new();
    let r = run(sb.milpa().args(["call", "add", r#"{"a":2,"b":3}"#]));
    assert_eq!((r.code, r.stdout.as_str()), (0, "✓ 5\n"), "{}", r.stderr);
    let r = run(sb
        .milpa()
        .args(["call", "add", r#"{"a":2,"b":3}"#, "--json"]));
    let result = r.json();
    assert_eq!(result["success"], true);
    assert_eq!(result["data"], 5);
    assert_eq!(result["meta"]["channel"], "cli");
    assert_eq!(result["meta"]["principal"], "local-shell");
    let keys: Vec<&String> = result.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["success", "data", "message", "error", "meta"]);
}

#[test]
fn echo_returns_its_text_and_defaults_to_empty_args() {
    let sb = Sandbox::new();
    let r = run(sb
        .milpa()
        .args(["call", "echo", r#"{"text":"hola"}"#, "--json"]));
    assert_eq!(r.json()["data"], "hola");
    // No ARGS_JSON is `{}`: a validation error, exit 1.
    let r = run(sb.milpa().args(["call", "echo", "--json"]));
    assert_eq!(r.code, 1);
    assert_eq!(r.json()["error"], "Missing required field: text");
    assert_eq!(r.json()["meta"]["code"], "VALIDATION_ERROR");
}

#[test]
fn bad_args_json_is_a_usage_error() {
    let sb = Sandbox::new();
    let r = run(sb.milpa().args(["call", "add", "{a: 2}"]));
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("ARGS_JSON is not valid JSON"),
        "{}",
        r.stderr
    );
    assert!(r.stdout.is_empty());
    let r = run(sb.milpa().args(["call", "add", "[2, 3]"]));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("ARGS_JSON must be a JSON object"));
}

#[test]
fn refused_and_failed_calls_exit_1() {
    let sb = Sandbox::new();
    let r = run(sb.milpa().args(["call", "nope", "--json"]));
    assert_eq!(r.code, 1);
    assert_eq!(r.json()["meta"]["code"], "TOOL_NOT_FOUND");
    assert_eq!(r.json()["error"], "Tool not found: nope");
    let r = run(sb.milpa().args(["call", "add", r#"{"a":"2","b":3}"#]));
    assert_eq!(r.code, 1);
    assert!(
        r.stdout.contains("'a' must be an integer (got a string)"),
        "{}",
        r.stdout
    );
    let r = run(sb
        .milpa()
        .args(["call", "add", r#"{"a":9223372036854775807,"b":1}"#]));
    assert_eq!(r.code, 1);
}

#[test]
fn caller_flags_change_who_calls() {
    let sb = Sandbox::new();
    // mcp requires a principal.
    let r = run(sb.milpa().args([
        "call",
        "echo",
        r#"{"text":"x"}"#,
        "--channel",
        "mcp",
        "--json",
    ]));
    assert_eq!(r.code, 1);
    assert_eq!(r.json()["meta"]["code"], "FORBIDDEN");
    assert_eq!(
        r.json()["error"],
        "channel 'mcp' requires an authenticated principal (require_auth) \u{2014} none provided."
    );
    // A principal without the scope.
    let r = run(sb.milpa().args([
        "call",
        "notes_add",
        r#"{"text":"x"}"#,
        "--channel",
        "mcp",
        "--actor",
        "bob",
        "--scope",
        "notes:read",
        "--json",
    ]));
    assert_eq!(r.code, 1);
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .starts_with("Missing required scope")
    );
    // With it (one of several --scope flags).
    let r = run(sb.milpa().args([
        "call",
        "notes_add",
        r#"{"text":"x"}"#,
        "--channel",
        "mcp",
        "--actor",
        "bob",
        "--scope",
        "other",
        "--scope",
        "notes:*",
        "--json",
    ]));
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert_eq!(r.json()["data"], json!({"id": 1, "text": "x"}));
    assert_eq!(r.json()["meta"]["principal"], "bob");
    assert_eq!(r.json()["meta"]["channel"], "mcp");
    // An unknown channel fails closed.
    let r = run(sb
        .milpa()
        .args(["call", "echo", r#"{"text":"x"}"#, "--channel", "pager"]));
    assert_eq!(r.code, 1);
}

#[test]
fn plan_mode_runs_nothing() {
    let sb = Sandbox::new();
    let r = run(sb
        .milpa()
        .args(["call", "notes_delete", r#"{"id":1}"#, "--plan", "--json"]));
    assert_eq!(r.code, 0, "{}", r.stdout);
    let result = r.json();
    assert_eq!(result["success"], true);
    assert_ne!(result["meta"]["requires_confirmation"], true);
    assert!(
        result["data"].to_string().contains("notes_delete"),
        "{result}"
    );
}

#[test]
fn confirmation_without_a_terminal_prints_the_token() {
    let sb = Sandbox::new();
    let r = run(sb.milpa().args([
        "--store",
        "memory",
        "call",
        "notes_delete",
        r#"{"id":1}"#,
        "--json",
    ]));
    // Nothing ran: exit 3, and the JSON keeps the original's shape.
    assert_eq!(r.code, 3);
    let result = r.json();
    assert_eq!(result["success"], true);
    assert_eq!(result["meta"]["requires_confirmation"], true);
    let token = result["data"]["confirm_token"].as_str().unwrap();
    assert_eq!(token.len(), 32);
    assert!(
        r.stderr.contains(&format!("--confirm-token {token}")),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("lives only in this process"),
        "{}",
        r.stderr
    );
    // A token from another process is unknown to this one (memory store).
    let r = run(sb.milpa().args([
        "--store",
        "memory",
        "call",
        "notes_delete",
        r#"{"id":1}"#,
        "--confirm-token",
        token,
        "--json",
    ]));
    assert_eq!(r.code, 1);
    assert_eq!(r.json()["error"], "Invalid or expired confirmation token");
}

#[test]
fn a_piped_confirmation_prints_the_command_that_confirms_and_that_command_works() {
    let sb = Sandbox::new();
    run(sb
        .milpa()
        .args(["call", "notes_add", r#"{"text": "buy milk"}"#]));
    let asked = run(sb.milpa().args(["call", "notes_delete", r#"{"id": 1}"#]));
    assert_eq!(asked.code, 3, "{}", asked.stderr);
    assert_eq!(
        asked.stdout,
        "Nothing was done: notes_delete(id=1) needs a confirmation.\n"
    );
    assert!(!asked.stdout.contains("Type 'yes'"));
    let command = asked
        .stderr
        .lines()
        .skip_while(|l| !l.starts_with("milpa: to confirm"))
        .nth(1)
        .unwrap_or_else(|| panic!("no command in: {}", asked.stderr))
        .trim()
        .to_owned();
    assert!(
        command.contains(r#"call notes_delete '{"id": 1}' --confirm-token "#),
        "{command}"
    );
    // What it printed, run by a shell, confirms: the note is gone.
    let mut shell = assert_cmd::Command::new("sh");
    shell
        .args(["-c", &command])
        .current_dir(sb.path())
        .env(common::HOME_ENV, sb.path())
        .env_remove(common::STORE_ENV)
        .env("NO_COLOR", "1");
    let confirmed = run(&mut shell);
    assert_eq!(
        confirmed.code, 0,
        "{}{}",
        confirmed.stdout, confirmed.stderr
    );
    let listed = run(sb.milpa().args(["call", "notes_list", "--json"]));
    assert_eq!(listed.json()["data"], json!([]), "{}", listed.stdout);
}

#[test]
fn inspect_prints_the_plan_as_text_or_json() {
    let sb = Sandbox::new();
    let r = run(sb.milpa().args(["tools", "inspect", "notes_delete"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("confirm"), "{}", r.stdout);
    let r = run(sb.milpa().args([
        "tools",
        "inspect",
        "notes_delete",
        "--channel",
        "mcp",
        "--actor",
        "bob",
        "--scope",
        "notes:write",
        "--plan",
        "--json",
    ]));
    assert_eq!(r.code, 0);
    let plan = r.json();
    assert_eq!(plan["schemaVersion"], "1.0");
    assert_eq!(plan["operation"], "notes_delete");
    assert_eq!(plan["channel"], "mcp");
    assert_eq!(
        plan["context"],
        json!({"actor": "bob", "scopes": ["notes:write"], "mode": "plan"})
    );
    let kinds: Vec<&str> = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "resolve",
            "validate",
            "clamp",
            "authorize",
            "rate_limit",
            "plan_mode",
            "confirm",
            "emit_executing",
            "execute",
            "contain_exception",
            "audit"
        ]
    );
    let r = run(sb.milpa().args(["tools", "--json", "inspect", "add"]));
    assert_eq!(r.json()["operation"], "add");
    let r = run(sb.milpa().args(["tools", "inspect", "nope"]));
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("Tool not found: nope"));
}

#[test]
fn usage_errors_exit_2_and_help_exits_0() {
    let sb = Sandbox::new();
    for args in [
        &["--bogus"][..],
        &[][..],
        &["call"][..],
        &["frobnicate"][..],
        &["serve", "--stdio", "--http", "127.0.0.1:1"][..],
        &["serve", "--http", "not-an-address"][..],
        &["serve", "--http", "example.com:80"][..],
        &["tools", "inspect"][..],
        &["proxy", "--protocol", "2025-06-18", "--", "server"][..],
    ] {
        let r = run(sb.milpa().args(args));
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(r.stdout.is_empty(), "{args:?}");
    }
    let r = run(sb
        .milpa()
        .args(["proxy", "--protocol", "1", "--", "server"]));
    assert!(
        r.stderr.contains("expected auto, 2026-07-28 or 2025-11-25"),
        "{}",
        r.stderr
    );
    let r = run(sb.milpa().arg("--help"));
    assert_eq!(r.code, 0);
    assert!(r.stdout.contains("Usage: milpa"));
    let r = run(sb.milpa().args(["call", "--help"]));
    assert!(r.stdout.contains("--confirm-token"));
    let r = run(sb.milpa().arg("--version"));
    assert_eq!(r.code, 0);
}

#[test]
fn store_urls_are_checked_and_an_unreachable_redis_is_named() {
    let sb = Sandbox::new();
    let r = run(sb.milpa().args(["--store", "memory", "tools"]));
    assert_eq!(r.code, 0);
    let r = run(sb.milpa().args(["--store", "sqlite:state.db", "tools"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(sb.path().join("state.db").exists());
    // Nothing listens on port 1.
    let r = run(sb
        .milpa()
        .args(["call", "add", "--store", "redis://:pw@127.0.0.1:1"]));
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .contains("store redis://:***@127.0.0.1:1: cannot connect"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("pw@"), "{}", r.stderr);
    let r = run(sb.milpa().args(["--store", "postgres://x", "tools"]));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("unknown store"));
    let r = run(sb.milpa().env("MILPA_STORE", "nope").arg("tools"));
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("MILPA_STORE=nope: unknown store"),
        "{}",
        r.stderr
    );
}

#[test]
fn serve_refuses_non_loopback_addresses() {
    let sb = Sandbox::new();
    let r = run(sb.milpa().args(["serve", "--http", "0.0.0.0:0"]));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("loopback"), "{}", r.stderr);
}

/// `script` gives the command a terminal, so `milpa call` asks before a confirmed action.
fn in_terminal(sb: &Sandbox, command: &str, answer: &str) -> Option<common::Run> {
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: no `script` command");
        return None;
    }
    let bin = assert_cmd::cargo::cargo_bin("milpa");
    let line = format!("{} {command}", bin.display());
    let mut cmd = assert_cmd::Command::new("script");
    cmd.current_dir(sb.path())
        .env("NO_COLOR", "1")
        .env("MILPA_HOME", sb.path())
        .args(["-qec", &line, "/dev/null"])
        .write_stdin(answer.to_owned())
        .timeout(std::time::Duration::from_secs(30));
    Some(run(&mut cmd))
}

#[test]
fn a_terminal_is_asked_before_a_confirmed_action() {
    let sb = Sandbox::new();
    sb.write(
        "milpa.toml",
        r#"
[[tools]]
name = "touch"
description = "Creates a file"
command = ["touch", "--", "{path}"]
mutating = true
confirm = true

[tools.params.path]
type = "string"
required = true
"#,
    );
    let Some(r) = in_terminal(&sb, r#"call touch '{"path": "no.txt"}'"#, "n\n") else {
        return;
    };
    assert_eq!(r.code, 3, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("Proceed? [y/N]"), "{}", r.stdout);
    assert!(r.stdout.contains("Not confirmed"));
    assert!(!r.stdout.contains("Type 'yes'"), "{}", r.stdout);
    assert!(!sb.path().join("no.txt").exists());

    let r = in_terminal(&sb, r#"call touch '{"path": "yes.txt"}'"#, "y\n").unwrap();
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(sb.path().join("yes.txt").exists());
}

#[test]
fn the_audit_line_on_stderr_has_no_colour_and_no_forged_line() {
    let sb = Sandbox::new();
    // Not a terminal, NO_COLOR unset: still no escape sequences.
    let r = run(sb
        .milpa()
        .env_remove("NO_COLOR")
        .env("RUST_LOG", "milpa::audit=info")
        .args([
            "call",
            "x\n2026 WARN milpa::audit: [ToolAudit] forged",
            "{}",
        ]));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(!r.stderr.contains('\u{1b}'), "{:?}", r.stderr);
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{:?}", r.stderr);
    assert!(
        lines[0].contains("[ToolAudit]")
            && lines[0].contains("| x\\n2026 WARN milpa::audit: [ToolAudit] forged |"),
        "{:?}",
        r.stderr
    );
}

#[test]
fn call_escapes_control_characters_of_tool_output() {
    let sb = Sandbox::new();
    let r = run(sb.milpa().args([
        "call",
        "echo",
        r#"{"text":"\u001b]0;pwned\u0007\u001b[2Jred\rline\nnext\tcol"}"#,
    ]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.stdout,
        "✓ \\u{1b}]0;pwned\\u{7}\\u{1b}[2Jred\\rline\nnext\tcol\n"
    );
}

#[test]
fn call_and_tables_escape_bidi_controls_and_line_separators() {
    let sb = Sandbox::new();
    let r = run(sb.milpa().args([
        "call",
        "echo",
        r#"{"text":"a\u202Eb\u2028c\u2066d\u200Be\uFEFFf"}"#,
    ]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.stdout,
        "✓ a\\u{202e}b\\u{2028}c\\u{2066}d\\u{200b}e\\u{feff}f\n"
    );
    // A manifest tool's description reaches the table escaped too.
    let r = common::run_manifest(
        &sb,
        "[[tools]]\nname = \"t\"\ndescription = \"safe \u{202E}txt.exe\u{2029}x\"\ncommand = [\"true\"]\n",
        &["tools"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("safe \\u{202e}txt.exe\\u{2029}x"),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains('\u{202E}') && !r.stdout.contains('\u{2029}'));
}

#[test]
fn an_unknown_tool_gets_the_nearest_name_when_one_is_near() {
    let sb = Sandbox::new();
    let r = run(sb.milpa().args(["call", "note_add", r#"{"text": "x"}"#]));
    assert_eq!(r.code, 1);
    assert!(
        r.stdout.contains("Tool not found: note_add"),
        "{}",
        r.stdout
    );
    assert!(
        r.stderr.contains("milpa: did you mean `notes_add`?"),
        "{}",
        r.stderr
    );
    let r = run(sb.milpa().args(["call", "zzzz"]));
    assert!(!r.stderr.contains("did you mean"), "{}", r.stderr);
    let r = run(sb.milpa().args(["tools", "inspect", "notes_lst"]));
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("did you mean `notes_list`?"),
        "{}",
        r.stderr
    );
}

#[test]
fn an_unknown_subcommand_gets_the_nearest_name_and_exit_2() {
    let sb = Sandbox::new();
    // At the top, one level down, and for a mistyped flag: clap's suggestion, usage exit 2,
    // and nothing on standard output (a script reading it gets nothing half-done).
    for (args, typo, nearest) in [
        (&["toolz"][..], "'toolz'", "'tools'"),
        (&["aproovals", "list"][..], "'aproovals'", "'approvals'"),
        (&["approvals", "lst"][..], "'lst'", "'list'"),
        (&["audit", "verfy"][..], "'verfy'", "'verify'"),
        (&["tools", "inspcet", "add"][..], "'inspcet'", "'inspect'"),
    ] {
        let r = run(sb.milpa().args(args));
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(r.stdout.is_empty(), "{args:?}: {}", r.stdout);
        assert!(
            r.stderr
                .contains(&format!("error: unrecognized subcommand {typo}")),
            "{args:?}: {}",
            r.stderr
        );
        assert!(
            r.stderr
                .contains(&format!("tip: a similar subcommand exists: {nearest}")),
            "{args:?}: {}",
            r.stderr
        );
    }
    let r = run(sb.milpa().args(["--mainfest", "m.toml", "tools"]));
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .contains("tip: a similar argument exists: '--manifest'"),
        "{}",
        r.stderr
    );
    // Far from every name: no guess.
    let r = run(sb.milpa().arg("qqqqqq"));
    assert_eq!(r.code, 2);
    assert!(!r.stderr.contains("similar"), "{}", r.stderr);
}

#[test]
fn completions_load_in_bash_and_are_printed_for_zsh_and_fish() {
    let sb = Sandbox::new();
    let bin = assert_cmd::cargo::cargo_bin("milpa");
    let script = format!(
        "source <('{}' completions bash) && complete -p milpa",
        bin.display()
    );
    let mut bash = assert_cmd::Command::new("bash");
    bash.args(["-c", &script]);
    let loaded = run(&mut bash);
    assert_eq!(loaded.code, 0, "{}", loaded.stderr);
    assert!(
        loaded.stdout.contains("-F _milpa milpa"),
        "{}",
        loaded.stdout
    );
    let zsh = run(sb.milpa().args(["completions", "zsh"]));
    assert!(zsh.stdout.starts_with("#compdef milpa"), "{}", zsh.stdout);
    let fish = run(sb.milpa().args(["completions", "fish"]));
    assert!(fish.stdout.contains("complete -c milpa"), "{}", fish.stdout);
    // Subcommands and their flags are completed, not only the top level.
    assert!(fish.stdout.contains("confirm-token"));
}

#[test]
fn every_subcommand_has_examples_and_the_global_options_stay_short() {
    let sb = Sandbox::new();
    for subcommand in [
        "tools",
        "call",
        "serve",
        "proxy",
        "approvals",
        "audit",
        "resources",
        "prompts",
        "read",
        "prompt",
        "check",
        "completions",
    ] {
        let help = run(sb.milpa().args([subcommand, "--help"]));
        assert_eq!(help.code, 0, "{subcommand}");
        assert!(
            help.stdout.contains("\nExamples:\n  milpa ")
                || help.stdout.contains("\nExamples:\n  source <(milpa"),
            "{subcommand}: {}",
            help.stdout
        );
        let store = help
            .stdout
            .lines()
            .find(|l| l.trim_start().starts_with("--store"))
            .unwrap_or_else(|| panic!("{subcommand}: no --store line"));
        assert!(store.len() < 120, "{subcommand}: {store}");
    }
    // The long story is told once, at the top.
    let top = run(sb.milpa().arg("--help"));
    assert!(top.stdout.contains("~/.local/state/milpa/state.db"));
    assert!(top.stdout.contains("3 a call that did not run"));
}
