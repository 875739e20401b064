//! `milpa serve --http` with `[auth.oauth]`: access tokens from the manifest's issuer call
//! tools as their subject, requests without one get the `401` challenge, a missing scope
//! the `403` one, the metadata is served, static tokens keep working, and a JWKS that
//! cannot be read stops the server at start.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use common::http::{Response, call, initialize, parse, post, spawn_http};
use common::{Sandbox, run_manifest};
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode, get_current_timestamp};
use milpa_mcp::auth::sha256_hex;
use serde_json::{Value, json};

const ISSUER: &str = "https://auth.example.test";
const AUDIENCE: &str = "https://tools.example.test/mcp";
const METADATA: &str = "https://tools.example.test/.well-known/oauth-protected-resource/mcp";

/// An ES256 key made for this test, and its public JWK.
fn key() -> (EncodingKey, Jwk) {
    use p256::elliptic_curve::Generate;
    use p256::pkcs8::EncodePrivateKey;
    let der = p256::SecretKey::generate().to_pkcs8_der().unwrap();
    let key = EncodingKey::from_ec_der(der.as_bytes());
    let mut jwk = Jwk::from_encoding_key(&key, Algorithm::ES256).unwrap();
    jwk.common.key_id = Some("k1".into());
    (key, jwk)
}

fn token(key: &EncodingKey, sub: &str, scopes: Value) -> String {
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some("k1".into());
    let now = get_current_timestamp();
    let claims = json!({"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "scp": scopes,
                        "exp": now + 300});
    encode(&header, &claims, key).unwrap()
}

fn manifest(jwks: &str) -> String {
    format!(
        r#"
[server]
name = "oauth-test"

[[auth.tokens]]
sha256 = "{bob}"
principal = "bob"
scopes = ["ops:read"]

[auth.oauth]
issuer = "{ISSUER}"
audience = "{AUDIENCE}"
jwks = "{jwks}"
scopes_claim = "scp"

[[tools]]
name = "status"
description = "Reads the status"
command = ["echo", "all good"]
scopes = ["ops:read"]

[[tools]]
name = "deploy"
description = "Deploys"
command = ["echo", "deployed"]
scopes = ["ops:write"]
"#,
        bob = sha256_hex("bob-token"),
    )
}

/// `GET path` with `Host: host`.
fn get(addr: SocketAddr, path: &str, host: &str) -> Response {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    parse(&raw)
}

#[test]
fn oauth_tokens_call_tools_beside_the_static_ones() {
    let sb = Sandbox::new();
    let (key, jwk) = key();
    sb.write(
        "keys/jwks.json",
        &serde_json::to_string(&JwkSet { keys: vec![jwk] }).unwrap(),
    );
    // A relative path is read beside the manifest.
    sb.write("m.toml", &manifest("keys/jwks.json"));
    let audit = sb.path().join("audit.jsonl");
    let (_server, addr) = spawn_http(
        &sb,
        &[
            "--manifest",
            "m.toml",
            "serve",
            "--http",
            "127.0.0.1:0",
            "--audit",
            audit.to_str().unwrap(),
        ],
    );

    // No token: 401 pointing at the metadata.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    let r = post(addr, &[], &init);
    assert_eq!(r.status, 401);
    assert_eq!(
        r.header("www-authenticate").unwrap(),
        format!("Bearer resource_metadata=\"{METADATA}\", scope=\"ops:read ops:write\"")
    );

    // An access token from the issuer: its subject calls the tool.
    let reader = token(&key, "alice", json!(["ops:read"]));
    let auth = format!("Bearer {reader}");
    let alice = [("Authorization", auth.as_str())];
    let session = initialize(addr, &alice);
    let result = call(addr, &session, &alice, "status", json!({}));
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["content"][0]["text"], "all good");

    // Without ops:write: 403 naming it.
    let mut headers = alice.to_vec();
    headers.push(("Mcp-Session-Id", &session));
    let deploy = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                        "params": {"name": "deploy", "arguments": {}}});
    let r = post(addr, &headers, &deploy);
    assert_eq!(r.status, 403, "{}", r.body);
    assert_eq!(
        r.header("www-authenticate").unwrap(),
        format!(
            "Bearer error=\"insufficient_scope\", scope=\"ops:write\", \
             resource_metadata=\"{METADATA}\""
        )
    );

    // The static token still works.
    let bob = [("Authorization", "Bearer bob-token")];
    let session = initialize(addr, &bob);
    let result = call(addr, &session, &bob, "status", json!({}));
    assert_eq!(result["isError"], false, "{result}");

    // The metadata, also under the audience's host (a proxy forwards it).
    for host in [addr.to_string(), "tools.example.test".to_owned()] {
        let r = get(addr, "/.well-known/oauth-protected-resource/mcp", &host);
        assert_eq!(r.status, 200, "{host}: {}", r.body);
        let doc: Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(doc["resource"], AUDIENCE);
        assert_eq!(doc["authorization_servers"], json!([ISSUER]));
        assert_eq!(doc["scopes_supported"], json!(["ops:read", "ops:write"]));
    }

    // The audit names the token's subject, and never the token.
    let log = std::fs::read_to_string(&audit).unwrap();
    assert!(log.contains("\"principal\":\"alice\""), "{log}");
    assert!(!log.contains(&reader));
}

#[test]
fn a_jwks_that_cannot_be_read_stops_the_server() {
    let sb = Sandbox::new();
    let run = run_manifest(
        &sb,
        &manifest("missing.json"),
        &["serve", "--http", "127.0.0.1:0"],
    );
    assert_ne!(run.code, 0);
    assert!(
        run.stderr
            .contains("[auth.oauth]: cannot read the JWKS file")
            && run.stderr.contains("missing.json"),
        "{}",
        run.stderr
    );
}

/// Serves `body` as `/jwks.json` over TLS with a certificate for `127.0.0.1` made here;
/// returns the port and the certificate (PEM), the only root a client needs to trust it.
fn https_jwks(body: String) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    common::tls::serve(move |mut tls| {
        let body = body.clone();
        async move {
            let mut request = [0u8; 4096];
            let _ = tls.read(&mut request).await;
            let response = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = tls.write_all(response.as_bytes()).await;
            let _ = tls.shutdown().await;
        }
    })
}

#[test]
fn a_jwks_over_https_is_fetched_from_a_server_the_system_trusts() {
    let sb = Sandbox::new();
    let (key, jwk) = key();
    let (port, root) = https_jwks(serde_json::to_string(&JwkSet { keys: vec![jwk] }).unwrap());
    let url = format!("https://127.0.0.1:{port}/jwks.json");
    sb.write("m.toml", &manifest(&url));

    // Not trusted: the server does not start.
    let untrusted = sb.write("other.pem", &https_jwks(String::new()).1);
    let run = common::run(sb.milpa().env("SSL_CERT_FILE", &untrusted).args([
        "--manifest",
        "m.toml",
        "serve",
        "--http",
        "127.0.0.1:0",
    ]));
    assert_ne!(run.code, 0);
    assert!(
        run.stderr
            .contains(&format!("cannot fetch the JWKS from {url}")),
        "{}",
        run.stderr
    );

    // Trusted (the system's roots, here from SSL_CERT_FILE): tokens signed by the key work.
    let trusted = sb.write("root.pem", &root);
    let mut command = common::http::milpa_command(&sb);
    command.env("SSL_CERT_FILE", &trusted);
    let (_server, addr) = common::http::spawn_http_command(
        command,
        &["--manifest", "m.toml", "serve", "--http", "127.0.0.1:0"],
    );
    let auth = format!("Bearer {}", token(&key, "alice", json!(["ops:read"])));
    let alice = [("Authorization", auth.as_str())];
    let session = initialize(addr, &alice);
    let result = call(addr, &session, &alice, "status", json!({}));
    assert_eq!(result["isError"], false, "{result}");
}
