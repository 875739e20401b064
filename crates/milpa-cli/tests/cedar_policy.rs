//! `[policy] cedar = …` in the manifest: a `forbid` on an argument denies a command tool's
//! call, `tools inspect` names Cedar and the policy, a bad policy file stops start-up.

mod common;

use common::{Sandbox, run, run_manifest};

const MANIFEST: &str = r#"
[policy]
cedar = "policy.cedar"

[[tools]]
name = "show"
command = ["echo", "{path}"]

[tools.params.path]
type = "string"
required = true
"#;

const POLICY: &str = r#"
@id("no-etc")
forbid(principal, action, resource == Tool::"show")
when { context.args.path like "/etc/*" };
"#;

#[test]
fn a_forbid_on_an_argument_denies_the_call() {
    let sb = Sandbox::new();
    sb.write("policy.cedar", POLICY);
    let ok = run_manifest(&sb, MANIFEST, &["call", "show", r#"{"path": "/srv/a"}"#]);
    assert_eq!(ok.code, 0, "{}{}", ok.stdout, ok.stderr);
    assert!(ok.stdout.contains("/srv/a"), "{}", ok.stdout);
    let denied = run_manifest(
        &sb,
        MANIFEST,
        &["call", "show", r#"{"path": "/etc/passwd"}"#],
    );
    assert_eq!(denied.code, 1, "{}{}", denied.stdout, denied.stderr);
    assert!(
        denied.stdout.contains(
            "Denied by policy 'no-etc' for tool 'show' on channel 'cli' (principal: local-shell)."
        ),
        "{}",
        denied.stdout
    );
    let json = run_manifest(
        &sb,
        MANIFEST,
        &["call", "show", r#"{"path": "/etc/passwd"}"#, "--json"],
    );
    assert_eq!(json.code, 1);
    assert_eq!(json.json()["meta"]["code"], "FORBIDDEN");
    assert_eq!(
        json.json()["error"],
        "Denied by policy 'no-etc' for tool 'show' on channel 'cli' (principal: local-shell)."
    );
}

#[test]
fn inspect_names_cedar_and_the_policies_that_can_apply() {
    let sb = Sandbox::new();
    sb.write("policy.cedar", POLICY);
    let r = run_manifest(&sb, MANIFEST, &["tools", "inspect", "show"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains(
            "Then a call policy reads the arguments and may refuse the call: cedar \
                (./policy.cedar, default allow): policies that can apply: no-etc."
        ),
        "{}",
        r.stdout
    );
}

#[test]
fn a_bad_policy_file_stops_start_up_naming_file_line_and_column() {
    let sb = Sandbox::new();
    sb.write("policy.cedar", "@id(\"x\")\nforbid(principal, action, resource)\nwhen { context.args.path lik \"/etc/*\" };\n");
    let r = run_manifest(&sb, MANIFEST, &["tools"]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("m.toml:3: [policy] ./policy.cedar:3:"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("syntax error"), "{}", r.stderr);
    // A policy that does not fit the entity model is refused the same way.
    sb.write(
        "policy.cedar",
        "forbid(principal, action, resource) when { resource.mutatin };\n",
    );
    let r = run_manifest(&sb, MANIFEST, &["tools"]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("./policy.cedar:1:44: invalid policy"),
        "{}",
        r.stderr
    );
}

#[test]
fn the_policy_section_refuses_unknown_keys_and_values() {
    let sb = Sandbox::new();
    sb.write("policy.cedar", POLICY);
    let typo = MANIFEST.replace(
        "cedar = \"policy.cedar\"",
        "cedar = \"policy.cedar\"\ndefualt = \"deny\"",
    );
    let r = run_manifest(&sb, &typo, &["tools"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("m.toml:4: unknown field `defualt`"),
        "{}",
        r.stderr
    );
    let bad = MANIFEST.replace(
        "cedar = \"policy.cedar\"",
        "cedar = \"policy.cedar\"\ndefault = \"maybe\"",
    );
    let r = run_manifest(&sb, &bad, &["tools"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("m.toml:4:"), "{}", r.stderr);
    let empty = MANIFEST.replace("cedar = \"policy.cedar\"", "cedar = []");
    let r = run(sb.with_manifest(&empty).arg("tools"));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("m.toml:3: policy.cedar lists no file"),
        "{}",
        r.stderr
    );
}

#[test]
fn with_default_deny_a_call_no_permit_covers_is_denied() {
    let sb = Sandbox::new();
    sb.write("policy.cedar", "@id(\"srv\") permit(principal, action, resource) when { context.args.path like \"/srv/*\" };\n");
    let manifest = MANIFEST.replace(
        "cedar = \"policy.cedar\"",
        "cedar = [\"policy.cedar\"]\ndefault = \"deny\"",
    );
    let ok = run_manifest(&sb, &manifest, &["call", "show", r#"{"path": "/srv/a"}"#]);
    assert_eq!(ok.code, 0, "{}{}", ok.stdout, ok.stderr);
    let denied = run_manifest(&sb, &manifest, &["call", "show", r#"{"path": "/home/a"}"#]);
    assert_eq!(denied.code, 1);
    assert!(
        format!("{}{}", denied.stdout, denied.stderr)
            .contains("no Cedar policy permits it (default deny)"),
        "{}{}",
        denied.stdout,
        denied.stderr
    );
}

/// `show` with its `path` declared a path: what the policy and the command see is the
/// normal form.
const PATH_MANIFEST: &str = r#"
[policy]
cedar = "policy.cedar"

[[tools]]
name = "show"
command = ["echo", "{path}"]

[tools.params.path]
type = "path"
required = true

[[tools]]
name = "note"
command = ["echo", "{path}"]

[tools.params.path]
type = "path"
required = true
within = ["/srv/notes"]
"#;

#[test]
fn a_path_param_is_normalised_before_the_policy_sees_it() {
    let sb = Sandbox::new();
    sb.write("policy.cedar", POLICY);
    // A plain string param: these spellings of /etc/hostname slip past `like "/etc/*"`.
    let slipped = run_manifest(
        &sb,
        MANIFEST,
        &["call", "show", r#"{"path": "//etc/hostname"}"#],
    );
    assert_eq!(slipped.code, 0, "{}", slipped.stdout);
    for spelling in ["//etc/hostname", "/./etc/hostname", "/tmp/../etc/hostname"] {
        let args = serde_json::json!({ "path": spelling }).to_string();
        let denied = run_manifest(&sb, PATH_MANIFEST, &["call", "show", &args, "--json"]);
        assert_eq!(denied.code, 1, "{spelling}: {}", denied.stdout);
        assert_eq!(denied.json()["meta"]["code"], "FORBIDDEN", "{spelling}");
        assert!(
            denied.json()["error"]
                .as_str()
                .unwrap()
                .starts_with("Denied by policy 'no-etc'"),
            "{spelling}: {}",
            denied.stdout
        );
    }
    // The command gets the normal form.
    let ok = run_manifest(
        &sb,
        PATH_MANIFEST,
        &["call", "show", r#"{"path": "/srv/./a//b/../c"}"#, "--json"],
    );
    assert_eq!(ok.code, 0, "{}", ok.stdout);
    assert_eq!(ok.json()["data"], "/srv/a/c", "{}", ok.stdout);
    // A relative path is refused: it means whatever the working folder makes it.
    let relative = run_manifest(
        &sb,
        PATH_MANIFEST,
        &["call", "show", r#"{"path": "etc/hostname"}"#, "--json"],
    );
    assert_eq!(relative.code, 1);
    assert_eq!(relative.json()["meta"]["code"], "VALIDATION_ERROR");
    assert_eq!(relative.json()["error"], "path: must be an absolute path");
    // `within`: a path outside the folder, however spelled, is refused.
    let outside = run_manifest(
        &sb,
        PATH_MANIFEST,
        &[
            "call",
            "note",
            r#"{"path": "/srv/notes/../secrets"}"#,
            "--json",
        ],
    );
    assert_eq!(
        outside.json()["meta"]["code"],
        "VALIDATION_ERROR",
        "{}",
        outside.stdout
    );
    assert_eq!(
        outside.json()["error"],
        "path: is outside the allowed folders (/srv/notes)"
    );
    let inside = run_manifest(
        &sb,
        PATH_MANIFEST,
        &["call", "note", r#"{"path": "/srv/notes/a.txt"}"#],
    );
    assert_eq!(inside.code, 0, "{}", inside.stdout);
}
