//! The OAuth 2.1 resource server: access tokens (JWTs) checked against the issuer's keys.
//!
//! A token is accepted when it is signed with RS256, ES256 or EdDSA by a key of the
//! issuer's JWKS, names the configured issuer (`iss`) and this resource among its
//! audiences (`aud`, RFC 8707: a token minted for another resource is refused, never passed
//! on), has a subject (`sub`, the principal calls run as) and is within its validity window
//! (`exp` required, `nbf` when present), both with [`OAuthConfig::leeway`] (30 s by default)
//! of clock skew allowed. Its scopes are read from [`OAuthConfig::scopes_claim`] (a
//! space-separated string, or a JSON list of strings) and are the call's scopes as they are:
//! the issuer grants the tool scopes (`notes:read`, …) themselves.
//!
//! Two things an issuer cannot grant:
//! - A wildcard. The issuer's scopes are literal names, so `*` and `ns:*`, which milpa reads
//!   as patterns where an operator wrote them (a manifest token), are dropped from the
//!   identity with a warning: a scope literally named `*` is one no tool asks for, and
//!   holding `*` would also let the caller act as another principal. Dropping rather than
//!   refusing the token keeps its other scopes working.
//! - A local principal. A `sub` of `stdio`, `cli` or `local-…` ([`milpa::principal`]) is
//!   refused (`401 invalid_token`), as is a `sub` longer than [`MAX_SUBJECT_BYTES`]: a
//!   remote caller never shares a name with the terminal or a trusted stdio process.
//!
//! The HTTP transport answers a request without a valid token `401` with a
//! `WWW-Authenticate` challenge pointing at the RFC 9728 metadata
//! ([`OAuthResource::metadata`]), served at `/.well-known/oauth-protected-resource`.

use std::time::Duration;

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation, decode, decode_header};
use serde_json::{Map, Value, json};

use super::Identity;
use super::jwks::{Jwks, KeyLookup};
pub use super::jwks::{JwksError, JwksSource};

/// The longest `sub` accepted, in bytes: it becomes the principal of every call, audit
/// record and approval the token makes.
pub const MAX_SUBJECT_BYTES: usize = 256;

/// The path of the protected-resource metadata (RFC 9728 §3).
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// Settings of the resource server (`[auth.oauth]` in a manifest).
///
/// ```
/// use milpa_mcp::auth::oauth::{JwksSource, OAuthConfig};
///
/// let config = OAuthConfig::new(
///     "https://auth.example.com",
///     "https://tools.example.com/mcp",
///     JwksSource::parse("/etc/milpa/jwks.json"),
/// )
/// .scopes_claim("scp");
/// assert_eq!(config.scopes_claim, "scp");
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct OAuthConfig {
    /// The authorization server that issues the tokens (`iss`), advertised in the metadata.
    pub issuer: String,
    /// This resource's identifier (RFC 8707): tokens must list it in `aud`. Also the
    /// `resource` of the metadata, whose URL is derived from it.
    pub audience: String,
    /// Where the issuer's keys are read.
    pub jwks: JwksSource,
    /// The claim holding the granted scopes (default `scope`).
    pub scopes_claim: String,
    /// Clock skew allowed on `exp` and `nbf` (default 30 s).
    pub leeway: Duration,
    /// The shortest time between two JWKS refetches caused by unknown key ids (default
    /// 30 s).
    pub refresh_interval: Duration,
}

impl OAuthConfig {
    /// Settings with the default claim (`scope`), leeway (30 s) and refresh interval (30 s).
    pub fn new(issuer: impl Into<String>, audience: impl Into<String>, jwks: JwksSource) -> Self {
        OAuthConfig {
            issuer: issuer.into(),
            audience: audience.into(),
            jwks,
            scopes_claim: "scope".to_owned(),
            leeway: Duration::from_secs(30),
            refresh_interval: Duration::from_secs(30),
        }
    }

    /// The claim holding the granted scopes.
    pub fn scopes_claim(mut self, claim: impl Into<String>) -> Self {
        self.scopes_claim = claim.into();
        self
    }

    /// Clock skew allowed on `exp` and `nbf`.
    pub fn leeway(mut self, leeway: Duration) -> Self {
        self.leeway = leeway;
        self
    }

    /// The shortest time between two JWKS refetches.
    pub fn refresh_interval(mut self, interval: Duration) -> Self {
        self.refresh_interval = interval;
        self
    }
}

/// Why the resource server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OAuthError {
    /// The keys could not be loaded.
    #[error(transparent)]
    Jwks(#[from] JwksError),
    /// The audience is not an absolute `http(s)` URL (the metadata URL is derived from it).
    #[error("the OAuth audience must be this server's absolute http(s) URL, got {0:?}")]
    BadAudience(String),
    /// The issuer is empty.
    #[error("the OAuth issuer must not be empty")]
    EmptyIssuer,
}

/// Why a token was refused. Its [`Display`](std::fmt::Display) is the `error_description`
/// sent back: short, and never the token itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenRejection {
    /// Not a JWT, or its header or claims cannot be read.
    #[error("the token is not a well-formed JWT")]
    Malformed,
    /// Signed with an algorithm other than RS256, ES256 or EdDSA.
    #[error("the token's signing algorithm is not accepted (RS256, ES256 or EdDSA)")]
    UnsupportedAlgorithm,
    /// No key of the issuer's set (even after a refetch) checks it.
    #[error("the token's signing key is unknown")]
    UnknownKey,
    /// The signature does not verify.
    #[error("the token's signature is invalid")]
    BadSignature,
    /// `exp` has passed.
    #[error("the token has expired")]
    Expired,
    /// `nbf` is still ahead.
    #[error("the token is not valid yet")]
    NotYetValid,
    /// `iss` is not the configured issuer.
    #[error("the token was not issued by the expected issuer")]
    WrongIssuer,
    /// `aud` does not name this resource.
    #[error("the token was not issued for this resource")]
    WrongAudience,
    /// `exp`, `iss`, `aud` or `sub` is missing, or `sub` or the scopes claim has the wrong
    /// type.
    #[error("the token lacks a required claim or has one of the wrong type: {0}")]
    BadClaim(&'static str),
    /// `sub` is longer than [`MAX_SUBJECT_BYTES`].
    #[error("the token's subject is longer than 256 bytes")]
    SubjectTooLong,
    /// `sub` is a name milpa keeps for its local callers (`stdio`, `cli`, `local-…`).
    #[error("the token's subject is a name reserved for local callers (stdio, cli, local-...)")]
    ReservedSubject,
}

/// The algorithms accepted, whatever a token's header says.
const ACCEPTED: [Algorithm; 3] = [Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA];

/// A configured resource server: its keys and its checks.
pub struct OAuthResource {
    config: OAuthConfig,
    jwks: Jwks,
    metadata_url: String,
    /// The path part of the audience (`/mcp`), for the path-suffixed metadata route.
    resource_path: String,
}

impl std::fmt::Debug for OAuthResource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthResource")
            .field("config", &self.config)
            .field("metadata_url", &self.metadata_url)
            .finish_non_exhaustive()
    }
}

impl OAuthResource {
    /// Loads the issuer's keys and checks the settings. Fails when the JWKS cannot be
    /// read, fetched or parsed, or holds no usable key: a server that could check no
    /// token must not start.
    pub async fn start(config: OAuthConfig) -> Result<OAuthResource, OAuthError> {
        if config.issuer.trim().is_empty() {
            return Err(OAuthError::EmptyIssuer);
        }
        let (origin, path) = split_url(&config.audience)
            .ok_or_else(|| OAuthError::BadAudience(config.audience.clone()))?;
        let resource_path = path.trim_end_matches('/').to_owned();
        let metadata_url = format!("{origin}{METADATA_PATH}{resource_path}");
        let jwks = Jwks::load(config.jwks.clone(), config.refresh_interval).await?;
        Ok(OAuthResource {
            config,
            jwks,
            metadata_url,
            resource_path,
        })
    }

    /// The settings.
    pub fn config(&self) -> &OAuthConfig {
        &self.config
    }

    /// The absolute URL of the metadata document, as challenges name it: the audience's
    /// origin, [`METADATA_PATH`], then the audience's path (RFC 9728 §3.1).
    pub fn metadata_url(&self) -> &str {
        &self.metadata_url
    }

    /// The audience's path (`/mcp`), empty for a bare origin.
    pub(crate) fn resource_path(&self) -> &str {
        &self.resource_path
    }

    /// The RFC 9728 metadata document, listing `scopes_supported` (every scope the tools
    /// ask for).
    pub fn metadata(&self, scopes_supported: &[String]) -> Value {
        json!({
            "resource": self.config.audience,
            "authorization_servers": [self.config.issuer],
            "scopes_supported": scopes_supported,
            "bearer_methods_supported": ["header"],
        })
    }

    /// Checks `token`; on success, who it belongs to and the scopes it grants. A token
    /// signed with a key id the cached set lacks causes one refetch (rate-limited) and a
    /// second look.
    pub async fn verify(&self, token: &str) -> Result<Identity, TokenRejection> {
        let header = decode_header(token).map_err(|_| TokenRejection::Malformed)?;
        if !ACCEPTED.contains(&header.alg) {
            return Err(TokenRejection::UnsupportedAlgorithm);
        }
        let kid = header.kid.as_deref();
        let mut keys = self.jwks.current();
        if matches!(keys.find(kid, header.alg), KeyLookup::UnknownKid) {
            keys = self.jwks.refresh(&keys).await;
        }
        let key = match keys.find(kid, header.alg) {
            KeyLookup::Found(key) => key,
            KeyLookup::UnknownKid | KeyLookup::Unusable => return Err(TokenRejection::UnknownKey),
        };
        let claims = decode::<Map<String, Value>>(token, key, &self.validation(header.alg))
            .map_err(|e| rejection(e.kind()))?
            .claims;
        self.identity(claims)
    }

    fn validation(&self, alg: Algorithm) -> Validation {
        let mut validation = Validation::new(alg);
        validation.leeway = self.config.leeway.as_secs();
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_audience(&[&self.config.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation
    }

    fn identity(&self, mut claims: Map<String, Value>) -> Result<Identity, TokenRejection> {
        let principal = match claims.remove("sub") {
            Some(Value::String(sub)) if !sub.is_empty() => sub,
            _ => return Err(TokenRejection::BadClaim("sub")),
        };
        if principal.len() > MAX_SUBJECT_BYTES {
            return Err(TokenRejection::SubjectTooLong);
        }
        if milpa::principal::is_reserved(&principal) {
            return Err(TokenRejection::ReservedSubject);
        }
        let mut scopes: Vec<String> = match claims.remove(&self.config.scopes_claim) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(list)) => list.split_whitespace().map(str::to_owned).collect(),
            Some(Value::Array(items)) => items
                .into_iter()
                .map(|item| match item {
                    Value::String(scope) => Ok(scope),
                    _ => Err(TokenRejection::BadClaim("scopes")),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(TokenRejection::BadClaim("scopes")),
        };
        scopes.retain(|scope| {
            let pattern = milpa::is_scope_pattern(scope);
            if pattern {
                tracing::warn!(target: "milpa_mcp", scope = ?scope, "an access token's wildcard scope is not a wildcard: dropped");
            }
            !pattern
        });
        Ok(Identity { principal, scopes })
    }
}

fn rejection(kind: &ErrorKind) -> TokenRejection {
    match kind {
        ErrorKind::InvalidSignature
        | ErrorKind::InvalidEcdsaKey
        | ErrorKind::InvalidEddsaKey
        | ErrorKind::InvalidRsaKey(_) => TokenRejection::BadSignature,
        ErrorKind::ExpiredSignature => TokenRejection::Expired,
        ErrorKind::ImmatureSignature => TokenRejection::NotYetValid,
        ErrorKind::InvalidIssuer => TokenRejection::WrongIssuer,
        ErrorKind::InvalidAudience => TokenRejection::WrongAudience,
        ErrorKind::MissingRequiredClaim(_) | ErrorKind::InvalidClaimFormat(_) => {
            TokenRejection::BadClaim("exp, iss, aud or sub")
        }
        ErrorKind::InvalidAlgorithm | ErrorKind::UnsupportedAlgorithm => {
            TokenRejection::UnsupportedAlgorithm
        }
        _ => TokenRejection::Malformed,
    }
}

/// `https://host:port` and `/path` of an absolute http(s) URL.
fn split_url(url: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = url.split_once("://")?;
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return None;
    }
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    let host_end = rest.find('/').unwrap_or(rest.len());
    if host_end == 0 {
        return None;
    }
    let origin_len = scheme.len() + 3 + host_end;
    Some((&url[..origin_len], &rest[host_end..]))
}

#[cfg(test)]
mod tests {
    use super::split_url;

    #[test]
    fn the_metadata_url_keeps_the_resource_origin_and_path_apart() {
        assert_eq!(
            split_url("https://tools.example.com/mcp"),
            Some(("https://tools.example.com", "/mcp"))
        );
        assert_eq!(
            split_url("http://127.0.0.1:8080"),
            Some(("http://127.0.0.1:8080", ""))
        );
        assert_eq!(
            split_url("https://a.example/x/mcp?q=1"),
            Some(("https://a.example", "/x/mcp"))
        );
        assert_eq!(split_url("ftp://a/b"), None);
        assert_eq!(split_url("https:///mcp"), None);
        assert_eq!(split_url("tools.example.com/mcp"), None);
    }
}
