//! The gate-order security property, over thousands of generated tools, contexts, channel
//! policies and rules: neither a `tool.executing` listener nor the tool itself is ever
//! invoked for a call that validation, authorization or rate limiting refused.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use milpa::events::{Dispatcher, Event};
use milpa::policy::{ChannelPolicy, PolicyRule, RuleEffect, StaticRule, StaticRuleProvider};
use milpa::rate_limit::{InMemoryRateLimiter, Quota};
use milpa::{ErrorCode, ToolContext, ToolDefinition, ToolRegistry};
use proptest::prelude::*;
use serde_json::{Value, json};

const SCOPES: [&str; 5] = ["notes:read", "notes:write", "admin", "notes:*", "*"];
const CHANNELS: [&str; 6] = ["cli", "mcp", "web", "telegram", "custom", "unknown-x"];

#[derive(Debug, Clone)]
struct Case {
    tool_scopes: Vec<&'static str>,
    mutating: bool,
    confirm: bool,
    schema_requires_n: bool,
    channel: &'static str,
    principal: Option<&'static str>,
    ctx_scopes: Vec<&'static str>,
    custom_policy: (bool, bool, bool, bool),
    rule: Option<(bool, bool, Vec<&'static str>)>,
    quota: u32,
    calls: Vec<Value>,
    plan: bool,
}

fn scope_subset() -> impl Strategy<Value = Vec<&'static str>> {
    proptest::sample::subsequence(SCOPES.to_vec(), 0..=3)
}

fn args() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!({"n": 1})),
        Just(json!({"n": "one"})),
        Just(json!({})),
        Just(json!({"n": 2, "extra": true})),
        Just(json!([1])),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    (
        (
            proptest::sample::subsequence(SCOPES[..3].to_vec(), 0..=2),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
        ),
        (
            proptest::sample::select(CHANNELS.to_vec()),
            proptest::option::of(proptest::sample::select(vec!["", "ann", "0"])),
        ),
        scope_subset(),
        (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()),
        proptest::option::of((any::<bool>(), any::<bool>(), scope_subset())),
        (
            1u32..8,
            proptest::collection::vec(args(), 1..6),
            any::<bool>(),
        ),
    )
        .prop_map(
            |(
                (tool_scopes, mutating, confirm, schema_requires_n),
                (channel, principal),
                ctx_scopes,
                custom_policy,
                rule,
                (quota, calls, plan),
            )| Case {
                tool_scopes,
                mutating,
                confirm,
                schema_requires_n,
                channel,
                principal,
                ctx_scopes,
                custom_policy,
                rule,
                quota,
                calls,
                plan,
            },
        )
}

fn run(case: &Case, runtime: &tokio::runtime::Runtime) -> Result<(), TestCaseError> {
    let tool_runs = Arc::new(AtomicUsize::new(0));
    let listener_runs = Arc::new(AtomicUsize::new(0));
    let dispatcher = Arc::new(Dispatcher::new());
    let counter = listener_runs.clone();
    dispatcher.subscribe("tool.executing", 0, move |_: &Event<'_>| {
        counter.fetch_add(1, Ordering::SeqCst);
    });
    let (allow_all, require_auth, block_mutating, confirm_mutating) = case.custom_policy;
    let mut builder = ToolRegistry::builder()
        .dispatcher(dispatcher)
        .rate_limiter(Arc::new(InMemoryRateLimiter::new()))
        .default_quota(Quota::new(case.quota, Duration::from_secs(3600)))
        .channel_policy(
            "custom",
            ChannelPolicy::default()
                .with_allow_all(allow_all)
                .with_require_auth(require_auth)
                .with_block_mutating(block_mutating)
                .with_require_confirmation_for_mutating(confirm_mutating),
        );
    if let Some((match_all, allow, requires)) = &case.rule {
        builder = builder.rule_provider(Arc::new(StaticRuleProvider::new(vec![StaticRule::new(
            if *match_all { "*" } else { "other" },
            PolicyRule::new(if *allow {
                RuleEffect::Allow
            } else {
                RuleEffect::Deny
            })
            .with_id(1)
            .with_requires_scopes(requires.iter().map(|s| s.to_string())),
        )])));
    }
    let mut registry = builder.build();
    let schema = if case.schema_requires_n {
        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": false})
    } else {
        json!({})
    };
    let runs = tool_runs.clone();
    registry
        .register(
            ToolDefinition::builder("t")
                .input_schema(schema)
                .scopes(case.tool_scopes.iter().copied())
                .mutating(case.mutating)
                .requires_confirmation(case.confirm)
                .sync(move |_, _| {
                    runs.fetch_add(1, Ordering::SeqCst);
                    json!("ran")
                }),
        )
        .unwrap();
    let mut ctx = ToolContext::builder(case.channel).scopes(case.ctx_scopes.iter().copied());
    if let Some(p) = case.principal {
        ctx = ctx.principal(p);
    }
    let mut ctx = ctx.build();
    if case.plan {
        ctx = ctx.as_plan();
    }
    for args in &case.calls {
        let (tools_before, listeners_before) = (
            tool_runs.load(Ordering::SeqCst),
            listener_runs.load(Ordering::SeqCst),
        );
        let result = runtime.block_on(registry.call("t", args.clone(), &ctx));
        let ran = tool_runs.load(Ordering::SeqCst) - tools_before;
        let heard = listener_runs.load(Ordering::SeqCst) - listeners_before;
        let refused = matches!(
            result.code(),
            Some(ErrorCode::ValidationError | ErrorCode::Forbidden | ErrorCode::RateLimited)
        );
        if refused {
            prop_assert_eq!(ran, 0, "tool ran for a refused call: {:?}", result);
            prop_assert_eq!(heard, 0, "listener heard a refused call: {:?}", result);
        }
        if ran + heard > 0 {
            prop_assert!(
                result.success,
                "something ran but the call failed: {:?}",
                result
            );
            prop_assert!(!case.plan, "plan mode ran something");
            prop_assert!(
                !result.requires_confirmation(),
                "ran while asking for confirmation"
            );
        }
        prop_assert!(ran <= 1 && heard <= 1);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, .. ProptestConfig::default() })]

    #[test]
    fn nothing_runs_for_a_call_a_gate_refused(case in case()) {
        thread_local! {
            static RUNTIME: tokio::runtime::Runtime =
                tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        }
        RUNTIME.with(|runtime| run(&case, runtime))?;
    }
}
