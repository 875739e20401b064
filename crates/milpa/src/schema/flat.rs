//! [`FlatSchema`]: a hand-rolled check for the commonest input schema — an object of
//! primitive-typed properties — which answers "valid" without the general validator.
//!
//! Measured: validating `{a: integer, b: integer}` with the general validator was the largest
//! cost of a two-argument call. This path only ever says "valid" when the general validator
//! would; when it says "invalid" (or the schema has anything it does not understand), the
//! general validator runs and produces the messages. A property test checks the agreement.

use serde_json::{Map, Number, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Primitive {
    Integer,
    Number,
    String,
    Boolean,
}

#[derive(Debug, Clone)]
struct Property {
    name: String,
    kind: Primitive,
    nullable: bool,
    minimum: Option<Number>,
    maximum: Option<Number>,
}

/// A flat object schema the fast path understands.
#[derive(Debug, Clone)]
pub(crate) struct FlatSchema {
    properties: Vec<Property>,
    /// Bit `i` set: `properties[i]` is required. Checked while walking the arguments once,
    /// so validation hashes nothing.
    required: u64,
    additional_allowed: bool,
}

/// Keywords that only annotate (never change validity, formats being annotations in 2020-12
/// and not asserted by our validator).
const ANNOTATIONS: [&str; 9] = [
    "description",
    "title",
    "format",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$comment",
];

impl FlatSchema {
    /// The fast form of `schema` (after `nullable` was honoured), if it qualifies.
    pub(crate) fn from_schema(schema: &Value) -> Option<FlatSchema> {
        let root = schema.as_object()?;
        let mut flat = FlatSchema {
            properties: Vec::new(),
            required: 0,
            additional_allowed: true,
        };
        let mut required_names = Vec::new();
        for (key, value) in root {
            match (key.as_str(), value) {
                ("type", Value::String(t)) if t == "object" => {}
                ("$schema", _) => {}
                ("additionalProperties", Value::Bool(allowed)) => {
                    flat.additional_allowed = *allowed
                }
                ("required", Value::Array(names)) => {
                    for name in names {
                        required_names.push(name.as_str()?);
                    }
                }
                ("properties", Value::Object(props)) => {
                    for (name, prop) in props {
                        flat.properties
                            .push(Property::from_schema(name, prop.as_object()?)?);
                    }
                }
                (k, _) if ANNOTATIONS.contains(&k) => {}
                _ => return None,
            }
        }
        if flat.properties.len() > 64 {
            return None;
        }
        for name in required_names {
            // A required name that is not a declared property: leave it to the general validator.
            let index = flat.properties.iter().position(|p| p.name == name)?;
            flat.required |= 1 << index;
        }
        Some(flat)
    }

    /// True only if `args` is certainly valid.
    pub(crate) fn accepts(&self, args: &Value) -> bool {
        let Some(args) = args.as_object() else {
            return false;
        };
        let mut seen = 0u64;
        for (key, value) in args {
            match self.properties.iter().position(|p| p.name == *key) {
                Some(index) if self.properties[index].accepts(value) => seen |= 1 << index,
                Some(_) => return false,
                None if self.additional_allowed => {}
                None => return false,
            }
        }
        seen & self.required == self.required
    }
}

impl Property {
    fn from_schema(name: &str, schema: &Map<String, Value>) -> Option<Property> {
        let mut kind = None;
        let mut nullable = false;
        let (mut minimum, mut maximum) = (None, None);
        for (key, value) in schema {
            match (key.as_str(), value) {
                ("type", Value::String(t)) => kind = Some(Primitive::parse(t)?),
                ("type", Value::Array(types)) => {
                    // `[T, "null"]`, as `nullable` becomes.
                    let names: Vec<&str> =
                        types.iter().map(Value::as_str).collect::<Option<_>>()?;
                    match names.as_slice() {
                        [t, "null"] | ["null", t] => {
                            kind = Some(Primitive::parse(t)?);
                            nullable = true;
                        }
                        _ => return None,
                    }
                }
                ("nullable", Value::Bool(_)) => {}
                ("minimum", Value::Number(n)) => minimum = Some(n.clone()),
                ("maximum", Value::Number(n)) => maximum = Some(n.clone()),
                (k, _) if ANNOTATIONS.contains(&k) => {}
                _ => return None,
            }
        }
        let kind = kind?;
        if (minimum.is_some() || maximum.is_some())
            && !matches!(kind, Primitive::Integer | Primitive::Number)
        {
            return None;
        }
        Some(Property {
            name: name.to_owned(),
            kind,
            nullable,
            minimum,
            maximum,
        })
    }

    fn accepts(&self, value: &Value) -> bool {
        match value {
            Value::Null => self.nullable,
            Value::Bool(_) => self.kind == Primitive::Boolean,
            Value::String(_) => self.kind == Primitive::String,
            Value::Number(n) => {
                let typed = match self.kind {
                    Primitive::Number => true,
                    // 2020-12: an integer is any number with a zero fractional part.
                    Primitive::Integer => {
                        n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
                    }
                    _ => false,
                };
                typed
                    && self
                        .minimum
                        .as_ref()
                        .is_none_or(|min| compare(n, min).is_some_and(|o| o.is_ge()))
                    && self
                        .maximum
                        .as_ref()
                        .is_none_or(|max| compare(n, max).is_some_and(|o| o.is_le()))
            }
            _ => false,
        }
    }
}

impl Primitive {
    fn parse(name: &str) -> Option<Primitive> {
        match name {
            "integer" => Some(Primitive::Integer),
            "number" => Some(Primitive::Number),
            "string" => Some(Primitive::String),
            "boolean" => Some(Primitive::Boolean),
            _ => None,
        }
    }
}

/// Exact for integers; for anything with a float, only when both sides are exactly
/// representable (`None` otherwise, which sends the value to the general validator).
fn compare(a: &Number, b: &Number) -> Option<std::cmp::Ordering> {
    let int = |n: &Number| {
        n.as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
    };
    if let (Some(x), Some(y)) = (int(a), int(b)) {
        return Some(x.cmp(&y));
    }
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    let (x, y) = (a.as_f64()?, b.as_f64()?);
    if x.abs() > EXACT || y.abs() > EXACT {
        return None;
    }
    x.partial_cmp(&y)
}
