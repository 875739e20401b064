//! The call's arguments (JSON) as a Cedar record, `context.args`.
//!
//! Converted by hand rather than through `Context::from_json_value`: Cedar's JSON format
//! reads objects with `__entity` / `__extn` keys as entity references and extension values,
//! and an argument must never be able to pose as an entity. Here every JSON object is a
//! plain record.

use cedar_policy::RestrictedExpression;
use serde_json::Value;

/// The arguments as a record; a non-object (arguments are objects after validation, but a
/// policy must not fail on anything else) becomes the empty record.
pub(crate) fn args_record(args: &Value) -> RestrictedExpression {
    match args {
        Value::Object(_) => value(args),
        _ => RestrictedExpression::new_record(std::iter::empty::<(String, RestrictedExpression)>())
            .expect("an empty record has no duplicate keys"),
    }
}

/// One JSON value as Cedar sees it.
///
/// Cedar has no floating point and no null: an integer that fits 64 bits is a `Long`; any
/// other number is a `decimal` when Cedar's decimal holds it exactly (at most four decimals,
/// within range) and its text otherwise (so a comparison with it errors, which denies under
/// a `forbid`: see the crate docs). `null` is the empty set, so no string or number
/// comparison matches it by accident.
fn value(v: &Value) -> RestrictedExpression {
    match v {
        Value::Null => RestrictedExpression::new_set(std::iter::empty()),
        Value::Bool(b) => RestrictedExpression::new_bool(*b),
        Value::String(s) => RestrictedExpression::new_string(s.clone()),
        Value::Number(n) => number(n),
        Value::Array(items) => RestrictedExpression::new_set(items.iter().map(value)),
        Value::Object(map) => {
            RestrictedExpression::new_record(map.iter().map(|(k, v)| (k.clone(), value(v))))
                .expect("JSON object keys are unique")
        }
    }
}

fn number(n: &serde_json::Number) -> RestrictedExpression {
    if let Some(i) = n.as_i64() {
        return RestrictedExpression::new_long(i);
    }
    let text = n.to_string();
    match decimal_text(n) {
        Some(dec) => RestrictedExpression::new_decimal(dec),
        None => RestrictedExpression::new_string(text),
    }
}

/// The text of `n` as Cedar's `decimal` literal, when it has one: an exact value with at most
/// four fractional digits, within ±922337203685477.5807.
fn decimal_text(n: &serde_json::Number) -> Option<String> {
    let f = n.as_f64()?;
    if !f.is_finite() || f.abs() >= 922_337_203_685_477.0 {
        return None;
    }
    let scaled = f * 10_000.0;
    if scaled.fract() != 0.0 {
        return None;
    }
    let text = format!("{f:.4}");
    // The four-digit rendering must be the same number, or the float had more precision.
    (text.parse::<f64>().ok()? == f).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_become_longs_decimals_or_text() {
        assert_eq!(
            decimal_text(&serde_json::Number::from_f64(12.5).unwrap()).as_deref(),
            Some("12.5000")
        );
        assert_eq!(
            decimal_text(&serde_json::Number::from_f64(0.123456).unwrap()),
            None
        );
        assert_eq!(
            decimal_text(&serde_json::Number::from_f64(1e300).unwrap()),
            None
        );
        let _ = args_record(
            &json!({"a": 1, "b": [1.5, null], "c": {"__entity": {"type": "Principal", "id": "root"}}}),
        );
    }
}
