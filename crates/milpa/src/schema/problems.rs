//! [`ArgumentProblem`]: one thing wrong with a call's arguments, in the original's message
//! and in words a person reads at a terminal.

use jsonschema::ValidationError;
use jsonschema::error::ValidationErrorKind;
use serde_json::{Map, Value};

use super::messages;
use super::words::{kind_of, noun};
use crate::escape::EscapeControl;

/// One thing wrong with a call's arguments.
///
/// `message` is what the call's result says (the original's words, fixed by the behaviour
/// spec: `id: Expected integer, got string`); `words` says the same for a person, from the
/// tool's schema: `'id' must be an integer ≥ 1 (got a string)`. Neither quotes a string
/// the caller sent (it may be a secret); `words` shows a number that is out of bounds.
///
/// ```
/// use milpa::schema::InputValidator;
/// use serde_json::json;
///
/// let schema = json!({
///     "type": "object",
///     "properties": {"id": {"type": "integer", "minimum": 1}},
///     "required": ["id"],
///     "additionalProperties": false
/// });
/// let validator = InputValidator::compile(&schema).unwrap();
/// let problems = validator.problems(&json!({"id": "abc"}));
/// assert_eq!(problems[0].path, "id");
/// assert_eq!(problems[0].message, "id: Expected integer, got string");
/// assert_eq!(problems[0].words, "'id' must be an integer ≥ 1 (got a string)");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ArgumentProblem {
    /// Where: `post.tags[2]`; empty for the argument object itself.
    pub path: String,
    /// The message the call's result carries for it.
    pub message: String,
    /// The same, in the schema's words, for a person.
    pub words: String,
}

/// Appends the problems of one validation error (an `additionalProperties` error names
/// several keys, one problem each), each with its sort rank.
pub(super) fn explain(
    error: &ValidationError<'_>,
    root: &Value,
    out: &mut Vec<(u8, ArgumentProblem)>,
) {
    let mut found = Vec::new();
    messages::describe(error, &mut found);
    let path = messages::dotted_path(error);
    // The schema the failing keyword sits in: its location minus the keyword.
    let location = error.schema_path().as_str();
    let owner = location
        .rfind('/')
        .and_then(|slash| root.pointer(&location[..slash]));
    let words: Vec<(String, String)> = match (error.kind(), owner) {
        (ValidationErrorKind::Required { property }, owner) => {
            let key = property
                .as_str()
                .map_or_else(|| property.to_string(), str::to_owned);
            let full = messages::join(&path, &key);
            let schema = owner
                .and_then(|o| o.get("properties"))
                .and_then(|p| p.get(&key));
            let words = match schema {
                Some(schema) => format!("{} is required ({})", quoted(&full), noun(schema, root)),
                None => format!("{} is required", quoted(&full)),
            };
            vec![(full, words)]
        }
        (
            ValidationErrorKind::AdditionalProperties { unexpected }
            | ValidationErrorKind::UnevaluatedProperties { unexpected },
            owner,
        ) => {
            let known = known_names(owner.and_then(|o| o.get("properties")));
            unexpected
                .iter()
                .map(|key| {
                    let full = messages::join(&path, key);
                    let words = if path.is_empty() {
                        format!("unknown argument {} (this tool takes {known})", quoted(key))
                    } else {
                        format!(
                            "unknown field {} ({} has {known})",
                            quoted(&full),
                            quoted(&path)
                        )
                    };
                    (full, words)
                })
                .collect()
        }
        (ValidationErrorKind::FalseSchema, _) => {
            vec![(path.clone(), format!("{} is not allowed", subject(&path)))]
        }
        (ValidationErrorKind::Not { schema }, _) => vec![(
            path.clone(),
            format!("{} must not be {}", subject(&path), noun(schema, root)),
        )],
        (kind, Some(owner)) => {
            let got = got(kind, error.instance());
            vec![(
                path.clone(),
                format!("{} must be {}{got}", subject(&path), noun(owner, root)),
            )]
        }
        // Not found in the schema (it should always be): the message says it best.
        (_, None) => found
            .iter()
            .map(|(_, m)| (path.clone(), m.clone()))
            .collect(),
    };
    for ((rank, message), (path, words)) in found.into_iter().zip(words) {
        out.push((
            rank,
            ArgumentProblem {
                path,
                message,
                words,
            },
        ));
    }
}

/// What was sent, when saying it helps and reveals nothing: its kind for a type error, the
/// number for a bound, the length for a length.
fn got(kind: &ValidationErrorKind, instance: &Value) -> String {
    use ValidationErrorKind as K;
    match kind {
        K::Type { .. } => format!(" (got {})", kind_of(instance)),
        K::Minimum { .. }
        | K::Maximum { .. }
        | K::ExclusiveMinimum { .. }
        | K::ExclusiveMaximum { .. }
        | K::MultipleOf { .. }
            if instance.is_number() =>
        {
            format!(" (got {})", messages::number_text(instance))
        }
        K::MinLength { .. } | K::MaxLength { .. } => match instance.as_str() {
            Some(text) => format!(" (got {})", units(text.chars().count(), "character")),
            None => String::new(),
        },
        K::MinItems { .. } | K::MaxItems { .. } => match instance.as_array() {
            Some(items) => format!(" (got {})", units(items.len(), "item")),
            None => String::new(),
        },
        _ => String::new(),
    }
}

fn units(n: usize, unit: &str) -> String {
    if n == 1 {
        format!("1 {unit}")
    } else {
        format!("{n} {unit}s")
    }
}

/// `'id'`, or `the arguments` for the argument object itself.
fn subject(path: &str) -> String {
    if path.is_empty() {
        "the arguments".to_owned()
    } else {
        quoted(path)
    }
}

/// A name between single quotes, its control and format characters escaped (a key comes
/// from the caller and is printed on a terminal).
fn quoted(name: &str) -> String {
    format!("'{}'", EscapeControl::all(name))
}

/// `a, b` for the declared properties, `none` when there are none.
fn known_names(properties: Option<&Value>) -> String {
    match properties.and_then(Value::as_object).map(Map::keys) {
        Some(keys) if keys.len() > 0 => keys
            .map(|k| EscapeControl::all(k).to_string())
            .collect::<Vec<_>>()
            .join(", "),
        _ => "none".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::InputValidator;
    use serde_json::{Value, json};

    fn words(schema: Value, args: Value) -> Vec<String> {
        InputValidator::compile(&schema)
            .unwrap()
            .problems(&args)
            .into_iter()
            .map(|p| p.words)
            .collect()
    }

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "id": {"type": "integer", "minimum": 0},
                "a": {"type": "number"},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                "mode": {"type": "string", "enum": ["fast", "slow"]},
                "name": {"type": "string", "minLength": 2, "maxLength": 4},
                "code": {"type": "string", "pattern": "^[a-z]+$"},
                "ratio": {"type": "number", "exclusiveMinimum": 0, "maximum": 1}
            },
            "required": ["id"],
            "additionalProperties": false
        })
    }

    #[test]
    fn every_keyword_the_tools_use_in_words() {
        assert_eq!(
            words(schema(), json!({"id": "abc"})),
            ["'id' must be an integer ≥ 0 (got a string)"]
        );
        assert_eq!(
            words(schema(), json!({"id": -1})),
            ["'id' must be an integer ≥ 0 (got -1)"]
        );
        assert_eq!(
            words(schema(), json!({"id": 1, "a": "x"})),
            ["'a' must be a number (got a string)"]
        );
        assert_eq!(
            words(schema(), json!({"id": 1, "tags": "x"})),
            ["'tags' must be an array of strings with at most 2 items (got a string)"]
        );
        assert_eq!(
            words(schema(), json!({"id": 1, "tags": ["a", "b", "c"]})),
            ["'tags' must be an array of strings with at most 2 items (got 3 items)"]
        );
        assert_eq!(
            words(schema(), json!({"id": 1, "tags": ["a", 3]})),
            ["'tags[1]' must be a string (got an integer)"]
        );
        assert_eq!(
            words(schema(), json!({"id": 1, "mode": "medium"})),
            [r#"'mode' must be one of "fast", "slow""#]
        );
        assert_eq!(
            words(schema(), json!({"id": 1, "name": "a"})),
            ["'name' must be a string of 2 to 4 characters (got 1 character)"]
        );
        assert_eq!(
            words(schema(), json!({"id": 1, "code": "ABC"})),
            ["'code' must be a string matching the pattern ^[a-z]+$"]
        );
        assert_eq!(
            words(schema(), json!({"id": 1, "ratio": 0})),
            ["'ratio' must be a number > 0 and ≤ 1 (got 0)"]
        );
        assert_eq!(
            words(schema(), json!({})),
            ["'id' is required (an integer ≥ 0)"]
        );
        assert_eq!(
            words(schema(), json!({"id": 1, "zz": 1})),
            ["unknown argument 'zz' (this tool takes id, a, tags, mode, name, code, ratio)"]
        );
    }

    #[test]
    fn the_message_stays_the_originals_and_the_order_is_kept() {
        let problems = InputValidator::compile(&schema())
            .unwrap()
            .problems(&json!({"zz": 1, "a": "x"}));
        let pairs: Vec<(&str, &str)> = problems
            .iter()
            .map(|p| (p.path.as_str(), p.message.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("id", "Missing required field: id"),
                ("a", "a: Expected number, got string"),
                ("zz", "Unknown property: zz"),
            ]
        );
        let validator = InputValidator::compile(&schema()).unwrap();
        let messages: Vec<String> = problems.into_iter().map(|p| p.message).collect();
        assert_eq!(
            validator.validate(&json!({"zz": 1, "a": "x"})).unwrap_err(),
            messages
        );
    }

    #[test]
    fn nested_objects_and_references_name_their_field() {
        let schema = json!({
            "$defs": {"Tag": {"type": "string", "maxLength": 3}},
            "properties": {"post": {
                "type": "object",
                "properties": {
                    "title": {"type": "string"},
                    "tags": {"type": "array", "items": {"$ref": "#/$defs/Tag"}}
                },
                "required": ["title"],
                "additionalProperties": false
            }}
        });
        assert_eq!(
            words(schema, json!({"post": {"tags": ["abcd"], "x\u{1b}[2J": 1}})),
            [
                "'post.title' is required (a string)",
                "'post.tags[0]' must be a string of at most 3 characters (got 4 characters)",
                "unknown field 'post.x\\u{1b}[2J' ('post' has title, tags)",
            ]
        );
    }

    #[test]
    fn a_string_sent_is_never_repeated() {
        let secret = "hunter2-SECRET";
        for args in [
            json!({"id": secret}),
            json!({"id": 1, "mode": secret}),
            json!({"id": 1, "code": secret}),
            json!({"id": 1, "name": secret}),
        ] {
            for problem in InputValidator::compile(&schema()).unwrap().problems(&args) {
                assert!(!problem.words.contains(secret), "{}", problem.words);
                assert!(!problem.message.contains(secret), "{}", problem.message);
            }
        }
    }

    #[test]
    fn valid_arguments_and_empty_schemas_have_no_problems() {
        assert!(words(schema(), json!({"id": 3, "mode": "fast"})).is_empty());
        assert!(words(json!({}), json!({"anything": 1})).is_empty());
    }
}
