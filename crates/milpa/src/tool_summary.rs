//! [`ToolSummary`]: what a model or an MCP client sees of a tool, the unit that listings
//! hand out and token budgets measure (both sit above this module).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::definition::ToolDefinition;

/// What a model or an MCP client sees of a tool: no code, no scopes, no flags.
///
/// Serializes as `{name, description, inputSchema, version?, outputSchema?}` (the MCP
/// `tools/list` shape), which is also what [`TokenEstimator`](crate::budget::TokenEstimator) measures.
///
/// ```
/// use milpa::{ToolDefinition, ToolSummary};
/// use serde_json::json;
///
/// let def = ToolDefinition::builder("zero").description("no params")
///     .input_schema(json!({"type": "object", "properties": []}))
///     .sync(|_, _| json!(null));
/// let summary = ToolSummary::from_definition(&def);
/// assert_eq!(
///     serde_json::to_string(&summary).unwrap(),
///     r#"{"name":"zero","description":"no params","inputSchema":{"type":"object","properties":{}}}"#
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSummary {
    /// The tool's name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Its argument schema, normalized (see [`ToolSummary::from_definition`]).
    #[serde(rename = "inputSchema")]
    pub input_schema: Value,
    /// Its version, when it declares one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub version: Option<String>,
    /// Its result schema, when it declares one (normalized like `inputSchema`).
    #[serde(
        rename = "outputSchema",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub output_schema: Option<Value>,
}

impl ToolSummary {
    /// The summary of one definition.
    ///
    /// Schemas are normalized so that strict clients (MCP's among them) accept them: an empty
    /// (or non-object) schema becomes `{"type": "object"}`, a schema without a top-level
    /// `type` gets `"type": "object"` first unless a keyword of its own decides the type
    /// (`oneOf`, `anyOf`, `allOf`, `not`, `if`, `$ref`, `$dynamicRef`, `enum`, `const`: those
    /// are left alone), and an empty top-level `properties` (`[]` or `{}`) becomes `{}`.
    /// Nested schemas are left as written.
    pub fn from_definition(definition: &ToolDefinition) -> ToolSummary {
        let options = definition.options();
        ToolSummary {
            name: definition.name().to_owned(),
            description: definition.description().to_owned(),
            input_schema: normalize_schema(definition.input_schema()),
            version: options.version.clone(),
            output_schema: options.output_schema.as_ref().map(normalize_schema),
        }
    }

    /// The summary as a JSON object.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The compact JSON the token estimate is taken from.
    pub fn to_compact_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Keywords that decide (or may decide) what type a schema accepts: a schema holding one
/// of them is not an object schema that merely forgot its `type`, and adding
/// `"type": "object"` to it would change what it means (`{"oneOf": [{"type": "string"},
/// …]}` would accept nothing).
const TYPE_DECIDING: [&str; 9] = [
    "oneOf",
    "anyOf",
    "allOf",
    "not",
    "if",
    "$ref",
    "$dynamicRef",
    "enum",
    "const",
];

fn normalize_schema(schema: &Value) -> Value {
    match schema {
        Value::Object(map) if !map.is_empty() => {
            let mut out = Map::with_capacity(map.len() + 1);
            if !map.contains_key("type") && !TYPE_DECIDING.iter().any(|k| map.contains_key(*k)) {
                out.insert("type".into(), Value::from("object"));
            }
            for (key, value) in map {
                let empty_properties = key == "properties"
                    && match value {
                        Value::Array(items) => items.is_empty(),
                        Value::Object(fields) => fields.is_empty(),
                        _ => false,
                    };
                let value = if empty_properties {
                    Value::Object(Map::new())
                } else {
                    value.clone()
                };
                out.insert(key.clone(), value);
            }
            Value::Object(out)
        }
        _ => json!({"type": "object"}),
    }
}
