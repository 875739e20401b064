//! What a policy can see: the caller's scopes and whether it is authenticated, the channel
//! and mode, the tool's `mutating` and `upstream`.

mod common;

use common::{caller, policy, registry};
use milpa::policy::{CallPolicy, PolicyDecision, PolicyInput};
use milpa::{ErrorCode, Mode, ToolContext, ToolDefinition};
use milpa_cedar::DefaultEffect;
use serde_json::json;
use std::future::IntoFuture;

fn decide(policy: &dyn CallPolicy, ctx: &ToolContext, tool: &ToolDefinition) -> PolicyDecision {
    let args = json!({});
    futures_ready(policy.evaluate(PolicyInput::new(ctx, tool, &args)))
}

/// Cedar answers in memory: the deferred is ready at once.
fn futures_ready(deferred: milpa::Deferred<'_, PolicyDecision>) -> PolicyDecision {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(deferred.into_future())
}

#[tokio::test]
async fn principal_scopes_are_usable() {
    let text = r#"
@id("admins-refund-big")
forbid(principal, action, resource == Tool::"refund")
when { context.args.amount >= 100 } unless { principal.scopes.contains("admin") };
"#;
    let (registry, _) = registry(policy(text, DefaultEffect::Allow));
    let args = json!({"amount": 500});
    let admin = registry
        .call(
            "refund",
            args.clone(),
            &caller("root", &["admin", "billing"]),
        )
        .await;
    assert!(admin.success, "{admin:?}");
    let clerk = registry
        .call("refund", args, &caller("clerk", &["billing"]))
        .await;
    assert_eq!(clerk.code(), Some(&ErrorCode::Forbidden));
    assert!(clerk.error.unwrap().contains("(principal: clerk)"));
}

#[test]
fn the_principal_name_and_anonymous_callers() {
    let text = r#"
@id("only-alice") forbid(principal, action, resource) unless { principal == Principal::"alice" };
@id("no-anonymous") forbid(principal, action, resource) unless { context.authenticated };
"#;
    let policy = policy(text, DefaultEffect::Allow);
    let tool = ToolDefinition::builder("t").sync(|_, _| json!(1));
    let alice = ToolContext::builder("http").principal("alice").build();
    assert_eq!(
        decide(policy.as_ref(), &alice, &tool),
        PolicyDecision::Continue
    );
    let anonymous = ToolContext::builder("http").build();
    assert_eq!(
        decide(policy.as_ref(), &anonymous, &tool),
        PolicyDecision::Deny("Denied by policy 'only-alice', 'no-anonymous' for tool 't' on channel 'http' (principal: (none)).".into())
    );
    // A principal that is called "anonymous" is still authenticated.
    let named = ToolContext::builder("http").principal("anonymous").build();
    assert_eq!(
        decide(policy.as_ref(), &named, &tool),
        PolicyDecision::Deny(
            "Denied by policy 'only-alice' for tool 't' on channel 'http' (principal: anonymous)."
                .into()
        )
    );
}

#[test]
fn channel_and_mode_are_in_the_context() {
    let text = r#"
@id("no-writes-from-http") forbid(principal, action, resource) when { context.channel == "http" && resource.mutating };
@id("no-plans") forbid(principal, action, resource) when { context.mode == "plan" };
"#;
    let policy = policy(text, DefaultEffect::Allow);
    let write = ToolDefinition::builder("w")
        .mutating(true)
        .sync(|_, _| json!(1));
    let read = ToolDefinition::builder("r")
        .mutating(false)
        .sync(|_, _| json!(1));
    let http = ToolContext::builder("http").principal("p").build();
    let cli = ToolContext::builder("cli").principal("p").build();
    assert!(
        matches!(decide(policy.as_ref(), &http, &write), PolicyDecision::Deny(m) if m.contains("'no-writes-from-http'"))
    );
    assert_eq!(
        decide(policy.as_ref(), &http, &read),
        PolicyDecision::Continue
    );
    assert_eq!(
        decide(policy.as_ref(), &cli, &write),
        PolicyDecision::Continue
    );
    let planning = cli.with_mode(Mode::Plan);
    assert!(
        matches!(decide(policy.as_ref(), &planning, &read), PolicyDecision::Deny(m) if m.contains("'no-plans'"))
    );
}

#[tokio::test]
async fn the_upstream_of_a_gateway_tool() {
    let text = r#"
@id("fs-read-only") forbid(principal, action, resource) when { resource.upstream == "fs" && resource.mutating };
@id("natives-only-for-admins") forbid(principal, action, resource) when { resource.upstream == "" && !principal.scopes.contains("admin") };
"#;
    let (registry, _) = registry(policy(text, DefaultEffect::Allow));
    let admin = caller("root", &["admin"]);
    let write = registry
        .call("fs_write", json!({"path": "/srv/x"}), &admin)
        .await;
    assert!(
        write.error.as_deref().unwrap().contains("'fs-read-only'"),
        "{write:?}"
    );
    assert!(
        registry
            .call("read_file", json!({"path": "/x"}), &admin)
            .await
            .success
    );
    let other = registry
        .call("read_file", json!({"path": "/x"}), &caller("bob", &[]))
        .await;
    assert!(
        other
            .error
            .as_deref()
            .unwrap()
            .contains("'natives-only-for-admins'"),
        "{other:?}"
    );
}
