//! Approvals a person gives (DESIGN §5), end to end on the default SQLite store: an agent's
//! call parked over HTTP, `milpa approvals` listing and deciding it from a shell as another
//! principal, and the agent's replay running the first call's arguments once. Also: reject,
//! expiry, unknown ids, the memory store, the audit trail, and a server killed with SIGKILL
//! while an approval waits.

mod common;

use std::net::SocketAddr;

use common::http::{Server, call, initialize, spawn_http};
use common::terminal::{decide, run_or_decide};
use common::{Run, Sandbox, run, trail_until};
use milpa_mcp::auth::sha256_hex;
use serde_json::{Value, json};

const AGENT: (&str, &str) = ("Authorization", "Bearer agent-token");

/// `deploy` appends its `env` to deployed.log, so each run is one visible line.
fn manifest(ttl_seconds: u64) -> String {
    format!(
        r#"
[approvals]
ttl_seconds = {ttl_seconds}

[[auth.tokens]]
sha256 = "{agent}"
principal = "agent"
scopes = ["ops:write"]

[[auth.tokens]]
sha256 = "{alice}"
principal = "alice"
scopes = ["approvals:grant"]

[[tools]]
name = "deploy"
description = "Deploys to an environment"
command = ["sh", "-c", "printf '%s\n' \"$1\" >> deployed.log", "sh", "{{env}}"]
mutating = true
confirm = "human"
scopes = ["ops:write"]

[tools.params.env]
type = "string"
required = true
"#,
        agent = sha256_hex("agent-token"),
        alice = sha256_hex("alice-token"),
    )
}

fn start(sb: &Sandbox, manifest: &str) -> (Server, SocketAddr) {
    sb.write("m.toml", manifest);
    spawn_http(
        sb,
        &["--manifest", "m.toml", "serve", "--http", "127.0.0.1:0"],
    )
}

/// `milpa --manifest m.toml ARGS…` (the manifest `start` wrote); a decision (`approvals
/// grant|reject ID`) at a terminal, typing the approval's code as a person does.
fn milpa(sb: &Sandbox, args: &[&str]) -> Run {
    let mut cmd = sb.milpa();
    cmd.args(["--manifest", "m.toml"]).args(args);
    run_or_decide(&mut cmd)
}

fn code(result: &Value) -> &str {
    result["_meta"]["milpa"]["code"].as_str().unwrap_or("")
}

fn deployed(sb: &Sandbox) -> String {
    std::fs::read_to_string(sb.path().join("deployed.log")).unwrap_or_default()
}

/// Parks `deploy {env}` as the agent; returns the approval id.
fn park(addr: SocketAddr, session: &str, env: &str) -> String {
    let parked = call(addr, session, &[AGENT], "deploy", json!({"env": env}));
    assert_eq!(parked["isError"], true, "{parked}");
    assert_eq!(code(&parked), "APPROVAL_PENDING", "{parked}");
    assert_eq!(
        parked["structuredContent"]["action_summary"],
        format!("deploy(env={env})")
    );
    parked["structuredContent"]["approval_id"]
        .as_str()
        .expect("data.approval_id")
        .to_owned()
}

fn replay(addr: SocketAddr, session: &str, id: &str, extra: Value) -> Value {
    let mut args = json!({"confirm_token": id});
    if let (Some(args), Some(extra)) = (args.as_object_mut(), extra.as_object()) {
        args.extend(extra.clone());
    }
    call(addr, session, &[AGENT], "deploy", args)
}

#[test]
fn a_grant_by_another_principal_runs_the_first_calls_arguments_once() {
    let sb = Sandbox::new();
    let (_server, addr) = start(&sb, &manifest(3600));
    let session = initialize(addr, &[AGENT]);
    let id = park(addr, &session, "prod");

    // Replayed while nobody decided: still pending, nothing ran.
    let early = replay(addr, &session, &id, json!({}));
    assert_eq!(code(&early), "APPROVAL_PENDING", "{early}");
    assert_eq!(early["structuredContent"]["approval_id"], id.as_str());
    assert_eq!(deployed(&sb), "");

    // Another process lists it: the parked call, its caller and arguments.
    let listed = milpa(&sb, &["approvals", "list", "--json"]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let items = listed.json();
    let item = items
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == id.as_str())
        .expect("the parked call is listed");
    assert_eq!(item["kind"], "tool_call");
    assert_eq!(item["state"], "pending");
    assert_eq!(item["tool"], "deploy");
    assert_eq!(item["channel"], "mcp");
    assert_eq!(item["requested_by"], "agent");
    assert_eq!(item["args"], json!({"env": "prod"}));
    // What the page shows too: the tool's description and effect, where it goes (a local
    // tool: nowhere upstream), this server (named after the manifest) and the client.
    assert_eq!(item["description"], "Deploys to an environment");
    assert_eq!(item["mutating"], true);
    assert_eq!(item["upstream"], Value::Null);
    assert_eq!(item["server"], "m");
    assert_eq!(item["client"], "milpa-cli-test");
    // `approvals` alone is the table.
    let table = milpa(&sb, &["approvals"]);
    assert_eq!(table.code, 0, "{}", table.stderr);
    let mut lines = table.stdout.lines();
    let header = lines.next().unwrap();
    for column in ["ID", "KIND", "SUMMARY", "REQUESTED BY", "AGE", "EXPIRES IN"] {
        assert!(header.contains(column), "{header}");
    }
    let row = lines.next().unwrap();
    assert!(
        row.starts_with(&id) && row.contains("tool_call  deploy(env=prod)  agent"),
        "{row}"
    );
    assert!(row.ends_with("59m") || row.ends_with("1h"), "{row}");

    // The caller cannot approve its own call.
    let own = milpa(&sb, &["approvals", "grant", &id, "--actor", "agent"]);
    assert_eq!(own.code, 1, "{}", own.stdout);
    assert!(
        own.stderr.contains(&format!(
            "'agent' asked for approval '{id}' and cannot decide it"
        )),
        "{}",
        own.stderr
    );
    assert_eq!(
        replay(addr, &session, &id, json!({}))["_meta"]["milpa"]["code"],
        "APPROVAL_PENDING"
    );

    // Alice can.
    let granted = milpa(
        &sb,
        &[
            "approvals",
            "grant",
            &id,
            "--actor",
            "alice",
            "--reason",
            "ship it",
        ],
    );
    assert_eq!(granted.code, 0, "{}", granted.stderr);
    assert_eq!(
        granted.stdout,
        format!("granted {id} (deploy(env=prod)) as alice: ship it\n")
    );
    assert_eq!(deployed(&sb), "", "a grant runs nothing by itself");

    // The replay runs the parked arguments, whatever it sends along.
    let ran = replay(addr, &session, &id, json!({"env": "staging"}));
    assert_eq!(ran["isError"], false, "{ran}");
    assert_eq!(deployed(&sb), "prod\n");
    // Once.
    let again = replay(addr, &session, &id, json!({}));
    assert_eq!(code(&again), "VALIDATION_ERROR", "{again}");
    assert_eq!(
        again["content"][0]["text"],
        "Invalid or expired confirmation token"
    );
    assert_eq!(deployed(&sb), "prod\n");

    // Decided already: refused, naming who decided.
    let late = milpa(&sb, &["approvals", "reject", &id, "--actor", "bob"]);
    assert_eq!(late.code, 1);
    assert!(
        late.stderr.contains("is already decided") && late.stderr.contains("by alice"),
        "{}",
        late.stderr
    );
    let shown = milpa(&sb, &["approvals", "show", &id, "--json"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    let shown = shown.json();
    assert_eq!(shown["state"], "executed");
    assert_eq!(shown["grants"][0]["principal"], "alice");
    assert_eq!(shown["grants"][0]["reason"], "ship it");
    let text = milpa(&sb, &["approvals", "show", &id]);
    assert!(
        text.stdout.contains("state         executed"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains("granted       by alice at "),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains("arguments     {\"env\":\"prod\"}"),
        "{}",
        text.stdout
    );
    for line in [
        "description   Deploys to an environment\n",
        "effect        mutating (changes state)\n",
        "server        m\n",
        "channel       mcp\n",
        "client        milpa-cli-test\n",
    ] {
        assert!(text.stdout.contains(line), "{line}\n{}", text.stdout);
    }
    assert!(!text.stdout.contains("upstream"), "{}", text.stdout);
    // Nothing is waiting any more.
    let empty = milpa(&sb, &["approvals"]);
    assert_eq!(empty.stdout, "No approvals are waiting.\n");
    assert_eq!(milpa(&sb, &["approvals", "--json"]).json(), json!([]));

    // The trail: parked by the agent, granted by alice on the cli channel, run once.
    // The server commits its records after a short linger: wait for the run's record.
    let records = trail_until(
        || milpa(&sb, &["audit", "--json", "--tool", "deploy"]),
        |records| records.iter().any(|r| r["outcome"] == "executed"),
    );
    let with = |outcome: &str| -> Vec<&Value> {
        records.iter().filter(|r| r["outcome"] == outcome).collect()
    };
    // The first call and the two replays made while it waited.
    assert_eq!(with("approval_pending").len(), 3, "{records:#?}");
    assert!(
        with("approval_pending")
            .iter()
            .all(|r| r["principal"] == "agent")
    );
    let granted = with("approval_granted");
    assert_eq!(granted.len(), 1, "{records:#?}");
    assert_eq!(granted[0]["principal"], "alice");
    assert_eq!(granted[0]["channel"], "cli");
    let executed = with("executed");
    assert_eq!(executed.len(), 1, "{records:#?}");
    assert_eq!(executed[0]["principal"], "agent");
    let refused = with("approval_refused");
    assert_eq!(
        refused.len(),
        2,
        "self-approval and the late reject: {records:#?}"
    );
}

#[test]
fn a_reject_makes_the_replay_forbidden_naming_who_and_why() {
    let sb = Sandbox::new();
    let (_server, addr) = start(&sb, &manifest(3600));
    let session = initialize(addr, &[AGENT]);
    let id = park(addr, &session, "prod");

    let own = milpa(&sb, &["approvals", "reject", &id, "--actor", "agent"]);
    assert_eq!(own.code, 1);
    assert!(own.stderr.contains("cannot decide it"), "{}", own.stderr);

    let rejected = milpa(
        &sb,
        &[
            "approvals",
            "reject",
            &id,
            "--actor",
            "alice",
            "--reason",
            "not on a Friday",
        ],
    );
    assert_eq!(rejected.code, 0, "{}", rejected.stderr);
    assert_eq!(
        rejected.stdout,
        format!("rejected {id} (deploy(env=prod)) as alice: not on a Friday\n")
    );
    let refused = replay(addr, &session, &id, json!({}));
    assert_eq!(code(&refused), "FORBIDDEN", "{refused}");
    let message = refused["content"][0]["text"].as_str().unwrap();
    assert!(
        message.contains("Rejected by alice: not on a Friday"),
        "{message}"
    );
    assert_eq!(deployed(&sb), "");

    // A grant after the reject changes nothing.
    let late = milpa(&sb, &["approvals", "grant", &id, "--actor", "bob"]);
    assert_eq!(late.code, 1);
    assert!(
        late.stderr.contains("already decided: rejected by alice"),
        "{}",
        late.stderr
    );
    assert_eq!(code(&replay(addr, &session, &id, json!({}))), "FORBIDDEN");
    assert_eq!(deployed(&sb), "");
}

#[test]
fn an_expired_approval_can_be_neither_decided_nor_replayed() {
    let sb = Sandbox::new();
    let (_server, addr) = start(&sb, &manifest(1));
    let session = initialize(addr, &[AGENT]);
    let id = park(addr, &session, "prod");
    std::thread::sleep(std::time::Duration::from_millis(2200));

    let granted = milpa(&sb, &["approvals", "grant", &id, "--actor", "alice"]);
    assert_eq!(granted.code, 1, "{}", granted.stdout);
    assert!(
        granted
            .stderr
            .contains(&format!("Approval '{id}' expired at ")),
        "{}",
        granted.stderr
    );
    let replayed = replay(addr, &session, &id, json!({}));
    assert_eq!(code(&replayed), "VALIDATION_ERROR", "{replayed}");
    assert_eq!(deployed(&sb), "");
    // No longer listed as waiting; `show` says what became of it.
    assert_eq!(milpa(&sb, &["approvals", "--json"]).json(), json!([]));
    assert_eq!(
        milpa(&sb, &["approvals", "show", &id, "--json"]).json()["state"],
        "expired"
    );
}

#[test]
fn unknown_ids_and_usage_errors() {
    let sb = Sandbox::new();
    sb.write("m.toml", &manifest(3600));
    for verb in ["grant", "reject"] {
        let r = milpa(&sb, &["approvals", verb, "no-such-id", "--actor", "alice"]);
        assert_eq!(r.code, 1);
        assert_eq!(
            r.stderr.trim_end(),
            "milpa: No approval with id 'no-such-id'."
        );
    }
    let r = milpa(&sb, &["approvals", "show", "no-such-id"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("No approval with id 'no-such-id'."));
    // Usage errors: no id, an unknown subcommand, a blank actor.
    assert_eq!(milpa(&sb, &["approvals", "grant"]).code, 2);
    assert_eq!(milpa(&sb, &["approvals", "approve", "x"]).code, 2);
    let blank = milpa(&sb, &["approvals", "grant", "x", "--actor", " "]);
    assert_eq!(blank.code, 2);
    assert!(blank.stderr.contains("--actor must name a principal"));
}

#[test]
fn the_memory_store_refuses_every_approvals_command() {
    let sb = Sandbox::new();
    for args in [
        &["approvals"][..],
        &["approvals", "list", "--json"],
        &["approvals", "show", "x"],
        &["approvals", "grant", "x", "--actor", "alice"],
        &["approvals", "reject", "x"],
    ] {
        let mut cmd = sb.milpa();
        cmd.args(["--store", "memory"]).args(args);
        let r = run(&mut cmd);
        assert_eq!(r.code, 2, "{args:?}");
        assert!(r.stdout.is_empty());
        assert!(
            r.stderr
                .contains("the memory store lives inside one process"),
            "{}",
            r.stderr
        );
    }
}

#[test]
fn the_actor_defaults_to_user_then_local_shell() {
    let sb = Sandbox::new();
    // The demo's notes_clear waits for a person; on the cli channel the caller is
    // local-shell.
    let mut park = sb.milpa();
    park.args(["call", "notes_clear", "--json"]);
    let parked = run(&mut park);
    assert_eq!(parked.code, 3, "nothing ran yet");
    let id = parked.json()["data"]["approval_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        parked
            .stderr
            .contains(&format!("milpa approvals grant {id}")),
        "{}",
        parked.stderr
    );

    // Without USER the approver is local-shell: the caller itself, refused.
    let mut own = sb.milpa();
    own.env_remove("USER").args(["approvals", "grant", &id]);
    let own = decide(&mut own);
    assert_eq!(own.code, 1);
    assert!(
        own.stderr.contains("'local-shell' asked for approval"),
        "{}",
        own.stderr
    );
    // With USER, that person.
    let mut ana = sb.milpa();
    ana.env("USER", "ana").args(["approvals", "grant", &id]);
    let ana = decide(&mut ana);
    assert_eq!(ana.code, 0, "{}", ana.stderr);
    assert_eq!(ana.stdout, format!("granted {id} (notes_clear()) as ana\n"));

    let mut replay = sb.milpa();
    replay.args(["call", "notes_clear", "--confirm-token", &id, "--json"]);
    let replayed = run(&mut replay);
    assert_eq!(replayed.code, 0, "{}", replayed.stdout);
    assert_eq!(replayed.json()["data"], json!({"deleted": 0}));
}

#[test]
fn verification_requests_wait_in_the_same_queue() {
    let sb = Sandbox::new();
    let mut open = sb.milpa();
    open.args([
        "call",
        "request_verification",
        r#"{"subject": "rotate the keys"}"#,
        "--actor",
        "bot",
        "--json",
    ]);
    let opened = run(&mut open);
    assert_eq!(opened.code, 0, "{}", opened.stdout);
    let id = opened.json()["data"]["request_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let listed = run(sb.milpa().args(["approvals", "--json"])).json();
    assert_eq!(listed[0]["id"], id.as_str());
    assert_eq!(listed[0]["kind"], "verification");
    assert_eq!(listed[0]["summary"], "rotate the keys");
    assert_eq!(listed[0]["requested_by"], "bot");

    let own = decide(
        sb.milpa()
            .args(["approvals", "grant", &id, "--actor", "bot"]),
    );
    assert_eq!(own.code, 1, "{}", own.stdout);
    let granted = decide(
        sb.milpa()
            .args(["approvals", "grant", &id, "--actor", "alice"]),
    );
    assert_eq!(granted.code, 0, "{}", granted.stderr);
    assert_eq!(
        granted.stdout,
        format!("granted {id} (rotate the keys) as alice\n")
    );
    assert_eq!(
        run(sb.milpa().args(["approvals", "show", &id, "--json"])).json()["state"],
        "granted"
    );
}

#[test]
fn a_parked_call_survives_a_server_killed_with_sigkill() {
    let sb = Sandbox::new();
    let (mut server, addr) = start(&sb, &manifest(3600));
    let session = initialize(addr, &[AGENT]);
    let id = park(addr, &session, "prod");
    server.0.kill().unwrap(); // SIGKILL
    server.0.wait().unwrap();
    drop(server);

    // A new server on the same file; the decision comes from a shell meanwhile.
    let granted = milpa(&sb, &["approvals", "grant", &id, "--actor", "alice"]);
    assert_eq!(granted.code, 0, "{}", granted.stderr);
    let (_server, addr) = spawn_http(
        &sb,
        &["--manifest", "m.toml", "serve", "--http", "127.0.0.1:0"],
    );
    let session = initialize(addr, &[AGENT]);
    let ran = replay(addr, &session, &id, json!({}));
    assert_eq!(ran["isError"], false, "{ran}");
    assert_eq!(deployed(&sb), "prod\n");
    let again = replay(addr, &session, &id, json!({}));
    assert_eq!(code(&again), "VALIDATION_ERROR", "{again}");
    assert_eq!(deployed(&sb), "prod\n");
}

#[test]
fn approvals_are_shared_through_redis_too() {
    let redis = common::redis::RedisServer::start();
    let url = format!("redis://127.0.0.1:{}", redis.port);
    let sb = Sandbox::new();
    sb.write("m.toml", &manifest(3600));
    let as_agent = ["--actor", "agent", "--scope", "ops:write", "--json"];
    let parked = milpa(
        &sb,
        &[
            &["--store", &url, "call", "deploy", r#"{"env": "prod"}"#][..],
            &as_agent,
        ]
        .concat(),
    );
    let id = parked.json()["data"]["approval_id"]
        .as_str()
        .expect("parked")
        .to_owned();
    let listed = milpa(&sb, &["--store", &url, "approvals", "--json"]);
    assert_eq!(listed.json()[0]["id"], id.as_str(), "{}", listed.stderr);
    let granted = milpa(
        &sb,
        &[
            "--store",
            &url,
            "approvals",
            "grant",
            &id,
            "--actor",
            "alice",
        ],
    );
    assert_eq!(granted.code, 0, "{}", granted.stderr);
    let ran = milpa(
        &sb,
        &[
            &["--store", &url, "call", "deploy", "--confirm-token", &id][..],
            &as_agent,
        ]
        .concat(),
    );
    assert_eq!(ran.code, 0, "{}", ran.stdout);
    assert_eq!(deployed(&sb), "prod\n");
    let again = milpa(
        &sb,
        &["--store", &url, "approvals", "grant", &id, "--actor", "bob"],
    );
    assert_eq!(again.code, 1);
    assert!(again.stderr.contains("by alice"), "{}", again.stderr);
}

#[test]
fn secrets_in_a_parked_call_are_redacted_wherever_people_read_it() {
    let sb = Sandbox::new();
    sb.write(
        "m.toml",
        r#"
[[tools]]
name = "login"
command = ["true", "{user}", "{password}"]
mutating = true
confirm = "human"

[tools.params.user]
type = "string"
required = true

[tools.params.password]
type = "string"
required = true
"#,
    );
    let parked = milpa(
        &sb,
        &[
            "call",
            "login",
            r#"{"user": "ana", "password": "hunter2-secret"}"#,
            "--actor",
            "agent",
            "--json",
        ],
    );
    assert_eq!(parked.json()["meta"]["code"], "APPROVAL_PENDING");
    let id = parked.json()["data"]["approval_id"]
        .as_str()
        .unwrap()
        .to_owned();
    for args in [
        &["approvals"][..],
        &["approvals", "--json"],
        &["approvals", "show", &id],
        &["approvals", "show", &id, "--json"],
    ] {
        let r = milpa(&sb, args);
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
        assert!(r.stdout.contains("ana"), "{args:?}: {}", r.stdout);
        assert!(!r.stdout.contains("hunter2"), "{args:?}: {}", r.stdout);
    }
    let shown = milpa(&sb, &["approvals", "show", &id, "--json"]).json();
    assert_eq!(shown["args"]["user"], "ana");
    assert_ne!(shown["args"]["password"], "hunter2-secret");
    // The parked call itself keeps the real value: the granted replay runs it.
    let granted = milpa(&sb, &["approvals", "grant", &id, "--actor", "alice"]);
    assert!(!granted.stdout.contains("hunter2"), "{}", granted.stdout);
    let ran = milpa(
        &sb,
        &[
            "call",
            "login",
            "--confirm-token",
            &id,
            "--actor",
            "agent",
            "--json",
        ],
    );
    assert_eq!(ran.json()["success"], true, "{}", ran.stdout);
}

#[test]
fn an_approver_with_a_passkey_is_refused_in_the_shell_and_enroll_prints_a_one_time_link() {
    use milpa::approval::passkeys::{PasskeyRecord, enrolment_token_hash};

    let sb = Sandbox::new();
    let (_server, addr) = start(&sb, &manifest(3600));
    let session = initialize(addr, &[AGENT]);
    let id = park(addr, &session, "prod");

    // The enrolment link: printed once, only its hash kept, with the actor and 10 minutes.
    let enrolled = milpa(
        &sb,
        &[
            "approvals",
            "enroll",
            "--actor",
            "alice",
            "--url",
            "http://localhost:8080/approvals",
        ],
    );
    assert_eq!(enrolled.code, 0, "{}", enrolled.stderr);
    let link = enrolled
        .stdout
        .split_whitespace()
        .find(|w| w.starts_with("http://localhost:8080/approvals/enroll/"))
        .unwrap_or_else(|| panic!("a link: {}", enrolled.stdout));
    let token = link.rsplit('/').next().unwrap();
    assert_eq!(token.len(), 64, "{token}");
    assert!(
        enrolled.stdout.contains("valid 10 minutes"),
        "{}",
        enrolled.stdout
    );
    let store = milpa_sqlite::SqliteStore::open(sb.path().join("state.db")).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let now = milpa::confirm::unix_millis(std::time::SystemTime::now());
    let passkeys = store.passkeys();
    let actor = runtime
        .block_on(async {
            passkeys
                .peek_enrolment(&enrolment_token_hash(token), now)
                .await
        })
        .unwrap();
    assert_eq!(actor.as_deref(), Some("alice"));
    let later = runtime
        .block_on(async {
            passkeys
                .peek_enrolment(&enrolment_token_hash(token), now + 601_000)
                .await
        })
        .unwrap();
    assert_eq!(later, None, "the link lasts 10 minutes");
    let conn = store.open_connection().unwrap();
    let kept: String = conn
        .query_row("SELECT token_hash FROM milpa_passkey_enrolments", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_ne!(kept, token, "the token itself is not stored");

    // Once alice has a passkey (the page stores it after the browser's attestation), the
    // shell does not decide for her.
    runtime
        .block_on(async {
            passkeys
                .add(PasskeyRecord::new("alice", "Y3JlZA", "{}", now))
                .await
        })
        .unwrap();
    for verb in ["grant", "reject"] {
        let refused = milpa(&sb, &["approvals", verb, &id, "--actor", "alice"]);
        assert_eq!(refused.code, 1, "{verb}: {}", refused.stdout);
        assert!(
            refused.stderr.contains("alice enrolled a passkey")
                && refused.stderr.contains("approvals page (/approvals)"),
            "{}",
            refused.stderr
        );
    }
    let listed = milpa(&sb, &["approvals", "show", &id, "--json"]);
    assert_eq!(listed.json()["state"], "pending", "{}", listed.stdout);
    assert_eq!(deployed(&sb), "");
}

#[test]
fn a_passkey_rp_id_that_does_not_fit_the_origin_stops_serve_at_start() {
    let sb = Sandbox::new();
    let manifest = format!(
        "{}\n",
        manifest(3600).replace(
            "[approvals]\n",
            "[approvals]\nrp_id = \"example.org\"\norigin = \"https://tools.example.com\"\n",
        )
    );
    sb.write("m.toml", &manifest);
    let refused = milpa(&sb, &["serve", "--http", "127.0.0.1:0"]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("m.toml:3")
            && refused
                .stderr
                .contains("rp_id \"example.org\" must be the host of origin"),
        "{}",
        refused.stderr
    );
}

#[test]
fn servers_sharing_a_store_each_list_their_own_queue() {
    let sb = Sandbox::new();
    let tool = "[[tools]]\nname = \"wipe\"\ndescription = \"Wipes\"\ncommand = [\"true\"]\nmutating = true\nconfirm = \"human\"\n";
    sb.write("alpha.toml", tool);
    sb.write(
        "beta.toml",
        &format!("[server]\nname = \"beta-ops\"\n\n{tool}"),
    );
    let park = |manifest: &str| {
        let parked = run(sb
            .milpa()
            .args(["--manifest", manifest, "call", "wipe", "--json"]));
        assert_eq!(parked.code, 3, "{}", parked.stderr);
        parked.json()["data"]["approval_id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let alpha = park("alpha.toml");
    let beta = park("beta.toml");
    let listed = |args: &[&str]| -> Vec<(String, Value)> {
        let mut command = sb.milpa();
        command.args(["approvals", "--json"]).args(args);
        let r = run(&mut command);
        assert_eq!(r.code, 0, "{}", r.stderr);
        r.json()
            .as_array()
            .unwrap()
            .iter()
            .map(|a| (a["id"].as_str().unwrap().to_owned(), a["server"].clone()))
            .collect()
    };
    // The file stem names a server without `[server] name`.
    assert_eq!(
        listed(&["--manifest", "alpha.toml"]),
        [(alpha.clone(), json!("alpha"))]
    );
    assert_eq!(
        listed(&["--manifest", "beta.toml"]),
        [(beta.clone(), json!("beta-ops"))]
    );
    let mut all = listed(&["--manifest", "alpha.toml", "--all"]);
    all.sort_by_key(|a| a.1.to_string());
    assert_eq!(all, [(alpha, json!("alpha")), (beta, json!("beta-ops"))]);
    // The table says whose each one is.
    let table = run(sb.milpa().args(["--manifest", "beta.toml", "approvals"]));
    assert!(table.stdout.contains("SERVER"), "{}", table.stdout);
    assert!(table.stdout.contains("beta-ops"), "{}", table.stdout);
}
