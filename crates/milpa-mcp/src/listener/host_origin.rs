//! The `Host` and `Origin` check every listener of this crate runs first: the defence
//! against DNS rebinding (a page on `evil.example` that resolves its name to 127.0.0.1 and
//! calls the local server from the victim's browser).
//!
//! `Host` must be one of the allowed names (the loopback names always are), and an
//! `Origin`, when a browser sends one, an allowed origin or an `http(s)` origin on an allowed
//! host. Only names are compared, not ports: the approvals page adds its own exact-origin
//! check on top (`approvals/own_origin.rs`).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, Response, StatusCode, header};
use axum::response::IntoResponse;
use tower_http::validate_request::ValidateRequest;

use super::json_body;
use crate::jsonrpc::{self, ErrorObject, SERVER_ERROR};

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
            return Err(HostOriginRefusal::Host.into_response());
        }
        if !self.origin_allowed(request.headers()) {
            return Err(HostOriginRefusal::Origin.into_response());
        }
        Ok(())
    }
}

/// Why [`HostOriginCheck`] refused a request: `403`, with a JSON-RPC error body (no id),
/// the same on every listener, so a client learns which header to fix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HostOriginRefusal {
    /// `Host` is missing or names a host that is not allowed.
    Host,
    /// `Origin` names an origin that is not allowed.
    Origin,
}

impl IntoResponse for HostOriginRefusal {
    fn into_response(self) -> axum::response::Response {
        let message = match self {
            HostOriginRefusal::Host => "Forbidden: Host header not allowed",
            HostOriginRefusal::Origin => "Forbidden: Origin not allowed",
        };
        let error = ErrorObject::new(SERVER_ERROR, message);
        json_body(StatusCode::FORBIDDEN, jsonrpc::error_response(None, &error))
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
    use super::*;

    #[tokio::test]
    async fn refusals_say_which_header_and_forbid() {
        for (refusal, message) in [
            (
                HostOriginRefusal::Host,
                "Forbidden: Host header not allowed",
            ),
            (HostOriginRefusal::Origin, "Forbidden: Origin not allowed"),
        ] {
            let response = refusal.into_response();
            assert_eq!(response.status(), StatusCode::FORBIDDEN);
            let body = axum::body::to_bytes(response.into_body(), 1024)
                .await
                .unwrap();
            let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(body["error"]["message"], message, "{body}");
            assert_eq!(body["error"]["code"], -32000, "{body}");
            assert!(body["id"].is_null(), "{body}");
        }
        let check = HostOriginCheck::new(Some(vec!["example.test".into()]), vec![]);
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, "EXAMPLE.test:8080".parse().unwrap());
        assert!(check.host_allowed(&headers));
        headers.insert(header::ORIGIN, "http://localhost:3000".parse().unwrap());
        assert!(check.origin_allowed(&headers));
        headers.insert(header::ORIGIN, "http://evil.example".parse().unwrap());
        assert!(!check.origin_allowed(&headers));
        headers.insert(header::HOST, "evil.example".parse().unwrap());
        assert!(!check.host_allowed(&headers));
    }

    #[test]
    fn host_names_lose_their_ports() {
        assert_eq!(host_name("127.0.0.1:8080"), "127.0.0.1");
        assert_eq!(host_name("LOCALHOST"), "localhost");
        assert_eq!(host_name("[::1]:3000"), "[::1]");
        assert_eq!(host_name("evil.example.com"), "evil.example.com");
        assert_eq!(host_name("localhost:80/x"), "localhost");
    }
}
