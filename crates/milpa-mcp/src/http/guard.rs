//! The checks every request passes before a handler sees it, as tower layers: `Host` and
//! `Origin` (DNS-rebinding defence), `MCP-Protocol-Version` and a `POST`'s `Content-Type`,
//! all through `tower-http`'s request validation. The caller's identity is resolved by the
//! layer in [`super::identity`].

use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, Method, Response, header};
use axum::response::IntoResponse;
use tower_http::validate_request::ValidateRequest;

use super::rejection::HttpRejection;
use crate::protocol;

/// The header naming the protocol version a client speaks after `initialize`.
const VERSION_HEADER: &str = "mcp-protocol-version";

/// Allowed `Host` and `Origin` values.
#[derive(Clone, Debug)]
pub(crate) struct HostOriginCheck {
    /// Allowed host names (lowercase, without port); `None` accepts any `Host`.
    hosts: Option<Arc<[String]>>,
    /// Whole origins allowed besides those of the allowed hosts.
    origins: Arc<[String]>,
}

impl HostOriginCheck {
    /// Accepts `hosts` (plus the loopback names) unless `hosts` is `None`, and `origins`.
    pub(crate) fn new(hosts: Option<Vec<String>>, origins: Vec<String>) -> HostOriginCheck {
        let hosts = hosts.map(|mut extra| {
            extra.extend(["localhost", "127.0.0.1", "[::1]", "::1"].map(String::from));
            extra.into()
        });
        HostOriginCheck {
            hosts,
            origins: origins.into(),
        }
    }

    fn host_allowed(&self, headers: &HeaderMap) -> bool {
        let Some(hosts) = &self.hosts else {
            return true;
        };
        let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
            return false;
        };
        hosts.iter().any(|h| *h == host_name(host))
    }

    fn origin_allowed(&self, headers: &HeaderMap) -> bool {
        let Some(origin) = headers.get(header::ORIGIN) else {
            return true;
        };
        let Ok(origin) = origin.to_str() else {
            return false;
        };
        let origin = origin.to_ascii_lowercase();
        if self.origins.contains(&origin) {
            return true;
        }
        let Some((scheme, rest)) = origin.split_once("://") else {
            return false;
        };
        if scheme != "http" && scheme != "https" {
            return false;
        }
        match &self.hosts {
            Some(hosts) => hosts.iter().any(|h| *h == host_name(rest)),
            // No host check configured: only explicitly allowed origins pass.
            None => false,
        }
    }
}

impl<B> ValidateRequest<B> for HostOriginCheck {
    type ResponseBody = Body;

    fn validate(&mut self, request: &mut Request<B>) -> Result<(), Response<Body>> {
        if !self.host_allowed(request.headers()) {
            return Err(HttpRejection::HostNotAllowed.into_response());
        }
        if !self.origin_allowed(request.headers()) {
            return Err(HttpRejection::OriginNotAllowed.into_response());
        }
        Ok(())
    }
}

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

/// The host part of a `Host` header or an origin's authority, lowercased, without port.
fn host_name(authority: &str) -> String {
    let authority = authority.trim().to_ascii_lowercase();
    let authority = authority.split('/').next().unwrap_or("");
    if let Some(rest) = authority.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((inner, _)) => format!("[{inner}]"),
            None => authority.to_owned(),
        };
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host.to_owned(),
        _ => authority.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::host_name;

    #[test]
    fn host_names_lose_their_ports() {
        assert_eq!(host_name("127.0.0.1:8080"), "127.0.0.1");
        assert_eq!(host_name("LOCALHOST"), "localhost");
        assert_eq!(host_name("[::1]:3000"), "[::1]");
        assert_eq!(host_name("evil.example.com"), "evil.example.com");
        assert_eq!(host_name("localhost:80/x"), "localhost");
    }
}
