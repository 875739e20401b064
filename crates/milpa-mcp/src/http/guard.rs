//! The MCP endpoint's own checks before a handler sees a request, as tower layers:
//! `MCP-Protocol-Version` and a `POST`'s `Content-Type`, through `tower-http`'s request
//! validation. The `Host`/`Origin` check runs before them and is shared with the approvals
//! page ([`crate::listener::HostOriginCheck`]); the caller's identity is resolved by the
//! layer in [`super::identity`].

use axum::body::Body;
use axum::extract::Request;
use axum::http::{Method, Response, header};
use axum::response::IntoResponse;
use tower_http::validate_request::ValidateRequest;

use super::rejection::HttpRejection;
use crate::protocol;

/// The header naming the protocol version a client speaks after `initialize`.
const VERSION_HEADER: &str = "mcp-protocol-version";

/// Refuses an `MCP-Protocol-Version` this server does not speak (absent is fine: clients
/// of the oldest version do not send it) on a session's requests and on `GET`/`DELETE`. A
/// `POST` without a session that names 2026-07-28, or a version no revision knows, goes
/// on: the 2026-07-28 handler answers it with the request's id (`-32022` for an unknown
/// version).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ProtocolVersionCheck;

impl<B> ValidateRequest<B> for ProtocolVersionCheck {
    type ResponseBody = Body;

    fn validate(&mut self, request: &mut Request<B>) -> Result<(), Response<Body>> {
        let stateless_post = request.method() == Method::POST
            && !request.headers().contains_key(super::SESSION_HEADER);
        match request.headers().get(VERSION_HEADER).map(|v| v.to_str()) {
            // A session's request, or GET/DELETE: only the versions of the older revisions.
            Some(Ok(version)) if protocol::is_supported(version) || stateless_post => Ok(()),
            Some(_) => Err(HttpRejection::UnsupportedProtocolVersion.into_response()),
            None => Ok(()),
        }
    }
}

/// Refuses a `POST` whose `Content-Type` is not JSON.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ContentTypeCheck;

impl<B> ValidateRequest<B> for ContentTypeCheck {
    type ResponseBody = Body;

    fn validate(&mut self, request: &mut Request<B>) -> Result<(), Response<Body>> {
        if request.method() != Method::POST {
            return Ok(());
        }
        let json = request
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.to_ascii_lowercase().contains("json"));
        if json {
            Ok(())
        } else {
            Err(HttpRejection::UnsupportedMediaType.into_response())
        }
    }
}
