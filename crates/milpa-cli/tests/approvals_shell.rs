//! Deciding an approval from a shell needs a person at a terminal: standard input must be a
//! terminal and the approval's short code (or its tool's name) typed there; a pipe or
//! `/dev/null` decides nothing, and `[approvals] shell = "off"` refuses shell decisions.

mod common;

use common::terminal::{decide, run_in_terminal};
use common::{Run, Sandbox, run};
use milpa_cli::approval_code::short_code;

/// `deploy` appends its `env` to deployed.log, so each run is one visible line.
fn manifest(approvals: &str) -> String {
    format!(
        r#"
[approvals]
{approvals}

[[tools]]
name = "deploy"
description = "Deploys to an environment"
command = ["sh", "-c", "printf '%s\n' \"$1\" >> deployed.log", "sh", "{{env}}"]
mutating = true
confirm = "human"

[tools.params.env]
type = "string"
required = true
"#
    )
}

fn milpa(sb: &Sandbox) -> assert_cmd::Command {
    let mut cmd = sb.milpa();
    cmd.args(["--manifest", "m.toml"]);
    cmd
}

fn deployed(sb: &Sandbox) -> String {
    std::fs::read_to_string(sb.path().join("deployed.log")).unwrap_or_default()
}

/// The agent's call, parked; its approval id.
fn park(sb: &Sandbox) -> String {
    let parked = run(milpa(sb).args([
        "call",
        "deploy",
        r#"{"env":"prod"}"#,
        "--actor",
        "agent",
        "--json",
    ]));
    // Nothing ran yet: exit 3.
    assert_eq!(parked.code, 3, "{}", parked.stderr);
    parked.json()["data"]["approval_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no approval id: {}", parked.stdout))
        .to_owned()
}

/// The agent's replay.
fn replay(sb: &Sandbox, id: &str) -> Run {
    run(milpa(sb).args([
        "call",
        "deploy",
        "--actor",
        "agent",
        "--confirm-token",
        id,
        "--json",
    ]))
}

fn state(sb: &Sandbox, id: &str) -> String {
    let shown = run(milpa(sb).args(["approvals", "show", id, "--json"]));
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    shown.json()["state"].as_str().unwrap().to_owned()
}

fn still_pending(sb: &Sandbox, id: &str) {
    assert_eq!(state(sb, id), "pending");
    let early = replay(sb, id);
    // Still nothing ran: exit 3.
    assert_eq!(early.code, 3, "{}", early.stdout);
    assert!(
        early.stdout.contains("APPROVAL_PENDING"),
        "{}",
        early.stdout
    );
    assert_eq!(deployed(sb), "");
}

#[test]
fn a_call_parked_from_the_shell_names_the_cli_as_its_client() {
    let sb = Sandbox::new();
    sb.write("m.toml", &manifest(""));
    let id = park(&sb);
    let shown = run(milpa(&sb).args(["approvals", "show", &id, "--json"]));
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    let shown = shown.json();
    assert_eq!(shown["client"], "milpa CLI", "{shown}");
    assert_eq!(shown["channel"], "cli", "{shown}");
    assert_eq!(shown["description"], "Deploys to an environment", "{shown}");
}

#[test]
fn a_decision_from_a_pipe_decides_nothing() {
    let sb = Sandbox::new();
    sb.write("m.toml", &manifest(""));
    let id = park(&sb);
    for verb in ["grant", "reject"] {
        // Standard input a pipe, as with `< /dev/null` or `echo CODE |`.
        let mut piped = milpa(&sb);
        piped
            .args(["approvals", verb, &id, "--actor", "alice"])
            .write_stdin(format!("{}\n", short_code(&id)));
        let r = run(&mut piped);
        assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
        assert!(
            r.stderr
                .contains("needs a person at a terminal, and standard input is not one")
                && r.stderr.contains("/approvals page")
                && r.stderr.contains("nothing was decided"),
            "{}",
            r.stderr
        );
        assert_eq!(r.stdout, "");
    }
    still_pending(&sb, &id);
}

#[test]
fn a_wrong_code_at_the_terminal_decides_nothing() {
    let sb = Sandbox::new();
    sb.write("m.toml", &manifest(""));
    let id = park(&sb);
    for typed in [
        "\n",
        "yes\n",
        "ZZZZZZ\n",
        &format!("{}\n", short_code("other")),
    ] {
        let r = run_in_terminal(
            milpa(&sb).args(["approvals", "grant", &id, "--actor", "alice"]),
            typed,
        );
        assert_eq!(r.code, 1, "{typed:?}: {}{}", r.stdout, r.stderr);
        assert!(
            r.stderr.contains(&format!(
                "that is not the code of approval {id} (see `milpa approvals show {id}`); nothing was decided"
            )),
            "{}",
            r.stderr
        );
        // The person was shown what they would approve.
        assert!(
            r.stderr.contains("deploy(env=prod)") && r.stderr.contains("requested by  agent"),
            "{}",
            r.stderr
        );
    }
    still_pending(&sb, &id);
}

#[test]
fn the_right_code_at_the_terminal_grants_and_the_replay_runs_once() {
    let sb = Sandbox::new();
    sb.write("m.toml", &manifest(""));
    let id = park(&sb);
    // The code is shown by `approvals show` and `approvals list`.
    let code = short_code(&id);
    let shown = run(milpa(&sb).args(["approvals", "show", &id]));
    assert!(
        shown.stdout.contains(&format!("code          {code}\n")),
        "{}",
        shown.stdout
    );
    let listed = run(milpa(&sb).args(["approvals"]));
    assert!(
        listed.stdout.starts_with("ID ") && listed.stdout.contains("  CODE  "),
        "{}",
        listed.stdout
    );
    assert!(
        listed.stdout.contains(&format!("{id}  {code}  ")),
        "{}",
        listed.stdout
    );
    let json = run(milpa(&sb).args(["approvals", "--json"])).json();
    assert_eq!(json[0]["code"], code.as_str());

    // In lower case, as a person may type it.
    let r = run_in_terminal(
        milpa(&sb).args(["approvals", "grant", &id, "--actor", "alice"]),
        &format!("{}\n", code.to_lowercase()),
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(
        r.stdout,
        format!("granted {id} (deploy(env=prod)) as alice\n")
    );
    assert_eq!(state(&sb, &id), "granted");

    let done = replay(&sb, &id);
    assert_eq!(done.code, 0, "{}{}", done.stdout, done.stderr);
    assert_eq!(deployed(&sb), "prod\n");
    let again = replay(&sb, &id);
    assert_eq!(again.code, 1, "{}", again.stdout);
    assert_eq!(deployed(&sb), "prod\n");
}

#[test]
fn the_tool_name_typed_at_the_terminal_decides_too() {
    let sb = Sandbox::new();
    sb.write("m.toml", &manifest(""));
    let id = park(&sb);
    let r = run_in_terminal(
        milpa(&sb).args([
            "approvals",
            "reject",
            &id,
            "--actor",
            "alice",
            "--reason",
            "no",
        ]),
        "deploy\n",
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(state(&sb, &id), "rejected");
    let refused = replay(&sb, &id);
    assert!(refused.stdout.contains("FORBIDDEN"), "{}", refused.stdout);
    assert_eq!(deployed(&sb), "");
}

#[test]
fn shell_off_refuses_every_decision_from_a_shell() {
    let sb = Sandbox::new();
    sb.write("m.toml", &manifest(r#"shell = "off""#));
    let id = park(&sb);
    for verb in ["grant", "reject"] {
        let r = decide(milpa(&sb).args(["approvals", verb, &id, "--actor", "alice"]));
        assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
        assert!(
            r.stderr.contains("[approvals] shell = \"off\"")
                && r.stderr.contains("/approvals page of `milpa serve --http`"),
            "{}",
            r.stderr
        );
    }
    still_pending(&sb, &id);
    // Listing and showing still work.
    assert_eq!(run(milpa(&sb).args(["approvals"])).code, 0);
}
