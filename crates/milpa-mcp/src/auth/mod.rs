//! Bearer tokens → principal and scopes, for the HTTP transport (the `oauth` feature adds
//! access tokens).
//!
//! A request's `Authorization: Bearer <token>` is handed to an [`Authenticator`] (a table of
//! [`StaticTokens`] from the manifest). What it returns becomes the call's principal and
//! scopes; without a token the caller is anonymous (and the `mcp` channel policy's
//! `require_auth` then denies tool calls with the usual `FORBIDDEN` message, while
//! `tools/list` still works), and a token it does not know gets `401`.
//!
//! With an OAuth resource server configured ([`oauth`]), a token the authenticator does not
//! know is checked as an access token (a JWT from the issuer), and a request without a valid
//! token of either kind gets `401` with a challenge pointing at the protected-resource
//! metadata: no anonymous access.

use std::collections::HashMap;

use milpa::BoxFuture;
use sha2::{Digest, Sha256};

#[cfg(feature = "oauth")]
pub(crate) mod challenge;
#[cfg(all(feature = "oauth", feature = "approvals-page"))]
pub(crate) mod either;
#[cfg(feature = "oauth")]
mod jwks;
#[cfg(feature = "oauth")]
#[cfg_attr(docsrs, doc(cfg(feature = "oauth")))]
pub mod oauth;
pub(crate) mod scope_denial;

/// Who a token belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The principal tool calls run as.
    pub principal: String,
    /// The scopes they hold.
    pub scopes: Vec<String>,
}

/// Maps a bearer token to an identity.
pub trait Authenticator: Send + Sync + 'static {
    /// The identity behind `token`, or `None` when the token is unknown.
    fn authenticate<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Option<Identity>>;
}

/// A fixed table of tokens, stored only as SHA-256 hashes (as a manifest lists them).
///
/// ```
/// use milpa_mcp::auth::{Authenticator, StaticTokens};
///
/// let mut tokens = StaticTokens::new();
/// // sha256("test")
/// tokens
///     .insert_sha256_hex("9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "alice", ["ops:read"])
///     .unwrap();
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let who = tokens.authenticate("test").await.unwrap();
/// assert_eq!(who.principal, "alice");
/// assert!(tokens.authenticate("nope").await.is_none());
/// # });
/// ```
#[derive(Debug, Clone, Default)]
pub struct StaticTokens {
    by_hash: HashMap<[u8; 32], Identity>,
}

/// A token hash that is not 64 hexadecimal characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadHash(pub String);

impl std::fmt::Display for BadHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "not a SHA-256 hex digest: {:?}", self.0)
    }
}

impl std::error::Error for BadHash {}

impl StaticTokens {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a token by the hex SHA-256 of its text.
    pub fn insert_sha256_hex(
        &mut self,
        sha256_hex: &str,
        principal: impl Into<String>,
        scopes: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<(), BadHash> {
        let bytes = hex::decode(sha256_hex.trim()).map_err(|_| BadHash(sha256_hex.into()))?;
        let hash: [u8; 32] = bytes.try_into().map_err(|_| BadHash(sha256_hex.into()))?;
        self.by_hash.insert(
            hash,
            Identity {
                principal: principal.into(),
                scopes: scopes.into_iter().map(Into::into).collect(),
            },
        );
        Ok(())
    }

    /// Adds a token by its text (only its hash is kept).
    pub fn insert_token(
        &mut self,
        token: &str,
        principal: impl Into<String>,
        scopes: impl IntoIterator<Item = impl Into<String>>,
    ) {
        self.by_hash.insert(
            hash(token),
            Identity {
                principal: principal.into(),
                scopes: scopes.into_iter().map(Into::into).collect(),
            },
        );
    }

    /// How many tokens are known.
    pub fn len(&self) -> usize {
        self.by_hash.len()
    }

    /// Whether no token is known.
    pub fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }

    /// The identity behind `token`, without the async wrapper.
    pub fn lookup(&self, token: &str) -> Option<&Identity> {
        self.by_hash.get(&hash(token))
    }
}

/// The hex SHA-256 of a token (what a manifest stores).
pub fn sha256_hex(token: &str) -> String {
    hex::encode(hash(token))
}

fn hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl Authenticator for StaticTokens {
    fn authenticate<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Option<Identity>> {
        let found = self.lookup(token).cloned();
        Box::pin(std::future::ready(found))
    }
}
