//! Tool listings for models and MCP clients: [`ToolSummary`] and the registry's listing and
//! token-budget methods.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::budget::{BudgetCheck, BudgetSelection, TokenEstimator, ToolsTokenEstimate};
use crate::context::scope_matches;
use crate::definition::ToolDefinition;
use crate::registry::ToolRegistry;

/// What a model or an MCP client sees of a tool: no code, no scopes, no flags.
///
/// Serializes as `{name, description, inputSchema, version?, outputSchema?}` (the MCP
/// `tools/list` shape), which is also what [`TokenEstimator`] measures.
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

/// Listings and token budgeting.
impl ToolRegistry {
    /// Every tool's summary, in registration order (the MCP `tools/list` shape).
    pub fn tool_summaries(&self) -> Vec<ToolSummary> {
        self.definitions()
            .map(|definition| ToolSummary::from_definition(&definition))
            .collect()
    }

    /// The summaries of the tools a caller holding `scopes` may call: tools without scopes,
    /// and tools with at least one scope a held scope grants. Unlike the original, held
    /// scopes match as everywhere else: `*` grants everything and `ns:*` grants `ns:…`.
    pub fn tools_by_scopes<S: AsRef<str>>(&self, scopes: &[S]) -> Vec<ToolSummary> {
        self.definitions()
            .filter(|definition| {
                definition.scopes().is_empty()
                    || definition.scopes().iter().any(|required| {
                        scopes
                            .iter()
                            .any(|held| scope_matches(held.as_ref(), required))
                    })
            })
            .map(|definition| ToolSummary::from_definition(&definition))
            .collect()
    }

    /// The summaries of the tools whose name starts with `prefix`, in registration order.
    pub fn tools_by_prefix(&self, prefix: &str) -> Vec<ToolSummary> {
        self.definitions()
            .filter(|definition| definition.name().starts_with(prefix))
            .map(|definition| ToolSummary::from_definition(&definition))
            .collect()
    }

    /// The tools to offer `model` within its tool budget (30 % of its context).
    ///
    /// Tools named in `priority_tools` go first, in registration order (the order of the
    /// priority list itself does not matter), then the rest; then
    /// [`TokenEstimator::select_within_budget`] picks greedily, skipping a tool that does
    /// not fit and trying the next. Logs a warning when a tool was left out.
    pub fn tools_within_budget(
        &self,
        model: &str,
        priority_tools: Option<&[&str]>,
    ) -> BudgetSelection {
        let mut summaries = self.tool_summaries();
        if let Some(priority) = priority_tools {
            // A stable sort on a bool keeps registration order within each group.
            summaries.sort_by_key(|summary| !priority.contains(&summary.name.as_str()));
        }
        let selection = TokenEstimator::new().select_within_budget(summaries, model);
        if !selection.excluded.is_empty() {
            let shown = selection
                .excluded
                .iter()
                .take(5)
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(", ");
            let more = if selection.excluded.len() > 5 {
                "..."
            } else {
                ""
            };
            tracing::warn!(
                target: "milpa::budget",
                model,
                excluded = selection.excluded.len(),
                "[ToolRegistry] Token budget exceeded. Excluded {} tools: {shown}{more}",
                selection.excluded.len()
            );
        }
        selection
    }

    /// Estimated tokens of every tool's summary.
    pub fn estimate_tokens(&self) -> ToolsTokenEstimate {
        TokenEstimator::new().estimate_tools_tokens(&self.tool_summaries())
    }

    /// Whether all tools fit `model`'s tool budget.
    pub fn check_token_budget(&self, model: &str) -> BudgetCheck {
        TokenEstimator::new().check_budget(&self.tool_summaries(), model)
    }

    /// The text report of [`TokenEstimator::usage_report`] for all tools.
    pub fn token_usage_report(&self, model: &str) -> String {
        TokenEstimator::new().usage_report(&self.tool_summaries(), model)
    }
}
