//! The input schema generated for every supported parameter type (insta snapshots), and
//! that every one of them compiles in the registry.

use std::collections::{BTreeMap, HashMap};

use milpa::{ToolDefinition, ToolRegistry, tool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

fn schema_of(definition: ToolDefinition) -> Value {
    let schema = definition.input_schema().clone();
    let mut registry = ToolRegistry::new();
    registry
        .register(definition)
        .expect("the generated schema compiles");
    schema
}

/// Integers of every width.
#[tool]
#[allow(clippy::too_many_arguments)]
fn integers(a: i8, b: i16, c: i32, d: i64, e: u8, f: u16, g: u32, h: u64, i: usize) {
    let _ = (a, b, c, d, e, f, g, h, i);
}

#[test]
fn integer_schemas() {
    insta::assert_json_snapshot!(schema_of(integers_tool()));
}

/// Floats, booleans and text.
#[tool]
fn scalars(x: f32, y: f64, flag: bool, owned: String, borrowed: &str, letter: char) {
    let _ = (x, y, flag, owned, borrowed, letter);
}

#[test]
fn scalar_schemas() {
    insta::assert_json_snapshot!(schema_of(scalars_tool()));
}

/// Lists, maps and any JSON.
#[tool]
fn collections(
    tags: Vec<String>,
    matrix: Vec<Vec<f64>>,
    counts: HashMap<String, u32>,
    sorted: BTreeMap<String, bool>,
    map: Map<String, Value>,
    anything: Value,
    borrowed_any: &Value,
) {
    let _ = (tags, matrix, counts, sorted, map, anything, borrowed_any);
}

#[test]
fn collection_schemas() {
    insta::assert_json_snapshot!(schema_of(collections_tool()));
}

/// Optional arguments.
#[tool]
fn optionals(limit: Option<u32>, query: Option<String>, ids: Option<Vec<i64>>, any: Option<Value>) {
    let _ = (limit, query, ids, any);
}

#[test]
fn option_schemas() {
    insta::assert_json_snapshot!(schema_of(optionals_tool()));
}

/// Where a note goes.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)]
enum Folder {
    /// The inbox.
    Inbox,
    /// The archive.
    Archive,
}

/// A note to write.
#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct NewNote {
    /// The title.
    title: String,
    /// Optional body text.
    body: Option<String>,
    folder: Folder,
    labels: Vec<Label>,
}

/// A label.
#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Label {
    name: String,
    color: Option<u32>,
}

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
enum Priority {
    Low,
    High,
}

/// Types deriving JsonSchema.
#[tool]
fn structured(note: NewNote, folder: Folder, priority: Priority, maybe: Option<Label>) {
    let _ = (note, folder, priority, maybe);
}

#[test]
fn derived_type_schemas_are_inlined() {
    let schema = schema_of(structured_tool());
    let text = schema.to_string();
    assert!(!text.contains("$ref"), "{text}");
    assert!(schema.get("$defs").is_none());
    insta::assert_json_snapshot!(schema);
}

/// A tree of comments.
#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Comment {
    text: String,
    replies: Vec<Comment>,
}

/// A recursive type.
#[tool]
fn recursive(thread: Comment) {
    let _ = thread;
}

#[test]
fn recursive_types_keep_their_definitions_at_the_top() {
    let schema = schema_of(recursive_tool());
    assert!(schema["$defs"]["Comment"].is_object(), "{schema}");
    insta::assert_json_snapshot!(schema);
}

/// Every #[param] keyword.
#[tool]
fn described(
    #[param(description = "How many", minimum = 1, maximum = 50)] count: u32,
    #[param(
        description = "A slug",
        min_length = 3,
        max_length = 20,
        pattern = "^[a-z-]+$"
    )]
    slug: String,
    #[param(enum = ["asc", "desc"], default = "asc")] order: String,
    #[param(default = 10)] page_size: u8,
    #[param(minimum = -1.5, maximum = 2.5)] ratio: f64,
    #[param(object, description = "Free-form filters")] filters: Value,
    #[param(default = ["a", "b"])] tags: Vec<String>,
) {
    let _ = (count, slug, order, page_size, ratio, filters, tags);
}

#[test]
fn param_keywords() {
    insta::assert_json_snapshot!(schema_of(described_tool()));
}

/// No arguments at all.
#[tool]
fn nothing() {}

#[test]
fn no_parameters_means_no_required_list() {
    insta::assert_json_snapshot!(schema_of(nothing_tool()));
}
