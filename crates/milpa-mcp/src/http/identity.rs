//! The caller's identity, as a tower layer: resolved from the bearer token before any body
//! is read, and (with an OAuth resource server) the `401` and `403` challenges.
//!
//! - A token the static [`Authenticator`] knows wins (manifest tokens keep working beside
//!   OAuth). Otherwise, with OAuth configured, the token is checked as an access token.
//! - Without OAuth: no token is anonymous; an unknown token gets `401`.
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
use axum::http::{HeaderMap, Method, Response, StatusCode, header};
use axum::middleware::Next;
use http_body_util::BodyExt;

use super::rejection::HttpRejection;
use super::throttle::{Failure, FailureThrottle};
use crate::auth::Authenticator;
use crate::auth::challenge::{self, ScopeDenial};
use crate::auth::oauth::OAuthResource;
use crate::session::Caller;

/// What the identity layer checks tokens with.
pub(crate) struct Gate {
    /// Tokens listed in the manifest (or generated at start).
    pub auth: Option<Arc<dyn Authenticator>>,
    /// The OAuth resource server, when configured.
    pub oauth: Option<Arc<OAuthResource>>,
    /// Every scope the tools ask for (advertised in the `401` challenge).
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
    match (known, token, &gate.oauth) {
        (Some(identity), _, _) => {
            caller.principal = Some(identity.principal);
            caller.scopes = identity.scopes;
        }
        (None, Some(token), Some(oauth)) => match oauth.verify(token).await {
            Ok(identity) => {
                caller.principal = Some(identity.principal);
                caller.scopes = identity.scopes;
            }
            Err(why) => {
                tracing::warn!(target: "milpa_mcp", reason = %why, "access token refused");
                let rejection = HttpRejection::InvalidAccessToken {
                    challenge: challenge::invalid_token(oauth.metadata_url(), &why),
                    why: why.to_string(),
                };
                return Err(gate.refuse(address, rejection).await);
            }
        },
        (None, None, Some(oauth)) => {
            return Err(HttpRejection::TokenRequired {
                challenge: challenge::missing_token(oauth.metadata_url(), &gate.scopes),
            });
        }
        (None, Some(_), None) => {
            return Err(gate.refuse(address, HttpRejection::InvalidToken).await);
        }
        (None, None, None) => {}
    }
    let Some(oauth) = &gate.oauth else {
        request.extensions_mut().insert(caller);
        return Ok(next.run(request).await);
    };
    let denial = ScopeDenial::default();
    caller.scope_denial = Some(denial.clone());
    // Only a tool call can be denied for a scope: a 2026-07-28 request names its method in
    // `Mcp-Method`, so other long-lived streams (`subscriptions/listen`) are not held.
    let streamed_post = request.method() == Method::POST
        && request
            .headers()
            .get(METHOD_HEADER)
            .is_none_or(|method| method.as_bytes() == b"tools/call");
    request.extensions_mut().insert(caller);
    let response = next.run(request).await;
    let response = if streamed_post && is_event_stream(&response) {
        first_event_sent(response).await
    } else {
        response
    };
    Ok(match denial.needed() {
        Some(needed) => insufficient_scope(response, oauth.metadata_url(), needed),
        None => response,
    })
}

fn is_event_stream(response: &Response<Body>) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// The header naming a 2026-07-28 request's method.
const METHOD_HEADER: &str = "mcp-method";

/// How many priming events (an event id without data, for resumption) are read past
/// while waiting for the call's first real event.
const MAX_PRIMING_EVENTS: usize = 4;

/// Waits for the stream's first event that carries something (a message, or the
/// keep-alive comment), past any priming events, and hands back the same response with
/// what was read first. A client that goes away meanwhile drops this future, and with it
/// the stream (which cancels the call).
async fn first_event_sent(response: Response<Body>) -> Response<Body> {
    let (parts, mut body) = response.into_parts();
    let mut read = Vec::new();
    while read.len() <= MAX_PRIMING_EVENTS {
        let Some(Ok(frame)) = body.frame().await else {
            break;
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let priming = is_priming(&data);
        read.push(Ok::<_, axum::Error>(data));
        if !priming {
            break;
        }
    }
    let rest = body.into_data_stream();
    let stream = futures_util::stream::StreamExt::chain(futures_util::stream::iter(read), rest);
    Response::from_parts(parts, Body::from_stream(stream))
}

/// Whether an SSE chunk only primes the stream: fields such as `id:` and `retry:`, and no
/// data or comment.
fn is_priming(chunk: &[u8]) -> bool {
    let text = String::from_utf8_lossy(chunk);
    let mut fields = text.lines().filter(|line| !line.is_empty()).peekable();
    fields.peek().is_some()
        && fields.all(|line| match line.split_once(':') {
            Some(("data", value)) => value.trim().is_empty(),
            Some(("", _)) => false,
            // Another field, or a bare field name (an empty value).
            Some(_) | None => true,
        })
}

/// The same response as `403` with the `insufficient_scope` challenge.
fn insufficient_scope(
    mut response: Response<Body>,
    metadata_url: &str,
    needed: &[String],
) -> Response<Body> {
    *response.status_mut() = StatusCode::FORBIDDEN;
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        challenge::insufficient_scope(metadata_url, needed),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::is_priming;

    #[test]
    fn priming_events_carry_no_data_and_no_comment() {
        assert!(is_priming(b"id: 0\ndata:\n\n"));
        assert!(is_priming(b"id: abc\nretry: 1000\ndata: \n\n"));
        assert!(is_priming(b"id: 2\ndata\n\n"));
        assert!(!is_priming(b"data: {\"jsonrpc\":\"2.0\"}\n\n"));
        assert!(!is_priming(b"id: 1\ndata: {}\n\n"));
        assert!(!is_priming(b":\n\n"));
        assert!(!is_priming(b""));
    }
}
