//! Parameters: wire names, required / optional / default arguments, descriptions.

use milpa::{ToolContext, ToolRegistry, tool};
use serde_json::{Value, json};

/// Echoes its arguments under their wire names.
#[tool]
#[allow(non_snake_case)]
fn echo(userId: u32, r#type: String, snake_case: bool) -> Value {
    json!({"userId": userId, "type": r#type, "snake_case": snake_case})
}

#[tokio::test]
async fn wire_names_are_the_rust_names_exactly() {
    let definition = echo_tool();
    let properties: Vec<&String> = definition.input_schema()["properties"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(properties, ["userId", "type", "snake_case"]);
    let mut registry = ToolRegistry::new();
    registry.register(definition).unwrap();
    let args = json!({"userId": 7, "type": "note", "snake_case": true});
    let result = registry
        .call("echo", args.clone(), &ToolContext::cli())
        .await;
    assert_eq!(result.data, args);
}

/// Lists things.
#[tool]
fn list(
    query: String,
    limit: Option<u32>,
    #[param(default = 20)] page_size: u32,
    #[param(default = "asc", enum = ["asc", "desc"])] order: &str,
    #[param(default = {"a": 1})] extra: &Value,
) -> Value {
    json!({"query": query, "limit": limit, "page_size": page_size, "order": order, "extra": extra})
}

#[tokio::test]
async fn only_plain_parameters_are_required_and_defaults_fill_in() {
    let definition = list_tool();
    assert_eq!(definition.input_schema()["required"], json!(["query"]));
    assert_eq!(
        definition.input_schema()["properties"]["page_size"]["default"],
        json!(20)
    );
    let mut registry = ToolRegistry::new();
    registry.register(definition).unwrap();
    let ctx = ToolContext::cli();

    let result = registry.call("list", json!({"query": "x"}), &ctx).await;
    assert_eq!(
        result.data,
        json!({"query": "x", "limit": null, "page_size": 20, "order": "asc", "extra": {"a": 1}})
    );

    let args = json!({"query": "y", "limit": 5, "page_size": 3, "order": "desc", "extra": [1]});
    let result = registry.call("list", args.clone(), &ctx).await;
    assert_eq!(result.data, args);

    let result = registry
        .call("list", json!({"query": "z", "limit": null}), &ctx)
        .await;
    assert!(result.success, "{result:?}");
    assert_eq!(result.data["limit"], Value::Null);

    let missing = registry.call("list", json!({}), &ctx).await;
    assert_eq!(
        missing.error.as_deref(),
        Some("Missing required field: query")
    );
    let extra = registry
        .call("list", json!({"query": "x", "limt": 1}), &ctx)
        .await;
    assert_eq!(extra.error.as_deref(), Some("Unknown property: limt"));
    let bad_enum = registry
        .call("list", json!({"query": "x", "order": "up"}), &ctx)
        .await;
    assert!(!bad_enum.success);
}

/// Searches the notes.
///
/// Matches titles and bodies.
#[tool]
fn search(#[param(description = "Words to look for")] text: String) -> String {
    text
}

/// This doc comment loses to the attribute.
#[tool(name = "notes.find", description = "Finds a note by id")]
fn find_note(id: u64) -> u64 {
    id
}

#[test]
fn descriptions_come_from_doc_comments_and_attributes() {
    let search = search_tool();
    assert_eq!(search.name(), "search");
    assert_eq!(
        search.description(),
        "Searches the notes.\n\nMatches titles and bodies."
    );
    assert_eq!(
        search.input_schema()["properties"]["text"],
        json!({"type": "string", "description": "Words to look for"})
    );
    let find = find_note_tool();
    assert_eq!(find.name(), "notes.find");
    assert_eq!(find.description(), "Finds a note by id");
}

/// Reads a note.
#[tool]
fn read_note(#[param(path, within = ["/srv/notes", "/srv/shared"])] path: String) -> String {
    path
}

#[tokio::test]
async fn a_path_param_reaches_the_tool_normalised_and_within_its_folders() {
    let mut registry = ToolRegistry::new();
    registry.register(read_note_tool()).unwrap();
    let ctx = ToolContext::cli();
    let read = |path: &str| registry.call("read_note", json!({ "path": path }), &ctx);
    let result = read("//srv/notes/./a/../b.txt").await;
    assert!(result.success, "{result:?}");
    assert_eq!(result.data, json!("/srv/notes/b.txt"));
    assert!(read("/srv/shared/c").await.success);
    for (path, error) in [
        (
            "/srv/notes/../../etc/hostname",
            "path: is outside the allowed folders (/srv/notes, /srv/shared)",
        ),
        ("notes/b.txt", "path: must be an absolute path"),
    ] {
        let refused = read(path).await;
        assert_eq!(
            refused.code(),
            Some(&milpa::ErrorCode::ValidationError),
            "{path}"
        );
        assert_eq!(refused.error.as_deref(), Some(error), "{path}");
    }
}
