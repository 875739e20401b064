//! `milpa tools inspect` speaks to the person using the tool (what a call does, who can
//! approve it, why a caller would be refused), not in the library's words; `--json` keeps
//! the plan's keys exactly.

mod common;

use common::{Sandbox, run, run_manifest};
use serde_json::Value;

const LIBRARY_WORDS: [&str; 7] = [
    "wired",
    "dispatcher",
    "rule provider",
    "absent",
    "dormant",
    "presence",
    "require_auth",
];

fn assert_user_words(text: &str) {
    for words in LIBRARY_WORDS {
        assert!(!text.contains(words), "{words:?} in\n{text}");
    }
}

#[test]
fn a_confirmed_tool_is_explained_step_by_step() {
    let sb = Sandbox::new();
    let r = run(sb.milpa().args(["tools", "inspect", "notes_delete"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let text = &r.stdout;
    assert!(
        text.starts_with(
            "notes_delete — Deletes a note (asks for confirmation first).\n\
             Called on the cli channel as local-shell, holding every scope (*).\n"
        ),
        "{text}"
    );
    for line in [
        "  ✓ Checks the arguments against the tool's input schema",
        "  ✓ Lets you call it: it needs the scope notes:write, which you hold.",
        "  ✓ Asks for a confirmation first: the first call runs nothing and answers with a one-time token, which expires after 60s;",
        "  ✓ Runs the tool (it changes things). A run longer than 30s is flagged as slow, not stopped.",
        "  ✓ Records the call in the audit trail",
        "Not in effect:\n  - rate limit: none is configured\n  - event listeners: none is registered",
    ] {
        assert!(text.contains(line), "{line:?} missing from\n{text}");
    }
    assert_user_words(text);
}

#[test]
fn a_parked_tool_says_who_can_approve_or_that_no_one_can() {
    let sb = Sandbox::new();
    let r = run(sb.milpa().args(["tools", "inspect", "notes_clear"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("Waits for a person's approval"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains(
            "Who can approve: someone other than local-shell, with `milpa approvals grant <id>` \
             at their own shell; or on the /approvals page of `milpa serve --http`"
        ),
        "{}",
        r.stdout
    );
    assert_user_words(&r.stdout);
    let r = run(sb
        .milpa()
        .args(["--store", "memory", "tools", "inspect", "notes_clear"]));
    assert!(
        r.stdout
            .contains("No one can approve it: with --store memory"),
        "{}",
        r.stdout
    );
    // A manifest whose tokens cannot grant: no one on the page.
    let manifest = r#"
[[auth.tokens]]
sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
principal = "agent"
scopes = ["files:read"]

[[tools]]
name = "wipe"
description = "Wipes the scratch folder"
command = ["true"]
mutating = true
confirm = "human"
"#;
    let r = run_manifest(&sb, manifest, &["tools", "inspect", "wipe"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("not on the /approvals page: no token of the manifest holds approvals:grant"),
        "{}",
        r.stdout
    );
}

#[test]
fn an_anonymous_caller_is_told_it_would_be_refused() {
    let sb = Sandbox::new();
    let r = run(sb
        .milpa()
        .args(["tools", "inspect", "notes_add", "--channel", "mcp"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains(
            "  ✗ Refuses you here: the mcp channel needs a signed-in caller, and you call \
             anonymously.\n    Nothing after this point happens for you."
        ),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("Runs the tool"), "{}", r.stdout);
    assert_user_words(&r.stdout);
    let r = run(sb.milpa().args([
        "tools",
        "inspect",
        "notes_add",
        "--channel",
        "mcp",
        "--actor",
        "ana",
        "--scope",
        "notes:read",
    ]));
    assert!(
        r.stdout
            .contains("the tool needs the scope notes:write, which you do not hold"),
        "{}",
        r.stdout
    );
}

#[test]
fn json_keeps_the_plans_keys() {
    let sb = Sandbox::new();
    let r = run(sb
        .milpa()
        .args(["tools", "inspect", "notes_delete", "--json"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let plan = r.json();
    let keys = |v: &Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
    assert_eq!(
        keys(&plan),
        [
            "schemaVersion",
            "operation",
            "channel",
            "context",
            "assumptions",
            "wiring",
            "steps"
        ]
    );
    assert_eq!(keys(&plan["context"]), ["actor", "scopes", "mode"]);
    assert_eq!(
        keys(&plan["wiring"]),
        ["rateLimiter", "dispatcher", "ruleProvider"]
    );
    assert_eq!(plan["wiring"]["dispatcher"], "absent");
    let steps = plan["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 11);
    for step in steps {
        assert_eq!(
            keys(step),
            [
                "kind", "role", "presence", "blocking", "mutates", "wraps", "source"
            ]
        );
    }
    assert_eq!(steps[7]["source"], "no dispatcher wired");
}
