//! The page's two cookies: the login session and the login form's CSRF token. Both are
//! `HttpOnly` (no script reads them), `SameSite=Strict` (no other site's page sends them)
//! and `Path=/approvals` (the MCP endpoint never sees them). `Secure` is added when the
//! request came over https according to a proxy's `X-Forwarded-Proto`; on the default
//! loopback http a `Secure` cookie would never come back, so it is left out there.
//!
//! Parsing and formatting are the `cookie` crate's; this module only fixes the page's
//! names and attributes, so every cookie the page sets carries the same ones.

use axum::http::{HeaderMap, HeaderValue, header};
use cookie::{Cookie, SameSite};

use super::PAGE_PATH;

/// The login session's id.
pub(crate) const SESSION: &str = "milpa_approvals_session";

/// The CSRF token of the login form (there is no session yet to hold it).
pub(crate) const LOGIN_CSRF: &str = "milpa_approvals_login";

/// The value of cookie `name` in the request's `Cookie` headers, if sent and not empty.
/// Pairs that do not parse (no `=`, no name) are skipped, as a browser would.
pub(crate) fn read<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|cookie| cookie.name() == name)
        .and_then(|cookie| cookie.value_raw())
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

/// A page cookie with the attributes every one of them carries.
fn page_cookie<'c>(name: &'c str, value: &'c str, secure: bool) -> cookie::CookieBuilder<'c> {
    let builder = Cookie::build((name, value))
        .path(PAGE_PATH)
        .http_only(true)
        .same_site(SameSite::Strict);
    // Left unset (rather than `Secure=false`) so the attribute is simply absent.
    if secure {
        builder.secure(true)
    } else {
        builder
    }
}

/// The `Set-Cookie` header value of `cookie`.
fn header_value(cookie: Cookie<'_>) -> HeaderValue {
    HeaderValue::from_str(&cookie.to_string())
        .expect("the page's cookie names, hex values and attributes are valid header text")
}

/// A `Set-Cookie` value that stores `value` until the browser closes (the server ends
/// sessions on its own schedule); `value` must be cookie-safe (the page only sets hex).
pub(crate) fn set(name: &str, value: &str, secure: bool) -> HeaderValue {
    header_value(page_cookie(name, value, secure).build())
}

/// A `Set-Cookie` value that makes the browser forget cookie `name` (`Max-Age=0`).
pub(crate) fn clear(name: &str, secure: bool) -> HeaderValue {
    header_value(
        page_cookie(name, "", secure)
            .max_age(cookie::time::Duration::ZERO)
            .build(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `Set-Cookie` value as the browser reads it.
    fn parsed(value: &HeaderValue) -> Cookie<'static> {
        Cookie::parse(value.to_str().unwrap().to_owned()).unwrap()
    }

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
    fn malformed_pairs_do_not_hide_the_cookie() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("junk; =x; milpa_approvals_login=0a1b"),
        );
        assert_eq!(read(&headers, LOGIN_CSRF), Some("0a1b"));
    }

    #[test]
    fn set_cookies_are_http_only_strict_and_scoped_to_the_page() {
        let plain = set(SESSION, "00ff", false);
        assert!(
            plain
                .to_str()
                .unwrap()
                .starts_with("milpa_approvals_session=00ff; ")
        );
        let cookie = parsed(&plain);
        assert_eq!((cookie.name(), cookie.value()), (SESSION, "00ff"));
        assert_eq!(cookie.path(), Some("/approvals"));
        assert_eq!(cookie.http_only(), Some(true));
        assert_eq!(cookie.same_site(), Some(SameSite::Strict));
        assert_eq!(cookie.secure(), None);
        assert_eq!(cookie.max_age(), None);
        assert!(!plain.to_str().unwrap().contains("Secure"));
        assert_eq!(parsed(&set(SESSION, "00ff", true)).secure(), Some(true));
        let cleared = parsed(&clear(SESSION, false));
        assert!(
            clear(SESSION, false)
                .to_str()
                .unwrap()
                .contains("Max-Age=0")
        );
        assert_eq!(cleared.value(), "");
        assert_eq!(cleared.max_age(), Some(cookie::time::Duration::ZERO));
        assert_eq!(cleared.path(), Some("/approvals"));
        assert_eq!(cleared.http_only(), Some(true));
        assert_eq!(cleared.same_site(), Some(SameSite::Strict));
        assert_eq!(parsed(&clear(SESSION, true)).secure(), Some(true));
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
