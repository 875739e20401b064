//! The issuer's signing keys (a JWKS): where they come from, and the cache the token checks
//! read, refreshed when a token names a key it does not hold.
//!
//! The set is loaded once at start (a failure there stops the server: it could not check
//! any token). After that a token signed with an unknown `kid` triggers one refetch, at most
//! once per [`OAuthConfig::refresh_interval`](super::oauth::OAuthConfig::refresh_interval),
//! so made-up key ids cannot be used to hammer the issuer; a failed refetch keeps the keys
//! already held.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_rustls::HttpsConnectorBuilder;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use jsonwebtoken::jwk::{
    AlgorithmParameters, EllipticCurve, Jwk, JwkSet, KeyAlgorithm, PublicKeyUse,
};
use jsonwebtoken::{Algorithm, DecodingKey};
use parking_lot::RwLock;

/// The largest JWKS document read (a real one is a few kilobytes).
const MAX_JWKS_BYTES: usize = 1 << 20;

/// How long a JWKS fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the issuer's JWKS is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum JwksSource {
    /// A local file (kept current by whoever deploys the server).
    File(PathBuf),
    /// An `https://` (or, on a trusted network, `http://`) URL, fetched with an HTTP/1.1
    /// GET; https checks the server against the system's trusted roots.
    Url(String),
}

impl JwksSource {
    /// An `http://` or `https://` address is a URL, anything else a file path.
    pub fn parse(text: &str) -> JwksSource {
        let lower = text.trim().to_ascii_lowercase();
        if lower.starts_with("http://") || lower.starts_with("https://") {
            JwksSource::Url(text.trim().to_owned())
        } else {
            JwksSource::File(PathBuf::from(text))
        }
    }
}

impl std::fmt::Display for JwksSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JwksSource::File(path) => write!(f, "{}", path.display()),
            JwksSource::Url(url) => f.write_str(url),
        }
    }
}

/// Why the JWKS could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JwksError {
    /// The file could not be read.
    #[error("cannot read the JWKS file {path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The system's trusted roots, which https fetches check the issuer against, could not
    /// be loaded.
    #[error("cannot fetch the JWKS from {url}: no trusted root certificates: {source}")]
    Roots {
        /// The URL.
        url: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The URL is not one the client can use.
    #[error("invalid JWKS URL {url}: {reason}")]
    BadUrl {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// The request failed (connection, timeout, body).
    #[error("cannot fetch the JWKS from {url}: {reason}")]
    Fetch {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// The server answered with another status than 200.
    #[error("cannot fetch the JWKS from {url}: HTTP status {status}")]
    Status {
        /// The URL.
        url: String,
        /// The status.
        status: u16,
    },
    /// The document is not a JWKS.
    #[error("the JWKS from {from} is not a JSON Web Key Set: {source}")]
    Parse {
        /// The file or URL.
        from: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// The set holds no RS256, ES256 or EdDSA verification key.
    #[error("the JWKS from {0} holds no usable key (RSA, EC P-256 or Ed25519, for signatures)")]
    NoUsableKey(String),
}

/// One verification key and what it may check.
struct VerifyingKey {
    kid: Option<String>,
    /// The algorithms the key may verify: its declared `alg`, or every supported one of its
    /// type.
    algorithms: &'static [Algorithm],
    key: DecodingKey,
}

/// The keys of one fetch.
pub(crate) struct KeySet {
    keys: Vec<VerifyingKey>,
}

/// What a lookup found.
pub(crate) enum KeyLookup<'a> {
    /// A key for this `kid` (or the only key of the algorithm's type, without `kid`).
    Found(&'a DecodingKey),
    /// No key with this `kid`: a refetch may find it.
    UnknownKid,
    /// A key exists but not for this algorithm, or the token names none and several fit.
    Unusable,
}

impl KeySet {
    fn from_jwks(set: &JwkSet, from: &str) -> Result<KeySet, JwksError> {
        let keys: Vec<VerifyingKey> = set.keys.iter().filter_map(verifying_key).collect();
        if keys.is_empty() {
            return Err(JwksError::NoUsableKey(from.to_owned()));
        }
        Ok(KeySet { keys })
    }

    /// The key that checks a token signed with `alg` under `kid`.
    pub(crate) fn find(&self, kid: Option<&str>, alg: Algorithm) -> KeyLookup<'_> {
        match kid {
            Some(kid) => match self.keys.iter().find(|k| k.kid.as_deref() == Some(kid)) {
                Some(key) if key.algorithms.contains(&alg) => KeyLookup::Found(&key.key),
                Some(_) => KeyLookup::Unusable,
                None => KeyLookup::UnknownKid,
            },
            None => {
                let mut fitting = self.keys.iter().filter(|k| k.algorithms.contains(&alg));
                match (fitting.next(), fitting.next()) {
                    (Some(key), None) => KeyLookup::Found(&key.key),
                    _ => KeyLookup::Unusable,
                }
            }
        }
    }

    /// How many keys the set holds.
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }
}

/// The key a JWK describes, when it is a signature key this server checks.
fn verifying_key(jwk: &Jwk) -> Option<VerifyingKey> {
    if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
        return None;
    }
    let algorithms: &'static [Algorithm] = match (&jwk.algorithm, jwk.common.key_algorithm.as_ref())
    {
        (AlgorithmParameters::RSA(_), None | Some(KeyAlgorithm::RS256)) => &[Algorithm::RS256],
        (AlgorithmParameters::EllipticCurve(ec), None | Some(KeyAlgorithm::ES256))
            if ec.curve == EllipticCurve::P256 =>
        {
            &[Algorithm::ES256]
        }
        (AlgorithmParameters::OctetKeyPair(okp), None | Some(KeyAlgorithm::EdDSA))
            if okp.curve == EllipticCurve::Ed25519 =>
        {
            &[Algorithm::EdDSA]
        }
        _ => return None,
    };
    let key = DecodingKey::from_jwk(jwk).ok()?;
    Some(VerifyingKey {
        kid: jwk.common.key_id.clone(),
        algorithms,
        key,
    })
}

/// The cached key set and its refresh rule.
pub(crate) struct Jwks {
    source: JwksSource,
    keys: RwLock<Arc<KeySet>>,
    /// Held while refetching, so concurrent unknown kids cause one fetch; holds the time of
    /// the last fetch.
    refresh: tokio::sync::Mutex<Instant>,
    refresh_interval: Duration,
}

impl Jwks {
    /// Loads the set from `source` (the server's start: errors are final).
    pub(crate) async fn load(
        source: JwksSource,
        refresh_interval: Duration,
    ) -> Result<Jwks, JwksError> {
        let keys = fetch(&source).await?;
        Ok(Jwks {
            source,
            keys: RwLock::new(Arc::new(keys)),
            refresh: tokio::sync::Mutex::new(Instant::now()),
            refresh_interval,
        })
    }

    /// The keys held now.
    pub(crate) fn current(&self) -> Arc<KeySet> {
        self.keys.read().clone()
    }

    /// Refetches the set unless that happened less than the refresh interval ago (or
    /// while this call waited for another refetch), and returns the keys held then.
    pub(crate) async fn refresh(&self, seen: &Arc<KeySet>) -> Arc<KeySet> {
        let mut last = self.refresh.lock().await;
        let current = self.current();
        if !Arc::ptr_eq(&current, seen) || last.elapsed() < self.refresh_interval {
            // Another request refetched meanwhile, or too soon to ask again.
            return current;
        }
        *last = Instant::now();
        match fetch(&self.source).await {
            Ok(keys) => {
                tracing::info!(
                    target: "milpa_mcp::oauth",
                    source = %self.source,
                    keys = keys.len(),
                    "JWKS refreshed"
                );
                let keys = Arc::new(keys);
                *self.keys.write() = keys.clone();
                keys
            }
            Err(error) => {
                tracing::warn!(
                    target: "milpa_mcp::oauth",
                    source = %self.source,
                    %error,
                    "JWKS refresh failed; keeping the keys already held"
                );
                current
            }
        }
    }
}

/// Reads and parses the set.
async fn fetch(source: &JwksSource) -> Result<KeySet, JwksError> {
    let (bytes, from) = match source {
        JwksSource::File(path) => {
            let bytes = tokio::fs::read(path)
                .await
                .map_err(|source| JwksError::File {
                    path: path.clone(),
                    source,
                })?;
            (Bytes::from(bytes), path.display().to_string())
        }
        JwksSource::Url(url) => (fetch_url(url).await?, url.clone()),
    };
    let set: JwkSet = serde_json::from_slice(&bytes).map_err(|source| JwksError::Parse {
        from: from.clone(),
        source,
    })?;
    KeySet::from_jwks(&set, &from)
}

async fn fetch_url(url: &str) -> Result<Bytes, JwksError> {
    let bad_url = |reason: String| JwksError::BadUrl {
        url: url.to_owned(),
        reason,
    };
    let uri: axum::http::Uri = url
        .parse()
        .map_err(|e: axum::http::uri::InvalidUri| bad_url(e.to_string()))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return Err(bad_url("only http and https URLs are fetched".to_owned()));
    }
    let fetch_error = |reason: String| JwksError::Fetch {
        url: url.to_owned(),
        reason,
    };
    // Built per fetch: fetches are rare (the start, then at most one per refresh
    // interval), and the system's roots may have changed meanwhile.
    let connector = HttpsConnectorBuilder::new()
        .with_native_roots()
        .map_err(|source| JwksError::Roots {
            url: url.to_owned(),
            source,
        })?
        .https_or_http()
        .enable_http1()
        .build();
    let client = Client::builder(TokioExecutor::new()).build::<_, Empty<Bytes>>(connector);
    let request = axum::http::Request::get(uri)
        .header(axum::http::header::ACCEPT, "application/json")
        .body(Empty::new())
        .map_err(|e| fetch_error(e.to_string()))?;
    let work = async {
        let response = client
            .request(request)
            .await
            .map_err(|e| fetch_error(e.to_string()))?;
        let status = response.status();
        if status != axum::http::StatusCode::OK {
            return Err(JwksError::Status {
                url: url.to_owned(),
                status: status.as_u16(),
            });
        }
        Limited::new(response.into_body(), MAX_JWKS_BYTES)
            .collect()
            .await
            .map(|body| body.to_bytes())
            .map_err(|e| fetch_error(e.to_string()))
    };
    tokio::time::timeout(FETCH_TIMEOUT, work)
        .await
        .map_err(|_| fetch_error(format!("no answer within {} s", FETCH_TIMEOUT.as_secs())))?
}
