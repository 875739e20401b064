//! A schema in words, for a person: `an integer ≥ 0`, `an array of strings`,
//! `one of "fast", "slow"`, `a string of 1 to 2000 characters`.
//!
//! These words are for terminals (`milpa call` at a terminal), never for the call's result:
//! the result keeps the original's messages (`id: Expected integer, got string`), which the
//! behaviour spec fixes byte for byte.

use serde_json::{Map, Value};

use super::messages::number_text;

/// How deep `$ref`s and nested `items` are followed before the words stop at "a value".
const MAX_DEPTH: usize = 8;

/// `schema` as a noun phrase with its article: `an integer from 1 to 10`, `a string or null`,
/// `any value`. `root` is the document `schema` sits in, for local `$ref`s.
pub(super) fn noun(schema: &Value, root: &Value) -> String {
    noun_at(schema, root, 0)
}

fn noun_at(schema: &Value, root: &Value, depth: usize) -> String {
    let Some(map) = resolve(schema, root, depth) else {
        return match schema {
            Value::Bool(false) => "nothing".to_owned(),
            _ => "any value".to_owned(),
        };
    };
    if let Some(options) = map.get("enum").and_then(Value::as_array) {
        return match options.as_slice() {
            [only] => format!("exactly {}", literal(only)),
            _ => format!("one of {}", list(options)),
        };
    }
    if let Some(value) = map.get("const") {
        return format!("exactly {}", literal(value));
    }
    let types = types(map);
    if types.is_empty() {
        let alternatives = map
            .get("anyOf")
            .or_else(|| map.get("oneOf"))
            .and_then(Value::as_array);
        return match alternatives {
            Some(options) if !options.is_empty() && depth < MAX_DEPTH => options
                .iter()
                .map(|option| noun_at(option, root, depth + 1))
                .collect::<Vec<_>>()
                .join(" or "),
            _ => "any value".to_owned(),
        };
    }
    types
        .iter()
        .map(|t| {
            let (singular, _) = type_nouns(t);
            with_qualifiers(singular, t, map, root, depth)
        })
        .collect::<Vec<_>>()
        .join(" or ")
}

/// `schema` as a plural noun, for the items of an array (`integers ≥ 0`, `strings`), when
/// it has one type; `None` otherwise (the caller then says "items each …").
fn plural(schema: &Value, root: &Value, depth: usize) -> Option<String> {
    let map = resolve(schema, root, depth)?;
    if map.contains_key("enum") || map.contains_key("const") {
        return None;
    }
    match types(map).as_slice() {
        [t] => Some(with_qualifiers(type_nouns(t).1, t, map, root, depth)),
        _ => None,
    }
}

/// The object behind `schema`, following local `$ref`s (`#/$defs/Node`).
fn resolve<'a>(schema: &'a Value, root: &'a Value, depth: usize) -> Option<&'a Map<String, Value>> {
    let map = schema.as_object()?;
    match map.get("$ref").and_then(Value::as_str) {
        Some(reference) if depth < MAX_DEPTH => {
            let target = root.pointer(reference.strip_prefix('#')?)?;
            resolve(target, root, depth + 1)
        }
        Some(_) => None,
        None => Some(map),
    }
}

/// The declared types, in their order (`["string", "null"]`); empty when untyped.
fn types(map: &Map<String, Value>) -> Vec<&str> {
    match map.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn type_nouns(t: &str) -> (&'static str, &'static str) {
    match t {
        "integer" => ("an integer", "integers"),
        "number" => ("a number", "numbers"),
        "string" => ("a string", "strings"),
        "boolean" => ("true or false", "booleans"),
        "null" => ("null", "nulls"),
        "array" => ("an array", "arrays"),
        "object" => ("an object", "objects"),
        _ => ("a value", "values"),
    }
}

/// `noun` with what the schema's keywords add for type `t`.
fn with_qualifiers(
    noun: &str,
    t: &str,
    map: &Map<String, Value>,
    root: &Value,
    depth: usize,
) -> String {
    let qualifiers = match t {
        "integer" | "number" => number_qualifiers(map),
        "string" => string_qualifiers(map),
        "array" => array_qualifiers(map, root, depth),
        _ => Vec::new(),
    };
    let mut text = noun.to_owned();
    for qualifier in qualifiers {
        text.push(' ');
        text.push_str(&qualifier);
    }
    text
}

fn number_qualifiers(map: &Map<String, Value>) -> Vec<String> {
    let bound = |key: &str| map.get(key).filter(|v| v.is_number()).map(number_text);
    let lower = bound("exclusiveMinimum")
        .map(|n| format!("> {n}"))
        .or_else(|| bound("minimum").map(|n| format!("≥ {n}")));
    let upper = bound("exclusiveMaximum")
        .map(|n| format!("< {n}"))
        .or_else(|| bound("maximum").map(|n| format!("≤ {n}")));
    let mut out = Vec::new();
    match (lower, upper, bound("minimum"), bound("maximum")) {
        (_, _, Some(lo), Some(hi))
            if !map.contains_key("exclusiveMinimum") && !map.contains_key("exclusiveMaximum") =>
        {
            out.push(format!("from {lo} to {hi}"));
        }
        (Some(lower), Some(upper), _, _) => out.push(format!("{lower} and {upper}")),
        (Some(only), None, _, _) | (None, Some(only), _, _) => out.push(only),
        (None, None, _, _) => {}
    }
    if let Some(step) = bound("multipleOf") {
        out.push(format!("(a multiple of {step})"));
    }
    out
}

fn string_qualifiers(map: &Map<String, Value>) -> Vec<String> {
    let count = |key: &str| map.get(key).and_then(Value::as_u64);
    let mut out = Vec::new();
    if let Some(length) = counted(count("minLength"), count("maxLength"), "character") {
        out.push(format!("of {length}"));
    }
    if let Some(pattern) = map.get("pattern").and_then(Value::as_str) {
        out.push(format!("matching the pattern {pattern}"));
    }
    if let Some(format) = map.get("format").and_then(Value::as_str) {
        out.push(format!("(format {format})"));
    }
    out
}

fn array_qualifiers(map: &Map<String, Value>, root: &Value, depth: usize) -> Vec<String> {
    let count = |key: &str| map.get(key).and_then(Value::as_u64);
    let unit = if map.get("uniqueItems") == Some(&Value::Bool(true)) {
        "distinct item"
    } else {
        "item"
    };
    let size = counted(count("minItems"), count("maxItems"), unit);
    let items = map.get("items").filter(|items| !is_anything(items));
    let mut out = Vec::new();
    match items {
        None => {
            if let Some(size) = size {
                out.push(format!("with {size}"));
            } else if unit != "item" {
                out.push(format!("with {unit}s"));
            }
        }
        Some(_) if depth >= MAX_DEPTH => out.push("of values".to_owned()),
        Some(items) => match plural(items, root, depth + 1) {
            Some(plural) => {
                out.push(format!("of {plural}"));
                if let Some(size) = size {
                    out.push(format!("with {size}"));
                } else if unit != "item" {
                    out.push("with none repeated".to_owned());
                }
            }
            None => {
                let each = noun_at(items, root, depth + 1);
                match size {
                    Some(size) => out.push(format!("with {size}, each {each}")),
                    None => out.push(format!("of {unit}s, each {each}")),
                }
            }
        },
    }
    out
}

/// `1 to 5 items`, `at least 2 characters`, `at most 1 item`, `exactly 3 items`.
fn counted(min: Option<u64>, max: Option<u64>, unit: &str) -> Option<String> {
    let units = |n: u64| {
        if n == 1 {
            format!("{n} {unit}")
        } else {
            format!("{n} {unit}s")
        }
    };
    match (min.filter(|n| *n > 0), max) {
        (Some(lo), Some(hi)) if lo == hi => Some(format!("exactly {}", units(lo))),
        (Some(lo), Some(hi)) => Some(format!("{lo} to {}", units(hi))),
        (Some(lo), None) => Some(format!("at least {}", units(lo))),
        (None, Some(hi)) => Some(format!("at most {}", units(hi))),
        (None, None) => None,
    }
}

/// `{}` and `true`: no constraint worth a word.
fn is_anything(schema: &Value) -> bool {
    match schema {
        Value::Bool(true) => true,
        Value::Object(map) => map
            .keys()
            .all(|k| matches!(k.as_str(), "description" | "title" | "$comment")),
        _ => false,
    }
}

/// A value as a person types it in JSON: `"fast"`, `3`, `null`.
fn literal(value: &Value) -> String {
    match value {
        Value::Number(_) => number_text(value),
        other => other.to_string(),
    }
}

fn list(values: &[Value]) -> String {
    values.iter().map(literal).collect::<Vec<_>>().join(", ")
}

/// The kind of a value, with its article, as a person says it: `a string`, `an integer`,
/// `a number with a fraction`, `null`. Never the value itself (it may be a secret).
pub(super) fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "true or false",
        Value::Number(n) if n.is_f64() => match n.as_f64() {
            Some(f) if f.fract() == 0.0 => "an integer",
            _ => "a number with a fraction",
        },
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// What was sent, for a message: a number as written (`-1`, `1e+30`), anything else by its
/// kind (`a string`), never a string's text.
pub(crate) fn sent_value(value: &Value) -> String {
    match value {
        Value::Number(_) => number_text(value),
        other => kind_of(other).to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn words(schema: Value) -> String {
        noun(&schema, &schema)
    }

    #[test]
    fn numbers_say_their_bounds() {
        assert_eq!(words(json!({"type": "integer"})), "an integer");
        assert_eq!(
            words(json!({"type": "integer", "minimum": 0})),
            "an integer ≥ 0"
        );
        assert_eq!(
            words(json!({"type": "integer", "maximum": 150})),
            "an integer ≤ 150"
        );
        assert_eq!(
            words(json!({"type": "integer", "minimum": 1, "maximum": 10})),
            "an integer from 1 to 10"
        );
        assert_eq!(
            words(json!({"type": "number", "exclusiveMinimum": 0, "maximum": 1.5})),
            "a number > 0 and ≤ 1.5"
        );
        assert_eq!(
            words(json!({"type": "number", "exclusiveMaximum": 1.0})),
            "a number < 1"
        );
        assert_eq!(
            words(json!({"type": "integer", "minimum": 0, "multipleOf": 5})),
            "an integer ≥ 0 (a multiple of 5)"
        );
    }

    #[test]
    fn strings_say_their_length_pattern_and_format() {
        assert_eq!(words(json!({"type": "string"})), "a string");
        assert_eq!(
            words(json!({"type": "string", "minLength": 1, "maxLength": 2000})),
            "a string of 1 to 2000 characters"
        );
        assert_eq!(
            words(json!({"type": "string", "minLength": 1})),
            "a string of at least 1 character"
        );
        assert_eq!(
            words(json!({"type": "string", "minLength": 0, "maxLength": 4})),
            "a string of at most 4 characters"
        );
        assert_eq!(
            words(json!({"type": "string", "minLength": 3, "maxLength": 3})),
            "a string of exactly 3 characters"
        );
        assert_eq!(
            words(json!({"type": "string", "pattern": "^[a-z]+$", "format": "hostname"})),
            "a string matching the pattern ^[a-z]+$ (format hostname)"
        );
    }

    #[test]
    fn enums_consts_and_unions() {
        assert_eq!(
            words(json!({"type": "string", "enum": ["fast", "slow"]})),
            r#"one of "fast", "slow""#
        );
        assert_eq!(
            words(json!({"enum": ["a", 1, 2.0, null, true]})),
            r#"one of "a", 1, 2, null, true"#
        );
        assert_eq!(words(json!({"enum": ["only"]})), r#"exactly "only""#);
        assert_eq!(words(json!({"const": 7})), "exactly 7");
        assert_eq!(
            words(json!({"type": ["string", "null"], "maxLength": 3})),
            "a string of at most 3 characters or null"
        );
        assert_eq!(
            words(json!({"anyOf": [{"type": "integer"}, {"type": "boolean"}]})),
            "an integer or true or false"
        );
        assert_eq!(words(json!({})), "any value");
        assert_eq!(words(json!(true)), "any value");
        assert_eq!(words(json!(false)), "nothing");
        assert_eq!(words(json!({"type": "object"})), "an object");
    }

    #[test]
    fn arrays_say_their_items() {
        assert_eq!(
            words(json!({"type": "array", "items": {"type": "string"}})),
            "an array of strings"
        );
        assert_eq!(
            words(json!({"type": "array", "items": {"type": "integer", "minimum": 0}})),
            "an array of integers ≥ 0"
        );
        assert_eq!(
            words(json!({"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 1})),
            r#"an array with at least 1 item, each one of "a", "b""#
        );
        assert_eq!(
            words(json!({"type": "array", "items": {"type": ["string", "null"]}})),
            "an array of items, each a string or null"
        );
        assert_eq!(
            words(json!({"type": "array", "maxItems": 5, "uniqueItems": true})),
            "an array with at most 5 distinct items"
        );
        assert_eq!(
            words(json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true})),
            "an array of strings with none repeated"
        );
        assert_eq!(
            words(
                json!({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3})
            ),
            "an array of integers with 2 to 3 items"
        );
        assert_eq!(
            words(
                json!({"type": "array", "items": {"type": "array", "items": {"type": "number"}}})
            ),
            "an array of arrays of numbers"
        );
        assert_eq!(words(json!({"type": "array", "items": {}})), "an array");
    }

    #[test]
    fn local_references_are_followed_and_cycles_stop() {
        let root = json!({
            "$defs": {
                "Tag": {"type": "string", "maxLength": 8},
                "Loop": {"$ref": "#/$defs/Loop"}
            },
            "properties": {}
        });
        assert_eq!(
            noun(
                &json!({"type": "array", "items": {"$ref": "#/$defs/Tag"}}),
                &root
            ),
            "an array of strings of at most 8 characters"
        );
        assert_eq!(noun(&json!({"$ref": "#/$defs/Loop"}), &root), "any value");
        assert_eq!(noun(&json!({"$ref": "#/nowhere"}), &root), "any value");
    }

    #[test]
    fn a_value_is_named_by_its_kind_never_quoted() {
        assert_eq!(kind_of(&json!("hunter2")), "a string");
        assert_eq!(kind_of(&json!(1.5)), "a number with a fraction");
        assert_eq!(kind_of(&json!(2.0)), "an integer");
        assert_eq!(kind_of(&json!(-3)), "an integer");
        assert_eq!(kind_of(&json!(null)), "null");
        assert_eq!(kind_of(&json!([1])), "an array");
        assert_eq!(kind_of(&json!({})), "an object");
        assert_eq!(kind_of(&json!(false)), "true or false");
        assert_eq!(sent_value(&json!(-1)), "-1");
        assert_eq!(sent_value(&json!(1e30)), "1e+30");
        assert_eq!(sent_value(&json!("hunter2")), "a string");
    }
}
