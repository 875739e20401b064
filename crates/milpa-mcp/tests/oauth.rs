//! The OAuth 2.1 resource server: keys generated here (RSA, P-256, Ed25519), the JWKS served
//! by the test on loopback, tokens signed here; the server checks signature, issuer,
//! audience, validity window and scopes, refetches the JWKS for an unknown key id, answers
//! `401`/`403` with the challenges, serves the RFC 9728 metadata, and keeps static tokens
//! working. (That no token reaches a log is `oauth_logs.rs`, alone in its binary.)

mod common;
mod page_client;

use std::time::Duration;

use common::JSON_HEADERS;
use common::oauth::*;
use jsonwebtoken::Algorithm;
use jsonwebtoken::get_current_timestamp;
use jsonwebtoken::jwk::JwkSet;
use milpa::audit::AuditOutcome;
use milpa_mcp::auth::StaticTokens;
use milpa_mcp::auth::oauth::{JwksSource, OAuthConfig, OAuthResource};
use page_client::PageClient;
use serde_json::{Value, json};

#[tokio::test]
async fn valid_tokens_of_each_algorithm_call_tools_as_their_subject() {
    let signers = [
        Signer::new("rsa-1", Algorithm::RS256),
        Signer::new("ec-1", Algorithm::ES256),
        Signer::new("ed-1", Algorithm::EdDSA),
    ];
    let jwks = JwksServer::start(signers.iter().map(|s| s.jwk.clone()).collect()).await;
    let p = protected(&jwks.url).await;
    for (signer, sub) in signers.iter().zip(["alice", "bob", "carol"]) {
        let token = signer.sign(&claims(&p.audience, sub, json!("notes:read")));
        for sse in [false, true] {
            let (r, message) = call(p.addr, &token, "whoami", sse).await;
            assert_eq!(r.status, 200, "{:?}: {}", signer.alg, r.body);
            let result = &message.unwrap()["result"];
            assert_eq!(result["isError"], false, "{result}");
            assert_eq!(result["structuredContent"]["principal"], sub);
        }
    }
    let principals: Vec<_> = p
        .audit
        .records()
        .iter()
        .filter(|r| r.tool == "whoami" && r.outcome == AuditOutcome::Executed)
        .map(|r| r.principal.clone().unwrap_or_default())
        .collect();
    assert_eq!(
        principals,
        ["alice", "alice", "bob", "bob", "carol", "carol"]
    );
    // The keys were fetched once, at start.
    assert_eq!(jwks.fetches(), 1);
}

#[tokio::test]
async fn scopes_may_come_as_a_list_or_from_another_claim() {
    let signer = Signer::new("ec-1", Algorithm::ES256);
    let jwks = JwksServer::start(vec![signer.jwk.clone()]).await;
    let p = protected_with(&jwks.url, |c| c.scopes_claim("scp"), |s| s).await;
    let mut list = claims(&p.audience, "dana", Value::Null);
    list["scp"] = json!(["notes:read", "other"]);
    let (r, message) = call(p.addr, &signer.sign(&list), "whoami", false).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        message.unwrap()["result"]["structuredContent"]["principal"],
        "dana"
    );
    // `scope` is not the configured claim here: no scope, so the call is refused.
    let plain = claims(&p.audience, "dana", json!("notes:read"));
    let (r, _) = call(p.addr, &signer.sign(&plain), "whoami", false).await;
    assert_eq!(r.status, 403);
}

/// `401`, `error="invalid_token"`, the description, the metadata URL, and not the token.
fn assert_invalid(p: &Protected, r: &common::HttpResponse, description: &str, token: &str) {
    assert_eq!(r.status, 401, "{}", r.body);
    let challenge = r.header("www-authenticate").unwrap();
    assert_eq!(
        challenge,
        format!(
            "Bearer error=\"invalid_token\", error_description=\"{description}\", \
             resource_metadata=\"{}\"",
            metadata_url(p)
        )
    );
    assert!(!r.body.contains(token));
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains(description)
    );
}

#[tokio::test]
async fn tokens_outside_their_window_or_for_someone_else_get_401() {
    let signer = Signer::new("ed-1", Algorithm::EdDSA);
    let forger = Signer::new("ed-1", Algorithm::EdDSA);
    let jwks = JwksServer::start(vec![signer.jwk.clone()]).await;
    let p = protected(&jwks.url).await;
    let now = get_current_timestamp();
    let good = claims(&p.audience, "eve", json!("notes:read"));

    let mut expired = good.clone();
    expired["exp"] = json!(now - 120);
    let mut early = good.clone();
    early["nbf"] = json!(now + 120);
    let mut other_audience = good.clone();
    other_audience["aud"] = json!("http://other.example.test/mcp");
    let mut other_issuer = good.clone();
    other_issuer["iss"] = json!("https://evil.example.test");
    let mut no_subject = good.clone();
    no_subject.as_object_mut().unwrap().remove("sub");

    let cases = [
        (signer.sign(&expired), "the token has expired"),
        (signer.sign(&early), "the token is not valid yet"),
        (
            signer.sign(&other_audience),
            "the token was not issued for this resource",
        ),
        (
            signer.sign(&other_issuer),
            "the token was not issued by the expected issuer",
        ),
        (forger.sign(&good), "the token's signature is invalid"),
        ("not.a.jwt".to_owned(), "the token is not a well-formed JWT"),
    ];
    for (token, description) in &cases {
        let r = initialize(p.addr, Some(token)).await;
        assert_invalid(&p, &r, description, token);
    }
    let r = initialize(p.addr, Some(&signer.sign(&no_subject))).await;
    assert_eq!(r.status, 401);
    assert!(
        r.header("www-authenticate")
            .unwrap()
            .contains("required claim")
    );

    // Within the leeway (30 s) an expired token still passes.
    let mut just_expired = good.clone();
    just_expired["exp"] = json!(now - 5);
    assert_eq!(
        initialize(p.addr, Some(&signer.sign(&just_expired)))
            .await
            .status,
        200
    );
    assert_eq!(
        initialize(p.addr, Some(&signer.sign(&good))).await.status,
        200
    );
}

#[tokio::test]
async fn an_unknown_key_id_refetches_the_keys_at_most_once_per_interval() {
    let old = Signer::new("2026-01", Algorithm::ES256);
    let new = Signer::new("2026-02", Algorithm::RS256);
    let jwks = JwksServer::start(vec![old.jwk.clone()]).await;
    let interval = Duration::from_millis(400);
    let p = protected_with(&jwks.url, |c| c.refresh_interval(interval), |s| s).await;
    assert_eq!(jwks.fetches(), 1);
    let token = new.sign(&claims(&p.audience, "frank", json!("notes:read")));

    // Not yet in the set: a refetch right away would be too soon after the start.
    let r = initialize(p.addr, Some(&token)).await;
    assert_invalid(&p, &r, "the token's signing key is unknown", &token);
    assert_eq!(jwks.fetches(), 1);

    // After the interval, one refetch; the key is still unknown.
    tokio::time::sleep(interval).await;
    let r = initialize(p.addr, Some(&token)).await;
    assert_eq!(r.status, 401);
    assert_eq!(jwks.fetches(), 2);
    // Hammering with unknown kids does not reach the issuer.
    for _ in 0..5 {
        assert_eq!(initialize(p.addr, Some(&token)).await.status, 401);
    }
    assert_eq!(jwks.fetches(), 2);

    // The issuer rotates its keys: the next refetch finds the new one.
    *jwks.keys.lock().unwrap() = vec![new.jwk.clone()];
    tokio::time::sleep(interval).await;
    let (r, message) = call(p.addr, &token, "whoami", false).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        message.unwrap()["result"]["structuredContent"]["principal"],
        "frank"
    );
    assert_eq!(jwks.fetches(), 3);
    // The old key is gone with the rotation (the cached set is the issuer's new one).
    let old_token = old.sign(&claims(&p.audience, "frank", json!("notes:read")));
    assert_eq!(initialize(p.addr, Some(&old_token)).await.status, 401);
}

#[tokio::test]
async fn a_missing_scope_gets_403_naming_every_scope_the_call_needs() {
    let signer = Signer::new("ec-1", Algorithm::ES256);
    let jwks = JwksServer::start(vec![signer.jwk.clone()]).await;
    let p = protected(&jwks.url).await;
    let token = signer.sign(&claims(&p.audience, "gina", json!("notes:read")));
    for sse in [false, true] {
        let (r, message) = call(p.addr, &token, "write_note", sse).await;
        assert_eq!(r.status, 403, "{}", r.body);
        assert_eq!(
            r.header("www-authenticate").unwrap(),
            format!(
                "Bearer error=\"insufficient_scope\", scope=\"notes:write notes:admin\", \
                 resource_metadata=\"{}\"",
                metadata_url(&p)
            )
        );
        // The body is still the call's answer: the denial, with the scopes it needs.
        let result = &message.unwrap()["result"];
        assert_eq!(result["isError"], true);
        assert_eq!(result["_meta"]["milpa"]["code"], "FORBIDDEN");
        assert_eq!(
            result["_meta"]["milpa"]["required_scopes"],
            json!(["notes:write", "notes:admin"])
        );
    }
    // The pipeline ran and audited the denials.
    let denied = p
        .audit
        .records()
        .iter()
        .filter(|r| r.tool == "write_note" && r.outcome == AuditOutcome::Denied)
        .count();
    assert_eq!(denied, 2);
    // A call it has the scope for, with the same token, is fine.
    let (r, _) = call(p.addr, &token, "whoami", true).await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn an_issuers_wildcard_scopes_are_literal_names_no_tool_asks_for() {
    let signer = Signer::new("ec-1", Algorithm::ES256);
    let jwks = JwksServer::start(vec![signer.jwk.clone()]).await;
    let p = protected(&jwks.url).await;
    // `*` would grant every scope in a manifest; from an issuer it grants none.
    let star = signer.sign(&claims(&p.audience, "hana", json!("*")));
    let (r, message) = call(p.addr, &star, "whoami", false).await;
    assert_eq!(r.status, 403, "{}", r.body);
    assert!(
        r.header("www-authenticate")
            .unwrap()
            .starts_with("Bearer error=\"insufficient_scope\", scope=\"notes:read\""),
        "{:?}",
        r.header("www-authenticate")
    );
    assert_eq!(
        message.unwrap()["result"]["_meta"]["milpa"]["code"],
        "FORBIDDEN"
    );
    // `notes:*` does not grant `notes:write`, as a list or as a string; the token's other
    // scopes still work.
    let mut family = claims(&p.audience, "hana", Value::Null);
    family["scope"] = json!(["notes:*", "notes:read"]);
    let family = signer.sign(&family);
    let (r, _) = call(p.addr, &family, "write_note", true).await;
    assert_eq!(r.status, 403, "{}", r.body);
    let (r, _) = call(p.addr, &family, "whoami", false).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let spaced = signer.sign(&claims(&p.audience, "hana", json!("notes:* *")));
    let (r, _) = call(p.addr, &spaced, "write_note", false).await;
    assert_eq!(r.status, 403, "{}", r.body);
    let denied = p
        .audit
        .records()
        .iter()
        .filter(|r| r.outcome == AuditOutcome::Denied && r.principal.as_deref() == Some("hana"))
        .count();
    assert_eq!(denied, 3);
}

#[tokio::test]
async fn a_subject_that_is_too_long_or_a_local_name_gets_401() {
    let signer = Signer::new("ed-1", Algorithm::EdDSA);
    let jwks = JwksServer::start(vec![signer.jwk.clone()]).await;
    let p = protected(&jwks.url).await;
    let long = "é".repeat(128) + "x";
    assert_eq!(long.len(), 257);
    let token = signer.sign(&claims(&p.audience, &long, json!("notes:read")));
    let r = initialize(p.addr, Some(&token)).await;
    assert_invalid(
        &p,
        &r,
        "the token's subject is longer than 256 bytes",
        &token,
    );
    // 256 bytes is fine.
    let longest = "é".repeat(128);
    let token = signer.sign(&claims(&p.audience, &longest, json!("notes:read")));
    let (r, message) = call(p.addr, &token, "whoami", false).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        message.unwrap()["result"]["structuredContent"]["principal"],
        longest.as_str()
    );
    // The names milpa gives its local callers are not the issuer's to hand out.
    for sub in [
        "local-shell",
        "stdio",
        "cli",
        "local-user",
        "local-approver",
    ] {
        let token = signer.sign(&claims(&p.audience, sub, json!("notes:read")));
        let r = initialize(p.addr, Some(&token)).await;
        assert_invalid(
            &p,
            &r,
            "the token's subject is a name reserved for local callers (stdio, cli, local-...)",
            &token,
        );
    }
}

#[tokio::test]
async fn an_access_token_signs_in_on_the_approvals_page() {
    let signer = Signer::new("ec-1", Algorithm::ES256);
    let jwks = JwksServer::start(vec![signer.jwk.clone()]).await;
    let p = protected(&jwks.url).await;

    // An access token granting approvals:grant signs its subject in, and it may decide:
    // deciding an id that does not exist is a 404, not the 403 of a missing scope.
    let token = signer.sign(&claims(&p.audience, "ivy", json!("approvals:grant")));
    let mut page = PageClient::new(p.addr);
    let login = page.login(&token).await;
    assert_eq!(login.status, 303, "{}", login.body);
    let queue = page.get("/approvals").await;
    assert_eq!(queue.status, 200, "{}", queue.body);
    assert!(queue.body.contains("ivy"), "{}", queue.body);
    assert!(!queue.body.contains(&token));
    let decided = page.decide(&queue, "no-such-id", "grant", "").await;
    assert_eq!(decided.status, 404, "{}", decided.body);

    // An issuer's `*` is not approvals:grant: signed in or not, it decides nothing.
    let star = signer.sign(&claims(&p.audience, "jo", json!("*")));
    let mut page = PageClient::new(p.addr);
    let login = page.login(&star).await;
    if login.status == 303 {
        let queue = page.get("/approvals").await;
        let decided = page.decide(&queue, "no-such-id", "grant", "").await;
        assert_eq!(decided.status, 403, "{}", decided.body);
    } else {
        assert!([401, 403].contains(&login.status), "{}", login.body);
    }

    // A token the resource server refuses does not sign in.
    let mut expired = claims(&p.audience, "ivy", json!("approvals:grant"));
    expired["exp"] = json!(get_current_timestamp() - 120);
    let mut page = PageClient::new(p.addr);
    let login = page.login(&signer.sign(&expired)).await;
    assert_eq!(login.status, 401, "{}", login.body);
    assert!(page.cookie("milpa_approvals_session").is_none());
}

#[tokio::test]
async fn no_token_gets_401_pointing_at_the_metadata() {
    let signer = Signer::new("ec-1", Algorithm::ES256);
    let jwks = JwksServer::start(vec![signer.jwk.clone()]).await;
    let p = protected(&jwks.url).await;
    let expected = format!(
        "Bearer resource_metadata=\"{}\", scope=\"notes:admin notes:read notes:write\"",
        metadata_url(&p)
    );
    let r = initialize(p.addr, None).await;
    assert_eq!(r.status, 401);
    assert_eq!(r.header("www-authenticate"), Some(expected.as_str()));
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
    let r = request(p.addr, "POST", "/mcp", &JSON_HEADERS, list.as_bytes()).await;
    assert_eq!(r.status, 401);
    for method in ["GET", "DELETE"] {
        let r = request(
            p.addr,
            method,
            "/mcp",
            &[("Accept", "text/event-stream")],
            b"",
        )
        .await;
        assert_eq!(r.status, 401, "{method}");
        assert_eq!(r.header("www-authenticate"), Some(expected.as_str()));
    }
    // A bearer scheme without a token is no token.
    let headers = [
        JSON_HEADERS[0],
        JSON_HEADERS[1],
        ("Authorization", "Bearer "),
    ];
    let r = request(p.addr, "POST", "/mcp", &headers, &initialize_body()).await;
    assert_eq!(r.status, 401);
    assert_eq!(r.header("www-authenticate"), Some(expected.as_str()));
}

#[tokio::test]
async fn the_metadata_document_is_served_at_both_paths() {
    let signer = Signer::new("ec-1", Algorithm::ES256);
    let jwks = JwksServer::start(vec![signer.jwk.clone()]).await;
    let p = protected(&jwks.url).await;
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        let r = request(p.addr, "GET", path, &[], b"").await;
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(
            r.json(),
            json!({
                "resource": p.audience,
                "authorization_servers": [ISSUER],
                "scopes_supported": ["notes:admin", "notes:read", "notes:write"],
                "bearer_methods_supported": ["header"],
            })
        );
    }
    // Read-only.
    let r = request(
        p.addr,
        "POST",
        "/.well-known/oauth-protected-resource",
        &[],
        b"{}",
    )
    .await;
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("GET, HEAD"));
    // Behind the same Host check as the endpoint.
    let r = request(
        p.addr,
        "GET",
        "/.well-known/oauth-protected-resource",
        &[("Host", "evil.example.test")],
        b"",
    )
    .await;
    assert_eq!(r.status, 403);
}

#[tokio::test]
async fn static_tokens_keep_working_beside_oauth() {
    let signer = Signer::new("ec-1", Algorithm::ES256);
    let jwks = JwksServer::start(vec![signer.jwk.clone()]).await;
    let mut tokens = StaticTokens::new();
    tokens.insert_token("static-secret", "ops", ["notes:read"]);
    let p = protected_with(&jwks.url, |c| c, |s| s.authenticator(tokens)).await;
    let (r, message) = call(p.addr, "static-secret", "whoami", false).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        message.unwrap()["result"]["structuredContent"]["principal"],
        "ops"
    );
    // And a scope denial for a static token is the same 403 challenge.
    let (r, _) = call(p.addr, "static-secret", "write_note", false).await;
    assert_eq!(r.status, 403);
    // An unknown one is checked as an access token, and refused as one.
    let r = initialize(p.addr, Some("static-secreT")).await;
    assert_invalid(
        &p,
        &r,
        "the token is not a well-formed JWT",
        "static-secreT",
    );
}

#[tokio::test]
async fn the_server_refuses_to_start_without_its_keys() {
    let missing = OAuthResource::start(OAuthConfig::new(
        ISSUER,
        "http://127.0.0.1:1/mcp",
        JwksSource::parse("/nonexistent/jwks.json"),
    ))
    .await
    .unwrap_err();
    assert!(
        missing.to_string().contains("cannot read the JWKS file"),
        "{missing}"
    );

    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("jwks.json");
    std::fs::write(&garbage, "{\"keys\": 3}").unwrap();
    let err = OAuthResource::start(OAuthConfig::new(
        ISSUER,
        "http://127.0.0.1:1/mcp",
        JwksSource::parse(garbage.to_str().unwrap()),
    ))
    .await
    .unwrap_err();
    assert!(
        err.to_string().contains("is not a JSON Web Key Set"),
        "{err}"
    );

    std::fs::write(&garbage, "{\"keys\": []}").unwrap();
    let err = OAuthResource::start(OAuthConfig::new(
        ISSUER,
        "http://127.0.0.1:1/mcp",
        JwksSource::parse(garbage.to_str().unwrap()),
    ))
    .await
    .unwrap_err();
    assert!(err.to_string().contains("no usable key"), "{err}");

    // Nothing listens on port 1.
    let err = OAuthResource::start(OAuthConfig::new(
        ISSUER,
        "http://127.0.0.1:1/mcp",
        JwksSource::parse("http://127.0.0.1:1/jwks.json"),
    ))
    .await
    .unwrap_err();
    assert!(err.to_string().contains("cannot fetch the JWKS"), "{err}");

    // https: the TLS handshake with something that is not a TLS server fails.
    let plain = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = plain.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = plain.accept().await {
            use tokio::io::AsyncWriteExt;
            let _ = socket.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await;
        }
    });
    let err = OAuthResource::start(OAuthConfig::new(
        ISSUER,
        "http://127.0.0.1:1/mcp",
        JwksSource::parse(&format!("https://127.0.0.1:{port}/jwks.json")),
    ))
    .await
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("cannot fetch the JWKS from https://"),
        "{err}"
    );

    let err = OAuthResource::start(OAuthConfig::new(
        ISSUER,
        "http://127.0.0.1:1/mcp",
        JwksSource::Url("ftp://127.0.0.1/jwks.json".into()),
    ))
    .await
    .unwrap_err();
    assert!(err.to_string().contains("only http and https"), "{err}");

    let err = OAuthResource::start(OAuthConfig::new(
        ISSUER,
        "tools.example.test",
        JwksSource::parse("/nonexistent"),
    ))
    .await
    .unwrap_err();
    assert!(err.to_string().contains("audience"), "{err}");
}

#[tokio::test]
async fn keys_from_a_file_work_too() {
    let signer = Signer::new("ed-1", Algorithm::EdDSA);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jwks.json");
    let set = JwkSet {
        keys: vec![signer.jwk.clone()],
    };
    std::fs::write(&path, serde_json::to_vec(&set).unwrap()).unwrap();
    let p = protected(path.to_str().unwrap()).await;
    let token = signer.sign(&claims(&p.audience, "hal", json!("notes:read")));
    let (r, message) = call(p.addr, &token, "whoami", false).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        message.unwrap()["result"]["structuredContent"]["principal"],
        "hal"
    );
}
