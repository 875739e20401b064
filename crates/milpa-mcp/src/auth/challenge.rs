//! The `WWW-Authenticate` challenges of a protected server (RFC 6750 §3, RFC 9728 §5.1).

use axum::http::HeaderValue;

use super::oauth::TokenRejection;

/// `401` for a request without a token: where to learn how to get one, and the scopes the
/// tools use (what a client should ask for when it has no better idea).
pub(crate) fn missing_token(metadata_url: &str, scopes: &[String]) -> HeaderValue {
    let mut value = format!("Bearer resource_metadata=\"{}\"", quoted(metadata_url));
    if !scopes.is_empty() {
        value.push_str(&format!(", scope=\"{}\"", quoted(&scopes.join(" "))));
    }
    header(value)
}

/// `401` for a token that was presented and refused: why, in a few words (never the token).
pub(crate) fn invalid_token(metadata_url: &str, why: &TokenRejection) -> HeaderValue {
    header(format!(
        "Bearer error=\"invalid_token\", error_description=\"{}\", resource_metadata=\"{}\"",
        quoted(&why.to_string()),
        quoted(metadata_url)
    ))
}

/// `403` for a call its token lacks a scope for: every scope the call needs.
pub(crate) fn insufficient_scope(metadata_url: &str, needed: &[String]) -> HeaderValue {
    header(format!(
        "Bearer error=\"insufficient_scope\", scope=\"{}\", resource_metadata=\"{}\"",
        quoted(&needed.join(" ")),
        quoted(metadata_url)
    ))
}

/// A quoted-string's content (RFC 9110 §5.6.4): backslash and quote escaped, control
/// characters dropped (a header value cannot hold them).
fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() || !c.is_ascii() => {}
            c => out.push(c),
        }
    }
    out
}

fn header(value: String) -> HeaderValue {
    // `quoted` leaves only visible ASCII and spaces, which a header value always accepts.
    HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static("Bearer"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_quote_their_parameters() {
        let scopes = vec!["notes:read".to_owned(), "notes:write".to_owned()];
        assert_eq!(
            insufficient_scope(
                "https://t.example/.well-known/oauth-protected-resource/mcp",
                &scopes
            ),
            "Bearer error=\"insufficient_scope\", scope=\"notes:read notes:write\", \
             resource_metadata=\"https://t.example/.well-known/oauth-protected-resource/mcp\""
        );
        assert_eq!(
            missing_token("u\"x\\", &[]),
            "Bearer resource_metadata=\"u\\\"x\\\\\""
        );
        assert_eq!(
            missing_token("u", &scopes),
            "Bearer resource_metadata=\"u\", scope=\"notes:read notes:write\""
        );
        assert_eq!(
            invalid_token("u", &TokenRejection::Expired),
            "Bearer error=\"invalid_token\", error_description=\"the token has expired\", \
             resource_metadata=\"u\""
        );
    }
}
