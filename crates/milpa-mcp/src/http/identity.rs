//! The caller's identity, as a tower layer: resolved from the bearer token before any body
//! is read, and (with an OAuth resource server) the `401` and `403` challenges.
//!
//! - A token the static [`Authenticator`] knows wins (manifest tokens keep working beside
//!   OAuth). Otherwise, with OAuth configured, the token is checked as an access token.
//! - Without OAuth: an unknown token gets `401`. No token is anonymous, unless the server
//!   requires one ([`HttpServer::require_token`](crate::HttpServer::require_token)): then
//!   `401` with `WWW-Authenticate: Bearer` on every request to the endpoint, from
//!   `initialize` on.
//! - With OAuth: no valid token of either kind gets `401` with `WWW-Authenticate: Bearer
//!   resource_metadata="…"` (plus `error="invalid_token"` and a short description when a
//!   token was presented), for every method of the endpoint.
//! - A refused token counts against the client's address ([`FailureThrottle`]): past the
//!   budget (10 a minute by default) further refusals from that address are `429` with
//!   `Retry-After`, each after a short delay, until the window passes. A token that is
//!   accepted is never throttled, so a client sharing an address with a guesser (every
//!   local process, on loopback) keeps working. Each `401` is logged with the address, and
//!   the address becoming throttled once (then at debug level); never the token.
//! - With OAuth, a request whose tool call the `authorize` stage denied for a missing scope
//!   (the call ran through the pipeline and was audited as denied) is answered `403` with
//!   `error="insufficient_scope"` and the scopes the stage reported, the response body
//!   unchanged. For a call answered on its own SSE stream, the status waits for the
//!   stream's first event that carries something (the denial itself, or the call's first
//!   message, or the keep-alive after 15 s; priming events are read past), so a denied
//!   call is seen before the headers go out. A 2026-07-28 request whose `Mcp-Method` is not
//!   `tools/call` is not held.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, Response, header};
use axum::middleware::Next;

use super::rejection::HttpRejection;
#[cfg(feature = "oauth")]
use super::scope_challenge;
use crate::auth::Authenticator;
#[cfg(feature = "oauth")]
use crate::auth::challenge;
#[cfg(feature = "oauth")]
use crate::auth::oauth::OAuthResource;
use crate::listener::throttle::{Failure, FailureThrottle};
use crate::session::Caller;

/// What the identity layer checks tokens with.
pub(crate) struct Gate {
    /// Tokens listed in the manifest (or generated at start).
    pub auth: Option<Arc<dyn Authenticator>>,
    /// A request to the endpoint without a token is refused (`401`, see
    /// [`require_token`]).
    pub token_required: bool,
    /// The OAuth resource server, when configured.
    #[cfg(feature = "oauth")]
    pub oauth: Option<Arc<OAuthResource>>,
    /// Every scope the tools ask for (advertised in the `401` challenge).
    #[cfg(feature = "oauth")]
    pub scopes: Arc<[String]>,
    /// Refused tokens per client address.
    pub throttle: FailureThrottle,
}

impl Gate {
    /// `rejection` for a refused token, or `429` when `address` has been refused too often
    /// (after the throttle's delay). Logs the refusal with the address, never the token.
    async fn refuse(&self, address: Option<SocketAddr>, rejection: HttpRejection) -> HttpRejection {
        let Some(address) = address else {
            // Served without connect info: nothing to count under.
            tracing::warn!(target: "milpa_mcp", "bearer token refused");
            return rejection;
        };
        let ip = address.ip();
        let failure = self.throttle.failed(ip);
        match failure {
            Failure::Counted => {
                tracing::warn!(target: "milpa_mcp", %ip, "bearer token refused");
            }
            Failure::NowThrottled { .. } => {
                tracing::warn!(target: "milpa_mcp", %ip, "bearer tokens refused too often; this address is throttled");
            }
            Failure::StillThrottled { .. } => {
                tracing::debug!(target: "milpa_mcp", %ip, "bearer token refused (throttled)");
            }
        }
        match failure.retry_after() {
            Some(retry_after) => {
                tokio::time::sleep(self.throttle.limits().delay).await;
                HttpRejection::TooManyFailedTokens { retry_after }
            }
            None => rejection,
        }
    }
}

/// The bearer token of `Authorization`, if any.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, token) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        })
        .filter(|t| !t.is_empty())
}

/// Resolves the caller from the request's headers and connection, and hands it to the
/// handler as a request extension (see the module documentation for who is refused).
pub(crate) async fn authenticate(
    State(gate): State<Arc<Gate>>,
    mut request: Request,
    next: Next,
) -> Result<Response<Body>, HttpRejection> {
    let headers = request.headers();
    let address = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0);
    let mut caller = Caller {
        ip: address.map(|a| a.ip().to_string()),
        user_agent: headers
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        ..Caller::default()
    };
    let token = bearer(headers);
    let known = match (&gate.auth, token) {
        (Some(auth), Some(token)) => auth.authenticate(token).await,
        _ => None,
    };
    // With an OAuth resource server, a request needs a valid token of either kind.
    #[cfg(feature = "oauth")]
    let known = match (known, &gate.oauth) {
        (None, Some(oauth)) => Some(access_token(&gate, oauth, address, token).await?),
        (known, _) => known,
    };
    match (known, token) {
        (Some(identity), _) => {
            caller.principal = Some(identity.principal);
            caller.scopes = identity.scopes;
        }
        (None, Some(_)) => {
            return Err(gate.refuse(address, HttpRejection::InvalidToken).await);
        }
        (None, None) => {}
    }
    #[cfg(feature = "oauth")]
    if let Some(oauth) = &gate.oauth {
        return Ok(scope_challenge::answer(oauth, caller, request, next).await);
    }
    request.extensions_mut().insert(caller);
    Ok(next.run(request).await)
}

/// The identity behind an access token `oauth` accepts; `401` with a challenge for a
/// missing or refused one (a refused one counted against `address`).
#[cfg(feature = "oauth")]
async fn access_token(
    gate: &Gate,
    oauth: &OAuthResource,
    address: Option<SocketAddr>,
    token: Option<&str>,
) -> Result<crate::auth::Identity, HttpRejection> {
    let Some(token) = token else {
        return Err(HttpRejection::TokenRequired {
            challenge: challenge::missing_token(oauth.metadata_url(), &gate.scopes),
        });
    };
    match oauth.verify(token).await {
        Ok(identity) => Ok(identity),
        Err(why) => {
            tracing::warn!(target: "milpa_mcp", reason = %why, "access token refused");
            let rejection = HttpRejection::InvalidAccessToken {
                challenge: challenge::invalid_token(oauth.metadata_url(), &why),
                why: why.to_string(),
            };
            Err(gate.refuse(address, rejection).await)
        }
    }
}

/// On the endpoint's route only (so an unknown path is still `404`): an anonymous caller
/// gets `401` with `WWW-Authenticate: Bearer`. Runs after [`authenticate`], which put the
/// caller in the request's extensions.
pub(crate) async fn require_token(
    request: Request,
    next: Next,
) -> Result<Response<Body>, HttpRejection> {
    let anonymous = request
        .extensions()
        .get::<Caller>()
        .is_none_or(|caller| caller.principal.is_none());
    if anonymous {
        return Err(HttpRejection::BearerTokenRequired);
    }
    Ok(next.run(request).await)
}
