//! Every way the HTTP transport refuses a request, and the response each one gets.
//!
//! One variant per failure; each answers with its own status code and (except `405`) a
//! JSON-RPC error body, so clients that only read the body still learn why.

use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::jsonrpc::{self, ErrorObject, INVALID_REQUEST, Rejected, RequestId, SERVER_ERROR};
use crate::listener::json_body;
use crate::listener::throttle::retry_after_secs;
use crate::protocol;

/// The JSON-RPC code for a session that ended or never existed.
const SESSION_NOT_FOUND: jsonrpc::ErrorCode = jsonrpc::ErrorCode::SESSION_NOT_FOUND;

/// Why the HTTP transport refused a request.
#[derive(Debug)]
pub(crate) enum HttpRejection {
    /// `MCP-Protocol-Version` names a version this server does not speak.
    UnsupportedProtocolVersion,
    /// A `POST` whose `Content-Type` is not JSON.
    UnsupportedMediaType,
    /// The body is larger than the limit (declared or counted while reading).
    PayloadTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The body did not arrive in time.
    BodyTimeout {
        /// The time it had.
        timeout: Duration,
    },
    /// The caller's class holds as many open streams as it may.
    TooManyStreams {
        /// The request's id, when it had one (`subscriptions/listen`).
        id: Option<RequestId>,
        /// Whether the caller is anonymous (sharing the anonymous budget).
        anonymous: bool,
    },
    /// Anonymous callers hold as many connections as they may; this one is closed.
    TooManyAnonymousConnections,
    /// Anonymous bodies being read hold all the bytes they may; this one was not read.
    AnonymousBodiesBusy,
    /// The body could not be read (the connection broke).
    BodyUnreadable,
    /// A bearer token the authenticator does not know.
    InvalidToken,
    /// No bearer token, where the endpoint serves nothing to an anonymous caller.
    BearerTokenRequired,
    /// A refused bearer token from an address refused too often lately.
    TooManyFailedTokens {
        /// Until the address's window passes.
        retry_after: Duration,
    },
    /// No token, on a server protected by OAuth.
    #[cfg(feature = "oauth")]
    TokenRequired {
        /// The `WWW-Authenticate` value (pointing at the resource metadata).
        challenge: HeaderValue,
    },
    /// A token that is neither a static one nor a valid access token, on a server
    /// protected by OAuth.
    #[cfg(feature = "oauth")]
    InvalidAccessToken {
        /// The `WWW-Authenticate` value (`error="invalid_token"`).
        challenge: HeaderValue,
        /// Why, in a few words (never the token).
        why: String,
    },
    /// `GET` without `Accept: text/event-stream`.
    NotAcceptable,
    /// A method other than `GET`, `POST` and `DELETE`.
    MethodNotAllowed,
    /// A request that needs a session came without `Mcp-Session-Id`.
    SessionRequired {
        /// The request's id, when it had one.
        id: Option<RequestId>,
    },
    /// `Mcp-Session-Id` names a session that ended, never existed, or belongs to another
    /// identity.
    SessionNotFound,
    /// The server holds as many authenticated sessions as it may.
    TooManySessions {
        /// The `initialize` request's id.
        id: RequestId,
    },
    /// This principal holds as many sessions as one principal may.
    TooManySessionsForPrincipal {
        /// The `initialize` request's id.
        id: RequestId,
    },
    /// Anonymous callers hold as many sessions as they may.
    TooManyAnonymousSessions {
        /// The `initialize` request's id.
        id: RequestId,
    },
    /// The body is not a JSON-RPC message (or batch) at all.
    Malformed(Rejected),
}

impl HttpRejection {
    fn status(&self) -> StatusCode {
        match self {
            HttpRejection::UnsupportedProtocolVersion
            | HttpRejection::BodyUnreadable
            | HttpRejection::SessionRequired { .. }
            | HttpRejection::Malformed(_) => StatusCode::BAD_REQUEST,
            HttpRejection::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            HttpRejection::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            HttpRejection::BodyTimeout { .. } => StatusCode::REQUEST_TIMEOUT,
            HttpRejection::InvalidToken | HttpRejection::BearerTokenRequired => {
                StatusCode::UNAUTHORIZED
            }
            #[cfg(feature = "oauth")]
            HttpRejection::TokenRequired { .. } | HttpRejection::InvalidAccessToken { .. } => {
                StatusCode::UNAUTHORIZED
            }
            HttpRejection::TooManyFailedTokens { .. } | HttpRejection::TooManyStreams { .. } => {
                StatusCode::TOO_MANY_REQUESTS
            }
            HttpRejection::NotAcceptable => StatusCode::NOT_ACCEPTABLE,
            HttpRejection::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            HttpRejection::SessionNotFound => StatusCode::NOT_FOUND,
            HttpRejection::TooManySessions { .. }
            | HttpRejection::TooManySessionsForPrincipal { .. }
            | HttpRejection::TooManyAnonymousSessions { .. }
            | HttpRejection::AnonymousBodiesBusy
            | HttpRejection::TooManyAnonymousConnections => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The request id to answer with (when known) and the error.
    fn error(self) -> (Option<RequestId>, ErrorObject) {
        let plain =
            |code: jsonrpc::ErrorCode, message: &str| (None, ErrorObject::new(code, message));
        match self {
            HttpRejection::UnsupportedProtocolVersion => plain(
                INVALID_REQUEST,
                &format!(
                    "Bad Request: unsupported MCP-Protocol-Version (supported: {})",
                    protocol::SUPPORTED_VERSIONS.join(", ")
                ),
            ),
            HttpRejection::UnsupportedMediaType => plain(
                INVALID_REQUEST,
                "Unsupported Media Type: Content-Type must be application/json",
            ),
            HttpRejection::PayloadTooLarge { limit } => plain(
                INVALID_REQUEST,
                &format!("Payload Too Large: bodies are limited to {limit} bytes"),
            ),
            HttpRejection::BodyTimeout { timeout } => plain(
                INVALID_REQUEST,
                &format!(
                    "Request Timeout: the body did not arrive within {} ms",
                    timeout.as_millis()
                ),
            ),
            HttpRejection::TooManyStreams { id, anonymous } => (
                id,
                ErrorObject::new(
                    SERVER_ERROR,
                    if anonymous {
                        "Too Many Requests: anonymous callers hold as many open streams as they may; close one or sign in"
                    } else {
                        "Too Many Requests: this principal holds as many open streams as it may; close one first"
                    },
                ),
            ),
            HttpRejection::TooManyAnonymousConnections => plain(
                SERVER_ERROR,
                "Service Unavailable: anonymous callers hold as many connections as they may; retry shortly or sign in",
            ),
            HttpRejection::AnonymousBodiesBusy => plain(
                SERVER_ERROR,
                "Service Unavailable: too many anonymous request bodies are being read; retry shortly",
            ),
            HttpRejection::BodyUnreadable => {
                plain(INVALID_REQUEST, "Bad Request: the body could not be read")
            }
            HttpRejection::InvalidToken => {
                plain(SERVER_ERROR, "Unauthorized: unknown bearer token")
            }
            HttpRejection::BearerTokenRequired => plain(
                SERVER_ERROR,
                "Unauthorized: this server needs a bearer token (Authorization: Bearer); anonymous callers are served nothing",
            ),
            HttpRejection::TooManyFailedTokens { retry_after } => plain(
                SERVER_ERROR,
                &format!(
                    "Too Many Requests: too many refused bearer tokens from this address; retry in {} s",
                    retry_after_secs(retry_after)
                ),
            ),
            #[cfg(feature = "oauth")]
            HttpRejection::TokenRequired { .. } => plain(
                SERVER_ERROR,
                "Unauthorized: this server needs an access token (Authorization: Bearer)",
            ),
            #[cfg(feature = "oauth")]
            HttpRejection::InvalidAccessToken { why, .. } => {
                plain(SERVER_ERROR, &format!("Unauthorized: {why}"))
            }
            HttpRejection::NotAcceptable => plain(
                INVALID_REQUEST,
                "Not Acceptable: GET needs Accept: text/event-stream",
            ),
            HttpRejection::MethodNotAllowed => plain(INVALID_REQUEST, "Method Not Allowed"),
            HttpRejection::SessionRequired { id } => (
                id,
                ErrorObject::new(
                    INVALID_REQUEST,
                    "Bad Request: Mcp-Session-Id header is required (send initialize first)",
                ),
            ),
            HttpRejection::SessionNotFound => plain(
                SESSION_NOT_FOUND,
                "Session not found (it ended or never existed); send initialize to start a new one",
            ),
            HttpRejection::TooManySessions { id } => (
                Some(id),
                ErrorObject::new(SERVER_ERROR, "Service Unavailable: too many sessions"),
            ),
            HttpRejection::TooManySessionsForPrincipal { id } => (
                Some(id),
                ErrorObject::new(
                    SERVER_ERROR,
                    "Service Unavailable: too many sessions for this principal",
                ),
            ),
            HttpRejection::TooManyAnonymousSessions { id } => (
                Some(id),
                ErrorObject::new(
                    SERVER_ERROR,
                    "Service Unavailable: too many anonymous sessions",
                ),
            ),
            HttpRejection::Malformed(rejected) => (rejected.id, *rejected.error),
        }
    }
}

impl IntoResponse for HttpRejection {
    fn into_response(self) -> Response {
        let status = self.status();
        match self {
            HttpRejection::MethodNotAllowed => (
                status,
                [(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"))],
            )
                .into_response(),
            HttpRejection::InvalidToken => {
                let mut response = rejection_body(status, self);
                response.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer error=\"invalid_token\""),
                );
                response
            }
            HttpRejection::BearerTokenRequired => {
                let mut response = rejection_body(status, self);
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                response
            }
            HttpRejection::TooManyFailedTokens { retry_after } => {
                let mut response = rejection_body(status, self);
                response.headers_mut().insert(
                    header::RETRY_AFTER,
                    HeaderValue::from(retry_after_secs(retry_after)),
                );
                response
            }
            HttpRejection::AnonymousBodiesBusy => {
                let mut response = rejection_body(status, self);
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                response
            }
            HttpRejection::TooManyStreams { .. } => {
                let mut response = rejection_body(status, self);
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
                response
            }
            HttpRejection::TooManyAnonymousConnections => {
                let mut response = rejection_body(status, self);
                let headers = response.headers_mut();
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                // Served, then closed: the connection is the resource refused.
                headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
                response
            }
            #[cfg(feature = "oauth")]
            HttpRejection::TokenRequired { ref challenge }
            | HttpRejection::InvalidAccessToken { ref challenge, .. } => {
                let challenge = challenge.clone();
                let mut response = rejection_body(status, self);
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, challenge);
                response
            }
            _ => rejection_body(status, self),
        }
    }
}

fn rejection_body(status: StatusCode, rejection: HttpRejection) -> Response {
    let (id, error) = rejection.error();
    json_body(status, jsonrpc::error_response(id.as_ref(), &error))
}
