//! What listings leave out: entries a `forbid` denies whatever the arguments (one that
//! reads no argument), and under default deny entries no argument-free `permit` covers.
//! A policy that reads the arguments never hides anything.

mod common;

use common::{Docs, caller, policy, registry};
use milpa::{Listed, ToolContext, ToolRegistry};
use milpa_cedar::DefaultEffect;

/// The tools and resources `ctx` would be shown, by name.
fn shown(registry: &ToolRegistry, ctx: &ToolContext) -> Vec<String> {
    let mut names: Vec<String> = registry
        .definitions()
        .filter(|tool| registry.could_use(Listed::Tool(tool), ctx))
        .map(|tool| tool.name().to_owned())
        .collect();
    names.extend(
        registry
            .catalog_snapshot()
            .resources()
            .filter(|r| registry.could_use(Listed::Resource(r), ctx))
            .map(|r| r.uri().to_owned()),
    );
    names
}

fn with_docs(text: &str, default: DefaultEffect) -> ToolRegistry {
    let (mut registry, _) = registry(policy(text, default));
    registry.register_resources(Docs).unwrap();
    registry
}

#[test]
fn a_forbid_that_reads_no_argument_hides_what_it_denies() {
    let text = r#"
@id("clerks-no-upstream") forbid(principal, action, resource) when { resource.upstream == "fs" } unless { principal.scopes.contains("fs") };
@id("private-docs") forbid(principal, action == Action::"read_resource", resource) when { resource.uri like "docs://private/*" } unless { principal.scopes.contains("docs") };
@id("refund-cap") forbid(principal, action, resource == Tool::"refund") when { context.args.amount >= 100 };
"#;
    let registry = with_docs(text, DefaultEffect::Allow);
    assert_eq!(
        shown(&registry, &caller("clerk", &[])),
        ["refund", "read_file", "docs://public"],
        "refund stays: its forbid depends on the amount"
    );
    assert_eq!(
        shown(&registry, &caller("root", &["fs", "docs"])),
        [
            "refund",
            "read_file",
            "fs_write",
            "docs://public",
            "docs://private/plan"
        ]
    );
}

#[test]
fn under_default_deny_only_what_an_argument_free_permit_covers_is_shown() {
    let text = r#"
@id("reads") permit(principal, action, resource) when { !resource.mutating };
"#;
    let registry = with_docs(text, DefaultEffect::Deny);
    assert_eq!(
        shown(&registry, &caller("clerk", &[])),
        ["read_file", "docs://public", "docs://private/plan"]
    );
    // A permit that reads the arguments might cover anything: everything is shown.
    let text = r#"
@id("reads") permit(principal, action, resource) when { !resource.mutating };
@id("small-refunds") permit(principal, action, resource == Tool::"refund") when { context.args.amount < 10 };
"#;
    let registry = with_docs(text, DefaultEffect::Deny);
    assert_eq!(shown(&registry, &caller("clerk", &[])).len(), 5);
}
