//! JSON written straight into a byte buffer, for the records written on every call (audit
//! lines, `tools/call` responses).
//!
//! Those records have a fixed shape whose keys never need escaping, and short string values
//! that rarely do. Through `serde_json`, each key and value costs a pass of its escaping
//! loop and three small buffer writes; measured in the MCP server, strings were a fifth of
//! the per-call CPU. Here a key is part of a literal, and a string that needs no escape is
//! copied in one go. Anything else (a `Value`, a string with an escape) still goes through
//! `serde_json`, so the output is byte for byte what `serde_json` writes.
//!
//! Crate-private: the hot records' writers (`AuditRecord::write_json`, `Meta::write_json`)
//! use it, and their tests hold them to `serde_json`'s bytes.

use serde::Serialize;

/// Appends `s` as a JSON string.
#[inline]
pub fn string(out: &mut Vec<u8>, s: &str) {
    if needs_no_escape(s) {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        // A string always serializes.
        let _ = serde_json::to_writer(&mut *out, s);
    }
}

/// Appends `s` as a JSON string, or `null`.
#[inline]
pub fn optional_string(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => string(out, s),
        None => out.extend_from_slice(b"null"),
    }
}

/// Appends a boolean.
#[inline]
pub fn boolean(out: &mut Vec<u8>, b: bool) {
    out.extend_from_slice(if b { b"true" } else { b"false" });
}

/// Appends an unsigned integer.
#[inline]
pub fn unsigned(out: &mut Vec<u8>, n: u64) {
    let mut digits = itoa::Buffer::new();
    out.extend_from_slice(digits.format(n).as_bytes());
}

/// Appends anything serializable, through `serde_json`. On a serialization error (only
/// possible for types such as maps with non-string keys) it writes `null` in its place, so
/// the record stays valid JSON.
pub fn value<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    let start = out.len();
    if serde_json::to_writer(&mut *out, value).is_err() {
        out.truncate(start);
        out.extend_from_slice(b"null");
    }
}

/// Whether `serde_json` would write `s` between quotes unchanged: no control character,
/// quote or backslash. (It writes everything else, including non-ASCII, as is.)
#[inline]
fn needs_no_escape(s: &str) -> bool {
    // Written as a fold over all bytes, without early exit, so that it vectorizes.
    s.bytes()
        .fold(true, |ok, b| ok & (b >= 0x20) & (b != b'"') & (b != b'\\'))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn strings_are_written_as_serde_json_writes_them(s in any::<String>()) {
            let mut out = Vec::new();
            string(&mut out, &s);
            prop_assert_eq!(out, serde_json::to_vec(&s).unwrap());
        }

        #[test]
        fn integers_are_written_as_serde_json_writes_them(n in any::<u64>()) {
            let mut out = Vec::new();
            unsigned(&mut out, n);
            prop_assert_eq!(out, serde_json::to_vec(&n).unwrap());
        }
    }

    #[test]
    fn escapes_fall_back_to_serde_json() {
        for s in [
            "",
            "plain",
            "é ü 日本",
            "quote\"",
            "back\\slash",
            "nl\n",
            "\u{1}",
            "\u{7f}",
        ] {
            let mut out = Vec::new();
            string(&mut out, s);
            assert_eq!(out, serde_json::to_vec(s).unwrap(), "{s:?}");
        }
    }

    #[test]
    fn unserializable_values_become_null() {
        let mut out = b"[".to_vec();
        let map: std::collections::BTreeMap<(u8, u8), u8> = [((1, 2), 3)].into();
        value(&mut out, &map);
        out.push(b']');
        assert_eq!(out, b"[null]");
    }
}
