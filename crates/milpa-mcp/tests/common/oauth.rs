//! OAuth test helpers: signing keys generated here, a JWKS served on loopback, a protected
//! server, and requests to it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::{HttpResponse, JSON_HEADERS, WAIT, fixture_with, parse_response};
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode, get_current_timestamp};
use milpa::audit::MemoryAuditSink;
use milpa::{ToolContext, ToolDefinition};
use milpa_mcp::HttpServer;
use milpa_mcp::auth::oauth::{JwksSource, OAuthConfig, OAuthResource};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub const ISSUER: &str = "https://auth.example.test";

/// A signing key and its public JWK.
pub struct Signer {
    pub kid: String,
    pub alg: Algorithm,
    pub key: EncodingKey,
    pub jwk: Jwk,
}

impl Signer {
    pub fn new(kid: &str, alg: Algorithm) -> Signer {
        let key = match alg {
            Algorithm::RS256 => {
                use rsa::pkcs1::EncodeRsaPrivateKey;
                let mut rng = p256::elliptic_curve::common::getrandom::SysRng;
                let private = rsa::PrivateKey::new(&mut rng, 2048).unwrap();
                EncodingKey::from_rsa_der(private.to_pkcs1_der().unwrap().as_bytes())
            }
            Algorithm::ES256 => {
                use p256::elliptic_curve::Generate;
                use p256::pkcs8::EncodePrivateKey;
                let private = p256::SecretKey::generate();
                EncodingKey::from_ec_der(private.to_pkcs8_der().unwrap().as_bytes())
            }
            Algorithm::EdDSA => {
                use ed25519_dalek::pkcs8::EncodePrivateKey;
                let mut secret = [0u8; 32];
                p256::elliptic_curve::common::getrandom::fill(&mut secret).unwrap();
                // Version 1 PKCS#8 (no public key inside): what jsonwebtoken's backend reads.
                let private = ed25519_dalek::pkcs8::KeypairBytes {
                    secret_key: secret,
                    public_key: None,
                };
                EncodingKey::from_ed_der(private.to_pkcs8_der().unwrap().as_bytes())
            }
            other => panic!("no test key for {other:?}"),
        };
        let mut jwk = Jwk::from_encoding_key(&key, alg).unwrap();
        jwk.common.key_id = Some(kid.to_owned());
        Signer {
            kid: kid.to_owned(),
            alg,
            key,
            jwk,
        }
    }

    pub fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(self.alg);
        header.kid = Some(self.kid.clone());
        encode(&header, claims, &self.key).unwrap()
    }
}

/// A JWKS served over plain HTTP on loopback; counts the fetches.
pub struct JwksServer {
    pub url: String,
    pub keys: Arc<Mutex<Vec<Jwk>>>,
    pub fetches: Arc<AtomicUsize>,
}

impl JwksServer {
    pub async fn start(keys: Vec<Jwk>) -> JwksServer {
        let keys = Arc::new(Mutex::new(keys));
        let fetches = Arc::new(AtomicUsize::new(0));
        let app = {
            let (keys, fetches) = (keys.clone(), fetches.clone());
            axum::Router::new().route(
                "/jwks.json",
                axum::routing::get(move || {
                    let set = JwkSet {
                        keys: keys.lock().unwrap().clone(),
                    };
                    fetches.fetch_add(1, Ordering::SeqCst);
                    async move { axum::Json(set) }
                }),
            )
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        JwksServer { url, keys, fetches }
    }

    pub fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }
}

/// The protected server under test.
pub struct Protected {
    pub addr: SocketAddr,
    pub audience: String,
    pub audit: Arc<MemoryAuditSink>,
    pub _stop: tokio::sync::oneshot::Sender<()>,
}

/// Tools with scopes: `whoami` needs `notes:read`; `write_note` one of `notes:write`,
/// `notes:admin`.
pub fn scoped_tools() -> Vec<ToolDefinition> {
    vec![
        ToolDefinition::builder("whoami")
            .description("Says who called")
            .input_schema(json!({"type": "object"}))
            .scopes(["notes:read"])
            .sync(|_, ctx: &ToolContext| json!({"principal": ctx.principal()})),
        ToolDefinition::builder("write_note")
            .description("Writes a note")
            .input_schema(json!({"type": "object"}))
            .scopes(["notes:write", "notes:admin"])
            .sync(|_, _| json!({"written": true})),
    ]
}

pub async fn protected_with(
    jwks: &str,
    configure: impl FnOnce(OAuthConfig) -> OAuthConfig,
    server: impl FnOnce(HttpServer) -> HttpServer,
) -> Protected {
    let f = fixture_with(false, |b| b);
    let mut registry = Arc::try_unwrap(f.registry).ok().unwrap();
    for tool in scoped_tools() {
        registry.register(tool).unwrap();
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let audience = format!("http://{addr}/mcp");
    let config = configure(OAuthConfig::new(
        ISSUER,
        audience.clone(),
        JwksSource::parse(jwks),
    ));
    let resource = OAuthResource::start(config).await.unwrap();
    let server = server(HttpServer::new(Arc::new(registry)).oauth(resource));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.serve_listener(listener, async {
        let _ = stopped.await;
    }));
    Protected {
        addr,
        audience,
        audit: f.audit,
        _stop: stop,
    }
}

pub async fn protected(jwks: &str) -> Protected {
    protected_with(jwks, |c| c, |s| s).await
}

pub fn claims(audience: &str, sub: &str, scope: Value) -> Value {
    let now = get_current_timestamp();
    json!({"iss": ISSUER, "aud": audience, "sub": sub, "scope": scope,
           "iat": now, "exp": now + 300})
}

/// One request to `path` on a fresh connection.
pub async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> HttpResponse {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(WAIT, stream.read_to_end(&mut raw))
        .await
        .expect("timed out")
        .unwrap();
    parse_response(&raw)
}

pub fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

pub fn initialize_body() -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}})
    .to_string()
    .into_bytes()
}

/// `initialize` with `token`; the response (the session id in its header when it worked).
pub async fn initialize(addr: SocketAddr, token: Option<&str>) -> HttpResponse {
    let auth = token.map(bearer);
    let mut headers = JSON_HEADERS.to_vec();
    if let Some(auth) = &auth {
        headers.push(("Authorization", auth));
    }
    request(addr, "POST", "/mcp", &headers, &initialize_body()).await
}

/// A `tools/call` in a fresh session opened with `token`; `sse` picks the response kind.
pub async fn call(
    addr: SocketAddr,
    token: &str,
    tool: &str,
    sse: bool,
) -> (HttpResponse, Option<Value>) {
    let init = initialize(addr, Some(token)).await;
    assert_eq!(init.status, 200, "initialize: {}", init.body);
    let session = init.header("mcp-session-id").unwrap().to_owned();
    let auth = bearer(token);
    let accept = if sse {
        "application/json, text/event-stream"
    } else {
        "application/json"
    };
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", accept),
        ("Authorization", auth.as_str()),
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                      "params": {"name": tool, "arguments": {}}})
    .to_string();
    let r = request(addr, "POST", "/mcp", &headers, body.as_bytes()).await;
    let message = if r.header("content-type") == Some("application/json") {
        Some(r.json())
    } else {
        r.sse_messages().into_iter().find(|m| m["id"] == 7)
    };
    (r, message)
}

pub fn metadata_url(p: &Protected) -> String {
    format!("http://{}/.well-known/oauth-protected-resource/mcp", p.addr)
}
