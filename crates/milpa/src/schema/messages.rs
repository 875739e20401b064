//! Turns `jsonschema` errors into the original's messages.

use std::fmt::Write;

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::paths::LocationSegment;
use jsonschema::{JsonType, ValidationError};
use serde_json::Value;

/// Sort rank: the original reports missing fields, then value failures, then unknown keys.
const RANK_REQUIRED: u8 = 0;
const RANK_VALUE: u8 = 1;
const RANK_UNKNOWN: u8 = 2;

/// The type name the original printed for a value (PHP's `gettype` spelling, except that a
/// JSON object is an `object`).
pub fn json_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "NULL",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "double",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `post.tags[2]` for the instance path `/post/tags/2`; empty at the top.
pub(super) fn dotted_path(error: &ValidationError<'_>) -> String {
    let mut path = String::new();
    for segment in error.instance_path().segments() {
        match segment {
            LocationSegment::Property(name) => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&name);
            }
            LocationSegment::Index(index) => {
                let _ = write!(path, "[{index}]");
            }
        }
    }
    path
}

pub(super) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// A number as the original printed it: `5`, `1.5` (an integral float has no `.0`).
pub(super) fn number_text(value: &Value) -> String {
    match value.as_f64() {
        Some(f) if value.is_f64() && f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
        _ => value.to_string(),
    }
}

/// An enum option as the original printed it (PHP string conversion).
fn option_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Bool(true) => "1".into(),
        Value::Bool(false) | Value::Null => String::new(),
        Value::Number(_) => number_text(value),
        other => other.to_string(),
    }
}

fn type_text(kind: &TypeKind) -> String {
    let names: Vec<&str> = match kind {
        TypeKind::Single(t) => vec![t.as_str()],
        TypeKind::Multiple(set) => {
            let all: Vec<JsonType> = set.iter().collect();
            let non_null: Vec<&str> = all
                .iter()
                .filter(|t| **t != JsonType::Null)
                .map(|t| t.as_str())
                .collect();
            if non_null.is_empty() {
                vec!["null"]
            } else {
                non_null
            }
        }
    };
    names.join(" or ")
}

/// Appends the messages for one error (an `additionalProperties` error may name several keys).
pub(super) fn describe(error: &ValidationError<'_>, out: &mut Vec<(u8, String)>) {
    let path = dotted_path(error);
    let name = if path.is_empty() {
        "arguments"
    } else {
        path.as_str()
    };
    match error.kind() {
        ValidationErrorKind::Required { property } => {
            let key = property
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| property.to_string());
            out.push((
                RANK_REQUIRED,
                format!("Missing required field: {}", join(&path, &key)),
            ));
        }
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            for key in unexpected {
                out.push((
                    RANK_UNKNOWN,
                    format!("Unknown property: {}", join(&path, key)),
                ));
            }
        }
        ValidationErrorKind::Type { kind } => {
            let got = json_type_name(error.instance());
            out.push((
                RANK_VALUE,
                format!("{name}: Expected {}, got {got}", type_text(kind)),
            ));
        }
        ValidationErrorKind::Enum { options } => {
            let values: Vec<String> = match options.as_ref() {
                Value::Array(items) => items.iter().map(option_text).collect(),
                other => vec![option_text(other)],
            };
            out.push((
                RANK_VALUE,
                format!("{name}: Value must be one of: {}", values.join(", ")),
            ));
        }
        ValidationErrorKind::Minimum { limit } => {
            out.push((
                RANK_VALUE,
                format!("{name}: Value too small (min: {})", number_text(limit)),
            ));
        }
        ValidationErrorKind::Maximum { limit } => {
            out.push((
                RANK_VALUE,
                format!("{name}: Value too large (max: {})", number_text(limit)),
            ));
        }
        ValidationErrorKind::MinLength { limit } => {
            out.push((
                RANK_VALUE,
                format!("{name}: String too short (min: {limit})"),
            ));
        }
        ValidationErrorKind::MaxLength { limit } => {
            out.push((
                RANK_VALUE,
                format!("{name}: String too long (max: {limit})"),
            ));
        }
        ValidationErrorKind::UnevaluatedProperties { unexpected } => {
            for key in unexpected {
                out.push((
                    RANK_UNKNOWN,
                    format!("Unknown property: {}", join(&path, key)),
                ));
            }
        }
        other => out.push((RANK_VALUE, format!("{name}: {}", generic_message(other)))),
    }
}

/// Messages for the other keywords. They never quote the offending value: these messages
/// reach audit logs, and the value may be a secret.
fn generic_message(kind: &ValidationErrorKind) -> String {
    use ValidationErrorKind as K;
    match kind {
        K::Constant { expected_value } => format!("Value must be {expected_value}"),
        K::Pattern { pattern } => format!("Value does not match pattern '{pattern}'"),
        K::Format { format } => format!("Value is not a valid '{format}'"),
        K::ExclusiveMinimum { limit } => {
            format!("Value must be greater than {}", number_text(limit))
        }
        K::ExclusiveMaximum { limit } => format!("Value must be less than {}", number_text(limit)),
        K::MultipleOf { multiple_of } => format!("Value must be a multiple of {multiple_of}"),
        K::MinItems { limit } => format!("Array too short (min items: {limit})"),
        K::MaxItems { limit } => format!("Array too long (max items: {limit})"),
        K::AdditionalItems { limit } => format!("Array too long (max items: {limit})"),
        K::UnevaluatedItems { .. } => "Array has unexpected items".to_owned(),
        K::UniqueItems => "Array items must be unique".to_owned(),
        K::Contains => "Array does not contain a required item".to_owned(),
        K::MinProperties { limit } => format!("Object has too few properties (min: {limit})"),
        K::MaxProperties { limit } => format!("Object has too many properties (max: {limit})"),
        K::PropertyNames { .. } => "Object has a property name that is not allowed".to_owned(),
        K::AnyOf { .. } | K::OneOfNotValid { .. } => {
            "Value does not match any allowed schema".to_owned()
        }
        K::OneOfMultipleValid { .. } => "Value matches more than one exclusive schema".to_owned(),
        K::Not { .. } => "Value matches a schema it must not match".to_owned(),
        K::FalseSchema => "No value is allowed here".to_owned(),
        K::ContentEncoding { content_encoding } => {
            format!("Value is not valid '{content_encoding}'")
        }
        K::ContentMediaType { content_media_type } => {
            format!("Value is not valid '{content_media_type}'")
        }
        K::Custom { message, .. } => message.clone(),
        _ => "Value is invalid".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::InputValidator;
    use serde_json::{Value, json};

    fn check(schema: Value, args: Value) -> String {
        InputValidator::compile(&schema)
            .unwrap()
            .validate(&args)
            .err()
            .map(|e| e.join("; "))
            .unwrap_or_default()
    }

    #[test]
    fn original_messages_for_the_common_keywords() {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 2, "maxLength": 4},
                "age": {"type": "integer", "minimum": 0, "maximum": 150},
                "ratio": {"type": "number", "maximum": 1.5},
                "kind": {"enum": ["a", true, null, 1]},
                "id": {}
            },
            "required": ["name", "id"],
            "additionalProperties": false
        });
        assert_eq!(
            check(schema.clone(), json!({"age": "x", "zz": 1})),
            "Missing required field: name; Missing required field: id; \
             age: Expected integer, got string; Unknown property: zz"
        );
        assert_eq!(
            check(
                schema.clone(),
                json!({"name": "a", "id": 1, "age": -1, "ratio": 2.0, "kind": "b"})
            ),
            "name: String too short (min: 2); age: Value too small (min: 0); \
             ratio: Value too large (max: 1.5); kind: Value must be one of: a, 1, , 1"
        );
        assert_eq!(
            check(schema, json!({"name": "abcde", "id": 1, "age": 200.0})),
            "name: String too long (max: 4); age: Value too large (max: 150)"
        );
    }

    #[test]
    fn nested_failures_name_their_path() {
        let schema = json!({
            "properties": {"post": {
                "type": "object",
                "properties": {"tags": {"type": "array", "items": {"type": "string"}}},
                "required": ["title"],
                "additionalProperties": false
            }}
        });
        assert_eq!(
            check(schema, json!({"post": {"tags": ["a", "b", 3], "x": 1}})),
            "Missing required field: post.title; post.tags[2]: Expected string, got integer; \
             Unknown property: post.x"
        );
    }

    #[test]
    fn other_keywords_name_the_path_and_never_quote_the_value() {
        let schema = json!({"properties": {"code": {"type": "string", "pattern": "^[a-z]+$"}}});
        let message = check(schema, json!({"code": "SECRET"}));
        assert_eq!(message, "code: Value does not match pattern '^[a-z]+$'");
        assert!(
            !message.contains("SECRET"),
            "messages never quote the value"
        );
    }
}
