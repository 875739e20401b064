//! The hand-rolled check for flat schemas never accepts what the general validator refuses.

use milpa::schema::InputValidator;
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn property() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(vec!["integer", "number", "string", "boolean"]),
        any::<bool>(),
        prop::option::of(-5i64..5),
        prop::option::of(prop_oneof![
            (-5i64..5).prop_map(|n| json!(n)),
            Just(json!(2.5))
        ]),
        any::<bool>(),
    )
        .prop_map(|(kind, nullable, minimum, maximum, format)| {
            let mut p = Map::new();
            p.insert("type".into(), json!(kind));
            if nullable {
                p.insert("nullable".into(), json!(true));
            }
            if matches!(kind, "integer" | "number") {
                if let Some(min) = minimum {
                    p.insert("minimum".into(), json!(min));
                }
                if let Some(max) = maximum {
                    p.insert("maximum".into(), max);
                }
            }
            if format {
                p.insert("format".into(), json!("int64"));
            }
            p.insert("description".into(), json!("d"));
            Value::Object(p)
        })
}

fn schema() -> impl Strategy<Value = Value> {
    (
        prop::collection::vec(property(), 0..4),
        any::<u8>(),
        prop::option::of(any::<bool>()),
    )
        .prop_map(|(props, required_mask, additional)| {
            let names = ["a", "b", "c", "d"];
            let mut properties = Map::new();
            for (i, p) in props.iter().enumerate() {
                properties.insert(names[i].into(), p.clone());
            }
            let required: Vec<&str> = (0..props.len())
                .filter(|i| required_mask & (1 << i) != 0)
                .map(|i| names[i])
                .collect();
            let mut s = json!({"type": "object", "properties": properties, "required": required});
            if let Some(additional) = additional {
                s["additionalProperties"] = json!(additional);
            }
            s
        })
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-10i64..10).prop_map(Value::from),
        Just(json!(u64::MAX)),
        Just(json!(i64::MIN)),
        Just(json!(1.0)),
        Just(json!(2.5)),
        Just(json!(-0.5)),
        Just(json!(1e300)),
        "[a-z]{0,3}".prop_map(Value::from),
        Just(json!([1])),
        Just(json!({"x": 1})),
    ]
}

fn instance() -> impl Strategy<Value = Value> {
    prop::collection::vec(
        (prop::sample::select(vec!["a", "b", "c", "d", "e"]), value()),
        0..5,
    )
    .prop_map(|pairs| {
        let mut map = Map::new();
        for (k, v) in pairs {
            map.insert(k.into(), v);
        }
        Value::Object(map)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, failure_persistence: None, .. ProptestConfig::default() })]

    #[test]
    fn fast_path_agrees_with_the_general_validator(schema in schema(), args in instance()) {
        let validator = InputValidator::compile(&schema).unwrap();
        let fast = validator.fast_accepts(&args);
        prop_assert!(fast.is_some(), "a flat schema takes the fast path: {}", schema);
        let general = validator.general_accepts(&args);
        if fast == Some(true) {
            prop_assert!(general, "fast path accepted what the validator refuses: {} {}", schema, args);
        }
        prop_assert_eq!(validator.validate(&args).is_ok(), general);
    }
}

#[test]
fn schemas_with_other_keywords_do_not_take_the_fast_path() {
    for schema in [
        json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}}),
        json!({"type": "object", "properties": {"a": {"type": "array"}}}),
        json!({"type": "object", "properties": {"a": {"enum": [1, 2]}}}),
        json!({"type": "object", "additionalProperties": {"type": "string"}}),
        json!({"type": "object", "properties": {"a": {"type": "string", "minimum": 1}}}),
    ] {
        let validator = InputValidator::compile(&schema).unwrap();
        assert_eq!(validator.fast_accepts(&json!({})), None, "{schema}");
    }
}

/// The property above holds for a fast path that never says yes; this pins that it does, so
/// the common valid call never pays for the general validator.
#[test]
fn the_fast_path_accepts_common_valid_arguments() {
    let two_ints = InputValidator::compile(&json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"]
    }))
    .unwrap();
    assert_eq!(two_ints.fast_accepts(&json!({"a": 1, "b": 2})), Some(true));
    assert_eq!(two_ints.fast_accepts(&json!({"a": 1})), Some(false));

    let nullable = InputValidator::compile(&json!({
        "type": "object",
        "properties": {"note": {"type": "string", "nullable": true}}
    }))
    .unwrap();
    assert_eq!(nullable.fast_accepts(&json!({"note": null})), Some(true));
    assert_eq!(nullable.fast_accepts(&json!({"note": "hi"})), Some(true));
}
