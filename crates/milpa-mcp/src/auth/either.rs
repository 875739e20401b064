//! [`StaticOrAccessToken`]: the tokens the MCP endpoint accepts, as one [`Authenticator`],
//! for the approvals page's sign-in.

use std::sync::Arc;

use milpa::BoxFuture;

use super::oauth::OAuthResource;
use super::{Authenticator, Identity};

/// A token the static authenticator knows, else an access token the OAuth resource server
/// verifies: the same two paths, in the same order, as a request to the endpoint. The
/// approvals page signs people in with it, so a person signs in with whichever token an
/// MCP client of this server would send (the identity's scopes, wildcards of an issuer
/// dropped, decide what the person may do there).
pub(crate) struct StaticOrAccessToken {
    tokens: Option<Arc<dyn Authenticator>>,
    oauth: Arc<OAuthResource>,
}

impl StaticOrAccessToken {
    /// Checks `tokens` first (when there are any), then `oauth`.
    pub(crate) fn new(tokens: Option<Arc<dyn Authenticator>>, oauth: Arc<OAuthResource>) -> Self {
        StaticOrAccessToken { tokens, oauth }
    }
}

impl Authenticator for StaticOrAccessToken {
    fn authenticate<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Option<Identity>> {
        Box::pin(async move {
            if let Some(tokens) = &self.tokens
                && let Some(identity) = tokens.authenticate(token).await
            {
                return Some(identity);
            }
            match self.oauth.verify(token).await {
                Ok(identity) => Some(identity),
                Err(why) => {
                    // The reason, never the token.
                    tracing::warn!(target: "milpa_mcp", reason = %why, "access token refused");
                    None
                }
            }
        })
    }
}
