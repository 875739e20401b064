//! A command tool whose failure quotes its password argument: `milpa call` (rendered and
//! `--json`) prints the result, and the audit on stderr, without the password.

mod common;

use common::{Sandbox, run_manifest};

const SECRET: &str = "s3cr3t-Hunter22";

const LOGIN_TOOL: &str = r#"
[[tools]]
name = "login"
description = "Logs in, badly"
command = ["sh", "-c", "echo \"login as $1 failed: wrong password $2\" >&2; exit 1", "login", "{user}", "{password}"]

[tools.params.user]
type = "string"
required = true

[tools.params.password]
type = "string"
required = true
"#;

#[test]
fn a_failing_command_does_not_print_its_password_argument() {
    let sb = Sandbox::new();
    let args = serde_json::json!({"user": "ann", "password": SECRET}).to_string();
    for json in [false, true] {
        let mut argv = vec!["call", "login", args.as_str()];
        if json {
            argv.push("--json");
        }
        let r = run_manifest(&sb, LOGIN_TOOL, &argv);
        assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
        assert!(!r.stdout.contains(SECRET), "stdout: {}", r.stdout);
        assert!(!r.stderr.contains(SECRET), "stderr: {}", r.stderr);
        // The rest of the command's stderr is still there for the caller.
        let shown = if json {
            r.json()["error"].as_str().unwrap().to_owned()
        } else {
            format!("{}{}", r.stdout, r.stderr)
        };
        assert!(
            shown.contains("login as ann failed: wrong password [REDACTED]"),
            "json={json}: {shown}"
        );
    }
}
