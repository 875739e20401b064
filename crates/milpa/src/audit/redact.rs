//! [`Redactor`]: hides secrets before anything is logged or shown: the values of
//! secret-looking keys, the secret parts of values (`Bearer` tokens, URL passwords,
//! `token=…` pairs), and any copy of those secrets quoted in a text (an error message, a
//! confirmation summary).
//!
//! ## The matching rule
//!
//! A key is secret when, compared lowercased with `_` and `-` removed, it *contains* one of
//! the fragments ([`DEFAULT_SENSITIVE_FIELDS`]: `user_password`, `clientSecret`,
//! `X-Api-Key`, `ssh-key` are caught), or when one of its *words* equals one of the words
//! ([`DEFAULT_SENSITIVE_WORDS`]). Words are split at `_`, `-`, `.`, spaces and camelCase
//! humps, so `auth`, `basic_auth`, `X-Auth` and `authHeader` are secret while `author`,
//! `authority` and `spinner` are not: short words like `auth` and `pwd` would catch too
//! much as fragments.
//!
//! A few words count only as a key's *last* word ([`DEFAULT_SENSITIVE_LAST_WORDS`]):
//! `session` and `user_session` are secret, `session_count` is not.
//!
//! Inside string values (under any key) these shapes are recognised and only their secret
//! part is replaced with [`REDACTED_IN_TEXT`]: `Bearer <token>` and `Basic <base64>`
//! (case-insensitive; `Basic` only when the base64 decodes to `user:password`), URL
//! user-info (`https://user:[REDACTED]@host`), `name=value` and `name: value` pairs whose
//! name is a secret key (`?token=[REDACTED]&page=2`, `--password=[REDACTED]`,
//! `password: [REDACTED]`, `"api_key": "[REDACTED]"`), and JSON Web Tokens (three or more
//! base64url segments joined by dots, the first starting `eyJ`).

use std::borrow::Cow;
use std::ops::Range;

use serde::Serialize;
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde_json::{Map, Value};

/// What a redacted value is replaced with.
pub const REDACTED: &str = "***REDACTED***";

/// What a secret inside a text (a value, an error message, a summary) is replaced with.
pub const REDACTED_IN_TEXT: &str = "[REDACTED]";

/// Key fragments that mark a value as secret. Keys are compared lowercased with `_` and `-`
/// removed, and a key is secret when it *contains* a fragment: `user_password`,
/// `clientSecret`, `X-Api-Key` and `refresh_token` are all caught.
pub const DEFAULT_SENSITIVE_FIELDS: [&str; 17] = [
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "accesskey",
    "authorization",
    "bearer",
    "cookie",
    "privatekey",
    "privkey",
    "sshkey",
    "credential",
    "sessionid",
    "signingkey",
    "clientkey",
];

/// Whole words that mark a key as secret (too short to match as fragments without
/// catching `author` or `pwdhistorylength`-like innocents: see the module docs).
pub const DEFAULT_SENSITIVE_WORDS: [&str; 6] = ["auth", "pwd", "pass", "pin", "jwt", "otp"];

/// Words that mark a key as secret when they are its *last* word: `session`,
/// `user_session` and `X-Session` hold a session, while `session_count`, `session_length`
/// and `sessions` describe sessions and stay visible (`session_id` and `session_token`
/// are caught by their fragments).
pub const DEFAULT_SENSITIVE_LAST_WORDS: [&str; 1] = ["session"];

/// Secrets shorter than this are not searched for in texts: scrubbing every `a` or `42`
/// would destroy the message and protect nothing.
const MIN_SCRUBBED_LEN: usize = 4;

/// Decides which keys are secret and rewrites values accordingly (recursively, through
/// objects and arrays).
///
/// ```
/// use milpa::audit::Redactor;
/// use serde_json::json;
///
/// let redactor = Redactor::default();
/// let clean = redactor.redact(&json!({
///     "user": "ann",
///     "author": "ann",
///     "auth": {"user": "ann"},
///     "creds": {"apiKey": "k", "client_secret": "s"},
///     "url": "https://ann:hunter22@example.com/x?token=abc&page=2",
/// }));
/// assert_eq!(clean, json!({
///     "user": "ann",
///     "author": "ann",
///     "auth": "***REDACTED***",
///     "creds": {"apiKey": "***REDACTED***", "client_secret": "***REDACTED***"},
///     "url": "https://ann:[REDACTED]@example.com/x?token=[REDACTED]&page=2",
/// }));
/// ```
#[derive(Debug, Clone)]
pub struct Redactor {
    fragments: Vec<String>,
    words: Vec<String>,
    last_words: Vec<String>,
}

impl Default for Redactor {
    fn default() -> Self {
        Redactor {
            fragments: DEFAULT_SENSITIVE_FIELDS
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
            words: DEFAULT_SENSITIVE_WORDS
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
            last_words: DEFAULT_SENSITIVE_LAST_WORDS
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
        }
    }
}

fn normalize(key: &str) -> String {
    key.chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

/// The words of a key: split at `_`, `-`, `.`, spaces and lower-to-upper case changes
/// (`authHeader` → `auth`, `Header`). Borrows from the key.
fn key_words(key: &str) -> impl Iterator<Item = &str> {
    let bytes = key.as_bytes();
    let mut start = 0;
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < bytes.len() {
            let b = bytes[i];
            if matches!(b, b'_' | b'-' | b'.' | b' ') {
                let word = &key[start..i];
                i += 1;
                start = i;
                if !word.is_empty() {
                    return Some(word);
                }
                continue;
            }
            if i > start && b.is_ascii_uppercase() && bytes[i - 1].is_ascii_lowercase() {
                let word = &key[start..i];
                start = i;
                i += 1;
                return Some(word);
            }
            i += 1;
        }
        if start < bytes.len() {
            let word = &key[start..];
            start = bytes.len();
            return Some(word);
        }
        None
    })
}

/// Whether `b` may be part of a token after `Bearer ` (RFC 6750's b64token, plus `%`).
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/' | b'=' | b'%')
}

/// Whether `b` may be part of the name in a `name=value` pair.
fn is_pair_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')
}

/// Whether `b` ends the value of a `name=value` pair or a URL's authority.
fn ends_value(b: u8) -> bool {
    b.is_ascii_whitespace() || matches!(b, b'&' | b'#' | b'"' | b'\'' | b'<' | b'>' | b';' | b',')
}

impl Redactor {
    /// A redactor with exactly these fragments (normalized like keys) and no words.
    pub fn with_fields(fields: impl IntoIterator<Item = impl AsRef<str>>) -> Self {
        Redactor {
            fragments: fields.into_iter().map(|f| normalize(f.as_ref())).collect(),
            words: Vec::new(),
            last_words: Vec::new(),
        }
    }

    /// Adds one fragment.
    pub fn add_field(&mut self, field: &str) {
        self.fragments.push(normalize(field));
    }

    /// Adds one whole word (matched case-insensitively against a key's words).
    pub fn add_word(&mut self, word: &str) {
        self.words.push(word.to_ascii_lowercase());
    }

    /// Adds one word that marks a key as secret when it is the key's last word.
    pub fn add_last_word(&mut self, word: &str) {
        self.last_words.push(word.to_ascii_lowercase());
    }

    /// The fragments in use.
    pub fn fields(&self) -> &[String] {
        &self.fragments
    }

    /// The whole words in use.
    pub fn words(&self) -> &[String] {
        &self.words
    }

    /// The last words in use.
    pub fn last_words(&self) -> &[String] {
        &self.last_words
    }

    /// Whether values under `key` are secret.
    pub fn is_sensitive(&self, key: &str) -> bool {
        let mut last = None;
        for word in key_words(key) {
            if self.words.iter().any(|w| word.eq_ignore_ascii_case(w)) {
                return true;
            }
            last = Some(word);
        }
        if let Some(last) = last
            && self.last_words.iter().any(|w| last.eq_ignore_ascii_case(w))
        {
            return true;
        }
        // Every argument key of every audited call passes here: normalize short ASCII keys
        // on the stack instead of allocating.
        let mut buf = [0u8; 64];
        if key.len() <= buf.len() && key.is_ascii() {
            let mut len = 0;
            for b in key.bytes().filter(|b| *b != b'_' && *b != b'-') {
                buf[len] = b.to_ascii_lowercase();
                len += 1;
            }
            return self.matches_normalized(&buf[..len]);
        }
        self.matches_normalized(normalize(key).as_bytes())
    }

    /// Whether a normalized key contains a fragment.
    fn matches_normalized(&self, key: &[u8]) -> bool {
        self.fragments.iter().any(|f| {
            let f = f.as_bytes();
            !f.is_empty() && key.windows(f.len()).any(|w| w == f)
        })
    }

    /// Calls `found` with the byte range of every secret part of `text`, left to right and
    /// without overlap: the token after `Bearer `, the password of a URL's user-info, the
    /// value of a `name=value` pair whose name is a secret key.
    fn secret_spans(&self, text: &str, mut found: impl FnMut(Range<usize>)) {
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let span = match bytes[i] {
                b'b' | b'B' => scheme_token_at(bytes, i),
                b':' => url_password_at(bytes, i).or_else(|| self.colon_value_at(text, i)),
                b'=' => self.pair_value_at(text, i),
                b'e' => jwt_at(bytes, i),
                _ => None,
            };
            match span {
                Some(span) if !span.is_empty() => {
                    i = span.end;
                    found(span);
                }
                _ => i += 1,
            }
        }
    }

    /// `name: value`, `name:value` or `"name": "value"` whose `:` is at `i` and whose name
    /// is secret: the value's range. A value that is an authorization scheme (`Bearer …`,
    /// `Basic …`) is left to [`scheme_token_at`], which takes only the credentials.
    fn colon_value_at(&self, text: &str, i: usize) -> Option<Range<usize>> {
        let bytes = text.as_bytes();
        let name_end = if i > 0 && bytes[i - 1] == b'"' {
            i - 1
        } else {
            i
        };
        let name_len = bytes[..name_end]
            .iter()
            .rev()
            .take_while(|b| is_pair_name_byte(**b))
            .count();
        if name_len == 0 || !self.is_sensitive(&text[name_end - name_len..name_end]) {
            return None;
        }
        let mut start = i + 1;
        start += bytes[start..]
            .iter()
            .take_while(|b| matches!(b, b' ' | b'\t'))
            .count();
        let rest = &bytes[start..];
        if rest.first() == Some(&b'"') {
            let len = rest[1..].iter().take_while(|b| **b != b'"').count();
            return Some(start + 1..start + 1 + len);
        }
        if text[start..].starts_with(REDACTED_IN_TEXT) {
            return Some(start..start + REDACTED_IN_TEXT.len());
        }
        // `Authorization: Bearer …` / `Basic …`: the scheme word stays, the credentials go
        // (whatever their shape: the name already says they are secret).
        if let Some(word) = [b"bearer ".as_slice(), b"basic ".as_slice()]
            .into_iter()
            .find(|w| rest.len() > w.len() && rest[..w.len()].eq_ignore_ascii_case(w))
        {
            start += word.len();
            start += bytes[start..].iter().take_while(|b| **b == b' ').count();
        }
        let len = bytes[start..]
            .iter()
            .take_while(|b| !ends_value(**b))
            .count();
        Some(start..start + len)
    }

    /// `name=value` whose `=` is at `i` and whose name is secret: the value's range.
    fn pair_value_at(&self, text: &str, i: usize) -> Option<Range<usize>> {
        let bytes = text.as_bytes();
        let name_len = bytes[..i]
            .iter()
            .rev()
            .take_while(|b| is_pair_name_byte(**b))
            .count();
        if name_len == 0 || !self.is_sensitive(&text[i - name_len..i]) {
            return None;
        }
        let start = i + 1;
        // Already redacted (a text scrubbed twice): keep what follows the marker.
        if text[start..].starts_with(REDACTED_IN_TEXT) {
            return Some(start..start + REDACTED_IN_TEXT.len());
        }
        let len = bytes[start..]
            .iter()
            .take_while(|b| !ends_value(**b))
            .count();
        Some(start..start + len)
    }

    /// A copy of `value` with secret values replaced by [`REDACTED`] and the secret parts
    /// of strings by [`REDACTED_IN_TEXT`].
    pub fn redact(&self, value: &Value) -> Value {
        match value {
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| {
                        let v = if self.is_sensitive(k) {
                            Value::from(REDACTED)
                        } else {
                            self.redact(v)
                        };
                        (k.clone(), v)
                    })
                    .collect::<Map<String, Value>>(),
            ),
            Value::Array(items) => Value::Array(items.iter().map(|v| self.redact(v)).collect()),
            Value::String(text) => Value::String(self.redact_text(text).into_owned()),
            other => other.clone(),
        }
    }

    /// `text` with its secret parts (`Bearer` tokens, URL passwords, secret `name=value`
    /// pairs) replaced by [`REDACTED_IN_TEXT`]; borrowed when there are none.
    pub fn redact_text<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let mut out: Option<String> = None;
        let mut copied = 0;
        self.secret_spans(text, |span| {
            let out = out.get_or_insert_with(|| String::with_capacity(text.len()));
            out.push_str(&text[copied..span.start]);
            out.push_str(REDACTED_IN_TEXT);
            copied = span.end;
        });
        match out {
            Some(mut out) => {
                out.push_str(&text[copied..]);
                Cow::Owned(out)
            }
            None => Cow::Borrowed(text),
        }
    }

    /// `text` (an error message, a summary) with every secret of `args` it quotes replaced
    /// by [`REDACTED_IN_TEXT`], then its own secret parts too (see [`redact_text`]).
    ///
    /// The secrets of `args` are the scalar values under secret keys and the secret parts
    /// of every other string; only those of 4 characters or more are searched for.
    ///
    /// ```
    /// use milpa::audit::Redactor;
    /// use serde_json::json;
    ///
    /// let args = json!({"user": "ann", "password": "hunter22"});
    /// let error = "login failed for ann with password hunter22";
    /// assert_eq!(
    ///     Redactor::default().scrub(error, &args),
    ///     "login failed for ann with password [REDACTED]"
    /// );
    /// ```
    ///
    /// [`redact_text`]: Self::redact_text
    pub fn scrub<'t>(&self, text: &'t str, args: &Value) -> Cow<'t, str> {
        let mut secrets = Vec::new();
        self.collect_secrets(args, false, &mut secrets);
        // Longest first, so a secret that contains another is replaced whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        let mut text = Cow::Borrowed(text);
        for secret in &secrets {
            if text.contains(secret.as_ref()) {
                text = Cow::Owned(text.replace(secret.as_ref(), REDACTED_IN_TEXT));
            }
        }
        match text {
            Cow::Borrowed(text) => self.redact_text(text),
            Cow::Owned(text) => Cow::Owned(self.redact_text(&text).into_owned()),
        }
    }

    /// The values under secret keys of `args`, at any depth, of 4 characters or more,
    /// longest first and without repeats: the texts that must not leave milpa in a result
    /// (see [`scrub_secrets`](Self::scrub_secrets)). Unlike [`scrub`](Self::scrub), the
    /// secret *parts* of other strings (a URL's password) are not included: finding them
    /// means scanning every argument of every call. Empty, and nothing allocated, when no
    /// key is secret.
    pub fn argument_secrets<'v>(&self, args: &'v Value) -> Vec<Cow<'v, str>> {
        let mut secrets = Vec::new();
        self.collect_keyed_secrets(args, false, &mut secrets);
        if secrets.len() > 1 {
            secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
            secrets.dedup();
        }
        secrets
    }

    /// `text` with every one of `secrets` (as [`argument_secrets`] returns them: longest
    /// first) replaced by [`REDACTED_IN_TEXT`]; borrowed when it quotes none.
    ///
    /// [`argument_secrets`]: Self::argument_secrets
    pub fn scrub_secrets<'t>(text: &'t str, secrets: &[Cow<'_, str>]) -> Cow<'t, str> {
        let mut text = Cow::Borrowed(text);
        for secret in secrets {
            if text.contains(secret.as_ref()) {
                text = Cow::Owned(text.replace(secret.as_ref(), REDACTED_IN_TEXT));
            }
        }
        text
    }

    /// Pushes the scalar values under secret keys of `value` (all of them when `secret`).
    fn collect_keyed_secrets<'v>(
        &self,
        value: &'v Value,
        secret: bool,
        out: &mut Vec<Cow<'v, str>>,
    ) {
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    self.collect_keyed_secrets(v, secret || self.is_sensitive(k), out);
                }
            }
            Value::Array(items) => {
                for v in items {
                    self.collect_keyed_secrets(v, secret, out);
                }
            }
            Value::String(text) if secret && text.chars().count() >= MIN_SCRUBBED_LEN => {
                out.push(Cow::Borrowed(text));
            }
            Value::Number(number) if secret => {
                let text = number.to_string();
                if text.len() >= MIN_SCRUBBED_LEN {
                    out.push(Cow::Owned(text));
                }
            }
            _ => {}
        }
    }

    /// Pushes the secrets of `value` (everything scalar when `secret`, else the secret
    /// parts of strings and whatever sits under secret keys).
    fn collect_secrets<'v>(&self, value: &'v Value, secret: bool, out: &mut Vec<Cow<'v, str>>) {
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    self.collect_secrets(v, secret || self.is_sensitive(k), out);
                }
            }
            Value::Array(items) => {
                for v in items {
                    self.collect_secrets(v, secret, out);
                }
            }
            Value::String(text) if secret && text.chars().count() >= MIN_SCRUBBED_LEN => {
                out.push(Cow::Borrowed(text));
            }
            Value::String(_) if secret => {}
            Value::String(text) => self.secret_spans(text, |span| {
                let part = &text[span];
                if part.chars().count() >= MIN_SCRUBBED_LEN {
                    out.push(Cow::Borrowed(part));
                }
            }),
            Value::Number(number) if secret => {
                let text = number.to_string();
                if text.len() >= MIN_SCRUBBED_LEN {
                    out.push(Cow::Owned(text));
                }
            }
            _ => {}
        }
    }
}

/// `Bearer <token>` or `Basic <base64 of user:password>` starting at `i`: the credentials'
/// range. A `Basic` word counts only when what follows decodes to a `user:password` pair,
/// so prose ("basic usage") stays as it is.
fn scheme_token_at(bytes: &[u8], i: usize) -> Option<Range<usize>> {
    if i > 0 && bytes[i - 1].is_ascii_alphanumeric() {
        return None;
    }
    let word = [b"bearer".as_slice(), b"basic".as_slice()]
        .into_iter()
        .find(|w| bytes.len() > i + w.len() && bytes[i..i + w.len()].eq_ignore_ascii_case(w))?;
    let end = i + word.len();
    if bytes[end] != b' ' {
        return None;
    }
    let start = end + bytes[end..].iter().take_while(|b| **b == b' ').count();
    if word == b"bearer" {
        let len = bytes[start..]
            .iter()
            .take_while(|b| is_token_byte(**b))
            .count();
        return Some(start..start + len);
    }
    let len = bytes[start..]
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
        .count();
    use base64::Engine as _;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(&bytes[start..start + len])
        .ok()?;
    decoded.contains(&b':').then_some(start..start + len)
}

/// A JSON Web Token starting at `i`: `eyJ…` (a base64url JSON header), then at least two
/// more base64url segments after dots (a JWE's five segments are taken whole). Version
/// numbers, file names and host names never start with `eyJ`.
fn jwt_at(bytes: &[u8], i: usize) -> Option<Range<usize>> {
    let is_b64url = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_');
    if !bytes[i..].starts_with(b"eyJ")
        || (i > 0 && (is_b64url(&bytes[i - 1]) || bytes[i - 1] == b'.'))
    {
        return None;
    }
    let mut end = i;
    let mut segments = 0;
    loop {
        let len = bytes[end..].iter().take_while(|b| is_b64url(b)).count();
        // The header and payload are never empty; an unsigned token's signature is.
        if len == 0 && segments < 2 {
            return None;
        }
        end += len;
        segments += 1;
        // A dot goes on to another segment when one follows (or when the signature may be
        // empty); a sentence's full stop after the token is not taken.
        let next_is_segment = bytes.get(end + 1).is_some_and(is_b64url) || segments == 2;
        if bytes.get(end) == Some(&b'.') && segments < 5 && next_is_segment {
            end += 1;
        } else {
            break;
        }
    }
    (segments >= 3).then_some(i..end)
}

/// `scheme://user:password@host` with the `:` after `scheme` at `i`: the password's range.
fn url_password_at(bytes: &[u8], i: usize) -> Option<Range<usize>> {
    if !bytes[i..].starts_with(b"://") || i == 0 || !bytes[i - 1].is_ascii_alphanumeric() {
        return None;
    }
    let authority = i + 3;
    let len = bytes[authority..]
        .iter()
        .take_while(|b| !ends_value(**b) && !matches!(**b, b'/' | b'?'))
        .count();
    let host = &bytes[authority..authority + len];
    let at = host.iter().rposition(|b| *b == b'@')?;
    let colon = host[..at].iter().position(|b| *b == b':')?;
    Some(authority + colon + 1..authority + at)
}

/// Serializes a value with secrets redacted, without copying it first.
#[derive(Debug, Clone, Copy)]
pub struct RedactedValue<'a> {
    /// The value.
    pub value: &'a Value,
    /// The rules.
    pub redactor: &'a Redactor,
}

impl Serialize for RedactedValue<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.value {
            Value::Object(map) => {
                let mut out = serializer.serialize_map(Some(map.len()))?;
                for (k, v) in map {
                    if self.redactor.is_sensitive(k) {
                        out.serialize_entry(k, REDACTED)?;
                    } else {
                        out.serialize_entry(
                            k,
                            &RedactedValue {
                                value: v,
                                redactor: self.redactor,
                            },
                        )?;
                    }
                }
                out.end()
            }
            Value::Array(items) => {
                let mut out = serializer.serialize_seq(Some(items.len()))?;
                for v in items {
                    out.serialize_element(&RedactedValue {
                        value: v,
                        redactor: self.redactor,
                    })?;
                }
                out.end()
            }
            Value::String(text) => serializer.serialize_str(&self.redactor.redact_text(text)),
            other => other.serialize(serializer),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn catches_the_keys_the_original_missed() {
        let r = Redactor::default();
        for key in [
            "password",
            "user_password",
            "apiKey",
            "API_KEY",
            "api-key",
            "access_token",
            "refreshToken",
            "client_secret",
            "Authorization",
            "cookie",
            "private_key",
            "passwd",
            "secret",
        ] {
            assert!(r.is_sensitive(key), "{key}");
        }
        for key in ["user", "name", "id", "path", "", "_-_"] {
            assert!(!r.is_sensitive(key), "{key}");
        }
        // Non-ASCII and long keys take the allocating path and agree with it.
        assert!(r.is_sensitive("Contraseña_PASSWORD"));
        assert!(r.is_sensitive(&format!("{}_token", "x".repeat(80))));
        assert!(!r.is_sensitive(&"y".repeat(80)));
    }

    #[test]
    fn redacted_serialization_matches_redact() {
        let r = Redactor::default();
        let value =
            json!({"a": [{"token": 1}, {"b": {"Cookie": "c"}}], "ok": true, "u": "Bearer x1"});
        let streamed = serde_json::to_value(RedactedValue {
            value: &value,
            redactor: &r,
        })
        .unwrap();
        assert_eq!(streamed, r.redact(&value));
        assert_eq!(streamed["a"][0]["token"], REDACTED);
        assert_eq!(streamed["a"][1]["b"]["Cookie"], REDACTED);
    }

    #[test]
    fn catches_the_short_words_and_secret_kinds_of_issue_10() {
        let r = Redactor::default();
        for key in [
            "auth",
            "basic_auth",
            "X-Auth",
            "authHeader",
            "HTTP_AUTH",
            "bearer",
            "bearer_token",
            "pwd",
            "db_pwd",
            "passphrase",
            "ssh-key",
            "ssh_private_key",
            "privkey",
            "db_pass",
            "card_pin",
            "aws_access_key",
        ] {
            assert!(r.is_sensitive(key), "{key}");
        }
        // Whole words, not fragments: these stay visible.
        for key in [
            "author",
            "authority",
            "authors",
            "spinner",
            "pinned",
            "passenger",
            "compass",
            "keyboard",
            "pwdstyle",
        ] {
            assert!(!r.is_sensitive(key), "{key}");
        }
    }

    #[test]
    fn key_words_split_at_separators_and_humps() {
        let words: Vec<&str> = key_words("x-Auth_header.v2 authToken__").collect();
        assert_eq!(words, ["x", "Auth", "header", "v2", "auth", "Token"]);
        assert_eq!(key_words("").count(), 0);
        assert_eq!(key_words("_-_").count(), 0);
        assert_eq!(key_words("Contraseña").collect::<Vec<_>>(), ["Contraseña"]);
    }

    #[test]
    fn secret_parts_of_values_are_replaced_and_the_rest_kept() {
        let r = Redactor::default();
        let cases = [
            ("Bearer abc.def-123", "Bearer [REDACTED]"),
            (
                "Authorization: bearer   eyJhbGc.x/y+z= trailing",
                "Authorization: bearer   [REDACTED] trailing",
            ),
            (
                "https://ann:hunter22@example.com/x",
                "https://ann:[REDACTED]@example.com/x",
            ),
            (
                "postgres://u:p%40ss@db:5432/app and https://example.com/a@b",
                "postgres://u:[REDACTED]@db:5432/app and https://example.com/a@b",
            ),
            (
                "https://h/p?token=abc&page=2&api_key=k#frag",
                "https://h/p?token=[REDACTED]&page=2&api_key=[REDACTED]#frag",
            ),
            (
                "run --password=s3cret --user=ann",
                "run --password=[REDACTED] --user=ann",
            ),
            ("author=ann spinner=on", "author=ann spinner=on"),
            ("(token=[REDACTED]) ok", "(token=[REDACTED]) ok"),
            ("unbearer x", "unbearer x"),
            ("Bearer", "Bearer"),
            (
                "a=b, https://host/, bearer\n",
                "a=b, https://host/, bearer\n",
            ),
            ("", ""),
        ];
        for (text, expected) in cases {
            assert_eq!(r.redact_text(text), expected, "{text}");
        }
        assert!(matches!(r.redact_text("nothing here"), Cow::Borrowed(_)));
        assert_eq!(
            r.redact(&json!({"h": ["Bearer t0k"], "url": "https://u:pw@h"})),
            json!({"h": ["Bearer [REDACTED]"], "url": "https://u:[REDACTED]@h"})
        );
    }

    #[test]
    fn scrub_removes_quoted_secrets_from_texts() {
        let r = Redactor::default();
        let args = json!({
            "user": "ann",
            "password": "hunter22",
            "nested": {"api_key": ["k-12345"], "pin": 987654},
            "url": "https://ann:urlpass@h",
            "short_token": "abc",
        });
        let error = "ann: hunter22 rejected (k-12345, 987654, urlpass, abc) Bearer zzz";
        assert_eq!(
            r.scrub(error, &args),
            "ann: [REDACTED] rejected ([REDACTED], [REDACTED], [REDACTED], abc) Bearer [REDACTED]"
        );
        // A secret containing another is replaced whole.
        let args = json!({"password": "abcd", "secret": "abcdefgh"});
        assert_eq!(r.scrub("x abcdefgh y", &args), "x [REDACTED] y");
        assert!(matches!(r.scrub("fine", &args), Cow::Borrowed(_)));
    }

    #[test]
    fn catches_jwt_otp_client_key_and_a_trailing_session() {
        let r = Redactor::default();
        for key in [
            "jwt",
            "id_jwt",
            "jwtToken",
            "otp",
            "sms-otp",
            "otp_code",
            "client_key",
            "clientKey",
            "oauth-client-key",
            "session",
            "user_session",
            "X-Session",
            "session_id",
        ] {
            assert!(r.is_sensitive(key), "{key}");
        }
        // Whole or last words only: these describe things and stay visible.
        for key in [
            "session_count",
            "sessionLength",
            "sessions",
            "jwtish",
            "otpauthority",
            "hotpot",
            "client",
        ] {
            assert!(!r.is_sensitive(key), "{key}");
        }
    }

    #[test]
    fn colon_pairs_basic_credentials_and_jwts_in_texts_are_replaced() {
        let r = Redactor::default();
        // "ann:s3cret" in base64.
        let basic = "YW5uOnMzY3JldA==";
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbm4ifQ.c2lnbmF0dXJl";
        let cases = [
            (
                "password: hunter22 rejected",
                "password: [REDACTED] rejected",
            ),
            ("db_password:hunter22", "db_password:[REDACTED]"),
            ("password=hunter22", "password=[REDACTED]"),
            (
                r#"{"api_key": "k 1 2", "user": "ann"}"#,
                r#"{"api_key": "[REDACTED]", "user": "ann"}"#,
            ),
            (
                "otp: 123456; session: abcd",
                "otp: [REDACTED]; session: [REDACTED]",
            ),
            (
                &format!("Authorization: Basic {basic}"),
                "Authorization: Basic [REDACTED]",
            ),
            (
                &format!("sent basic {basic} ok"),
                "sent basic [REDACTED] ok",
            ),
            (
                "Authorization: Basic not/base64!",
                "Authorization: Basic [REDACTED]",
            ),
            (&format!("token {jwt}."), "token [REDACTED]."),
            (&format!("jwt={jwt}"), "jwt=[REDACTED]"),
            (
                "unsigned eyJhbGciOiJub25lIn0.eyJzIjoxfQ. end",
                "unsigned [REDACTED] end",
            ),
            ("password: [REDACTED] twice", "password: [REDACTED] twice"),
        ];
        for (text, expected) in cases {
            assert_eq!(r.redact_text(text), expected, "{text}");
        }
    }

    #[test]
    fn ordinary_texts_are_not_redacted() {
        let r = Redactor::default();
        for text in [
            "Version 1.2.3 of a.b.c was released by ann@example.com at 12:30.",
            "Note: the basic usage is in README.md; Basic English is fine.",
            "Error: connection refused (host: db.internal, port: 5432)",
            "user: ann, author: bob, session_count: 4, sessions: 2",
            "eyes.only.here and heyJude.a.b and eyJ alone and eyJx.y",
            "see https://example.com/a:b?page=2 and mailto:ann@example.com",
            "password:",
            "ratio 3:2, time 10:15:30, IPv6 ::1",
        ] {
            assert_eq!(r.redact_text(text), text, "{text}");
            assert!(matches!(r.redact_text(text), Cow::Borrowed(_)), "{text}");
        }
    }

    #[test]
    fn the_list_is_configurable() {
        let mut r = Redactor::with_fields(["pin"]);
        assert!(r.is_sensitive("card_PIN"));
        assert!(!r.is_sensitive("password"));
        assert!(!r.is_sensitive("auth"));
        r.add_field("Pass-Word");
        assert!(r.is_sensitive("password"));
        r.add_word("Auth");
        assert!(r.is_sensitive("x_auth"));
        assert!(!r.is_sensitive("author"));
    }
}
