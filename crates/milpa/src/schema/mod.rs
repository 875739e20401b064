//! Argument validation: a tool's input schema compiled once, and errors in the original's words.
//!
//! Validation is full JSON Schema 2020-12 (the `jsonschema` crate, no network `$ref`). The
//! keywords the original validated keep its messages byte for byte (`Missing required field:
//! x`, `x: Expected integer, got string`, `Unknown property: y`, …); nested failures name
//! their path (`post.tags[2]: …`); other keywords get a message of ours
//! after the path, which never quotes the value (messages reach audit logs).
//!
//! For a person (or a model) the same failures are also said in the schema's words
//! ([`InputValidator::problems`]: `'id' must be an integer ≥ 0 (got a string)`): the
//! refused call's `message` carries them, its `error` keeps the original's.

mod flat;
mod messages;
mod path;
mod problems;
mod words;

use flat::FlatSchema;

use serde_json::{Map, Value};

pub use messages::json_type_name;
pub(crate) use path::normalise_args;
pub use path::{PathRefusal, PathRule};
pub use problems::ArgumentProblem;
pub(crate) use words::sent_value;

/// A refused input schema, found at registration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid input schema: {0}")]
pub struct SchemaError(pub String);

/// A tool's input schema, compiled once.
pub struct InputValidator {
    /// `None` for an empty schema (`{}`), which accepts any argument object.
    validator: Option<jsonschema::Validator>,
    /// The hand-rolled check for flat schemas, tried first.
    flat: Option<FlatSchema>,
    /// The schema as compiled (`nullable` honoured), which [`problems`](Self::problems)
    /// puts into words.
    schema: Value,
}

impl std::fmt::Debug for InputValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InputValidator")
            .field("empty", &self.validator.is_none())
            .field("flat", &self.flat.is_some())
            .finish()
    }
}

impl InputValidator {
    /// Whether the general validator accepts `args` (bypassing the fast path; for tests).
    #[doc(hidden)]
    pub fn general_accepts(&self, args: &Value) -> bool {
        self.validator.as_ref().is_none_or(|v| v.is_valid(args))
    }

    /// Whether the fast path applies to this schema and accepts `args` (for tests).
    #[doc(hidden)]
    pub fn fast_accepts(&self, args: &Value) -> Option<bool> {
        self.flat.as_ref().map(|flat| flat.accepts(args))
    }
}

impl InputValidator {
    /// Compiles `schema`. An empty object accepts every argument object; otherwise the
    /// schema must describe an object (a missing `type` reads as `object`) and be valid
    /// JSON Schema.
    pub fn compile(schema: &Value) -> Result<InputValidator, SchemaError> {
        let Value::Object(map) = schema else {
            return Err(SchemaError("the input schema must be a JSON object".into()));
        };
        if map.is_empty() {
            return Ok(InputValidator {
                validator: None,
                flat: None,
                schema: Value::Object(Map::new()),
            });
        }
        match map.get("type") {
            None => {}
            Some(Value::String(t)) if t == "object" => {}
            Some(other) => {
                return Err(SchemaError(format!(
                    "the input schema must have type \"object\", not {other}"
                )));
            }
        }
        let mut prepared = schema.clone();
        if let Value::Object(root) = &mut prepared {
            root.entry("type").or_insert_with(|| Value::from("object"));
        }
        honour_nullable(&mut prepared);
        // Formats are annotations in 2020-12; we say so explicitly, since the fast path
        // relies on it.
        let validator = jsonschema::draft202012::options()
            .should_validate_formats(false)
            .build(&prepared)
            .map_err(|e| SchemaError(e.to_string()))?;
        let flat = FlatSchema::from_schema(&prepared);
        Ok(InputValidator {
            validator: Some(validator),
            flat,
            schema: prepared,
        })
    }

    /// True if the schema accepts anything (nothing to check).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.validator.is_none()
    }

    /// Checks `args`; on failure, every message in the original's order (missing fields,
    /// then per-value failures, then unknown properties).
    pub fn validate(&self, args: &Value) -> Result<(), Vec<String>> {
        let Some(validator) = &self.validator else {
            return Ok(());
        };
        if self.flat.as_ref().is_some_and(|flat| flat.accepts(args)) || validator.is_valid(args) {
            return Ok(());
        }
        let mut errors: Vec<(u8, String)> = Vec::new();
        for error in validator.iter_errors(args) {
            messages::describe(&error, &mut errors);
        }
        errors.sort_by_key(|(rank, _)| *rank);
        Err(errors.into_iter().map(|(_, m)| m).collect())
    }

    /// What is wrong with `args`, in the order of [`validate`](Self::validate)'s messages,
    /// each with its message and the same said in the schema's words; empty when `args`
    /// are valid. For people (the slow path: it walks every error and the schema).
    pub fn problems(&self, args: &Value) -> Vec<ArgumentProblem> {
        let Some(validator) = &self.validator else {
            return Vec::new();
        };
        let mut problems = Vec::new();
        for error in validator.iter_errors(args) {
            problems::explain(&error, &self.schema, &mut problems);
        }
        problems.sort_by_key(|(rank, _)| *rank);
        problems.into_iter().map(|(_, p)| p).collect()
    }
}

/// Keywords whose values are data, not schemas: never rewritten.
const DATA_KEYWORDS: [&str; 4] = ["enum", "const", "default", "examples"];

/// Rewrites OpenAPI's `nullable: true` (which 2020-12 ignores) as a `null` type, so the
/// flag the original emitted for `?T` parameters is honoured.
fn honour_nullable(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            if map.get("nullable") == Some(&Value::Bool(true)) {
                allow_null(map);
            }
            for (key, value) in map.iter_mut() {
                if !DATA_KEYWORDS.contains(&key.as_str()) {
                    honour_nullable(value);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(honour_nullable),
        _ => {}
    }
}

fn allow_null(map: &mut Map<String, Value>) {
    match map.get_mut("type") {
        Some(Value::String(t)) if t != "null" => {
            let t = std::mem::take(t);
            map.insert(
                "type".into(),
                Value::Array(vec![Value::String(t), "null".into()]),
            );
        }
        Some(Value::Array(types)) if !types.iter().any(|t| t == "null") => {
            types.push("null".into());
        }
        _ => {}
    }
    if let Some(Value::Array(options)) = map.get_mut("enum")
        && !options.contains(&Value::Null)
    {
        options.push(Value::Null);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errors(schema: Value, args: Value) -> Vec<String> {
        InputValidator::compile(&schema)
            .unwrap()
            .validate(&args)
            .err()
            .unwrap_or_default()
    }

    #[test]
    fn nullable_accepts_null() {
        let schema = json!({"properties": {"x": {"type": "string", "nullable": true}}});
        assert!(errors(schema.clone(), json!({"x": null})).is_empty());
        assert_eq!(
            errors(schema, json!({"x": 1})),
            ["x: Expected string, got integer"]
        );
    }

    #[test]
    fn refuses_non_object_and_invalid_schemas() {
        assert!(InputValidator::compile(&json!({"type": "array"})).is_err());
        assert!(InputValidator::compile(&json!({"type": "object", "properties": 3})).is_err());
        assert!(InputValidator::compile(&json!({"$ref": "https://example.com/s.json"})).is_err());
    }
}
