//! Secrets for upstreams: `${VAR}` and `${VAR:-default}` in `command`, `env`, `url` and
//! `headers`, read from milpa's environment when the upstream starts; an unset variable
//! without a default is a manifest error naming file, line and variable (`milpa check`
//! too); the values never show in `milpa tools`, `inspect` or the log.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use common::{Run, Sandbox, odd_command, run};

/// `milpa --manifest m.toml ARGS…` with `env` set (and the test's secrets otherwise unset).
fn with_env(sb: &Sandbox, manifest: &str, env: &[(&str, &str)], args: &[&str]) -> Run {
    let mut command = sb.with_manifest(manifest);
    for name in [
        "MY_SECRET",
        "ODD_ARG",
        "TAG",
        "LEVEL",
        "MCP_PATH",
        "API_KEY",
        "TEAM",
    ] {
        command.env_remove(name);
    }
    for (name, value) in env {
        command.env(name, value);
    }
    run(command.args(args))
}

fn stdio_manifest() -> String {
    format!(
        "[[upstreams]]\nname = \"odd\"\ncommand = {}\n\
         env = {{ API_TOKEN = \"${{MY_SECRET}}\", LEVEL = \"${{LEVEL:-warn}}\" }}\n",
        odd_command(&["--tag", "${TAG:-plain}", "--tag", "${ODD_ARG}"])
    )
}

#[test]
fn variables_reach_a_stdio_upstreams_arguments_and_environment_and_are_never_shown() {
    let sb = Sandbox::new();
    let manifest = stdio_manifest();
    let env = [("MY_SECRET", "tok-3f9a77"), ("ODD_ARG", "arg-5511c")];
    let call = |args: &[&str]| {
        with_env(
            &sb,
            &manifest,
            &env,
            &["--store", "memory", "call"]
                .iter()
                .chain(args)
                .copied()
                .collect::<Vec<_>>(),
        )
    };

    let token = call(&["env", r#"{"name": "API_TOKEN"}"#]);
    assert_eq!(token.code, 0, "{}", token.stderr);
    assert!(token.stdout.contains("tok-3f9a77"), "{}", token.stdout);
    let level = call(&["env", r#"{"name": "LEVEL"}"#]);
    assert!(level.stdout.contains("warn"), "{}", level.stdout);
    // Only what `env` names reaches the child: milpa's own variables do not.
    let withheld = call(&["env", r#"{"name": "MY_SECRET"}"#]);
    assert!(withheld.stdout.contains("unset"), "{}", withheld.stdout);
    let args = call(&["args", "{}"]);
    assert!(
        args.stdout.contains("--tag plain --tag arg-5511c"),
        "{}",
        args.stdout
    );

    for shown in [
        with_env(&sb, &manifest, &env, &["--store", "memory", "tools"]),
        with_env(
            &sb,
            &manifest,
            &env,
            &["--store", "memory", "tools", "--json"],
        ),
        with_env(
            &sb,
            &manifest,
            &env,
            &["--store", "memory", "tools", "inspect", "env"],
        ),
        with_env(&sb, &manifest, &env, &["--store", "memory", "check"]),
    ] {
        assert_eq!(shown.code, 0, "{}", shown.stderr);
        for secret in ["tok-3f9a77", "arg-5511c"] {
            assert!(
                !shown.stdout.contains(secret) && !shown.stderr.contains(secret),
                "{secret} shown: {}\n{}",
                shown.stdout,
                shown.stderr
            );
        }
    }
}

#[test]
fn a_program_that_cannot_start_is_named_as_written() {
    let sb = Sandbox::new();
    let run = with_env(
        &sb,
        "[[upstreams]]\nname = \"gone\"\ncommand = [\"${SERVER_BIN}\", \"--stdio\"]\n",
        &[("SERVER_BIN", "/nonexistent/bin-c0ffee")],
        &["--store", "memory", "tools"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("down: upstream `gone`: could not start `${SERVER_BIN} --stdio`"),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains("c0ffee") && !run.stderr.contains("c0ffee"));
}

#[test]
fn an_unset_variable_without_default_is_a_manifest_error_naming_file_line_and_variable() {
    let sb = Sandbox::new();
    let manifest = stdio_manifest();
    for args in [
        &["--store", "memory", "check"][..],
        &["--store", "memory", "tools"],
    ] {
        let unset = with_env(&sb, &manifest, &[("ODD_ARG", "x")], args);
        assert_eq!(unset.code, 2, "{args:?}: {}", unset.stderr);
        assert!(
            unset
                .stderr
                .contains("m.toml:4: upstream `odd`: the variable `MY_SECRET` is not set"),
            "{args:?}: {}",
            unset.stderr
        );
    }
    // In the command too (line 3); an empty value counts as unset, as `:-` does.
    let empty = with_env(
        &sb,
        &manifest,
        &[("MY_SECRET", "s"), ("ODD_ARG", "")],
        &["--store", "memory", "check"],
    );
    assert_eq!(empty.code, 2, "{}", empty.stderr);
    assert!(
        empty
            .stderr
            .contains("m.toml:3: upstream `odd`: the variable `ODD_ARG` is not set"),
        "{}",
        empty.stderr
    );
    // A malformed placeholder is refused when the manifest is read, naming its line.
    let malformed = with_env(
        &sb,
        "[[upstreams]]\nname = \"web\"\nurl = \"http://127.0.0.1:1/${OPEN\"\n",
        &[],
        &["check"],
    );
    assert_eq!(malformed.code, 2, "{}", malformed.stderr);
    assert!(
        malformed
            .stderr
            .contains("m.toml:3: upstream `web`: `${` without a closing `}`"),
        "{}",
        malformed.stderr
    );
}

/// A server that records the head of each request it gets and answers 401.
fn recording_server() -> (std::net::SocketAddr, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&heads);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while head.len() < 64 * 1024 && !head.ends_with(b"\r\n\r\n") {
                match stream.read(&mut byte) {
                    Ok(1) => head.push(byte[0]),
                    _ => break,
                }
            }
            seen.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&head).to_lowercase());
            let _ = stream.write_all(
                b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            );
        }
    });
    (addr, heads)
}

#[test]
fn variables_reach_an_http_upstreams_url_and_headers_and_are_never_shown() {
    let sb = Sandbox::new();
    let (addr, heads) = recording_server();
    let manifest = format!(
        "[[upstreams]]\nname = \"web\"\nurl = \"http://{addr}/${{MCP_PATH}}\"\n\
         headers = {{ X-Api-Key = \"${{API_KEY}}\", X-Team = \"${{TEAM:-core}}\" }}\n"
    );
    let env = [("MCP_PATH", "mcp-path-81ab"), ("API_KEY", "key-5e2b90")];
    let listed = with_env(&sb, &manifest, &env, &["--store", "memory", "tools"]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let head = heads
        .lock()
        .unwrap()
        .first()
        .cloned()
        .expect("a request came");
    assert!(
        head.starts_with("post /mcp-path-81ab http/1.1\r\n"),
        "{head}"
    );
    assert!(head.contains("\r\nx-api-key: key-5e2b90\r\n"), "{head}");
    assert!(head.contains("\r\nx-team: core\r\n"), "{head}");
    // It is down (401), and says so with the URL as written.
    assert!(
        listed.stdout.contains(&format!(
            "down: upstream `web`: initialize failed: http://{addr}/${{MCP_PATH}} answered HTTP 401"
        )),
        "{}",
        listed.stdout
    );
    for secret in ["mcp-path-81ab", "key-5e2b90"] {
        assert!(
            !listed.stdout.contains(secret) && !listed.stderr.contains(secret),
            "{secret} shown: {}\n{}",
            listed.stdout,
            listed.stderr
        );
    }
    // A header the gateway sets itself is refused, naming it and not its value.
    let reserved = with_env(
        &sb,
        &format!(
            "[[upstreams]]\nname = \"web\"\nurl = \"http://{addr}/mcp\"\n\
             headers = {{ Mcp-Session-Id = \"${{API_KEY}}\" }}\n"
        ),
        &env,
        &["--store", "memory", "tools"],
    );
    assert!(
        reserved.stdout.contains(
            "down: upstream `web`: the header `Mcp-Session-Id` cannot be sent: the gateway sets it itself"
        ),
        "{}\n{}",
        reserved.stdout,
        reserved.stderr
    );
    assert!(!reserved.stdout.contains("key-5e2b90") && !reserved.stderr.contains("key-5e2b90"));
}
