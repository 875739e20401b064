//! Reads and prompts under Cedar: `Action::"read_resource"` on `Resource::"<uri>"` and
//! `Action::"get_prompt"` on `Prompt::"<name>"`, with the prompt's arguments in
//! `context.args`; policies written for tool calls still load and still mean what they did.

mod common;

use std::collections::BTreeMap;

use common::{Docs, caller, policy, registry};
use milpa::audit::AuditOutcome;
use milpa::catalog::{
    CatalogError, Prompt, PromptArgument, PromptMessage, PromptProvider, PromptReply,
};
use milpa::{Deferred, ErrorCode, ToolContext, ToolRegistry};
use milpa_cedar::{CedarPolicy, DefaultEffect};
use serde_json::json;

/// `greet(name)`.
struct Greetings;

impl PromptProvider for Greetings {
    fn prompts(&self) -> Vec<Prompt> {
        vec![Prompt::new("greet", "Greets someone").with_argument(PromptArgument::required("name"))]
    }

    fn get<'a>(
        &'a self,
        _name: &'a str,
        arguments: &'a BTreeMap<String, String>,
        _ctx: &'a ToolContext,
    ) -> Deferred<'a, Result<PromptReply, CatalogError>> {
        let text = format!("Say hello to {}", arguments["name"]);
        Deferred::ready(Ok(PromptReply::new(vec![PromptMessage::user(text)])))
    }
}

/// The common tools plus the documents and the prompt, behind `text`.
fn catalog(
    text: &str,
    default: DefaultEffect,
) -> (ToolRegistry, std::sync::Arc<milpa::audit::MemoryAuditSink>) {
    let (mut registry, sink) = registry(policy(text, default));
    registry.register_resources(Docs).unwrap();
    registry.register_prompts(Greetings).unwrap();
    (registry, sink)
}

fn name(value: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("name".to_owned(), value.to_owned())])
}

#[tokio::test]
async fn a_uri_pattern_denies_a_read_with_the_policy_named() {
    let text = r#"
@id("private-docs")
forbid(principal, action == Action::"read_resource", resource)
when { resource is Resource && resource.uri like "docs://private/*" }
unless { principal.scopes.contains("docs:private") };
"#;
    let (registry, sink) = catalog(text, DefaultEffect::Allow);
    let clerk = caller("clerk", &["billing"]);
    assert!(
        registry
            .read_resource("docs://public", &clerk)
            .await
            .is_ok()
    );
    let denied = registry
        .read_resource("docs://private/plan", &clerk)
        .await
        .unwrap_err();
    assert_eq!(denied.code(), &ErrorCode::Forbidden);
    assert_eq!(
        denied.message(),
        "Denied by policy 'private-docs' for resource 'docs://private/plan' on channel 'mcp' (principal: clerk)."
    );
    // The one with the scope reads it; a templated URI is judged by its concrete URI.
    let boss = caller("boss", &["docs:private"]);
    assert!(
        registry
            .read_resource("docs://private/plan", &boss)
            .await
            .is_ok()
    );
    assert!(
        registry
            .read_resource("docs://notes/7", &clerk)
            .await
            .is_ok()
    );
    let outcomes: Vec<AuditOutcome> = sink.take().into_iter().map(|r| r.outcome).collect();
    assert_eq!(
        outcomes,
        [
            AuditOutcome::Executed,
            AuditOutcome::Denied,
            AuditOutcome::Executed,
            AuditOutcome::Executed
        ]
    );
}

#[tokio::test]
async fn a_prompt_is_judged_on_its_name_and_arguments() {
    let text = r#"
@id("no-greeting-root")
forbid(principal, action == Action::"get_prompt", resource == Prompt::"greet")
when { context.args has name && context.args.name == "root" };
"#;
    let (registry, _) = catalog(text, DefaultEffect::Allow);
    let clerk = caller("clerk", &[]);
    let reply = registry
        .get_prompt("greet", &name("ana"), &clerk)
        .await
        .unwrap();
    assert_eq!(reply.messages, [PromptMessage::user("Say hello to ana")]);
    let denied = registry
        .get_prompt("greet", &name("root"), &clerk)
        .await
        .unwrap_err();
    assert_eq!(
        denied.message(),
        "Denied by policy 'no-greeting-root' for prompt 'greet' on channel 'mcp' (principal: clerk)."
    );
}

#[tokio::test]
async fn default_deny_covers_reads_and_prompts_no_permit_names() {
    let text = r#"
@id("tools-for-all") permit(principal, action == Action::"call", resource);
@id("public-doc") permit(principal, action == Action::"read_resource", resource == Resource::"docs://public");
"#;
    let (registry, _) = catalog(text, DefaultEffect::Deny);
    let clerk = caller("clerk", &[]);
    assert!(
        registry
            .call("read_file", json!({"path": "/a"}), &clerk)
            .await
            .success
    );
    assert!(
        registry
            .read_resource("docs://public", &clerk)
            .await
            .is_ok()
    );
    let plan = registry
        .read_resource("docs://private/plan", &clerk)
        .await
        .unwrap_err();
    assert_eq!(
        plan.message(),
        "Denied for resource 'docs://private/plan' on channel 'mcp' (principal: clerk): no Cedar policy permits it (default deny)."
    );
    let prompt = registry
        .get_prompt("greet", &name("ana"), &clerk)
        .await
        .unwrap_err();
    assert_eq!(prompt.code(), &ErrorCode::Forbidden);
    assert!(
        prompt.message().contains("prompt 'greet'"),
        "{}",
        prompt.message()
    );
}

/// Policies open on the action were written for tool calls; they still load, and a read
/// (which mutates nothing and comes from no upstream) passes where a mutating call does not.
#[tokio::test]
async fn tool_policies_open_on_the_action_still_load_and_spare_reads() {
    let text = r#"
@id("no-mutations-over-http") forbid(principal, action, resource) when { resource.mutating && context.channel == "mcp" };
@id("no-fs") forbid(principal, action, resource) when { resource.upstream == "fs" };
@id("refund-cap") forbid(principal, action, resource == Tool::"refund") when { context.args.amount >= 100 };
"#;
    let (registry, _) = catalog(text, DefaultEffect::Allow);
    let clerk = caller("clerk", &[]);
    assert!(
        registry
            .read_resource("docs://private/plan", &clerk)
            .await
            .is_ok()
    );
    assert!(
        registry
            .get_prompt("greet", &name("ana"), &clerk)
            .await
            .is_ok()
    );
    let refund = registry.call("refund", json!({"amount": 5}), &clerk).await;
    assert_eq!(refund.code(), Some(&ErrorCode::Forbidden));
}

/// An unguarded argument condition open on the action cannot be evaluated for a read (its
/// `args` is empty): that counts as denying, as it does for a call.
#[tokio::test]
async fn an_unguarded_argument_condition_denies_a_read() {
    let text = r#"
@id("small-amounts") forbid(principal, action, resource) when { context.args.amount > 10 };
"#;
    let (registry, _) = catalog(text, DefaultEffect::Allow);
    let denied = registry
        .read_resource("docs://public", &caller("clerk", &[]))
        .await
        .unwrap_err();
    assert!(
        denied
            .message()
            .starts_with("Denied by policy 'small-amounts' for resource 'docs://public' on channel 'mcp' (principal: clerk): the policy could not be evaluated"),
        "{}",
        denied.message()
    );
}

#[test]
fn the_new_types_and_actions_are_checked_at_load() {
    let unknown = CedarPolicy::from_str(
        "p.cedar",
        r#"forbid(principal, action == Action::"read_resource", resource) when { resource is Resource && resource.path == "x" };"#,
        DefaultEffect::Allow,
    )
    .unwrap_err();
    assert!(unknown.to_string().contains("invalid policy"), "{unknown}");
    // A prompt has no `uri`, a resource no `name`.
    let wrong = CedarPolicy::from_str(
        "p.cedar",
        r#"forbid(principal, action == Action::"get_prompt", resource) when { resource.uri == "x" };"#,
        DefaultEffect::Allow,
    )
    .unwrap_err();
    assert!(wrong.to_string().contains("invalid policy"), "{wrong}");
    // The README's example.
    CedarPolicy::from_str(
        "p.cedar",
        r#"forbid(principal, action == Action::"read_resource", resource) when { resource.uri like "notes://private/*" } unless { principal.scopes.contains("notes:private") };"#,
        DefaultEffect::Allow,
    )
    .unwrap();
    CedarPolicy::from_str(
        "p.cedar",
        r#"forbid(principal, action == Action::"get_prompt", resource) when { resource.name like "admin_*" };"#,
        DefaultEffect::Allow,
    )
    .unwrap();
}
