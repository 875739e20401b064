//! `inspect` says Cedar is wired and which policies can apply to the tool.

mod common;

use common::{caller, policy, registry};
use milpa::StepKind;
use milpa::inspect::InvocationPlan;
use milpa_cedar::DefaultEffect;

const POLICIES: &str = r#"
@id("refund-limit") forbid(principal, action, resource == Tool::"refund") when { context.args.amount >= 100 };
@id("everything") forbid(principal, action, resource) when { context.channel == "none" };
@id("tools") permit(principal, action, resource is Tool);
@id("in-read") forbid(principal, action, resource in Tool::"read_file") when { context.args.path like "/etc/*" };
forbid(principal, action, resource is Tool in Tool::"refund") when { principal.scopes.isEmpty() };
"#;

#[test]
fn describe_lists_the_policies_whose_resource_scope_admits_the_tool() {
    let (registry, _) = registry(policy(POLICIES, DefaultEffect::Deny));
    let ctx = caller("alice", &[]);
    let refund = InvocationPlan::build(&registry, "refund", &ctx).unwrap();
    let source = &refund.step(StepKind::Authorize).source;
    assert!(
        source.contains("cedar (test.cedar, default deny): policies that can apply: refund-limit, everything, tools, policy4"),
        "{source}"
    );
    let read = InvocationPlan::build(&registry, "read_file", &ctx).unwrap();
    let source = &read.step(StepKind::Authorize).source;
    assert!(
        source.contains(
            "cedar (test.cedar, default deny): policies that can apply: everything, tools, in-read"
        ),
        "{source}"
    );
}

#[test]
fn describe_says_none_when_no_policy_can_apply() {
    let (registry, _) = registry(policy(
        r#"@id("r") forbid(principal, action, resource == Tool::"refund");"#,
        DefaultEffect::Allow,
    ));
    let plan = InvocationPlan::build(&registry, "read_file", &caller("a", &[])).unwrap();
    assert!(
        plan.step(StepKind::Authorize)
            .source
            .contains("cedar (test.cedar, default allow): policies that can apply: none")
    );
}
