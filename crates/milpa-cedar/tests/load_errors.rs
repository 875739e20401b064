//! Policies are checked when loaded: a syntax error or a policy that does not fit the entity
//! model names the file, the line and the column.

use milpa_cedar::{CedarLoadError, CedarPolicy, DefaultEffect};

fn load_error(text: &str) -> String {
    CedarPolicy::from_str("policy.cedar", text, DefaultEffect::Allow)
        .expect_err("the policy should be refused")
        .to_string()
}

#[test]
fn a_syntax_error_names_file_line_and_column() {
    let text = "@id(\"ok\")\npermit(principal, action, resource);\n\nforbid(principal, action resource);\n";
    let message = load_error(text);
    assert!(
        message.starts_with("policy.cedar:4:26: syntax error: "),
        "{message}"
    );
}

#[test]
fn an_unknown_attribute_names_file_line_and_column() {
    // `scope` for `scopes`, on line 3; the column counts characters (the é before it on the
    // line is two bytes).
    let text = "// policies\n\n@id(\"café\") forbid(principal, action, resource) when { principal.scope.contains(\"x\") };\n";
    let message = load_error(text);
    assert!(
        message.starts_with("policy.cedar:3:56: invalid policy: policy 'café': "),
        "{message}"
    );
    assert!(message.contains("scope"), "{message}");
}

#[test]
fn unknown_entity_types_actions_and_context_fields_are_refused() {
    let tool = load_error("forbid(principal, action, resource == Tol::\"x\");");
    assert!(
        tool.starts_with("policy.cedar:1:39: invalid policy: policy 'policy0': "),
        "{tool}"
    );
    let action = load_error("forbid(principal, action == Action::\"cal\", resource);");
    assert!(
        action.starts_with("policy.cedar:1:29: invalid policy: "),
        "{action}"
    );
    let context =
        load_error("forbid(principal, action, resource) when { context.chanel == \"http\" };");
    assert!(
        context.starts_with("policy.cedar:1:44: invalid policy: "),
        "{context}"
    );
    let types =
        load_error("forbid(principal, action, resource) when { resource.mutating == \"yes\" };");
    assert!(types.starts_with("policy.cedar:1:"), "{types}");
}

#[test]
fn arguments_may_be_anything_but_must_be_used_consistently() {
    // Open: any argument name passes validation ...
    CedarPolicy::from_str(
        "ok.cedar",
        r#"forbid(principal, action, resource) when { context.args.anything.at.all == 3 };"#,
        DefaultEffect::Allow,
    )
    .unwrap();
    // ... but not a misuse of the record itself.
    let message = load_error("forbid(principal, action, resource) when { context.args == 3 };");
    assert!(message.starts_with("policy.cedar:1:"), "{message}");
}

#[test]
fn templates_are_refused() {
    let message = load_error("permit(principal == ?principal, action, resource);");
    assert!(
        message.starts_with("policy.cedar:1:21: unsupported: "),
        "{message}"
    );
}

#[test]
fn errors_in_a_second_file_name_that_file() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("a.cedar");
    let second = dir.path().join("b.cedar");
    std::fs::write(&first, "@id(\"a\") permit(principal, action, resource);\n").unwrap();
    std::fs::write(
        &second,
        "\n\n  forbid(principal, action, resource) when { resource.upstrem == \"\" };\n",
    )
    .unwrap();
    let error = CedarPolicy::from_files([&first, &second], DefaultEffect::Allow).unwrap_err();
    let message = error.to_string();
    assert!(
        message.starts_with(&format!("{}:3:", second.display())),
        "{message}"
    );
    assert!(matches!(error, CedarLoadError::Policy { line: 3, .. }));
    // Both files load once fixed, into one set whose ids stay unique.
    std::fs::write(&second, "@id(\"b\") forbid(principal, action, resource) when { resource.upstream == \"x\" };\npermit(principal, action, resource);\n").unwrap();
    let policy = CedarPolicy::from_files([&first, &second], DefaultEffect::Allow).unwrap();
    assert_eq!(policy.len(), 3);
}

#[test]
fn a_missing_file_is_a_read_error_naming_it() {
    let error =
        CedarPolicy::from_files(["/nonexistent/p.cedar"], DefaultEffect::Allow).unwrap_err();
    assert!(matches!(error, CedarLoadError::Read { .. }));
    assert!(
        error
            .to_string()
            .starts_with("/nonexistent/p.cedar: cannot read"),
        "{error}"
    );
    let none: [&str; 0] = [];
    assert!(matches!(
        CedarPolicy::from_files(none, DefaultEffect::Allow),
        Err(CedarLoadError::Empty)
    ));
}
