//! Tool listings: summaries, by scope, by prefix.

use milpa::{ToolDefinition, ToolRegistry, ToolSummary};
use serde_json::{Value, json};

fn tool(name: &str) -> milpa::ToolDefinitionBuilder {
    ToolDefinition::builder(name).description(format!("The {name} tool"))
}

fn done(builder: milpa::ToolDefinitionBuilder) -> ToolDefinition {
    builder.sync(|_args: &Value, _ctx: &milpa::ToolContext| json!(null))
}

fn registry() -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    for definition in [
        done(tool("notes.list").scopes(["notes:read"])),
        done(tool("notes.delete").scopes(["notes:write", "admin"])),
        done(tool("ping")),
        done(tool("ops.restart").scopes(["ops:restart"])),
    ] {
        registry.register(definition).unwrap();
    }
    registry
}

fn names(summaries: &[ToolSummary]) -> Vec<&str> {
    summaries.iter().map(|s| s.name.as_str()).collect()
}

#[test]
fn summaries_are_in_registration_order_with_normalized_schemas() {
    let mut registry = ToolRegistry::new();
    registry
        .register(done(
            tool("zero")
                .description("no params")
                .input_schema(json!({"type": "object", "properties": {}})),
        ))
        .unwrap();
    registry.register(done(tool("bare"))).unwrap();
    registry
        .register(done(
            tool("nested")
                .input_schema(json!({
                    "type": "object",
                    "properties": {"filter": {"type": "object", "properties": {}}}
                }))
                .version("1.2.0")
                .output_schema(json!({"type": "object", "properties": {}})),
        ))
        .unwrap();

    let summaries: Vec<Value> = registry
        .tool_summaries()
        .iter()
        .map(ToolSummary::to_value)
        .collect();
    assert_eq!(
        summaries,
        vec![
            json!({"name": "zero", "description": "no params", "inputSchema": {"type": "object", "properties": {}}}),
            json!({"name": "bare", "description": "The bare tool", "inputSchema": {"type": "object"}}),
            json!({
                "name": "nested",
                "description": "The nested tool",
                "inputSchema": {"type": "object", "properties": {"filter": {"type": "object", "properties": {}}}},
                "version": "1.2.0",
                "outputSchema": {"type": "object", "properties": {}}
            }),
        ]
    );
    // Key order on the wire is fixed.
    assert_eq!(
        registry.tool_summaries()[2].to_compact_json(),
        r#"{"name":"nested","description":"The nested tool","inputSchema":{"type":"object","properties":{"filter":{"type":"object","properties":{}}}},"version":"1.2.0","outputSchema":{"type":"object","properties":{}}}"#
    );
}

#[test]
fn an_empty_properties_list_becomes_an_object() {
    // PHP wrote an empty map as `[]`; a definition carried over verbatim is normalized.
    let definition = done(tool("legacy").input_schema(json!({"type": "object", "properties": []})));
    let summary = ToolSummary::from_definition(&definition);
    assert_eq!(
        summary.input_schema,
        json!({"type": "object", "properties": {}})
    );
    let odd = done(tool("odd").input_schema(Value::Null));
    assert_eq!(
        ToolSummary::from_definition(&odd).input_schema,
        json!({"type": "object"})
    );
}

#[test]
fn an_output_schema_with_one_of_is_never_made_an_object() {
    let one_of =
        json!({"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "integer"}}]});
    let any_ref = json!({"$ref": "#/$defs/x", "$defs": {"x": {"type": "string"}}});
    let summary = ToolSummary::from_definition(&done(
        tool("either")
            .input_schema(json!({"properties": {"a": {"type": "string"}}}))
            .output_schema(one_of.clone()),
    ));
    assert_eq!(summary.output_schema, Some(one_of));
    assert_eq!(summary.to_value()["outputSchema"].get("type"), None);
    // An object schema that merely omits its type still gets it.
    assert_eq!(
        summary.input_schema,
        json!({"type": "object", "properties": {"a": {"type": "string"}}})
    );
    let summary = ToolSummary::from_definition(&done(tool("r").output_schema(any_ref.clone())));
    assert_eq!(summary.output_schema, Some(any_ref));
}

#[test]
fn summaries_read_back() {
    let summary: ToolSummary =
        serde_json::from_str(r#"{"name":"a","description":"d","inputSchema":{"type":"object"}}"#)
            .unwrap();
    assert_eq!(summary.version, None);
    assert_eq!(summary.output_schema, None);
}

#[test]
fn by_scopes_lists_unscoped_tools_and_those_a_held_scope_grants() {
    let registry = registry();
    assert_eq!(
        names(&registry.tools_by_scopes(&["notes:read"])),
        ["notes.list", "ping"]
    );
    assert_eq!(
        names(&registry.tools_by_scopes(&["admin"])),
        ["notes.delete", "ping"]
    );
    // Held patterns work as they do for authorization (the original ignored `*`).
    assert_eq!(
        names(&registry.tools_by_scopes(&["notes:*"])),
        ["notes.list", "notes.delete", "ping"]
    );
    assert_eq!(
        names(&registry.tools_by_scopes(&["*"])),
        ["notes.list", "notes.delete", "ping", "ops.restart"]
    );
    assert_eq!(
        names(&registry.tools_by_scopes(&Vec::<String>::new())),
        ["ping"]
    );
    // Otherwise scopes match exactly: `notes` is not `notes:read`.
    assert_eq!(names(&registry.tools_by_scopes(&["notes"])), ["ping"]);
}

#[test]
fn by_prefix_keeps_registration_order() {
    let registry = registry();
    assert_eq!(
        names(&registry.tools_by_prefix("notes.")),
        ["notes.list", "notes.delete"]
    );
    assert_eq!(names(&registry.tools_by_prefix("")).len(), 4);
    assert!(registry.tools_by_prefix("zzz").is_empty());
}
