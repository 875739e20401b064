//! Human approval: `requires_human_approval` parks a call until a person other than the
//! caller decides; replays follow DESIGN §5 exactly; decisions are audited.

mod support;

use std::sync::Arc;
use std::time::Duration;

use milpa::approval::{ApprovalError, ApprovalKind, ApprovalQueue, ApprovalState, Verdict};
use milpa::audit::{AuditOutcome, MemoryAuditSink};
use milpa::inspect::{InvocationPlan, StepPresence};
use milpa::policy::ChannelPolicy;
use milpa::verification::{
    HumanVerifier, VerificationRecord, VerificationStore, VerificationStoreError, VerificationTools,
};
use milpa::{
    Deferred, ErrorCode, StepKind, StoreError, ToolContext, ToolDefinition, ToolRegistry,
    ToolResult,
};
use serde_json::json;
use support::{Runs, audited, echo_args, echoing};

const INVALID: &str = "Invalid or expired confirmation token";

fn agent() -> ToolContext {
    ToolContext::mcp("r1", Some("agent".into()), ["ops:*"])
}

fn alice() -> ToolContext {
    ToolContext::web("alice", ["approvals:grant"])
}

fn registry_with(
    builder: milpa::ToolRegistryBuilder,
    runs: &Runs,
) -> (ToolRegistry, Arc<MemoryAuditSink>) {
    let (mut registry, sink) = audited(builder);
    registry
        .register(echoing(
            echo_args("deploy")
                .input_schema(json!({
                    "type": "object",
                    "properties": {"env": {"type": "string"}, "token": {"type": "string"}},
                    "required": ["env"],
                    "additionalProperties": false
                }))
                .scopes(["ops:deploy"])
                .mutating(true)
                .requires_human_approval(true),
            runs,
        ))
        .unwrap();
    registry
        .register(echoing(echo_args("restart").mutating(true), runs))
        .unwrap();
    registry
        .register(echoing(echo_args("status"), runs))
        .unwrap();
    (registry, sink)
}

fn registry(runs: &Runs) -> (ToolRegistry, Arc<MemoryAuditSink>) {
    registry_with(ToolRegistry::builder(), runs)
}

fn approval_id(result: &ToolResult) -> String {
    assert_eq!(
        result.code(),
        Some(&ErrorCode::ApprovalPending),
        "{result:?}"
    );
    result.data["approval_id"]
        .as_str()
        .expect("an approval id")
        .to_owned()
}

#[tokio::test]
async fn the_first_call_parks_and_runs_nothing() {
    let runs = Runs::default();
    let (registry, sink) = registry(&runs);
    let parked = registry
        .call("deploy", json!({"env": "prod"}), &agent())
        .await;
    assert!(!parked.success);
    let id = approval_id(&parked);
    assert_eq!(parked.data["action_summary"], json!("deploy(env=prod)"));
    let expires = parked.data["expires_at"].as_str().unwrap();
    assert!(
        expires.ends_with("+00:00") && expires.len() == 25,
        "{expires}"
    );
    let error = parked.error.as_deref().unwrap();
    assert!(
        error.contains("deploy(env=prod)") && error.contains(&id),
        "{error}"
    );
    assert_eq!(runs.count(), 0);

    let records = sink.take();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].outcome, AuditOutcome::ApprovalPending);
    assert_eq!(records[0].principal.as_deref(), Some("agent"));

    let queue = registry.approvals();
    let pending = queue.pending(10).await.unwrap();
    assert_eq!(pending.len(), 1);
    let item = &pending[0];
    assert_eq!(item.id(), id);
    assert_eq!(item.kind(), ApprovalKind::ToolCall);
    assert_eq!(item.tool(), Some("deploy"));
    assert_eq!(item.channel(), Some("mcp"));
    assert_eq!(item.requested_by(), Some("agent"));
    assert_eq!(item.state(0), ApprovalState::Pending);
}

#[tokio::test]
async fn a_parked_call_keeps_what_its_tool_does_where_it_goes_and_which_client_asked() {
    let runs = Runs::default();
    let (mut registry, _sink) = registry(&runs);
    registry
        .register(echoing(
            ToolDefinition::builder("up__wipe")
                .description("Wipes the <upstream> disk")
                .upstream("files")
                .mutating(true)
                .requires_human_approval(true),
            &runs,
        ))
        .unwrap();
    let from_desktop = ToolContext::builder("mcp")
        .principal("agent")
        .scopes(["ops:*"])
        .client("claude-desktop")
        .build();
    approval_id(&registry.call("up__wipe", json!({}), &from_desktop).await);
    // The same agent through a client that named nobody.
    approval_id(
        &registry
            .call("deploy", json!({"env": "prod"}), &agent())
            .await,
    );
    assert_eq!(runs.count(), 0);

    let pending = registry.approvals().pending(10).await.unwrap();
    let wipe = pending
        .iter()
        .find(|a| a.tool() == Some("up__wipe"))
        .unwrap();
    assert_eq!(wipe.description(), Some("Wipes the <upstream> disk"));
    assert_eq!(wipe.mutating(), Some(true));
    assert_eq!(wipe.upstream(), Some("files"));
    assert_eq!(wipe.client(), Some("claude-desktop"));
    let shown = wipe.to_json(registry.redactor(), 0);
    assert_eq!(shown["description"], json!("Wipes the <upstream> disk"));
    assert_eq!(shown["mutating"], json!(true));
    assert_eq!(shown["upstream"], json!("files"));
    assert_eq!(shown["client"], json!("claude-desktop"));

    let deploy = pending.iter().find(|a| a.tool() == Some("deploy")).unwrap();
    assert_eq!(deploy.description(), Some("Echoes its arguments"));
    assert_eq!(deploy.mutating(), Some(true));
    assert_eq!(deploy.upstream(), None);
    assert_eq!(deploy.client(), None);
    let shown = deploy.to_json(registry.redactor(), 0);
    assert_eq!(shown["upstream"], json!(null));
    assert_eq!(shown["client"], json!(null));
}

#[tokio::test]
async fn a_replay_while_pending_answers_pending_and_runs_nothing() {
    let runs = Runs::default();
    let (registry, _sink) = registry(&runs);
    let id = approval_id(
        &registry
            .call("deploy", json!({"env": "prod"}), &agent())
            .await,
    );
    let replay = registry
        .call("deploy", json!({"confirm_token": id}), &agent())
        .await;
    assert_eq!(approval_id(&replay), id);
    assert_eq!(runs.count(), 0);
    assert_eq!(registry.approvals().pending(10).await.unwrap().len(), 1);
}

#[tokio::test]
async fn after_a_grant_the_replay_runs_the_parked_arguments_once() {
    let runs = Runs::default();
    let (registry, sink) = registry(&runs);
    let id = approval_id(
        &registry
            .call("deploy", json!({"env": "prod"}), &agent())
            .await,
    );
    let granted = registry
        .decide_approval(&id, Verdict::Grant, Some("change 42"), &alice())
        .await
        .unwrap();
    assert_eq!(granted.state(0), ApprovalState::Granted);
    assert_eq!(granted.decided_by(), Some(("alice", Some("change 42"))));

    // Other arguments sent with the token are ignored: the parked ones run.
    let ran = registry
        .call(
            "deploy",
            json!({"confirm_token": id, "env": "staging"}),
            &agent(),
        )
        .await;
    assert!(ran.success, "{ran:?}");
    assert_eq!(ran.data, json!({"env": "prod"}));
    assert_eq!(runs.count(), 1);

    let again = registry
        .call("deploy", json!({"confirm_token": id}), &agent())
        .await;
    assert_eq!(again.code(), Some(&ErrorCode::ValidationError));
    assert_eq!(again.error.as_deref(), Some(INVALID));
    assert_eq!(runs.count(), 1);
    let item = registry.approvals().get(&id).await.unwrap().unwrap();
    assert_eq!(item.state(0), ApprovalState::Executed);

    let outcomes: Vec<(AuditOutcome, Option<String>)> = sink
        .take()
        .into_iter()
        .map(|r| (r.outcome, r.principal))
        .collect();
    assert_eq!(
        outcomes,
        [
            (AuditOutcome::ApprovalPending, Some("agent".into())),
            (AuditOutcome::ApprovalGranted, Some("alice".into())),
            (AuditOutcome::Executed, Some("agent".into())),
            (AuditOutcome::InvalidConfirmation, Some("agent".into())),
        ]
    );
}

#[tokio::test]
async fn a_decision_is_audited_with_the_approval_and_the_reason() {
    let runs = Runs::default();
    let (registry, sink) = registry(&runs);
    let id = approval_id(
        &registry
            .call("deploy", json!({"env": "prod"}), &agent())
            .await,
    );
    sink.take();
    registry
        .decide_approval(&id, Verdict::Reject, Some("not today"), &alice())
        .await
        .unwrap();
    let record = support::only_record(&sink);
    assert_eq!(record.outcome, AuditOutcome::ApprovalRejected);
    assert_eq!(record.tool, "deploy");
    assert_eq!(record.channel, "web");
    assert_eq!(
        record.args,
        json!({"approval_id": id, "decision": "reject", "reason": "not today"})
    );
}

#[tokio::test]
async fn after_a_reject_the_replay_is_forbidden_naming_who_and_why() {
    let runs = Runs::default();
    let (registry, _sink) = registry(&runs);
    let id = approval_id(
        &registry
            .call("deploy", json!({"env": "prod"}), &agent())
            .await,
    );
    registry
        .decide_approval(&id, Verdict::Reject, Some("freeze week"), &alice())
        .await
        .unwrap();
    let replay = registry
        .call("deploy", json!({"confirm_token": id}), &agent())
        .await;
    assert_eq!(replay.code(), Some(&ErrorCode::Forbidden));
    let error = replay.error.as_deref().unwrap();
    assert!(
        error.starts_with("Rejected by alice: freeze week"),
        "{error}"
    );
    assert_eq!(runs.count(), 0);
}

#[tokio::test]
async fn the_caller_cannot_decide_its_own_parked_call() {
    let runs = Runs::default();
    let (registry, sink) = registry(&runs);
    let caller = ToolContext::mcp("r1", Some("agent".into()), ["*"]);
    let id = approval_id(
        &registry
            .call("deploy", json!({"env": "prod"}), &caller)
            .await,
    );
    sink.take();
    for verdict in [Verdict::Grant, Verdict::Reject] {
        let refused = registry
            .decide_approval(&id, verdict, None, &caller)
            .await
            .unwrap_err();
        assert!(
            matches!(&refused, ApprovalError::SelfApproval { principal, .. } if principal == "agent"),
            "{refused:?}"
        );
        assert_eq!(refused.code(), ErrorCode::Forbidden);
    }
    // Not even from the terminal under the same name.
    let same_name_at_terminal = ToolContext::builder("cli").principal("agent").build();
    assert!(matches!(
        registry
            .decide_approval(&id, Verdict::Grant, None, &same_name_at_terminal)
            .await,
        Err(ApprovalError::SelfApproval { .. })
    ));
    let records = sink.take();
    assert_eq!(records.len(), 3);
    assert!(
        records
            .iter()
            .all(|r| r.outcome == AuditOutcome::ApprovalRefused)
    );
    assert_eq!(
        registry
            .approvals()
            .get(&id)
            .await
            .unwrap()
            .unwrap()
            .state(0),
        ApprovalState::Pending
    );
}

#[tokio::test]
async fn approvers_need_the_scope_except_at_the_terminal_and_a_name() {
    let runs = Runs::default();
    let (registry, _sink) = registry(&runs);
    let id = approval_id(
        &registry
            .call("deploy", json!({"env": "prod"}), &agent())
            .await,
    );
    let no_scope = ToolContext::web("mallory", ["ops:deploy"]);
    let refused = registry
        .decide_approval(&id, Verdict::Grant, None, &no_scope)
        .await
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "'mallory' may not decide approvals on channel 'web': the scope 'approvals:grant' is required."
    );
    let anonymous = ToolContext::builder("cli").build();
    assert!(matches!(
        registry
            .decide_approval(&id, Verdict::Grant, None, &anonymous)
            .await,
        Err(ApprovalError::Anonymous)
    ));
    // At the terminal a named person needs no scope.
    let terminal = ToolContext::builder("cli").principal("ops-oncall").build();
    registry
        .decide_approval(&id, Verdict::Grant, None, &terminal)
        .await
        .unwrap();
}

#[tokio::test]
async fn unknown_decided_and_expired_ids_are_refused_saying_which() {
    let runs = Runs::default();
    let (registry, _sink) = registry_with(
        ToolRegistry::builder().approvals(Arc::new(
            ApprovalQueue::in_memory().with_ttl(Duration::from_millis(40)),
        )),
        &runs,
    );
    let unknown = registry
        .decide_approval("nope", Verdict::Grant, None, &alice())
        .await
        .unwrap_err();
    assert_eq!(unknown.to_string(), "No approval with id 'nope'.");
    assert_eq!(unknown.code(), ErrorCode::NotFound);

    let id = approval_id(&registry.call("deploy", json!({"env": "a"}), &agent()).await);
    registry
        .decide_approval(&id, Verdict::Reject, None, &alice())
        .await
        .unwrap();
    let decided = registry
        .decide_approval(&id, Verdict::Grant, None, &ToolContext::web("bob", ["*"]))
        .await
        .unwrap_err();
    assert_eq!(
        decided.to_string(),
        format!("Approval '{id}' is already decided: rejected by alice.")
    );

    let late = approval_id(&registry.call("deploy", json!({"env": "b"}), &agent()).await);
    tokio::time::sleep(Duration::from_millis(80)).await;
    let expired = registry
        .decide_approval(&late, Verdict::Grant, None, &alice())
        .await
        .unwrap_err();
    assert!(
        matches!(&expired, ApprovalError::Expired { id, .. } if *id == late),
        "{expired:?}"
    );
    assert!(expired.to_string().contains("expired at"), "{expired}");
    let replay = registry
        .call("deploy", json!({"confirm_token": late}), &agent())
        .await;
    assert_eq!(replay.error.as_deref(), Some(INVALID));
    // Expired items leave the pending list.
    assert!(registry.approvals().pending(10).await.unwrap().is_empty());
    assert_eq!(runs.count(), 0);
}

#[tokio::test]
async fn a_granted_call_expires_with_its_approval() {
    let runs = Runs::default();
    let (registry, _sink) = registry_with(
        ToolRegistry::builder().approvals(Arc::new(
            ApprovalQueue::in_memory().with_ttl(Duration::from_millis(60)),
        )),
        &runs,
    );
    let id = approval_id(&registry.call("deploy", json!({"env": "a"}), &agent()).await);
    registry
        .decide_approval(&id, Verdict::Grant, None, &alice())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let replay = registry
        .call("deploy", json!({"confirm_token": id}), &agent())
        .await;
    assert_eq!(replay.error.as_deref(), Some(INVALID));
    assert_eq!(runs.count(), 0);
}

#[tokio::test]
async fn only_the_caller_on_its_channel_may_replay() {
    let runs = Runs::default();
    let (registry, _sink) = registry(&runs);
    let id = approval_id(
        &registry
            .call("deploy", json!({"env": "prod"}), &agent())
            .await,
    );
    registry
        .decide_approval(&id, Verdict::Grant, None, &alice())
        .await
        .unwrap();
    let thief = ToolContext::mcp("r2", Some("thief".into()), ["ops:*"]);
    let other_channel = ToolContext::builder("web")
        .principal("agent")
        .scopes(["ops:*"])
        .build();
    for ctx in [&thief, &other_channel] {
        let stolen = registry
            .call("deploy", json!({"confirm_token": id}), ctx)
            .await;
        assert_eq!(stolen.error.as_deref(), Some(INVALID), "{ctx:?}");
    }
    // A verification request id or a confirmation token of another tool is no approval.
    let other_tool = registry
        .call("restart", json!({"confirm_token": id}), &agent())
        .await;
    assert_ne!(other_tool.data, json!({"env": "prod"}));
    assert_eq!(
        runs.count(),
        1,
        "restart ran without a gate, deploy did not"
    );
    let owner = registry
        .call("deploy", json!({"confirm_token": id}), &agent())
        .await;
    assert!(owner.success, "{owner:?}");
    assert_eq!(runs.count(), 2);
}

#[tokio::test]
async fn concurrent_grants_record_one_decision_and_concurrent_replays_run_once() {
    let runs = Runs::default();
    let (registry, _sink) = registry(&runs);
    let registry = Arc::new(registry);
    let id = approval_id(
        &registry
            .call("deploy", json!({"env": "prod"}), &agent())
            .await,
    );
    let grants = (0..16).map(|i| {
        let registry = registry.clone();
        let id = id.clone();
        tokio::spawn(async move {
            let approver = ToolContext::web(format!("approver-{i}"), ["approvals:grant"]);
            registry
                .decide_approval(&id, Verdict::Grant, None, &approver)
                .await
        })
    });
    let outcomes: Vec<_> = futures_join(grants).await;
    assert_eq!(outcomes.iter().filter(|o| o.is_ok()).count(), 1);
    assert!(
        outcomes
            .iter()
            .filter_map(|o| o.as_ref().err())
            .all(|e| matches!(e, ApprovalError::AlreadyDecided { .. })),
        "{outcomes:?}"
    );
    let item = registry.approvals().get(&id).await.unwrap().unwrap();
    assert_eq!(item.record().grants.len(), 1);

    let replays = (0..16).map(|_| {
        let registry = registry.clone();
        let id = id.clone();
        tokio::spawn(async move {
            registry
                .call("deploy", json!({"confirm_token": id}), &agent())
                .await
        })
    });
    let results = futures_join(replays).await;
    assert_eq!(results.iter().filter(|r| r.success).count(), 1);
    assert_eq!(runs.count(), 1);
}

async fn futures_join<T: Send + 'static>(
    handles: impl Iterator<Item = tokio::task::JoinHandle<T>>,
) -> Vec<T> {
    let mut out = Vec::new();
    for handle in handles.collect::<Vec<_>>() {
        out.push(handle.await.unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_grants_race_on_many_threads_too() {
    let runs = Runs::default();
    let (registry, _sink) = registry(&runs);
    let registry = Arc::new(registry);
    for _ in 0..20 {
        let id = approval_id(
            &registry
                .call("deploy", json!({"env": "prod"}), &agent())
                .await,
        );
        let grants = (0..4).map(|i| {
            let registry = registry.clone();
            let id = id.clone();
            tokio::spawn(async move {
                let verdict = if i % 2 == 0 {
                    Verdict::Grant
                } else {
                    Verdict::Reject
                };
                registry
                    .decide_approval(
                        &id,
                        verdict,
                        None,
                        &ToolContext::web(format!("p{i}"), ["*"]),
                    )
                    .await
                    .is_ok()
            })
        });
        let won = futures_join(grants)
            .await
            .into_iter()
            .filter(|ok| *ok)
            .count();
        assert_eq!(won, 1);
    }
}

#[tokio::test]
async fn a_channel_can_park_every_mutating_tool() {
    let runs = Runs::default();
    let (registry, _sink) = registry_with(
        ToolRegistry::builder().channel_policy(
            "ops-bot",
            ChannelPolicy::default().with_require_human_approval_for_mutating(true),
        ),
        &runs,
    );
    let bot = ToolContext::builder("ops-bot").principal("bot").build();
    let parked = registry.call("restart", json!({}), &bot).await;
    approval_id(&parked);
    let read = registry.call("status", json!({}), &bot).await;
    assert!(read.success, "{read:?}");
    assert_eq!(runs.count(), 1);
    // The same tool on a channel without the flag runs at once.
    let cli = registry
        .call("restart", json!({}), &ToolContext::cli())
        .await;
    assert!(cli.success);
}

#[tokio::test]
async fn the_human_gate_wins_over_a_caller_confirmation() {
    let runs = Runs::default();
    let (mut registry, _sink) = registry_with(
        ToolRegistry::builder().channel_policy(
            "telegram",
            ChannelPolicy::TELEGRAM.with_require_human_approval_for_mutating(true),
        ),
        &runs,
    );
    registry
        .register(echoing(
            echo_args("both")
                .mutating(true)
                .requires_confirmation(true)
                .requires_human_approval(true),
            &runs,
        ))
        .unwrap();
    let ctx = ToolContext::telegram(7, Some("u1".into()));
    approval_id(&registry.call("both", json!({}), &ctx).await);
    approval_id(&registry.call("restart", json!({}), &ctx).await);
}

#[tokio::test]
async fn plan_mode_describes_the_gate_and_parks_nothing() {
    let runs = Runs::default();
    let (registry, _sink) = registry(&runs);
    let plan = registry
        .call("deploy", json!({"env": "prod"}), &agent().as_plan())
        .await;
    assert_eq!(plan.data["plan"]["requires_confirmation"], json!(true));
    assert_eq!(plan.data["plan"]["requires_human_approval"], json!(true));
    assert!(registry.approvals().pending(10).await.unwrap().is_empty());
    let other = registry
        .call("restart", json!({}), &agent().as_plan())
        .await;
    assert!(other.data["plan"].get("requires_human_approval").is_none());
}

#[test]
fn inspect_says_who_may_approve_and_for_how_long() {
    let runs = Runs::default();
    let (registry, _sink) = registry(&runs);
    let plan = InvocationPlan::build(&registry, "deploy", &agent()).unwrap();
    let step = plan.step(StepKind::Confirm);
    assert_eq!(step.presence, StepPresence::Conditional);
    let source = &step.source;
    for needle in [
        "confirm = \"human\"",
        "expires after 3600s",
        "other than the caller ('agent')",
        "approvals:grant",
        "milpa approvals",
    ] {
        assert!(source.contains(needle), "{needle} not in {source}");
    }
}

#[tokio::test]
async fn verification_requests_share_the_queue_but_tools_cannot_decide_parked_calls() {
    let runs = Runs::default();
    let verifier = Arc::new(HumanVerifier::in_memory());
    let (mut registry, _sink) = registry_with(
        ToolRegistry::builder().approvals(Arc::new(ApprovalQueue::new(verifier.clone()))),
        &runs,
    );
    VerificationTools::new(verifier)
        .resolve_scopes(["verification:resolve"])
        .register(&mut registry)
        .unwrap();
    let parked = approval_id(
        &registry
            .call("deploy", json!({"env": "prod"}), &agent())
            .await,
    );
    // Opened later (the queue is oldest first; ties at one millisecond go by id).
    tokio::time::sleep(Duration::from_millis(3)).await;
    let opened = registry
        .call(
            "request_verification",
            json!({"subject": "rotate keys"}),
            &agent(),
        )
        .await;
    let request = opened.data["request_id"].as_str().unwrap().to_owned();

    let pending = registry.approvals().pending(10).await.unwrap();
    let kinds: Vec<(String, ApprovalKind)> = pending
        .iter()
        .map(|a| (a.id().to_owned(), a.kind()))
        .collect();
    assert_eq!(
        kinds,
        [
            (parked.clone(), ApprovalKind::ToolCall),
            (request.clone(), ApprovalKind::Verification)
        ]
    );

    // An agent holding the resolve scope cannot release a parked call through the tool.
    let resolver = ToolContext::mcp("r9", Some("resolver".into()), ["verification:resolve"]);
    let refused = registry
        .call(
            "resolve_verification",
            json!({"request_id": parked, "decision": "grant", "principal": "resolver"}),
            &resolver,
        )
        .await;
    assert_eq!(refused.code(), Some(&ErrorCode::Forbidden), "{refused:?}");
    assert!(refused.error.as_deref().unwrap().contains("approvals page"));

    // A person decides the verification request through the queue; its requester cannot.
    assert!(matches!(
        registry
            .decide_approval(
                &request,
                Verdict::Grant,
                None,
                &ToolContext::web("agent", ["*"])
            )
            .await,
        Err(ApprovalError::SelfApproval { .. })
    ));
    let passed = registry
        .decide_approval(&request, Verdict::Grant, None, &alice())
        .await
        .unwrap();
    assert_eq!(passed.state(0), ApprovalState::Granted);
    let decided = registry.approvals().decided(10).await.unwrap();
    assert_eq!(decided[0].id(), request);
}

#[tokio::test]
async fn waiting_for_a_decision_wakes_when_a_person_decides() {
    let runs = Runs::default();
    let (registry, _sink) = registry(&runs);
    let registry = Arc::new(registry);
    let id = approval_id(
        &registry
            .call("deploy", json!({"env": "prod"}), &agent())
            .await,
    );
    let waiter = {
        let registry = registry.clone();
        let id = id.clone();
        tokio::spawn(async move { registry.approvals().wait_for_decision(&id).await })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!waiter.is_finished());
    registry
        .decide_approval(&id, Verdict::Grant, None, &alice())
        .await
        .unwrap();
    let decided = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("woken")
        .unwrap()
        .unwrap();
    assert_eq!(decided.state(0), ApprovalState::Granted);
}

#[tokio::test]
async fn a_secret_argument_never_reaches_the_summary_or_the_listing() {
    let runs = Runs::default();
    let (registry, _sink) = registry(&runs);
    let id = approval_id(
        &registry
            .call(
                "deploy",
                json!({"env": "prod", "token": "s3cr3t-value"}),
                &agent(),
            )
            .await,
    );
    let item = registry.approvals().get(&id).await.unwrap().unwrap();
    assert!(!item.summary().contains("s3cr3t"), "{}", item.summary());
    let shown = item.to_json(registry.redactor(), 0).to_string();
    assert!(!shown.contains("s3cr3t"), "{shown}");
    // The parked call still runs with the real value once granted.
    registry
        .decide_approval(&id, Verdict::Grant, None, &alice())
        .await
        .unwrap();
    let ran = registry
        .call("deploy", json!({"confirm_token": id}), &agent())
        .await;
    // The tool echoed exactly the real value, which the result then scrubs (only that
    // value is replaced by the marker).
    assert_eq!(ran.data["token"], json!("[REDACTED]"));
    assert_eq!(ran.data["env"], json!("prod"));
}

/// A verification store whose backend is down.
struct DownStore;

fn down() -> VerificationStoreError {
    VerificationStoreError::Backend(StoreError::unavailable(std::io::Error::other("db down")))
}

impl VerificationStore for DownStore {
    fn create<'a>(
        &'a self,
        _: VerificationRecord,
    ) -> Deferred<'a, Result<(), VerificationStoreError>> {
        Deferred::ready(Err(down()))
    }
    fn get<'a>(
        &'a self,
        _: &'a str,
    ) -> Deferred<'a, Result<Option<VerificationRecord>, VerificationStoreError>> {
        Deferred::ready(Err(down()))
    }
    fn compare_and_set<'a>(
        &'a self,
        _: u64,
        _: VerificationRecord,
    ) -> Deferred<'a, Result<bool, VerificationStoreError>> {
        Deferred::ready(Err(down()))
    }
    fn list_pending<'a>(
        &'a self,
        _: usize,
    ) -> Deferred<'a, Result<Vec<VerificationRecord>, VerificationStoreError>> {
        Deferred::ready(Err(down()))
    }
    fn list_resolved<'a>(
        &'a self,
        _: usize,
    ) -> Deferred<'a, Result<Vec<VerificationRecord>, VerificationStoreError>> {
        Deferred::ready(Err(down()))
    }
}

#[tokio::test]
async fn a_failing_store_refuses_the_call_and_the_decision() {
    let runs = Runs::default();
    let queue = ApprovalQueue::new(HumanVerifier::new(Arc::new(DownStore)));
    let (registry, sink) = registry_with(ToolRegistry::builder().approvals(Arc::new(queue)), &runs);
    let parked = registry
        .call("deploy", json!({"env": "prod"}), &agent())
        .await;
    assert_eq!(parked.code(), Some(&ErrorCode::Unavailable), "{parked:?}");
    assert!(parked.error.as_deref().unwrap().contains("approval queue"));
    let replay = registry
        .call("deploy", json!({"confirm_token": "x"}), &agent())
        .await;
    assert_eq!(replay.code(), Some(&ErrorCode::Unavailable));
    assert_eq!(runs.count(), 0);
    let refused = registry
        .decide_approval("x", Verdict::Grant, None, &alice())
        .await
        .unwrap_err();
    assert_eq!(refused.code(), ErrorCode::Unavailable);
    assert!(registry.approvals().pending(5).await.is_err());
    let outcomes: Vec<AuditOutcome> = sink.take().into_iter().map(|r| r.outcome).collect();
    assert_eq!(
        outcomes,
        [
            AuditOutcome::Unavailable,
            AuditOutcome::Unavailable,
            AuditOutcome::ApprovalRefused
        ]
    );
}
