//! The digest of a call's arguments that a 2026-07-28 `requestState` is bound to: a retry
//! opens the state only with the same arguments.
//!
//! It is read from a borrow of the arguments, streaming their canonical text straight
//! into the hasher, so the arguments themselves go to the tool without a copy.

use std::io::{self, Write};

use serde_json::Value;
use sha2::{Digest, Sha256};

/// SHA-256 of the canonical arguments (object keys sorted at every level), hex: the same
/// arguments give the same digest whatever order the client wrote them in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ArgumentDigest(String);

impl ArgumentDigest {
    /// The digest of `arguments`, computed once per call and shared by every state the
    /// call seals or opens.
    pub fn of(arguments: &Value) -> ArgumentDigest {
        let mut hasher = HashWriter(Sha256::new());
        canonical(arguments, &mut hasher);
        ArgumentDigest(hex::encode(hasher.0.finalize()))
    }

    /// The hex text a sealed state carries.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Feeds what is written into a SHA-256 (writing cannot fail).
struct HashWriter(Sha256);

impl Write for HashWriter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Writes `value` as compact JSON with object keys sorted, the bytes the digest has
/// always been taken over (states already issued keep opening).
fn canonical(value: &Value, out: &mut HashWriter) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.0.update(b"{");
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.0.update(b",");
                }
                scalar(key, out);
                out.0.update(b":");
                canonical(&map[key], out);
            }
            out.0.update(b"}");
        }
        Value::Array(items) => {
            out.0.update(b"[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.0.update(b",");
                }
                canonical(item, out);
            }
            out.0.update(b"]");
        }
        other => scalar(other, out),
    }
}

/// A string or scalar as serde_json writes it.
fn scalar(value: &(impl serde::Serialize + ?Sized), out: &mut HashWriter) {
    // The hasher never fails a write, and strings and JSON scalars always serialize.
    let _ = serde_json::to_writer(out, value);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_argument_digest_ignores_key_order_but_not_values() {
        let a: Value = serde_json::from_str(r#"{"a":1,"b":{"y":[1,2],"x":null}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"b":{"x":null,"y":[1,2]},"a":1}"#).unwrap();
        let c: Value = serde_json::from_str(r#"{"a":2,"b":{"x":null,"y":[1,2]}}"#).unwrap();
        assert_eq!(ArgumentDigest::of(&a), ArgumentDigest::of(&b));
        assert_ne!(ArgumentDigest::of(&a), ArgumentDigest::of(&c));
    }

    /// The bytes hashed are those the buffered digest hashed before it streamed, so a
    /// state issued earlier in the process still opens.
    #[test]
    fn the_argument_digest_is_sha256_of_the_canonical_text() {
        let value: Value =
            serde_json::from_str(r#"{"b":[true,null,"xé",{"z":1.5,"a":-2}],"a":"q\""}"#).unwrap();
        // sha256(r#"{"a":"q\"","b":[true,null,"xé",{"a":-2,"z":1.5}]}"#)
        assert_eq!(
            ArgumentDigest::of(&value).as_str(),
            "7c1505b52df944aecab8e489502b503b5ce59de845826ca2f6aac982c1a1aae4"
        );
    }
}
