//! A Streamable HTTP upstream (this build's `milpa serve --http`, which wants a bearer
//! token) behind the gateway.

mod common;

use std::process::Command;

use common::http::{Server, milpa_command, spawn_http};
use common::stdio::StdioClient;
use common::{Run, Sandbox};
use milpa_mcp::auth::sha256_hex;
use serde_json::{Value, json};

/// The upstream: `greet` needs the scope `up:use`, which only the token `gw-token` holds.
fn start_upstream(sb: &Sandbox) -> (Server, std::net::SocketAddr) {
    sb.write(
        "upstream.toml",
        &format!(
            r#"
[[auth.tokens]]
sha256 = "{gw}"
principal = "gw"
scopes = ["up:use"]

[[tools]]
name = "greet"
description = "Say hello"
command = ["echo", "hello {{who}}"]
scopes = ["up:use"]
[tools.params.who]
type = "string"
required = true
"#,
            gw = sha256_hex("gw-token")
        ),
    );
    spawn_http(
        sb,
        &[
            "--store",
            "memory",
            "--manifest",
            "upstream.toml",
            "serve",
            "--http",
            "127.0.0.1:0",
        ],
    )
}

fn proxy_manifest(sb: &Sandbox, addr: std::net::SocketAddr) -> std::path::PathBuf {
    sb.write(
        "m.toml",
        &format!(
            "[[upstreams]]\nname = \"web\"\nurl = \"http://{addr}/mcp\"\nbearer_env = \"UP_TOKEN\"\n"
        ),
    )
}

fn proxy(sb: &Sandbox, manifest: &std::path::Path, token: &str) -> Command {
    let mut command = milpa_command(sb);
    command
        .env("UP_TOKEN", token)
        .args(["--store", "memory", "--manifest"])
        .arg(manifest);
    command
}

fn run(command: &mut Command) -> Run {
    let output = command.output().unwrap();
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn code(result: &Value) -> &str {
    result["_meta"]["milpa"]["code"].as_str().unwrap_or("")
}

#[test]
fn an_http_upstream_is_called_with_its_bearer_token_its_loss_is_reported_and_its_return_noticed() {
    let sb = Sandbox::new();
    let (upstream, addr) = start_upstream(&sb);
    let manifest = proxy_manifest(&sb, addr);
    let mut serve = proxy(&sb, &manifest, "gw-token");
    serve.arg("serve");
    let mut client = StdioClient::start(serve, &sb.path().join("proxy.err"));
    client.wait_for_tool("greet");

    let listed = client.request("tools/list", json!({}));
    assert_eq!(listed["result"]["tools"][0]["name"], "greet", "{listed}");
    let greeted = client.call("greet", json!({"who": "ana"}));
    assert_eq!(greeted["isError"], false, "{greeted}");
    assert_eq!(greeted["content"][0]["text"], "hello ana");

    drop(upstream);
    let lost = client.call("greet", json!({"who": "ana"}));
    assert_eq!(code(&lost), "UPSTREAM_UNAVAILABLE", "{lost}");
    let message = lost["content"][0]["text"].as_str().unwrap();
    assert!(
        message.starts_with(&format!(
            "Upstream `web` is unavailable: could not reach http://{addr}/mcp"
        )),
        "{message}"
    );
    // The server keeps serving.
    let listed = client.request("tools/list", json!({}));
    assert_eq!(listed["result"]["tools"][0]["name"], "greet");

    // The upstream back on the same address knows nothing of our session: a new one is
    // opened and the call goes through.
    let (_again, again_addr) = spawn_http(
        &sb,
        &[
            "--store",
            "memory",
            "--manifest",
            "upstream.toml",
            "serve",
            "--http",
            &addr.to_string(),
        ],
    );
    assert_eq!(again_addr, addr);
    let back = client.call("greet", json!({"who": "bea"}));
    assert_eq!(back["isError"], false, "{back}");
    assert_eq!(back["content"][0]["text"], "hello bea");
}

#[test]
fn an_http_upstream_refusing_the_token_or_a_missing_token_variable_is_down_naming_why() {
    let sb = Sandbox::new();
    let (_upstream, addr) = start_upstream(&sb);
    let manifest = proxy_manifest(&sb, addr);
    // A token the upstream does not know is refused at the handshake: it is down (and
    // tried again), the rest is served.
    let wrong = run(proxy(&sb, &manifest, "not-the-token").args(["tools"]));
    assert_eq!(wrong.code, 0, "{}", wrong.stderr);
    assert!(
        wrong.stderr.contains(&format!(
            "upstream `web`: initialize failed: http://{addr}/mcp answered HTTP 401"
        )),
        "{}",
        wrong.stderr
    );
    assert!(!wrong.stderr.contains("not-the-token"), "{}", wrong.stderr);

    let missing = run(proxy(&sb, &manifest, "")
        .env_remove("UP_TOKEN")
        .args(["tools"]));
    assert_eq!(missing.code, 0, "{}", missing.stderr);
    assert!(
        missing
            .stderr
            .contains("upstream `web`: the variable `UP_TOKEN` (bearer_env) is not set"),
        "{}",
        missing.stderr
    );
}

/// A TLS terminator on a free loopback port in front of `backend`: its port and its
/// certificate's PEM (the root a client must trust).
fn tls_terminator(backend: std::net::SocketAddr) -> (u16, String) {
    common::tls::serve(move |mut tls| async move {
        if let Ok(mut plain) = tokio::net::TcpStream::connect(backend).await {
            let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
        }
    })
}

#[test]
fn an_https_upstream_is_called_when_its_certificate_is_trusted_and_refused_when_not_or_without_roots()
 {
    let sb = Sandbox::new();
    let (_upstream, addr) = start_upstream(&sb);
    let (port, pem) = tls_terminator(addr);
    let url = format!("https://127.0.0.1:{port}/mcp");
    let root = sb.write("root.pem", &pem);
    let manifest = sb.write(
        "tls.toml",
        &format!("[[upstreams]]\nname = \"web\"\nurl = \"{url}\"\nbearer_env = \"UP_TOKEN\"\n"),
    );

    let mut serve = proxy(&sb, &manifest, "gw-token");
    serve.env("SSL_CERT_FILE", &root).arg("serve");
    let mut client = StdioClient::start(serve, &sb.path().join("tls.err"));
    client.wait_for_tool("greet");
    let greeted = client.call("greet", json!({"who": "ana"}));
    assert_eq!(greeted["isError"], false, "{greeted}");
    assert_eq!(greeted["content"][0]["text"], "hello ana");
    drop(client);

    // A certificate the system does not trust: the handshake fails, the upstream is down.
    let untrusted = sb.write("other.pem", &tls_terminator(addr).1);
    let refused = run(proxy(&sb, &manifest, "gw-token")
        .env("SSL_CERT_FILE", &untrusted)
        .args(["tools"]));
    assert_eq!(refused.code, 0, "{}", refused.stderr);
    assert!(
        refused.stderr.contains(&format!(
            "upstream `web`: initialize failed: could not reach {url}"
        )),
        "{}",
        refused.stderr
    );
    assert!(
        refused.stderr.contains("certificate"),
        "the reason names the certificate: {}",
        refused.stderr
    );

    // A host with no root certificate at all: https cannot work and says why; plain http
    // still does.
    let empty = sb.write("empty.pem", "");
    let rootless = run(proxy(&sb, &manifest, "gw-token")
        .env("SSL_CERT_FILE", &empty)
        .env("SSL_CERT_DIR", sb.path().join("no-such-dir"))
        .args(["tools"]));
    assert_eq!(rootless.code, 0, "{}", rootless.stderr);
    assert!(
        rootless
            .stderr
            .contains("upstream `web`: no trusted root certificates for https://"),
        "{}",
        rootless.stderr
    );
    let plain = proxy_manifest(&sb, addr);
    let listed = run(proxy(&sb, &plain, "gw-token")
        .env("SSL_CERT_FILE", &empty)
        .env("SSL_CERT_DIR", sb.path().join("no-such-dir"))
        .args(["tools"]));
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert!(listed.stdout.contains("greet"), "{}", listed.stdout);
}
