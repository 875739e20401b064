//! A refused argument in the schema's words: `milpa call` prints what the tool takes
//! (`'id' must be an integer ≥ 1 (got a string)`), never serde's `expected u64`; `--json`
//! keeps the original's error, code and keys; an MCP client reads both in its text block.

mod common;

use common::http::milpa_command;
use common::stdio::StdioClient;
use common::{Sandbox, run};
use serde_json::json;

#[test]
fn a_wrong_type_or_range_is_said_in_the_schemas_words_at_the_terminal() {
    let sb = Sandbox::new();
    let cases = [
        (
            "notes_delete",
            r#"{"id":"abc"}"#,
            "'id' must be an integer ≥ 1 (got a string)",
        ),
        (
            "notes_delete",
            r#"{"id":0}"#,
            "'id' must be an integer ≥ 1 (got 0)",
        ),
        (
            "notes_delete",
            r#"{"id":1.5}"#,
            "'id' must be an integer ≥ 1 (got a number with a fraction)",
        ),
        ("notes_delete", "{}", "'id' is required (an integer ≥ 1)"),
        (
            "notes_add",
            r#"{"text":""}"#,
            "'text' must be a string of 1 to 2000 characters (got 0 characters)",
        ),
        (
            "add",
            r#"{"a":1,"b":2,"c":3}"#,
            "unknown argument 'c' (this tool takes a, b)",
        ),
    ];
    for (tool, args, words) in cases {
        let r = run(sb.milpa().args(["call", tool, args]));
        assert_eq!(r.code, 1, "{tool} {args}: {}", r.stderr);
        assert_eq!(
            r.stdout,
            format!("✗ Invalid arguments:\n  - {words}\n"),
            "{tool} {args}"
        );
        assert!(!r.stdout.contains("Expected"), "{}", r.stdout);
    }
}

#[test]
fn several_failures_get_a_line_each() {
    let sb = Sandbox::new();
    let r = run(sb.milpa().args(["call", "add", r#"{"a":"x","z":1}"#]));
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stdout,
        "✗ Invalid arguments:\n  \
         - 'b' is required (an integer)\n  \
         - 'a' must be an integer (got a string)\n  \
         - unknown argument 'z' (this tool takes a, b)\n"
    );
}

#[test]
fn a_value_the_parameter_cannot_hold_names_its_range_not_a_rust_type() {
    let sb = Sandbox::new();
    let r = run(sb
        .milpa()
        .args(["call", "add", r#"{"a":9223372036854775808,"b":1}"#]));
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stdout,
        "✗ Error: a: Expected an integer from -9223372036854775808 to 9223372036854775807, \
         got 9223372036854775808\n"
    );
    let r = run(sb
        .milpa()
        .args(["call", "add", r#"{"a":1e30,"b":1}"#, "--json"]));
    assert_eq!(r.json()["meta"]["code"], "VALIDATION_ERROR");
    let error = r.json()["error"].as_str().unwrap().to_owned();
    assert!(error.starts_with("a: Expected an integer from"), "{error}");
    assert!(
        !error.contains("i64") && !error.contains("floating point"),
        "{error}"
    );
}

#[test]
fn json_keeps_the_originals_error_code_and_keys() {
    let sb = Sandbox::new();
    let r = run(sb
        .milpa()
        .args(["call", "notes_delete", r#"{"id":"abc"}"#, "--json"]));
    assert_eq!(r.code, 1);
    let json = r.json();
    let keys: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["success", "data", "message", "error", "meta"]);
    assert_eq!(json["success"], false);
    assert_eq!(json["data"], json!(null));
    assert_eq!(json["error"], "id: Expected integer, got string");
    assert_eq!(
        json["message"],
        "'id' must be an integer ≥ 1 (got a string)"
    );
    assert_eq!(json["meta"]["code"], "VALIDATION_ERROR");
    assert_eq!(json["meta"]["type"], "error");
}

#[test]
fn an_mcp_client_reads_the_original_error_then_the_schemas_words() {
    let sb = Sandbox::new();
    let mut command = milpa_command(&sb);
    command.arg("serve");
    let mut server = StdioClient::start(command, &sb.path().join("serve.log"));
    let r = server.call("notes_delete", json!({"id": -3}));
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(r["_meta"]["milpa"]["code"], "VALIDATION_ERROR");
    assert_eq!(
        r["content"][0]["text"],
        "id: Value too small (min: 1)\n'id' must be an integer ≥ 1 (got -3)"
    );
    let r = server.call("add", json!({"a": 9_223_372_036_854_775_808u64, "b": 1}));
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(
        r["content"][0]["text"],
        "a: Expected an integer from -9223372036854775808 to 9223372036854775807, \
         got 9223372036854775808"
    );
}
