//! The page accepts a browser's request only from its own origin: the same scheme, host
//! and port, as a tower layer.
//!
//! The listener's `Host`/`Origin` check ([`HostOriginCheck`](crate::listener::HostOriginCheck))
//! compares host names only, so a page served on another loopback port (another program on
//! the same machine) would pass it; cookies do not separate ports either. Here an `Origin`,
//! when a browser sends one, must be exactly the page's: the configured origin (a host name
//! behind TLS, `[approvals] origin`), else `http://` (or `https://` when a proxy says so with
//! `X-Forwarded-Proto`) followed by the request's own `Host`. A request without `Origin` (a
//! non-browser client) goes on; its forms still need their CSRF tokens.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, Response, StatusCode, header};
use axum::response::{Html, IntoResponse};
use tower_http::validate_request::ValidateRequest;

use super::cookies;
use super::render;

/// The check, with the configured origin if there is one.
#[derive(Clone, Debug)]
pub(crate) struct OwnOrigin {
    /// `scheme://host[:port]`, lowercase, without a trailing slash.
    configured: Option<String>,
}

impl OwnOrigin {
    /// Accepts `configured` (when given) as the only origin, else the request's own.
    pub(crate) fn new(configured: Option<&str>) -> OwnOrigin {
        OwnOrigin {
            configured: configured.map(|o| o.trim_end_matches('/').to_ascii_lowercase()),
        }
    }

    /// The page's origin for this request, as a browser would name it.
    pub(crate) fn expected(&self, headers: &HeaderMap) -> Option<String> {
        if let Some(configured) = &self.configured {
            return Some(configured.clone());
        }
        let host = headers.get(header::HOST)?.to_str().ok()?.trim();
        let scheme = if cookies::over_https(headers) {
            "https"
        } else {
            "http"
        };
        Some(format!("{scheme}://{}", host.to_ascii_lowercase()))
    }

    /// Whether the request's `Origin`, if any, is the page's own.
    pub(crate) fn allows(&self, headers: &HeaderMap) -> bool {
        let Some(origin) = headers.get(header::ORIGIN) else {
            return true;
        };
        let Ok(origin) = origin.to_str() else {
            return false;
        };
        self.expected(headers)
            .is_some_and(|expected| origin.trim().eq_ignore_ascii_case(&expected))
    }
}

impl<B> ValidateRequest<B> for OwnOrigin {
    type ResponseBody = Body;

    fn validate(&mut self, request: &mut Request<B>) -> Result<(), Response<Body>> {
        if self.allows(request.headers()) {
            return Ok(());
        }
        tracing::warn!(target: "milpa_mcp", "approvals page: a request from another origin refused");
        let html = render::message_page(
            None,
            "Not from this page",
            "This request came from another page (another site, or another port on this \
             machine); nothing was changed.",
        );
        Err((StatusCode::FORBIDDEN, Html(html)).into_response())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(host: &str, origin: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_str(host).unwrap());
        if let Some(origin) = origin {
            headers.insert(header::ORIGIN, HeaderValue::from_str(origin).unwrap());
        }
        headers
    }

    #[test]
    fn only_the_same_scheme_host_and_port_pass() {
        let check = OwnOrigin::new(None);
        assert!(check.allows(&headers("127.0.0.1:8080", None)));
        assert!(check.allows(&headers("127.0.0.1:8080", Some("http://127.0.0.1:8080"))));
        assert!(check.allows(&headers("LocalHost:8080", Some("http://localhost:8080"))));
        for other in [
            "http://127.0.0.1:9999",
            "http://127.0.0.1",
            "https://127.0.0.1:8080",
            "http://localhost:8080",
            "null",
        ] {
            assert!(
                !check.allows(&headers("127.0.0.1:8080", Some(other))),
                "{other}"
            );
        }
        let mut proxied = headers("tools.example.com", Some("https://tools.example.com"));
        assert!(!check.allows(&proxied));
        proxied.insert("x-forwarded-proto", HeaderValue::from_static("https"));
        assert!(check.allows(&proxied));
    }

    #[test]
    fn a_configured_origin_is_the_only_one() {
        let check = OwnOrigin::new(Some("https://Tools.example.com/"));
        assert!(check.allows(&headers(
            "127.0.0.1:8080",
            Some("https://tools.example.com")
        )));
        assert!(!check.allows(&headers("127.0.0.1:8080", Some("http://127.0.0.1:8080"))));
    }
}
