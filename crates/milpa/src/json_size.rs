//! How many bytes a JSON value takes once serialized, counted without serializing it and
//! only up to a bound: the result-size cap and the audit-record cap ask "is this over N?" on
//! every call, and a walk that stops at N costs nothing for the usual small values.

use serde_json::Value;

/// The serialized (compact) length of `value`, or `None` once it passes `max`.
///
/// Exact for everything but floats, which count as the longest form `serde_json` writes
/// (24 bytes), so the answer never falls short of the real size.
#[inline]
pub(crate) fn within(value: &Value, max: usize) -> Option<usize> {
    // Most arguments and results are scalars or nothing: answered here, without the walk.
    let scalar = match value {
        Value::Null => Some(4),
        Value::Bool(b) => Some(if *b { 4 } else { 5 }),
        Value::Number(n) => Some(number_len(n)),
        Value::Object(map) if map.is_empty() => Some(2),
        Value::Array(items) if items.is_empty() => Some(2),
        _ => None,
    };
    match scalar {
        Some(len) => (len <= max).then_some(len),
        None => walk(value, max),
    }
}

fn walk(value: &Value, max: usize) -> Option<usize> {
    let mut budget = Budget { used: 0, max };
    budget.value(value).then_some(budget.used)
}

/// The serialized length of `text` as a JSON string (quotes and escapes included), or
/// `None` once it passes `max`.
pub(crate) fn string_within(text: &str, max: usize) -> Option<usize> {
    let mut budget = Budget { used: 0, max };
    budget.string(text).then_some(budget.used)
}

struct Budget {
    used: usize,
    max: usize,
}

impl Budget {
    #[inline]
    fn add(&mut self, bytes: usize) -> bool {
        self.used = self.used.saturating_add(bytes);
        self.used <= self.max
    }

    fn value(&mut self, value: &Value) -> bool {
        match value {
            Value::Null => self.add(4),
            Value::Bool(b) => self.add(if *b { 4 } else { 5 }),
            Value::Number(n) => self.add(number_len(n)),
            Value::String(s) => self.string(s),
            Value::Array(items) => {
                self.add(2 + items.len().saturating_sub(1))
                    && items.iter().all(|item| self.value(item))
            }
            Value::Object(map) => {
                // Braces, commas and a colon per entry.
                self.add(2 + map.len().saturating_sub(1) + map.len())
                    && map.iter().all(|(k, v)| self.string(k) && self.value(v))
            }
        }
    }

    fn string(&mut self, text: &str) -> bool {
        // Every byte takes at least one byte, an escaped one two or six (`\u0000`).
        if !self.add(text.len() + 2) {
            return false;
        }
        let extra: usize = text
            .bytes()
            .map(|b| match b {
                b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 1,
                0..=0x1f => 5,
                _ => 0,
            })
            .sum();
        self.add(extra)
    }
}

fn number_len(n: &serde_json::Number) -> usize {
    if let Some(u) = n.as_u64() {
        digits(u)
    } else if let Some(i) = n.as_i64() {
        1 + digits(i.unsigned_abs())
    } else {
        24
    }
}

fn digits(mut n: u64) -> usize {
    let mut count = 1;
    while n >= 10 {
        n /= 10;
        count += 1;
    }
    count
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_count_is_the_serialized_length() {
        let cases = [
            json!(null),
            json!(true),
            json!(false),
            json!(0),
            json!(-12345),
            json!(u64::MAX),
            json!(i64::MIN),
            json!("plain"),
            json!("quote \" back \\ nl \n tab \t nul \u{0} bell \u{7} é 日本"),
            json!([]),
            json!({}),
            json!([1, "a", null, [true], {"k": "v"}]),
            json!({"a": {"b": [1, 2, {"c": "d\n"}]}, "e": ""}),
        ];
        for case in cases {
            let real = serde_json::to_vec(&case).unwrap().len();
            assert_eq!(within(&case, usize::MAX), Some(real), "{case}");
            assert_eq!(within(&case, real), Some(real), "{case}");
            assert_eq!(within(&case, real - 1), None, "{case}");
        }
    }

    #[test]
    fn floats_never_count_short() {
        for f in [0.5, -1.0e-300, 1.7976931348623157e308, 123.456] {
            let real = serde_json::to_vec(&json!(f)).unwrap().len();
            assert!(within(&json!(f), usize::MAX).unwrap() >= real);
        }
    }

    #[test]
    fn control_characters_count_escaped() {
        let nuls = "\u{0}".repeat(1000);
        assert_eq!(string_within(&nuls, usize::MAX), Some(6002));
        assert_eq!(string_within(&nuls, 6001), None);
    }
}
