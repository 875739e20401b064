//! `authorize`: channel policies, scopes, rule-provider precedence, and the exact denials.

mod support;

use std::sync::Arc;

use milpa::audit::AuditOutcome;
use milpa::policy::{ChannelPolicy, PolicyRule, RuleEffect, StaticRule, StaticRuleProvider};
use milpa::{ErrorCode, ToolContext, ToolDefinition, ToolRegistry, ToolRegistryBuilder};
use serde_json::json;
use support::{Runs, audited, echo_args, echoing, only_record};

fn tool(name: &str, scopes: &[&str], mutating: bool, runs: &Runs) -> ToolDefinition {
    echoing(
        echo_args(name)
            .scopes(scopes.iter().copied())
            .mutating(mutating),
        runs,
    )
}

fn registry_with(builder: ToolRegistryBuilder, runs: &Runs) -> ToolRegistry {
    let mut registry = builder.build();
    registry.register(tool("read", &[], false, runs)).unwrap();
    registry
        .register(tool("write", &["notes:write"], true, runs))
        .unwrap();
    registry
        .register(tool("restart_db", &[], true, runs))
        .unwrap();
    registry
}

async fn denial(registry: &ToolRegistry, name: &str, ctx: &ToolContext) -> Option<String> {
    let result = registry.call(name, json!({}), ctx).await;
    if result.success {
        return None;
    }
    assert_eq!(result.code(), Some(&ErrorCode::Forbidden), "{result:?}");
    result.error
}

#[tokio::test]
async fn cli_allows_everything() {
    let runs = Runs::default();
    let registry = registry_with(ToolRegistry::builder(), &runs);
    for name in ["read", "write", "restart_db"] {
        assert_eq!(denial(&registry, name, &ToolContext::cli()).await, None);
    }
    assert_eq!(runs.count(), 3);
}

#[tokio::test]
async fn mcp_and_web_require_an_authenticated_principal() {
    let runs = Runs::default();
    let registry = registry_with(ToolRegistry::builder(), &runs);
    let anonymous = ToolContext::mcp("r", None, ["*"]);
    assert_eq!(
        denial(&registry, "read", &anonymous).await.as_deref(),
        Some("channel 'mcp' requires an authenticated principal (require_auth) — none provided.")
    );
    let empty = ToolContext::web("", ["*"]);
    assert_eq!(
        denial(&registry, "read", &empty).await.as_deref(),
        Some("channel 'web' requires an authenticated principal (require_auth) — none provided.")
    );
    // "0" is a principal, not anonymous.
    assert_eq!(
        denial(
            &registry,
            "read",
            &ToolContext::web("0", Vec::<String>::new())
        )
        .await,
        None
    );
    assert_eq!(runs.count(), 1);
}

#[tokio::test]
async fn an_unknown_channel_fails_closed() {
    let runs = Runs::default();
    let registry = registry_with(ToolRegistry::builder(), &runs);
    let ctx = ToolContext::builder("carrier-pigeon").scopes(["*"]).build();
    assert_eq!(
        denial(&registry, "read", &ctx).await.as_deref(),
        Some(
            "channel 'carrier-pigeon' requires an authenticated principal (require_auth) — none provided."
        )
    );
    assert_eq!(
        registry.policy_gate().channel_policy("carrier-pigeon"),
        ChannelPolicy::FAIL_CLOSED
    );
    assert_eq!(
        registry.policy_gate().registered_policy("carrier-pigeon"),
        None
    );
}

#[tokio::test]
async fn missing_scopes_name_what_is_needed_and_what_is_held() {
    let runs = Runs::default();
    let registry = registry_with(ToolRegistry::builder(), &runs);
    let reader = ToolContext::mcp("r", Some("bot".into()), ["notes:read", "tasks:write"]);
    assert_eq!(
        denial(&registry, "write", &reader).await.as_deref(),
        Some(
            "Missing required scope for tool 'write'. Need one of: notes:write — context has: notes:read, tasks:write."
        )
    );
    let none = ToolContext::mcp("r", Some("bot".into()), Vec::<String>::new());
    assert_eq!(
        denial(&registry, "write", &none).await.as_deref(),
        Some(
            "Missing required scope for tool 'write'. Need one of: notes:write — context has: (none)."
        )
    );
    let namespaced = ToolContext::mcp("r", Some("bot".into()), ["notes:*"]);
    assert_eq!(denial(&registry, "write", &namespaced).await, None);
    let other_ns = ToolContext::mcp("r", Some("bot".into()), ["tasks:*"]);
    assert!(denial(&registry, "write", &other_ns).await.is_some());
}

#[tokio::test]
async fn block_mutating_names_the_tool_and_channel_unless_allow_all() {
    let runs = Runs::default();
    let blocking = ChannelPolicy::default().with_block_mutating(true);
    let registry = registry_with(
        ToolRegistry::builder().channel_policy("kiosk", blocking),
        &runs,
    );
    let ctx = ToolContext::builder("kiosk")
        .principal("k")
        .scopes(["*"])
        .build();
    assert_eq!(
        denial(&registry, "restart_db", &ctx).await.as_deref(),
        Some("Mutating tool 'restart_db' is blocked on channel 'kiosk' (block_mutating policy).")
    );
    assert_eq!(denial(&registry, "read", &ctx).await, None);
    let lax = blocking.with_allow_all(true);
    let registry = registry_with(ToolRegistry::builder().channel_policy("kiosk", lax), &runs);
    assert_eq!(denial(&registry, "restart_db", &ctx).await, None);
}

#[tokio::test]
async fn telegram_asks_to_confirm_mutating_tools_only() {
    let runs = Runs::default();
    let registry = registry_with(ToolRegistry::builder(), &runs);
    let ctx = ToolContext::telegram(99, Some("u1".into()));
    let write = registry.call("restart_db", json!({}), &ctx).await;
    assert!(write.success && write.requires_confirmation(), "{write:?}");
    let read = registry.call("read", json!({}), &ctx).await;
    assert!(read.success && !read.requires_confirmation());
    assert_eq!(runs.count(), 1);
}

fn rule(
    id: Option<i64>,
    effect: RuleEffect,
    requires: &[&str],
    description: Option<&str>,
) -> PolicyRule {
    let mut rule = PolicyRule::new(effect).with_requires_scopes(requires.iter().copied());
    if let Some(id) = id {
        rule = rule.with_id(id);
    }
    if let Some(description) = description {
        rule = rule.with_description(description);
    }
    rule
}

fn rules(list: Vec<StaticRule>) -> Arc<StaticRuleProvider> {
    Arc::new(StaticRuleProvider::new(list))
}

fn for_tool(tool: &str, rule: PolicyRule) -> StaticRule {
    StaticRule::new(tool, rule)
}

#[tokio::test]
async fn rules_run_after_auth_and_scopes_and_before_the_channel_check() {
    let runs = Runs::default();
    // A deny rule for everything: it must not hide the earlier, more specific denials.
    let provider = rules(vec![for_tool(
        "*",
        rule(Some(7), RuleEffect::Deny, &[], None),
    )]);
    let registry = registry_with(ToolRegistry::builder().rule_provider(provider), &runs);
    assert!(
        denial(&registry, "read", &ToolContext::mcp("r", None, ["*"]))
            .await
            .unwrap()
            .contains("require_auth")
    );
    let scoped = ToolContext::mcp("r", Some("bot".into()), Vec::<String>::new());
    assert!(
        denial(&registry, "write", &scoped)
            .await
            .unwrap()
            .starts_with("Missing required scope")
    );
    assert_eq!(
        denial(
            &registry,
            "read",
            &ToolContext::mcp("r", Some("bot".into()), ["x"])
        )
        .await
        .as_deref(),
        Some("Denied by policy rule #7 for tool 'read' on channel 'mcp' (principal: bot).")
    );
    assert!(registry.has_rule_provider());
}

#[tokio::test]
async fn a_rule_allow_overrides_block_mutating_and_a_rule_may_require_scopes() {
    let runs = Runs::default();
    let blocking = ChannelPolicy::default()
        .with_block_mutating(true)
        .with_require_auth(true);
    let provider = rules(vec![
        for_tool(
            "restart_*",
            rule(Some(1), RuleEffect::Allow, &["ops:restart"], None),
        ),
        StaticRule::new(
            "read",
            rule(
                None,
                RuleEffect::Deny,
                &[],
                Some("Interns read through the wiki."),
            ),
        )
        .with_principal("intern-*")
        .with_channel("ops"),
    ]);
    let registry = registry_with(
        ToolRegistry::builder()
            .channel_policy("ops", blocking)
            .rule_provider(provider),
        &runs,
    );
    let operator = ToolContext::builder("ops")
        .principal("ann")
        .scopes(["ops:restart"])
        .build();
    assert_eq!(denial(&registry, "restart_db", &operator).await, None);
    let guest = ToolContext::builder("ops")
        .principal("bob")
        .scopes(["read"])
        .build();
    assert_eq!(
        denial(&registry, "restart_db", &guest).await.as_deref(),
        Some(
            "Policy rule #1 for tool 'restart_db' requires one of these scopes: ops:restart — context has: read."
        )
    );
    let intern = ToolContext::builder("ops").principal("intern-7").build();
    assert_eq!(
        denial(&registry, "read", &intern).await.as_deref(),
        Some("Interns read through the wiki.")
    );
    let staff = ToolContext::builder("ops").principal("ann").build();
    assert_eq!(denial(&registry, "read", &staff).await, None);
}

#[tokio::test]
async fn a_rule_without_id_prints_a_bare_hash_and_anonymous_principals_print_none() {
    let runs = Runs::default();
    let open = ChannelPolicy::default();
    let provider = rules(vec![for_tool(
        "read",
        rule(None, RuleEffect::Deny, &[], None),
    )]);
    let registry = registry_with(
        ToolRegistry::builder()
            .channel_policy("open", open)
            .rule_provider(provider),
        &runs,
    );
    let ctx = ToolContext::builder("open").build();
    assert_eq!(
        denial(&registry, "read", &ctx).await.as_deref(),
        Some("Denied by policy rule # for tool 'read' on channel 'open' (principal: (none)).")
    );
}

#[tokio::test]
async fn denials_are_audited_and_the_tool_never_runs() {
    let runs = Runs::default();
    let (mut registry, sink) = audited(ToolRegistry::builder());
    registry
        .register(tool("write", &["notes:write"], true, &runs))
        .unwrap();
    let ctx = ToolContext::mcp("req-1", Some("bot".into()), ["notes:read"]);
    registry
        .call("write", json!({"password": "hunter2"}), &ctx)
        .await;
    let record = only_record(&sink);
    assert_eq!(record.outcome, AuditOutcome::Denied);
    assert_eq!(record.code, Some(ErrorCode::Forbidden));
    assert_eq!(record.principal.as_deref(), Some("bot"));
    assert_eq!(record.args, json!({"password": "***REDACTED***"}));
    assert_eq!(runs.count(), 0);
}

/// A scope denial lists every scope the call needs (the tool's and a matching rule's), for
/// a transport to ask for them all at once; other denials list none. The call is audited as
/// denied either way.
#[tokio::test]
async fn scope_denials_report_every_scope_the_call_needs() {
    let runs = Runs::default();
    let sink = Arc::new(milpa::audit::MemoryAuditSink::new());
    let builder = ToolRegistry::builder()
        .audit_sink(sink.clone())
        .rule_provider(rules(vec![for_tool(
            "write",
            rule(
                Some(7),
                RuleEffect::Allow,
                &["notes:admin", "notes:write"],
                None,
            ),
        )]));
    let registry = registry_with(builder, &runs);

    // Lacks the tool's scope: the tool's and the rule's scopes, once each, in order.
    let reader = ToolContext::mcp("r", Some("ann".into()), ["notes:read"]);
    let result = registry.call("write", json!({}), &reader).await;
    assert_eq!(
        result.required_scopes(),
        Some(vec!["notes:write", "notes:admin"])
    );
    assert_eq!(
        result.meta.get("required_scopes"),
        Some(&json!(["notes:write", "notes:admin"]))
    );
    assert_eq!(only_record(&sink).outcome, AuditOutcome::Denied);

    // Holds the tool's scope but not the rule's: still both.
    let builder = ToolRegistry::builder().rule_provider(rules(vec![for_tool(
        "write",
        rule(Some(8), RuleEffect::Allow, &["notes:admin"], None),
    )]));
    let registry = registry_with(builder, &runs);
    let writer = ToolContext::mcp("r", Some("ann".into()), ["notes:write"]);
    let result = registry.call("write", json!({}), &writer).await;
    assert_eq!(
        result.required_scopes(),
        Some(vec!["notes:write", "notes:admin"])
    );

    // Not a scope denial: nothing listed.
    let anonymous = ToolContext::mcp("r", None, ["*"]);
    let result = registry.call("write", json!({}), &anonymous).await;
    assert_eq!(result.code(), Some(&ErrorCode::Forbidden));
    assert_eq!(result.required_scopes(), None);
    assert_eq!(runs.count(), 0);
}
