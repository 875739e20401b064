//! The tamper-evident audit trail: every record is sealed into a hash chain.
//!
//! A sealed record is the record's JSON object with three keys added at the end:
//! `"seq"` (1, 2, 3, … in the order written), `"prev_hash"` (the previous record's `hash`,
//! or [`GENESIS_HASH`] for the first) and `"hash"`, the lowercase hex SHA-256 of the
//! record's *canonical bytes*: the object exactly as written, up to and including
//! `prev_hash`, closed with `}`, i.e. the line without its `,"hash":"…"` field.
//!
//! Hashing the text as written (rather than a re-serialization) means a verifier needs no
//! agreement with the writer about key order or number formatting: any byte changed in a
//! line changes its hash, and changing the hash to match breaks the next record's
//! `prev_hash`. A removed record leaves a gap in `seq`; swapped records come out of order.
//! What a chain cannot show on its own is a cut at the end (the newest records removed):
//! compare the head ([`ChainSummary::head`]) with one kept elsewhere for that.
//!
//! ```
//! use milpa::audit::chain::{ChainHead, seal, verify_lines};
//!
//! let mut head = ChainHead::genesis();
//! let mut file = String::new();
//! for record in [r#"{"tool":"a"}"#, r#"{"tool":"b"}"#] {
//!     let mut line = Vec::new();
//!     head = seal(record.as_bytes(), &head, &mut line);
//!     file.push_str(std::str::from_utf8(&line).unwrap());
//!     file.push('\n');
//! }
//! let summary = verify_lines(file.lines()).unwrap();
//! assert_eq!(summary.records, 2);
//! assert_eq!(summary.head, head);
//!
//! let edited = file.replace(r#""tool":"a""#, r#""tool":"x""#);
//! let broken = verify_lines(edited.lines()).unwrap_err();
//! assert_eq!(
//!     broken.to_string(),
//!     "record at line 1 (seq 1) was edited: its hash does not match its contents"
//! );
//! ```

use std::fmt;

use sha2::{Digest, Sha256};

/// The `prev_hash` of the first record of a chain: 64 zeros.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Length of a hash in hex.
const HASH_HEX_LEN: usize = 64;

/// The last record of a chain: what the next record links to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ChainHead {
    /// The last record's `seq` (0 before the first record).
    pub seq: u64,
    /// The last record's `hash` ([`GENESIS_HASH`] before the first record).
    pub hash: String,
}

impl ChainHead {
    /// The head of an empty chain: seq 0, [`GENESIS_HASH`].
    pub fn genesis() -> ChainHead {
        ChainHead {
            seq: 0,
            hash: GENESIS_HASH.to_owned(),
        }
    }

    /// The head a sealed line leaves behind (its `seq` and `hash`), if `line` is a sealed
    /// record whose hash matches its contents. Used to resume a chain from its last record.
    pub fn of_sealed_line(line: &str) -> Option<ChainHead> {
        let parts = SealedParts::parse(line).ok()?;
        (sha256_hex(parts.canonical_prefix) == parts.hash).then(|| ChainHead {
            seq: parts.seq,
            hash: parts.hash.to_owned(),
        })
    }
}

impl Default for ChainHead {
    fn default() -> Self {
        ChainHead::genesis()
    }
}

/// Seals one record: appends to `out` (no newline) `record_json` with `"seq"`,
/// `"prev_hash"` and `"hash"` added at the end, and returns the new head.
///
/// `record_json` is one JSON object as
/// [`AuditRecord::write_json`](crate::audit::AuditRecord::write_json) writes it (no
/// trailing whitespace). The record is not parsed: its closing `}` is replaced, so this
/// costs one SHA-256 over the line.
pub fn seal(record_json: &[u8], head: &ChainHead, out: &mut Vec<u8>) -> ChainHead {
    let seq = head.seq + 1;
    let body = record_json.trim_ascii_end();
    let body = body.strip_suffix(b"}").unwrap_or(body);
    let start = out.len();
    out.reserve(body.len() + 192);
    out.extend_from_slice(body);
    // `{}` has no field to follow: no comma then.
    if !body.trim_ascii().ends_with(b"{") {
        out.push(b',');
    }
    out.extend_from_slice(b"\"seq\":");
    out.extend_from_slice(itoa::Buffer::new().format(seq).as_bytes());
    out.extend_from_slice(b",\"prev_hash\":\"");
    out.extend_from_slice(head.hash.as_bytes());
    out.push(b'"');
    let hash = sha256_hex_bytes(&out[start..]);
    out.extend_from_slice(b",\"hash\":\"");
    out.extend_from_slice(&hash);
    out.extend_from_slice(b"\"}");
    ChainHead {
        seq,
        hash: String::from_utf8(hash.to_vec()).expect("hex digits are ASCII"),
    }
}

/// What [`verify_lines`] found when the chain is intact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainSummary {
    /// How many records the chain holds.
    pub records: u64,
    /// Its last record (genesis when empty).
    pub head: ChainHead,
}

/// The first record that breaks a chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainBreak {
    /// Its line, 1-based (empty lines count, so this is the line in the file).
    pub line: usize,
    /// Its `seq`, when it could be read.
    pub seq: Option<u64>,
    /// What is wrong with it.
    pub kind: ChainBreakKind,
}

/// What is wrong with the record a [`ChainBreak`] names.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChainBreakKind {
    /// The line is not a JSON object.
    Unreadable {
        /// The parser's complaint.
        reason: String,
    },
    /// A JSON object that does not end with `seq`, `prev_hash` and `hash` (written by an
    /// unsealed sink, or its chain fields were altered).
    NotChained,
    /// Its hash does not match its contents: the record was changed after it was written.
    Edited,
    /// Its `seq` is not the previous record's plus one: records before it were removed, or
    /// records were reordered.
    OutOfSequence {
        /// The `seq` the previous record calls for.
        expected: u64,
    },
    /// Its `prev_hash` is not the previous record's hash: the record before it was
    /// replaced (edited and re-hashed), or the chain was spliced.
    Unlinked,
}

impl fmt::Display for ChainBreak {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "record at line {}", self.line)?;
        if let Some(seq) = self.seq {
            write!(f, " (seq {seq})")?;
        }
        match &self.kind {
            ChainBreakKind::Unreadable { reason } => write!(f, " is not a JSON object: {reason}"),
            ChainBreakKind::NotChained => f.write_str(
                " is not a chained record: it does not end with seq, prev_hash and hash",
            ),
            ChainBreakKind::Edited => {
                f.write_str(" was edited: its hash does not match its contents")
            }
            ChainBreakKind::OutOfSequence { expected } => write!(
                f,
                " is out of sequence: expected seq {expected} (a record was removed or reordered)"
            ),
            ChainBreakKind::Unlinked => f.write_str(
                " does not follow the record before it: its prev_hash is not that record's hash \
                 (a record was replaced, removed or reordered)",
            ),
        }
    }
}

impl std::error::Error for ChainBreak {}

/// Checks a chain, oldest record first; empty (or all-blank) lines are skipped. Returns the
/// first record that breaks it, or how many records it holds and its head.
///
/// A chain starts at seq 1 with prev_hash [`GENESIS_HASH`].
pub fn verify_lines<'a>(
    lines: impl IntoIterator<Item = &'a str>,
) -> Result<ChainSummary, ChainBreak> {
    let mut verifier = ChainVerifier::new();
    for line in lines {
        verifier.push(line)?;
    }
    Ok(verifier.finish())
}

/// [`verify_lines`] one line at a time, for a chain read from somewhere that lends each
/// line only briefly (a database cursor, a buffered file reader).
///
/// ```
/// use milpa::audit::chain::{ChainHead, ChainVerifier, seal};
///
/// let mut line = Vec::new();
/// seal(br#"{"tool":"a"}"#, &ChainHead::genesis(), &mut line);
/// let mut verifier = ChainVerifier::new();
/// verifier.push(std::str::from_utf8(&line).unwrap()).unwrap();
/// assert_eq!(verifier.finish().records, 1);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ChainVerifier {
    head: ChainHead,
    records: u64,
    lines: usize,
}

impl ChainVerifier {
    /// A verifier expecting the first record of a chain.
    pub fn new() -> ChainVerifier {
        ChainVerifier::default()
    }

    /// Checks the next line (an empty or all-blank one is skipped but counted). Once it
    /// has answered an error the chain is broken: pushing more lines proves nothing.
    pub fn push(&mut self, line: &str) -> Result<(), ChainBreak> {
        self.lines += 1;
        let line = line.trim_end_matches(['\r', '\n']);
        if line.trim().is_empty() {
            return Ok(());
        }
        let line_no = self.lines;
        let broken = |seq, kind| ChainBreak {
            line: line_no,
            seq,
            kind,
        };
        // Valid JSON first: the chain fields are read from the text, so a line that only
        // looks like a record at its end must not pass.
        if let Err(error) = serde_json::from_str::<serde::de::IgnoredAny>(line) {
            return Err(broken(
                None,
                ChainBreakKind::Unreadable {
                    reason: error.to_string(),
                },
            ));
        }
        let parts = match SealedParts::parse(line) {
            Ok(parts) => parts,
            Err(NotSealed::NotAnObject) => {
                return Err(broken(
                    None,
                    ChainBreakKind::Unreadable {
                        reason: "a JSON value that is not an object".to_owned(),
                    },
                ));
            }
            Err(NotSealed::NoChainFields) => return Err(broken(None, ChainBreakKind::NotChained)),
        };
        let seq = Some(parts.seq);
        if sha256_hex(parts.canonical_prefix) != parts.hash {
            return Err(broken(seq, ChainBreakKind::Edited));
        }
        let expected = self.head.seq + 1;
        if parts.seq != expected {
            return Err(broken(seq, ChainBreakKind::OutOfSequence { expected }));
        }
        if parts.prev_hash != self.head.hash {
            return Err(broken(seq, ChainBreakKind::Unlinked));
        }
        self.records += 1;
        self.head = ChainHead {
            seq: parts.seq,
            hash: parts.hash.to_owned(),
        };
        Ok(())
    }

    /// What the lines pushed so far hold.
    pub fn finish(self) -> ChainSummary {
        ChainSummary {
            records: self.records,
            head: self.head,
        }
    }
}

/// Why a line could not be split into its chain fields.
enum NotSealed {
    NotAnObject,
    NoChainFields,
}

/// A sealed line split into its parts, read from the end of the text.
struct SealedParts<'a> {
    /// The line up to and including prev_hash's closing quote: the canonical bytes without
    /// their final `}`.
    canonical_prefix: &'a str,
    seq: u64,
    prev_hash: &'a str,
    hash: &'a str,
}

impl<'a> SealedParts<'a> {
    fn parse(line: &'a str) -> Result<SealedParts<'a>, NotSealed> {
        if !line.starts_with('{') || !line.ends_with('}') {
            return Err(NotSealed::NotAnObject);
        }
        let rest = &line[..line.len() - 1];
        let (rest, hash) =
            split_hash_field(rest, ",\"hash\":\"").ok_or(NotSealed::NoChainFields)?;
        let (rest, prev_hash) =
            split_hash_field(rest, ",\"prev_hash\":\"").ok_or(NotSealed::NoChainFields)?;
        let canonical_prefix = &line[..rest.len() + ",\"prev_hash\":\"".len() + HASH_HEX_LEN + 1];
        let digits_at = rest
            .rfind(|c: char| !c.is_ascii_digit())
            .map_or(0, |i| i + 1);
        let (rest, digits) = rest.split_at(digits_at);
        if digits.is_empty() || (digits.len() > 1 && digits.starts_with('0')) {
            return Err(NotSealed::NoChainFields);
        }
        let seq: u64 = digits.parse().map_err(|_| NotSealed::NoChainFields)?;
        let before = rest
            .strip_suffix("\"seq\":")
            .ok_or(NotSealed::NoChainFields)?;
        // `seq` follows another field (`,`) or opens the object (`{`).
        if !(before.ends_with(',') || before == "{") {
            return Err(NotSealed::NoChainFields);
        }
        Ok(SealedParts {
            canonical_prefix,
            seq,
            prev_hash,
            hash,
        })
    }
}

/// Splits `…<field>"<64 lowercase hex>"` into what comes before `field` and the hex.
fn split_hash_field<'a>(text: &'a str, field: &str) -> Option<(&'a str, &'a str)> {
    let value_end = text.strip_suffix('"')?;
    let value_at = value_end.len().checked_sub(HASH_HEX_LEN)?;
    let value = value_end.get(value_at..)?;
    if !value
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    let before = value_end[..value_at].strip_suffix(field)?;
    Some((before, value))
}

/// Lowercase hex SHA-256 of the canonical bytes `prefix` + `}`.
fn sha256_hex(prefix: &str) -> String {
    String::from_utf8(sha256_hex_bytes(prefix.as_bytes()).to_vec()).expect("hex digits are ASCII")
}

/// [`sha256_hex`] into a stack buffer: the canonical bytes' closing `}` is hashed without
/// being written, so `seal` can write the `hash` field in its place.
fn sha256_hex_bytes(prefix: &[u8]) -> [u8; HASH_HEX_LEN] {
    let mut hasher = Sha256::new();
    hasher.update(prefix);
    hasher.update(b"}");
    let mut hex = [0u8; HASH_HEX_LEN];
    hex::encode_to_slice(hasher.finalize(), &mut hex).expect("64 hex digits for 32 bytes");
    hex
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn sealed_lines(n: usize) -> Vec<String> {
        let mut head = ChainHead::genesis();
        (0..n)
            .map(|i| {
                let record = format!(
                    r#"{{"ts":"2026-01-01T00:00:00.000Z","request_id":"r{i}","tool":"echo","args":{{"n":{i},"s":"a \"q\" }}"}}}}"#
                );
                let mut out = Vec::new();
                head = seal(record.as_bytes(), &head, &mut out);
                String::from_utf8(out).unwrap()
            })
            .collect()
    }

    fn verify(lines: &[String]) -> Result<ChainSummary, ChainBreak> {
        verify_lines(lines.iter().map(String::as_str))
    }

    #[test]
    fn a_sealed_line_is_the_record_with_seq_prev_hash_and_hash_at_the_end() {
        let mut out = Vec::new();
        let head = seal(br#"{"tool":"a"}"#, &ChainHead::genesis(), &mut out);
        let line = String::from_utf8(out).unwrap();
        let canonical = format!(r#"{{"tool":"a","seq":1,"prev_hash":"{GENESIS_HASH}"}}"#);
        let hash = hex::encode(Sha256::digest(canonical.as_bytes()));
        assert_eq!(
            line,
            format!(r#"{{"tool":"a","seq":1,"prev_hash":"{GENESIS_HASH}","hash":"{hash}"}}"#)
        );
        assert_eq!(head, ChainHead { seq: 1, hash });
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(value["seq"], 1);
        assert_eq!(ChainHead::of_sealed_line(&line), Some(head));
    }

    #[test]
    fn an_empty_object_seals_to_valid_json() {
        let mut out = Vec::new();
        seal(b"{}", &ChainHead::genesis(), &mut out);
        let line = String::from_utf8(out).unwrap();
        assert!(line.starts_with(r#"{"seq":1,"#), "{line}");
        assert_eq!(verify_lines([line.as_str()]).unwrap().records, 1);
    }

    #[test]
    fn seal_then_verify_round_trips() {
        let lines = sealed_lines(5);
        let summary = verify(&lines).unwrap();
        assert_eq!(summary.records, 5);
        assert_eq!(summary.head.seq, 5);
        assert_eq!(
            summary.head,
            ChainHead::of_sealed_line(lines.last().unwrap()).unwrap()
        );
        assert_eq!(
            verify(&[]).unwrap(),
            ChainSummary {
                records: 0,
                head: ChainHead::genesis()
            }
        );
    }

    #[test]
    fn empty_lines_are_skipped_but_counted_in_line_numbers() {
        let mut lines = sealed_lines(3);
        lines.insert(1, String::new());
        lines.insert(3, "   ".to_owned());
        assert_eq!(verify(&lines).unwrap().records, 3);
        lines[4] = lines[4].replace("r2", "r9");
        let broken = verify(&lines).unwrap_err();
        assert_eq!((broken.line, broken.seq), (5, Some(3)));
    }

    #[test]
    fn an_edited_record_is_named() {
        let mut lines = sealed_lines(4);
        lines[2] = lines[2].replace(r#""tool":"echo""#, r#""tool":"ecko""#);
        let broken = verify(&lines).unwrap_err();
        assert_eq!(broken.kind, ChainBreakKind::Edited);
        assert_eq!(
            broken.to_string(),
            "record at line 3 (seq 3) was edited: its hash does not match its contents"
        );
    }

    #[test]
    fn an_edited_and_rehashed_record_breaks_the_next_link() {
        let mut lines = sealed_lines(4);
        // Re-seal an edited record 2 in place, with a correct hash of its own.
        let head1 = ChainHead::of_sealed_line(&lines[0]).unwrap();
        let body = lines[1].split(",\"seq\":").next().unwrap().to_owned() + "}";
        let mut out = Vec::new();
        seal(body.replace("r1", "rX").as_bytes(), &head1, &mut out);
        lines[1] = String::from_utf8(out).unwrap();
        let broken = verify(&lines).unwrap_err();
        assert_eq!((broken.line, broken.seq), (3, Some(3)));
        assert_eq!(broken.kind, ChainBreakKind::Unlinked);
        assert!(broken.to_string().contains("prev_hash"), "{broken}");
    }

    #[test]
    fn a_deleted_record_is_named() {
        for (removed, line, seq, expected) in [(0, 1, 2, 1), (2, 3, 4, 3), (3, 4, 5, 4)] {
            let mut lines = sealed_lines(5);
            lines.remove(removed);
            let broken = verify(&lines).unwrap_err();
            assert_eq!(broken.line, line, "removed {removed}");
            assert_eq!(broken.seq, Some(seq));
            assert_eq!(broken.kind, ChainBreakKind::OutOfSequence { expected });
            assert_eq!(
                broken.to_string(),
                format!(
                    "record at line {line} (seq {seq}) is out of sequence: expected seq {expected} \
                     (a record was removed or reordered)"
                )
            );
        }
    }

    #[test]
    fn swapped_records_are_named() {
        let mut lines = sealed_lines(5);
        lines.swap(1, 2);
        let broken = verify(&lines).unwrap_err();
        assert_eq!((broken.line, broken.seq), (2, Some(3)));
        assert_eq!(broken.kind, ChainBreakKind::OutOfSequence { expected: 2 });
    }

    #[test]
    fn a_line_that_is_not_json_is_named() {
        let mut lines = sealed_lines(3);
        lines[1] = "not json at all".to_owned();
        let broken = verify(&lines).unwrap_err();
        assert_eq!((broken.line, broken.seq), (2, None));
        assert!(matches!(broken.kind, ChainBreakKind::Unreadable { .. }));
        assert!(
            broken
                .to_string()
                .starts_with("record at line 2 is not a JSON object:"),
            "{broken}"
        );
        // JSON, but not a record.
        lines[1] = "[1,2]".to_owned();
        assert!(matches!(
            verify(&lines).unwrap_err().kind,
            ChainBreakKind::Unreadable { .. }
        ));
        lines[1] = r#"{"tool":"echo"}"#.to_owned();
        let broken = verify(&lines).unwrap_err();
        assert_eq!(broken.kind, ChainBreakKind::NotChained);
        assert_eq!(
            broken.to_string(),
            "record at line 2 is not a chained record: it does not end with seq, prev_hash and hash"
        );
    }

    #[test]
    fn a_chain_must_start_at_genesis() {
        let lines = sealed_lines(3);
        let broken = verify(&lines[1..]).unwrap_err();
        assert_eq!(broken.kind, ChainBreakKind::OutOfSequence { expected: 1 });
    }

    #[test]
    fn of_sealed_line_refuses_an_edited_or_unsealed_line() {
        let lines = sealed_lines(1);
        assert!(ChainHead::of_sealed_line(&lines[0]).is_some());
        assert!(ChainHead::of_sealed_line(&lines[0].replace("echo", "ech0")).is_none());
        assert!(ChainHead::of_sealed_line(r#"{"tool":"echo"}"#).is_none());
        assert!(ChainHead::of_sealed_line("").is_none());
    }

    proptest! {
        #[test]
        fn any_single_byte_edit_of_a_sealed_line_is_caught(
            target in 0usize..3,
            position in any::<prop::sample::Index>(),
            byte in any::<u8>(),
        ) {
            let lines = sealed_lines(3);
            let mut bytes = lines[target].clone().into_bytes();
            let at = position.index(bytes.len());
            prop_assume!(bytes[at] != byte);
            bytes[at] = byte;
            let mut edited = lines.clone();
            edited[target] = String::from_utf8_lossy(&bytes).into_owned();
            let broken = verify(&edited).unwrap_err();
            prop_assert_eq!(broken.line, target + 1);
        }
    }
}
