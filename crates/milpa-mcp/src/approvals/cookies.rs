//! The page's two cookies: the login session and the login form's CSRF token. Both are
//! `HttpOnly` (no script reads them), `SameSite=Strict` (no other site's page sends them)
//! and `Path=/approvals` (the MCP endpoint never sees them). `Secure` is added when the
//! request came over https according to a proxy's `X-Forwarded-Proto`; on the default
//! loopback http a `Secure` cookie would never come back, so it is left out there.

use axum::http::{HeaderMap, HeaderValue, header};

/// The login session's id.
pub(crate) const SESSION: &str = "milpa_approvals_session";

/// The CSRF token of the login form (there is no session yet to hold it).
pub(crate) const LOGIN_CSRF: &str = "milpa_approvals_login";

/// The value of cookie `name` in the request's `Cookie` headers, if sent.
pub(crate) fn read<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.trim())
        .filter(|value| !value.is_empty())
}

/// Whether the request reached a proxy over https (`X-Forwarded-Proto: https`).
pub(crate) fn over_https(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .is_some_and(|proto| proto.trim().eq_ignore_ascii_case("https"))
}

/// A `Set-Cookie` value that stores `value` until the browser closes (the server ends
/// sessions on its own schedule); `value` must be cookie-safe (the page only sets hex).
pub(crate) fn set(name: &str, value: &str, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{name}={value}; Path=/approvals; HttpOnly; SameSite=Strict{secure}"
    ))
    .expect("cookie names and hex values are valid header text")
}

/// A `Set-Cookie` value that makes the browser forget cookie `name`.
pub(crate) fn clear(name: &str, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{name}=; Path=/approvals; Max-Age=0; HttpOnly; SameSite=Strict{secure}"
    ))
    .expect("cookie names are valid header text")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_found_among_others_and_in_several_headers() {
        let mut headers = HeaderMap::new();
        headers.append(header::COOKIE, HeaderValue::from_static("a=1; b=2"));
        headers.append(
            header::COOKIE,
            HeaderValue::from_static("milpa_approvals_session=abc ; c=3"),
        );
        assert_eq!(read(&headers, SESSION), Some("abc"));
        assert_eq!(read(&headers, "b"), Some("2"));
        assert_eq!(read(&headers, "milpa_approvals"), None);
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("milpa_approvals_session="),
        );
        assert_eq!(read(&headers, SESSION), None);
    }

    #[test]
    fn set_cookies_are_http_only_strict_and_scoped_to_the_page() {
        let plain = set(SESSION, "00ff", false);
        assert_eq!(
            plain,
            "milpa_approvals_session=00ff; Path=/approvals; HttpOnly; SameSite=Strict"
        );
        assert!(
            set(SESSION, "00ff", true)
                .to_str()
                .unwrap()
                .ends_with("; Secure")
        );
        assert!(
            clear(SESSION, false)
                .to_str()
                .unwrap()
                .contains("Max-Age=0")
        );
    }

    #[test]
    fn https_is_read_from_the_forwarded_proto() {
        let mut headers = HeaderMap::new();
        assert!(!over_https(&headers));
        headers.insert("x-forwarded-proto", HeaderValue::from_static("HTTPS, http"));
        assert!(over_https(&headers));
        headers.insert("x-forwarded-proto", HeaderValue::from_static("http"));
        assert!(!over_https(&headers));
    }
}
