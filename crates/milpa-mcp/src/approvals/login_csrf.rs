//! The sign-in form's CSRF token, bound to a value only this server can make.
//!
//! There is no session yet when the form is shown, so the token travels twice: in the
//! form and in a cookie (`milpa_approvals_login`), and both must agree. Cookies do not
//! separate ports, so a page on another loopback port could plant a cookie of its own
//! choosing and post a form carrying the same value. Here the value is also signed: a
//! random nonce and an expiry, with an HMAC-SHA-256 under a key drawn when the process
//! starts; a value the server did not sign, or signed more than [`LOGIN_FORM_TTL`] ago, is
//! refused whatever the cookie says. (The page's own-origin check refuses such a post from
//! a browser anyway; this holds without it, for clients that send no `Origin`.)

use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use milpa::confirm::random_hex_128;
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// How long a sign-in form stays good.
pub(crate) const LOGIN_FORM_TTL: Duration = Duration::from_secs(3600);

/// Makes and checks sign-in tokens: `<nonce>.<expiry ms, hex>.<mac, hex>`.
pub(crate) struct LoginCsrf {
    key: [u8; 32],
}

impl LoginCsrf {
    /// A signer with a fresh random key.
    pub(crate) fn new() -> LoginCsrf {
        LoginCsrf {
            key: rand::random(),
        }
    }

    /// A new token, good until `now_ms + LOGIN_FORM_TTL`.
    pub(crate) fn issue(&self, now_ms: u64) -> String {
        let body = format!(
            "{}.{:x}",
            random_hex_128(),
            now_ms.saturating_add(LOGIN_FORM_TTL.as_millis() as u64)
        );
        let mac = hex::encode(self.mac(&body));
        format!("{body}.{mac}")
    }

    /// Whether `form` is the `cookie`'s token, signed here and not expired at `now_ms`.
    pub(crate) fn verify(&self, cookie: &str, form: &str, now_ms: u64) -> bool {
        if form.is_empty() || !bool::from(cookie.as_bytes().ct_eq(form.as_bytes())) {
            return false;
        }
        let Some((body, mac)) = form.rsplit_once('.') else {
            return false;
        };
        let Ok(mac) = hex::decode(mac) else {
            return false;
        };
        let Some(expiry) = body
            .split_once('.')
            .and_then(|(_, expiry)| u64::from_str_radix(expiry, 16).ok())
        else {
            return false;
        };
        let signed = bool::from(self.mac(body).as_slice().ct_eq(&mac));
        signed && now_ms < expiry
    }

    fn mac(&self, body: &str) -> Vec<u8> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("any key length");
        mac.update(b"milpa approvals login\0");
        mac.update(body.as_bytes());
        mac.finalize().into_bytes().to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signed_token_passes_until_it_expires() {
        let signer = LoginCsrf::new();
        let token = signer.issue(1_000);
        assert!(signer.verify(&token, &token, 1_000));
        let ttl = LOGIN_FORM_TTL.as_millis() as u64;
        assert!(signer.verify(&token, &token, 1_000 + ttl - 1));
        assert!(!signer.verify(&token, &token, 1_000 + ttl));
    }

    #[test]
    fn unsigned_altered_or_mismatched_tokens_fail() {
        let signer = LoginCsrf::new();
        let token = signer.issue(1_000);
        assert!(!signer.verify(&token, "", 1_000));
        assert!(!signer.verify("", &token, 1_000));
        let other = signer.issue(1_000);
        assert!(!signer.verify(&token, &other, 1_000));
        // A value of the attacker's choosing, in the cookie and the form alike.
        let planted = "0123456789abcdef0123456789abcdef";
        assert!(!signer.verify(planted, planted, 1_000));
        // A later expiry with the old mac.
        let (nonce, rest) = token.split_once('.').unwrap();
        let mac = rest.split_once('.').unwrap().1;
        let stretched = format!("{nonce}.ffffffffffff.{mac}");
        assert!(!signer.verify(&stretched, &stretched, 1_000));
        // Another process's signature.
        let elsewhere = LoginCsrf::new().issue(1_000);
        assert!(!signer.verify(&elsewhere, &elsewhere, 1_000));
    }
}
