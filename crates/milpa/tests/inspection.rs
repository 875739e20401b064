//! Inspection: the plan's JSON contract, its text form, and a grid of tools × channels ×
//! callers × wiring where every step's presence is checked against what a real call does.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use milpa::approval::Verdict;
use milpa::events::{Dispatcher, Event};
use milpa::inspect::{InvocationPlan, StepPresence};
use milpa::policy::ChannelPolicy;
use milpa::rate_limit::{InMemoryRateLimiter, Quota, RateDecision, RateKey, RateLimiter};
use milpa::{Clamp, Deferred, ErrorCode, StepKind, ToolContext, ToolDefinition, ToolRegistry};
use serde_json::{Value, json};

#[test]
fn the_json_has_the_contract_shape() {
    let mut registry = ToolRegistry::new();
    registry
        .register(
            ToolDefinition::builder("settings_update")
                .input_schema(json!({"type": "object", "properties": {"k": {"type": "string"}}}))
                .scopes(["settings:write"])
                .mutating(true)
                .sync(|_, _| Value::Null),
        )
        .unwrap();
    let ctx = ToolContext::builder("web").build();
    let plan = InvocationPlan::build(&registry, "settings_update", &ctx).unwrap();
    let json = plan.to_json();
    let keys: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "schemaVersion",
            "operation",
            "channel",
            "context",
            "assumptions",
            "wiring",
            "steps"
        ]
    );
    assert_eq!(json["schemaVersion"], "1.0");
    assert_eq!(json["operation"], "settings_update");
    assert_eq!(json["channel"], "web");
    assert_eq!(
        json["context"],
        json!({"actor": null, "scopes": [], "mode": "execute"})
    );
    assert_eq!(
        json["assumptions"],
        json!(["actor anonymous; channel 'web' requires auth → authorize would deny"])
    );
    assert_eq!(
        json["wiring"],
        json!({"rateLimiter": "absent", "dispatcher": "absent", "ruleProvider": "absent"})
    );
    let steps = json["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 11);
    let kinds: Vec<&str> = steps.iter().map(|s| s["kind"].as_str().unwrap()).collect();
    let expected: Vec<&str> = StepKind::ORDER.iter().map(|k| k.as_str()).collect();
    assert_eq!(kinds, expected);
    let step_keys: Vec<&str> = steps[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        step_keys,
        [
            "kind", "role", "presence", "blocking", "mutates", "wraps", "source"
        ]
    );
    assert_eq!(steps[9]["wraps"], "execute");
    assert_eq!(steps[9]["role"], "boundary");
    assert_eq!(steps[10]["role"], "outcome");
    assert_eq!(steps[8]["mutates"], true);
    assert_eq!(steps[4]["presence"], "skipped");
    let back: InvocationPlan = serde_json::from_value(json).unwrap();
    assert_eq!(back, plan);
}

#[test]
fn the_text_form_is_a_table_then_assumptions_and_wiring() {
    let mut registry = ToolRegistry::new();
    registry
        .register(ToolDefinition::builder("ping").sync(|_, _| Value::Null))
        .unwrap();
    let plan = InvocationPlan::build(&registry, "ping", &ToolContext::cli()).unwrap();
    let text = plan.to_text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "ping on channel 'cli' as local-shell [scopes: *; mode: execute]"
    );
    assert!(
        lines[2].starts_with("kind")
            && lines[2].contains("presence")
            && lines[2].ends_with("source")
    );
    assert!(lines[3].starts_with("resolve "));
    assert!(lines[13].starts_with("audit "));
    assert!(text.contains("assumptions:\n  (none)\n"));
    assert!(
        text.ends_with("wiring: rate limiter absent, dispatcher absent, rule provider absent\n")
    );
    assert!(InvocationPlan::build(&registry, "nope", &ToolContext::cli()).is_none());
}

/// Counts what the limiter is asked to charge.
struct CountingLimiter {
    inner: InMemoryRateLimiter,
    charges: AtomicUsize,
}

impl RateLimiter for CountingLimiter {
    fn consume<'a>(
        &'a self,
        key: RateKey<'a>,
        cost: u32,
        quota: Quota,
    ) -> Deferred<'a, Result<RateDecision, milpa::StoreError>> {
        self.charges.fetch_add(1, Ordering::SeqCst);
        self.inner.consume(key, cost, quota)
    }
    fn reset<'a>(&'a self, key: RateKey<'a>) -> Deferred<'a, Result<(), milpa::StoreError>> {
        self.inner.reset(key)
    }
}

struct Probe {
    registry: ToolRegistry,
    runs: Arc<Mutex<Vec<Value>>>,
    listened: Arc<AtomicUsize>,
    limiter: Option<Arc<CountingLimiter>>,
}

fn tools() -> Vec<(&'static str, milpa::ToolDefinitionBuilder)> {
    let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
    vec![
        ("plain", ToolDefinition::builder("plain")),
        (
            "typed",
            ToolDefinition::builder("typed").input_schema(schema.clone()),
        ),
        (
            "clamped",
            ToolDefinition::builder("clamped")
                .input_schema(schema.clone())
                .clamp("n", Clamp::range(0, 10)),
        ),
        (
            "scoped",
            ToolDefinition::builder("scoped").scopes(["notes:write"]),
        ),
        (
            "mutating",
            ToolDefinition::builder("mutating").mutating(true),
        ),
        (
            "confirmed",
            ToolDefinition::builder("confirmed")
                .mutating(true)
                .requires_confirmation(true),
        ),
        (
            "hard",
            ToolDefinition::builder("hard").hard_timeout(Duration::from_secs(5)),
        ),
        (
            "human",
            ToolDefinition::builder("human")
                .mutating(true)
                .requires_human_approval(true),
        ),
    ]
}

fn probe(with_dispatcher: bool, with_listener: bool, with_limiter: bool) -> Probe {
    let mut builder = ToolRegistry::builder().channel_policy(
        "kiosk",
        ChannelPolicy::default()
            .with_block_mutating(true)
            .with_require_auth(false),
    );
    let listened = Arc::new(AtomicUsize::new(0));
    if with_dispatcher {
        let dispatcher = Arc::new(Dispatcher::new());
        if with_listener {
            let counter = listened.clone();
            dispatcher.subscribe("tool.executing", 0, move |_: &Event<'_>| {
                counter.fetch_add(1, Ordering::SeqCst);
            });
        }
        builder = builder.dispatcher(dispatcher);
    }
    let limiter = with_limiter.then(|| {
        Arc::new(CountingLimiter {
            inner: InMemoryRateLimiter::new(),
            charges: AtomicUsize::new(0),
        })
    });
    if let Some(limiter) = &limiter {
        builder = builder
            .rate_limiter(limiter.clone())
            .default_quota(Quota::new(10_000, Duration::from_secs(60)));
    }
    let mut registry = builder.build();
    let runs = Arc::new(Mutex::new(Vec::new()));
    for (_, tool) in tools() {
        let runs = runs.clone();
        registry
            .register(tool.sync(move |args: &Value, _ctx: &ToolContext| {
                runs.lock().unwrap().push(args.clone());
                json!("ran")
            }))
            .unwrap();
    }
    Probe {
        registry,
        runs,
        listened,
        limiter,
    }
}

fn contexts() -> Vec<ToolContext> {
    let mut out = Vec::new();
    for channel in ["cli", "mcp", "web", "telegram", "kiosk", "pigeon"] {
        out.push(ToolContext::builder(channel).build());
        out.push(
            ToolContext::builder(channel)
                .principal("ann")
                .scopes(["notes:read"])
                .build(),
        );
        out.push(
            ToolContext::builder(channel)
                .principal("bob")
                .scopes(["notes:*"])
                .build(),
        );
    }
    out.push(ToolContext::cli());
    out.push(ToolContext::cli().as_plan());
    out.push(
        ToolContext::builder("mcp")
            .principal("bob")
            .scopes(["*"])
            .build()
            .as_plan(),
    );
    out
}

#[tokio::test]
async fn every_presence_matches_what_a_real_call_does() {
    let mut checked = 0;
    for (dispatcher, listener, limiter) in [
        (false, false, false),
        (true, false, false),
        (true, true, true),
        (false, false, true),
    ] {
        let probe = probe(dispatcher, listener, limiter);
        for (name, _) in tools() {
            for ctx in contexts() {
                let plan = InvocationPlan::build(&probe.registry, name, &ctx).unwrap();
                let presence = |kind: StepKind| plan.step(kind).presence;
                let denied_predicted = plan
                    .assumptions
                    .iter()
                    .any(|a| a.contains("authorize would deny"));
                probe.runs.lock().unwrap().clear();
                let (listened, charged) = (
                    probe.listened.load(Ordering::SeqCst),
                    probe
                        .limiter
                        .as_ref()
                        .map(|l| l.charges.load(Ordering::SeqCst)),
                );
                let args = if name == "clamped" {
                    json!({"n": 99})
                } else {
                    json!({})
                };
                let result = probe.registry.call(name, args, &ctx).await;
                let label = format!(
                    "{name} on {} as {:?} (mode {}) d={dispatcher} l={listener} r={limiter}: {result:?}",
                    ctx.channel(),
                    ctx.principal(),
                    ctx.mode()
                );

                // authorize: denied exactly when the plan predicted it.
                assert_eq!(
                    result.code() == Some(&ErrorCode::Forbidden),
                    denied_predicted,
                    "{label}"
                );
                // rate_limit: charged exactly when active (every call here passes validation).
                if let (Some(before), Some(limiter)) = (charged, &probe.limiter) {
                    let charged_now = limiter.charges.load(Ordering::SeqCst) > before;
                    assert_eq!(
                        charged_now,
                        !denied_predicted && presence(StepKind::RateLimit) == StepPresence::Active,
                        "{label}"
                    );
                } else {
                    assert_eq!(
                        presence(StepKind::RateLimit),
                        StepPresence::Skipped,
                        "{label}"
                    );
                }
                if denied_predicted {
                    checked += 1;
                    continue;
                }
                // plan_mode: active exactly when the call returned a plan.
                let planned = result.data.get("plan").is_some();
                assert_eq!(
                    planned,
                    presence(StepKind::PlanMode) == StepPresence::Active,
                    "{label}"
                );
                // confirm: conditional exactly when the first call asks for a token, and
                // dormant (present, but with nothing to ask) otherwise.
                let parked = result.code() == Some(&ErrorCode::ApprovalPending);
                let asked = result.requires_confirmation() || parked;
                assert_eq!(
                    presence(StepKind::Confirm),
                    if asked {
                        StepPresence::Conditional
                    } else {
                        StepPresence::Dormant
                    },
                    "{label}"
                );
                if asked {
                    // The plan describes the whole dance: the replay goes through the rest.
                    assert!(probe.runs.lock().unwrap().is_empty(), "{label}");
                    let token = if parked {
                        // A person (another principal, at the terminal) grants it.
                        let id = result.data["approval_id"].as_str().unwrap().to_owned();
                        let person = ToolContext::builder("cli").principal("zed").build();
                        probe
                            .registry
                            .decide_approval(&id, Verdict::Grant, None, &person)
                            .await
                            .unwrap();
                        id
                    } else {
                        result.confirm_token().unwrap().to_owned()
                    };
                    let replay = probe
                        .registry
                        .call(name, json!({"confirm_token": token}), &ctx)
                        .await;
                    assert!(replay.success, "{label}: replay {replay:?}");
                }
                // emit_executing: active exactly when a listener heard the call.
                let heard = probe.listened.load(Ordering::SeqCst) > listened;
                assert_eq!(
                    heard,
                    presence(StepKind::EmitExecuting) == StepPresence::Active,
                    "{label}"
                );
                // execute: the tool ran exactly when execute is active.
                let ran = !probe.runs.lock().unwrap().is_empty();
                assert_eq!(
                    ran,
                    presence(StepKind::Execute) == StepPresence::Active,
                    "{label}"
                );
                // clamp: active exactly when the tool saw the clamped value.
                if ran && name == "clamped" {
                    assert_eq!(probe.runs.lock().unwrap()[0], json!({"n": 10}));
                    assert_eq!(presence(StepKind::Clamp), StepPresence::Active);
                } else if name != "clamped" {
                    assert_eq!(presence(StepKind::Clamp), StepPresence::Skipped, "{label}");
                }
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 4 * 8 * 21);
}

#[tokio::test]
async fn validate_is_active_exactly_when_a_schema_can_refuse() {
    let probe = probe(false, false, false);
    for (name, _) in tools() {
        let plan = InvocationPlan::build(&probe.registry, name, &ToolContext::cli()).unwrap();
        let result = probe
            .registry
            .call(name, json!({"n": "not a number"}), &ToolContext::cli())
            .await;
        let refused = result.code() == Some(&ErrorCode::ValidationError);
        assert_eq!(
            refused,
            plan.step(StepKind::Validate).presence == StepPresence::Active,
            "{name}"
        );
    }
}

#[test]
fn the_plan_never_invents_an_actor() {
    let mut registry = ToolRegistry::new();
    registry
        .register(ToolDefinition::builder("t").sync(|_, _| Value::Null))
        .unwrap();
    for channel in ["mcp", "web", "pigeon"] {
        let plan =
            InvocationPlan::build(&registry, "t", &ToolContext::builder(channel).build()).unwrap();
        assert_eq!(plan.context.actor, None);
        assert!(plan.assumptions.iter().any(|a| a
            == &format!(
                "actor anonymous; channel '{channel}' requires auth → authorize would deny"
            )));
    }
    let unknown = InvocationPlan::build(
        &registry,
        "t",
        &ToolContext::builder("pigeon").principal("p").build(),
    )
    .unwrap();
    assert_eq!(
        unknown.assumptions,
        [
            "channel 'pigeon' has no policy of its own → the fail-closed policy applies (require_auth)"
        ]
    );
    assert!(
        unknown
            .step(StepKind::Authorize)
            .source
            .contains("fail-closed")
    );
}
