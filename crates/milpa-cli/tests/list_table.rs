//! `milpa call notes_list` shows the notes as a table (a list of records reads best in
//! columns); `--json` prints the result unchanged.

mod common;

use common::{Sandbox, run};
use serde_json::json;

#[test]
fn notes_list_is_a_table_and_its_json_is_unchanged() {
    let sb = Sandbox::new();
    let r = run(sb.milpa().args(["call", "notes_list"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, "✓ no items\n");
    for text in ["buy milk", "call ana about the\nseeds"] {
        let added =
            run(sb
                .milpa()
                .args(["call", "notes_add", &json!({ "text": text }).to_string()]));
        assert_eq!(added.code, 0, "{}", added.stderr);
    }
    let r = run(sb.milpa().args(["call", "notes_list"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.stdout,
        "✓ 2 items\n\
         ID  TEXT\n\
         1   buy milk\n\
         2   call ana about the\\nseeds\n"
    );
    let r = run(sb.milpa().args(["call", "notes_list", "--json"]));
    assert_eq!(r.code, 0);
    let json = r.json();
    assert_eq!(
        json["data"],
        json!([
            {"id": 1, "text": "buy milk"},
            {"id": 2, "text": "call ana about the\nseeds"}
        ])
    );
    let keys: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["success", "data", "message", "error", "meta"]);
}

#[test]
fn a_record_with_nested_values_or_a_plain_list_keeps_the_usual_layout() {
    let sb = Sandbox::new();
    // `echo` returns its text: a scalar stays on the status line.
    let r = run(sb.milpa().args(["call", "echo", r#"{"text":"hi"}"#]));
    assert_eq!(r.stdout, "✓ hi\n");
    // An object is listed field by field, as before.
    let added = run(sb.milpa().args(["call", "notes_add", r#"{"text":"x"}"#]));
    assert_eq!(added.stdout, "✓ \n  Id: 1\n  Text: x\n");
}
