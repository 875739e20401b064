//! [`Redactor`]: hides the values of secret-looking keys before anything is logged.

use serde::Serialize;
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde_json::{Map, Value};

/// What a redacted value is replaced with.
pub const REDACTED: &str = "***REDACTED***";

/// Key fragments that mark a value as secret. Keys are compared lowercased with `_` and `-`
/// removed, and a key is secret when it *contains* a fragment: `user_password`,
/// `clientSecret`, `X-Api-Key` and `refresh_token` are all caught.
pub const DEFAULT_SENSITIVE_FIELDS: [&str; 10] = [
    "password",
    "passwd",
    "secret",
    "token",
    "apikey",
    "authorization",
    "cookie",
    "privatekey",
    "credential",
    "sessionid",
];

/// Decides which keys are secret and rewrites values accordingly (recursively, through
/// objects and arrays).
///
/// ```
/// use milpa::audit::Redactor;
/// use serde_json::json;
///
/// let redactor = Redactor::default();
/// let clean = redactor.redact(&json!({"user": "ann", "auth": {"apiKey": "k", "client_secret": "s"}}));
/// assert_eq!(clean, json!({"user": "ann", "auth": {"apiKey": "***REDACTED***", "client_secret": "***REDACTED***"}}));
/// ```
#[derive(Debug, Clone)]
pub struct Redactor {
    fragments: Vec<String>,
}

impl Default for Redactor {
    fn default() -> Self {
        Redactor {
            fragments: DEFAULT_SENSITIVE_FIELDS
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

impl Redactor {
    /// A redactor with exactly these fragments (normalized like keys).
    pub fn with_fields(fields: impl IntoIterator<Item = impl AsRef<str>>) -> Self {
        Redactor {
            fragments: fields.into_iter().map(|f| normalize(f.as_ref())).collect(),
        }
    }

    /// Adds one fragment.
    pub fn add_field(&mut self, field: &str) {
        self.fragments.push(normalize(field));
    }

    /// The fragments in use.
    pub fn fields(&self) -> &[String] {
        &self.fragments
    }

    /// Whether values under `key` are secret.
    pub fn is_sensitive(&self, key: &str) -> bool {
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

    /// A copy of `value` with secret values replaced by [`REDACTED`].
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
            other => other.clone(),
        }
    }
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
        let value = json!({"a": [{"token": 1}, {"b": {"Cookie": "c"}}], "ok": true});
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
    fn the_list_is_configurable() {
        let mut r = Redactor::with_fields(["pin"]);
        assert!(r.is_sensitive("card_PIN"));
        assert!(!r.is_sensitive("password"));
        r.add_field("Pass-Word");
        assert!(r.is_sensitive("password"));
    }
}
