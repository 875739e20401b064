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
pub(crate) fn string(out: &mut Vec<u8>, s: &str) {
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
pub(crate) fn optional_string(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => string(out, s),
        None => out.extend_from_slice(b"null"),
    }
}

/// Appends a boolean.
#[inline]
pub(crate) fn boolean(out: &mut Vec<u8>, b: bool) {
    out.extend_from_slice(if b { b"true" } else { b"false" });
}

/// Appends an unsigned integer.
#[inline]
pub(crate) fn unsigned(out: &mut Vec<u8>, n: u64) {
    let mut digits = itoa::Buffer::new();
    out.extend_from_slice(digits.format(n).as_bytes());
}

/// Appends anything serializable, through `serde_json`. On a serialization error (only
/// possible for types such as maps with non-string keys) it writes `null` in its place, so
/// the record stays valid JSON.
pub(crate) fn value<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    let start = out.len();
    if serde_json::to_writer(&mut *out, value).is_err() {
        out.truncate(start);
        out.extend_from_slice(b"null");
    }
}

/// Where a hot record's fields go: [`ObjectWriter`] (bytes, by hand) or [`SerdeFields`] (a
/// serde serializer). Each record lists its keys once, in one `visit_fields` function, and
/// both its `write_json` and its `Serialize` run that function, so the two cannot drift.
pub(crate) trait FieldVisitor {
    fn string(&mut self, key: &'static str, value: &str);
    fn optional_string(&mut self, key: &'static str, value: Option<&str>);
    fn boolean(&mut self, key: &'static str, value: bool);
    fn unsigned(&mut self, key: &'static str, value: u64);
    fn value<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T);
    /// A field whose key comes from data (a tool's own meta field), so it is escaped.
    fn data_keyed_value<T: Serialize + ?Sized>(&mut self, key: &str, value: &T);
}

/// Writes a JSON object's fields straight into bytes.
pub(crate) struct ObjectWriter<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl<'a> ObjectWriter<'a> {
    /// Opens an object on `out`.
    #[inline(always)]
    pub(crate) fn open(out: &'a mut Vec<u8>) -> Self {
        out.push(b'{');
        ObjectWriter { out, first: true }
    }

    /// Closes the object.
    #[inline(always)]
    pub(crate) fn close(self) {
        self.out.push(b'}');
    }

    #[inline(always)]
    fn key(&mut self, key: &'static str) -> &mut Vec<u8> {
        // Keys are the records' own field names, plain ASCII: copied without the escape
        // scan (measured: scanning them made `string` the top symbol of an audited call,
        // about +4 % of its time). The debug check and the serde comparison tests hold
        // them to what `serde_json` writes.
        debug_assert!(needs_no_escape(key), "a record key needs escaping: {key}");
        if !std::mem::take(&mut self.first) {
            self.out.push(b',');
        }
        self.out.reserve(key.len() + 3);
        self.out.push(b'"');
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\":");
        self.out
    }
}

impl FieldVisitor for ObjectWriter<'_> {
    #[inline(always)]
    fn string(&mut self, key: &'static str, value: &str) {
        string(self.key(key), value);
    }

    #[inline(always)]
    fn optional_string(&mut self, key: &'static str, value: Option<&str>) {
        optional_string(self.key(key), value);
    }

    #[inline(always)]
    fn boolean(&mut self, key: &'static str, value: bool) {
        boolean(self.key(key), value);
    }

    #[inline(always)]
    fn unsigned(&mut self, key: &'static str, value: u64) {
        unsigned(self.key(key), value);
    }

    #[inline(always)]
    fn value<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) {
        self::value(self.key(key), value);
    }

    fn data_keyed_value<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) {
        if !std::mem::take(&mut self.first) {
            self.out.push(b',');
        }
        string(self.out, key);
        self.out.push(b':');
        self::value(self.out, value);
    }
}

/// Feeds a record's fields to a serde map serializer (keeping the first error).
pub(crate) struct SerdeFields<M: serde::ser::SerializeMap> {
    map: M,
    error: Option<M::Error>,
}

impl<M: serde::ser::SerializeMap> SerdeFields<M> {
    pub(crate) fn new(map: M) -> Self {
        SerdeFields { map, error: None }
    }

    fn entry<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) {
        if self.error.is_none()
            && let Err(error) = self.map.serialize_entry(key, value)
        {
            self.error = Some(error);
        }
    }

    /// Ends the map, or returns the first error.
    pub(crate) fn end(self) -> Result<M::Ok, M::Error> {
        match self.error {
            Some(error) => Err(error),
            None => self.map.end(),
        }
    }
}

impl<M: serde::ser::SerializeMap> FieldVisitor for SerdeFields<M> {
    fn string(&mut self, key: &'static str, value: &str) {
        self.entry(key, value);
    }

    fn optional_string(&mut self, key: &'static str, value: Option<&str>) {
        self.entry(key, &value);
    }

    fn boolean(&mut self, key: &'static str, value: bool) {
        self.entry(key, &value);
    }

    fn unsigned(&mut self, key: &'static str, value: u64) {
        self.entry(key, &value);
    }

    fn value<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) {
        self.entry(key, value);
    }

    fn data_keyed_value<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) {
        self.entry(key, value);
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
