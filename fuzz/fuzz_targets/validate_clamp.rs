//! validate + clamp over generated schemas and arguments.
//!
//! The input builds a small object schema from a fixed menu of keywords (types, bounds,
//! lengths, enums, `nullable`, `required`, `additionalProperties`), clamps on some fields,
//! and an argument object. The schema is registered on a tool that returns the arguments it
//! received (registration may refuse it), and the call goes through the whole pipeline.
//!
//! Oracles:
//! - the call succeeds exactly when milpa's general validator accepts the arguments, and
//!   that validator agrees with `jsonschema`'s own draft 2020-12 validator on schemas
//!   without `nullable` (which milpa rewrites);
//! - the hand-rolled fast path never accepts what the general validator refuses;
//! - the tool only ever sees clamped values: numbers inside a clamp's range, strings no
//!   longer than its `maxLength`.

#![no_main]

use std::sync::OnceLock;

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use milpa::schema::InputValidator;
use milpa::{Clamp, ToolContext, ToolDefinition, ToolRegistry};
use serde_json::{Map, Number, Value, json};
use tokio::runtime::Runtime;

const NAMES: [&str; 4] = ["a", "b", "c", "confirm"];

#[derive(Debug, Clone, Copy, Arbitrary)]
enum Kind {
    String,
    Integer,
    Number,
    Boolean,
    Null,
    Array,
    Object,
    Untyped,
    Union,
}

/// A scalar drawn from values that sit on edges: zero, negatives, big integers, floats that
/// are whole, unicode text.
#[derive(Debug, Clone, Arbitrary)]
enum Scalar {
    Null,
    Bool(bool),
    Int(i64),
    Big(u64),
    Float(f64),
    Whole(i32),
    Text(String),
    Short(u8),
}

impl Scalar {
    fn value(&self) -> Value {
        match self {
            Scalar::Null => Value::Null,
            Scalar::Bool(b) => json!(b),
            Scalar::Int(n) => json!(n),
            Scalar::Big(n) => json!(n),
            Scalar::Float(f) => Number::from_f64(*f).map_or(Value::Null, Value::Number),
            Scalar::Whole(n) => Number::from_f64(f64::from(*n)).map_or(Value::Null, Value::Number),
            Scalar::Text(s) => json!(s),
            Scalar::Short(n) => json!("é".repeat(usize::from(*n % 8))),
        }
    }
}

#[derive(Debug, Clone, Arbitrary)]
enum Arg {
    Scalar(Scalar),
    List(Vec<Scalar>),
    Object(Vec<(u8, Scalar)>),
}

impl Arg {
    fn value(&self) -> Value {
        match self {
            Arg::Scalar(s) => s.value(),
            Arg::List(items) => Value::Array(items.iter().take(4).map(Scalar::value).collect()),
            Arg::Object(fields) => Value::Object(
                fields
                    .iter()
                    .take(4)
                    .map(|(k, v)| (NAMES[usize::from(*k) % NAMES.len()].to_owned(), v.value()))
                    .collect(),
            ),
        }
    }
}

#[derive(Debug, Clone, Arbitrary)]
struct Property {
    kind: Kind,
    minimum: Option<Scalar>,
    maximum: Option<Scalar>,
    exclusive_minimum: Option<i16>,
    min_length: Option<u8>,
    max_length: Option<u8>,
    allowed: Option<Vec<Scalar>>,
    nullable: Option<bool>,
    format: bool,
    default: Option<Scalar>,
}

impl Property {
    fn schema(&self) -> Value {
        let mut map = Map::new();
        let kind = match self.kind {
            Kind::String => Some(json!("string")),
            Kind::Integer => Some(json!("integer")),
            Kind::Number => Some(json!("number")),
            Kind::Boolean => Some(json!("boolean")),
            Kind::Null => Some(json!("null")),
            Kind::Array => Some(json!("array")),
            Kind::Object => Some(json!("object")),
            Kind::Untyped => None,
            Kind::Union => Some(json!(["integer", "string"])),
        };
        if let Some(kind) = kind {
            map.insert("type".into(), kind);
        }
        // Bounds take numbers; anything else makes an invalid schema, which registration
        // must refuse cleanly.
        if let Some(m) = &self.minimum {
            map.insert("minimum".into(), m.value());
        }
        if let Some(m) = &self.maximum {
            map.insert("maximum".into(), m.value());
        }
        if let Some(m) = self.exclusive_minimum {
            map.insert("exclusiveMinimum".into(), json!(m));
        }
        if let Some(n) = self.min_length {
            map.insert("minLength".into(), json!(n % 8));
        }
        if let Some(n) = self.max_length {
            map.insert("maxLength".into(), json!(n % 8));
        }
        if let Some(values) = &self.allowed {
            map.insert(
                "enum".into(),
                Value::Array(values.iter().take(4).map(Scalar::value).collect()),
            );
        }
        if let Some(nullable) = self.nullable {
            map.insert("nullable".into(), json!(nullable));
        }
        if self.format {
            map.insert("format".into(), json!("email"));
        }
        if let Some(d) = &self.default {
            map.insert("default".into(), d.value());
        }
        Value::Object(map)
    }
}

#[derive(Debug, Clone, Arbitrary)]
enum ClampSpec {
    Range(i32, i32),
    FloatRange(f64, f64),
    MaxLength(u8),
}

impl ClampSpec {
    fn clamp(&self) -> Option<Clamp> {
        match self {
            ClampSpec::Range(lo, hi) => Some(Clamp::range(*lo, *hi)),
            ClampSpec::FloatRange(lo, hi) => {
                Some(Clamp::range(Number::from_f64(*lo)?, Number::from_f64(*hi)?))
            }
            ClampSpec::MaxLength(n) => Some(Clamp::max_length(usize::from(*n % 8))),
        }
    }
}

#[derive(Debug, Arbitrary)]
struct Case {
    properties: Vec<(u8, Property)>,
    required: Vec<u8>,
    additional: Option<bool>,
    clamps: Vec<(u8, ClampSpec)>,
    args: Vec<(u8, Arg)>,
}

fn name(index: u8) -> String {
    NAMES[usize::from(index) % NAMES.len()].to_owned()
}

fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
    })
}

fn mentions_nullable(schema: &Value) -> bool {
    match schema {
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| k == "nullable" || mentions_nullable(v)),
        Value::Array(items) => items.iter().any(mentions_nullable),
        _ => false,
    }
}

fn check(case: &Case) {
    let mut properties = Map::new();
    for (index, property) in case.properties.iter().take(4) {
        properties.insert(name(*index), property.schema());
    }
    let mut schema = Map::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), Value::Object(properties));
    if !case.required.is_empty() {
        let required: Vec<String> = case.required.iter().take(4).map(|i| name(*i)).collect();
        schema.insert("required".into(), json!(required));
    }
    if let Some(additional) = case.additional {
        schema.insert("additionalProperties".into(), json!(additional));
    }
    let schema = Value::Object(schema);
    let clamps: Vec<(String, Clamp)> = case
        .clamps
        .iter()
        .take(3)
        .filter_map(|(i, spec)| Some((name(*i), spec.clamp()?)))
        .collect();
    let mut definition = ToolDefinition::builder("probe").input_schema(schema.clone());
    for (field, clamp) in &clamps {
        definition = definition.clamp(field.clone(), clamp.clone());
    }
    let definition = definition.sync(|args, _| args.clone());
    let mut registry = ToolRegistry::new();
    let Ok(validator) = InputValidator::compile(&schema) else {
        // milpa refused the schema; so must registration.
        assert!(
            registry.register(definition).is_err(),
            "registration took a schema compile refused"
        );
        return;
    };
    if registry.register(definition).is_err() {
        // A clamp on a field the schema does not declare.
        return;
    }
    let args = Value::Object(
        case.args
            .iter()
            .take(5)
            .map(|(i, arg)| (name(*i), arg.value()))
            .collect(),
    );

    let accepted = validator.general_accepts(&args);
    if validator.fast_accepts(&args) == Some(true) {
        assert!(
            accepted,
            "the fast path accepted what the general validator refuses: {schema} {args}"
        );
    }
    if !mentions_nullable(&schema) {
        if let Ok(oracle) = jsonschema::draft202012::options()
            .should_validate_formats(false)
            .build(&schema)
        {
            assert_eq!(
                oracle.is_valid(&args),
                accepted,
                "milpa and jsonschema disagree: {schema} {args}"
            );
        }
    }

    let ctx = ToolContext::cli();
    let result = runtime().block_on(registry.call("probe", args.clone(), &ctx));
    assert_eq!(
        result.success, accepted,
        "the call's outcome is not the validator's: {schema} {args} -> {:?}",
        result.error
    );
    if !result.success {
        return;
    }
    let seen = result
        .data
        .as_object()
        .expect("the tool returns its arguments");
    for (field, clamp) in &clamps {
        let Some(value) = seen.get(field) else {
            continue;
        };
        match value {
            Value::Number(n) => {
                let x = n.as_f64().unwrap_or(0.0);
                let lo = clamp.min.as_ref().and_then(Number::as_f64);
                let hi = clamp.max.as_ref().and_then(Number::as_f64);
                // A range whose bounds are crossed has no inside; the value is at one bound.
                if let (Some(lo), Some(hi)) = (lo, hi) {
                    if lo <= hi {
                        assert!(
                            lo <= x && x <= hi,
                            "{field} = {x} escaped its clamp [{lo}, {hi}]"
                        );
                    }
                }
            }
            Value::String(text) => {
                if let Some(limit) = clamp.max_length {
                    assert!(
                        text.chars().count() <= limit,
                        "{field} kept more than {limit} characters"
                    );
                }
            }
            _ => {}
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Unstructured::new(data);
    if let Ok(case) = Case::arbitrary(&mut input) {
        check(&case);
    }
});
