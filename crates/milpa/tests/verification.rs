//! Verification through the registry: `request_verification` → `resolve_verification`.

use std::sync::{Arc, Mutex};

use milpa::events::{Dispatcher, Event};
use milpa::verification::{
    ApprovalPolicy, HumanVerifier, InMemoryVerificationStore, REQUEST_NAME, RESOLVE_NAME,
    VerificationError, VerificationRequest, VerificationStatus, VerificationStoreError,
    VerificationTools,
};
use milpa::{ErrorCode, ToolContext, ToolRegistry, ToolResult};
use serde_json::{Value, json};

const RESOLVE_SCOPE: &str = "verification:resolve";

fn registry_with(verifier: HumanVerifier) -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    VerificationTools::new(verifier)
        .resolve_scopes([RESOLVE_SCOPE])
        .register(&mut registry)
        .unwrap();
    registry
}

fn registry() -> ToolRegistry {
    registry_with(HumanVerifier::in_memory())
}

/// An authenticated MCP caller.
fn mcp(principal: &str, scopes: &[&str]) -> ToolContext {
    ToolContext::mcp("req", Some(principal.to_owned()), scopes.iter().copied())
}

async fn open(registry: &ToolRegistry, args: Value) -> String {
    let result = registry.call(REQUEST_NAME, args, &ToolContext::cli()).await;
    assert!(result.success, "{result:?}");
    result.data["request_id"].as_str().unwrap().to_owned()
}

async fn resolve(registry: &ToolRegistry, args: Value) -> ToolResult {
    registry.call(RESOLVE_NAME, args, &ToolContext::cli()).await
}

fn assert_refused(result: &ToolResult, code: ErrorCode, field: &str, message: &str) {
    assert!(!result.success, "{result:?}");
    assert_eq!(result.code(), Some(&code), "{result:?}");
    assert_eq!(result.error.as_deref(), Some(message));
    assert_eq!(result.data, json!({"field": field, "message": message}));
}

#[tokio::test]
async fn request_then_resolve_is_two_calls() {
    let registry = registry();
    let ctx = ToolContext::cli();
    let opened = registry
        .call(
            REQUEST_NAME,
            json!({"subject": "  deploy v2  ", "policy": "single", "request_id": "req-1"}),
            &ctx,
        )
        .await;
    assert!(opened.success);
    assert_eq!(
        opened.message.as_deref(),
        Some(
            "Verification required for 'deploy v2' (policy: single). Resolve by calling \
             resolve_verification with decision=grant|reject, a principal, and request_id=req-1."
        )
    );
    assert_eq!(
        opened.data,
        json!({"subject": "deploy v2", "policy": "single", "request_id": "req-1"})
    );
    assert_eq!(opened.result_type(), "confirmation");
    assert!(opened.requires_confirmation());
    assert_eq!(opened.meta.get("action"), Some(&json!("verify")));
    assert_eq!(opened.meta.get("target"), Some(&json!("deploy v2")));
    assert_eq!(opened.meta.get("target_id"), Some(&json!("deploy v2")));
    // The verification is its own confirmation: no registry token.
    assert!(opened.confirm_token().is_none());
    assert_eq!(opened.meta.runtime().unwrap().tool(), REQUEST_NAME);

    let resolved = registry
        .call(
            RESOLVE_NAME,
            json!({"request_id": "req-1", "decision": "grant", "principal": "alice", "subject": "deploy v2", "reason": "ok"}),
            &ctx,
        )
        .await;
    assert!(resolved.success, "{resolved:?}");
    assert_eq!(
        resolved.message.as_deref(),
        Some("Verification granted for 'deploy v2'.")
    );
    assert_eq!(
        resolved.meta.get("verification_status"),
        Some(&json!("passed"))
    );
    assert_eq!(
        resolved.data,
        json!({
            "status": "passed",
            "reason": null,
            "verifier": "human_verifier",
            "principal": "alice",
            "missing": [],
            "metadata": {"reason": "ok", "approvals": ["alice"], "required_approvals": 1}
        })
    );
}

#[tokio::test]
async fn without_a_subject_the_message_names_the_request_id() {
    let registry = registry();
    let id = open(&registry, json!({"subject": "rotate keys"})).await;
    assert_eq!(id.len(), 36, "a generated UUID");
    let resolved = resolve(
        &registry,
        json!({"request_id": id, "decision": "reject", "principal": "bob"}),
    )
    .await;
    assert_eq!(
        resolved.message,
        Some(format!("Verification rejected for '{id}'."))
    );
    assert_eq!(
        resolved.meta.get("verification_status"),
        Some(&json!("failed"))
    );
    assert_eq!(
        resolved.data,
        json!({
            "status": "failed",
            "reason": "rejected",
            "verifier": "human_verifier",
            "principal": "bob",
            "missing": [],
            "metadata": {}
        })
    );
}

#[tokio::test]
async fn the_policy_dividend_anyone_may_ask_only_holders_of_the_scope_may_answer() {
    let registry = registry();
    let agent = mcp("agent-7", &["notes:read"]);
    let opened = registry
        .call(REQUEST_NAME, json!({"subject": "drop table"}), &agent)
        .await;
    assert!(opened.success, "{opened:?}");
    let id = opened.data["request_id"].as_str().unwrap().to_owned();

    let answer = json!({"request_id": id, "decision": "grant", "principal": "alice"});
    let refused = registry.call(RESOLVE_NAME, answer.clone(), &agent).await;
    assert_eq!(refused.code(), Some(&ErrorCode::Forbidden));
    assert_eq!(
        refused.error.as_deref(),
        Some(
            "Missing required scope for tool 'resolve_verification'. Need one of: \
             verification:resolve — context has: notes:read."
        )
    );
    // Nothing was recorded: the request is still open for a real approver.
    let approver = mcp("alice", &["verification:*"]);
    let granted = registry.call(RESOLVE_NAME, answer, &approver).await;
    assert!(granted.success, "{granted:?}");
    assert_eq!(
        granted.meta.get("verification_status"),
        Some(&json!("passed"))
    );
}

#[tokio::test]
async fn an_anonymous_mcp_caller_cannot_even_ask() {
    let registry = registry();
    let anonymous = ToolContext::mcp("r", None, Vec::<String>::new());
    let refused = registry
        .call(REQUEST_NAME, json!({"subject": "x"}), &anonymous)
        .await;
    assert_eq!(refused.code(), Some(&ErrorCode::Forbidden));
    assert_eq!(
        refused.error.as_deref(),
        Some("channel 'mcp' requires an authenticated principal (require_auth) — none provided.")
    );
}

#[tokio::test]
async fn unknown_and_already_resolved_ids_are_refused_with_their_state() {
    let registry = registry();
    let unknown = resolve(
        &registry,
        json!({"request_id": "nope", "decision": "grant", "principal": "alice"}),
    )
    .await;
    assert_refused(
        &unknown,
        ErrorCode::NotFound,
        "request_id",
        "Verification request 'nope' not found.",
    );

    let id = open(&registry, json!({"subject": "s", "request_id": "r-1"})).await;
    let first = resolve(
        &registry,
        json!({"request_id": id, "decision": "grant", "principal": "alice"}),
    )
    .await;
    assert!(first.success);
    for decision in ["grant", "reject"] {
        let again = resolve(
            &registry,
            json!({"request_id": "r-1", "decision": decision, "principal": "carol"}),
        )
        .await;
        assert_refused(
            &again,
            ErrorCode::ValidationError,
            "request_id",
            "Verification request 'r-1' is already resolved (status: passed).",
        );
    }
}

#[tokio::test]
async fn a_reject_is_final() {
    let registry = registry();
    let id = open(
        &registry,
        json!({"subject": "s", "policy": "dual", "request_id": "r-2"}),
    )
    .await;
    let grant = json!({"request_id": id, "decision": "grant", "principal": "alice"});
    assert!(resolve(&registry, grant).await.success);
    let reject = resolve(
        &registry,
        json!({"request_id": "r-2", "decision": "reject", "principal": "bob", "reason": "not today"}),
    )
    .await;
    assert_eq!(reject.data["reason"], "not today");
    assert_eq!(
        reject.meta.get("verification_status"),
        Some(&json!("failed"))
    );
    let late = resolve(
        &registry,
        json!({"request_id": "r-2", "decision": "grant", "principal": "carol"}),
    )
    .await;
    assert_refused(
        &late,
        ErrorCode::ValidationError,
        "request_id",
        "Verification request 'r-2' is already resolved (status: failed).",
    );
}

#[tokio::test]
async fn a_request_id_that_exists_is_refused() {
    let registry = registry();
    open(&registry, json!({"subject": "first", "request_id": "dup"})).await;
    let again = registry
        .call(
            REQUEST_NAME,
            json!({"subject": "second", "request_id": "dup"}),
            &ToolContext::cli(),
        )
        .await;
    assert_refused(
        &again,
        ErrorCode::ValidationError,
        "request_id",
        "Verification request 'dup' already exists (status: pending).",
    );
}

#[tokio::test]
async fn blank_arguments_are_refused_with_the_original_messages() {
    let registry = registry();
    let ctx = ToolContext::cli();
    let blank_subject = registry
        .call(REQUEST_NAME, json!({"subject": "   "}), &ctx)
        .await;
    assert_refused(
        &blank_subject,
        ErrorCode::ValidationError,
        "subject",
        "subject is required",
    );
    let id = open(&registry, json!({"subject": "s"})).await;
    let blank_id = resolve(
        &registry,
        json!({"request_id": " ", "decision": "grant", "principal": "alice"}),
    )
    .await;
    assert_refused(
        &blank_id,
        ErrorCode::ValidationError,
        "request_id",
        "request_id is required",
    );
    let blank_principal = resolve(
        &registry,
        json!({"request_id": id, "decision": "grant", "principal": "  "}),
    )
    .await;
    assert_refused(
        &blank_principal,
        ErrorCode::ValidationError,
        "principal",
        "principal is required",
    );
    // The schema refuses a missing field or a decision outside the enum before the handler.
    let missing = registry
        .call(
            RESOLVE_NAME,
            json!({"decision": "grant", "principal": "alice"}),
            &ctx,
        )
        .await;
    assert_eq!(missing.code(), Some(&ErrorCode::ValidationError));
    assert_eq!(
        missing.error.as_deref(),
        Some("Missing required field: request_id")
    );
    let maybe = registry
        .call(
            RESOLVE_NAME,
            json!({"request_id": id, "decision": "maybe", "principal": "alice"}),
            &ctx,
        )
        .await;
    assert_eq!(maybe.code(), Some(&ErrorCode::ValidationError));
    assert_eq!(
        maybe.error.as_deref(),
        Some("decision: Value must be one of: grant, reject")
    );
}

#[tokio::test]
async fn a_subject_that_does_not_match_is_refused_and_records_nothing() {
    let registry = registry();
    let id = open(&registry, json!({"subject": "deploy", "request_id": "r-3"})).await;
    let wrong = resolve(
        &registry,
        json!({"request_id": id, "decision": "grant", "principal": "alice", "subject": "drop db"}),
    )
    .await;
    assert_refused(
        &wrong,
        ErrorCode::ValidationError,
        "subject",
        "Subject 'drop db' does not match verification request 'r-3'.",
    );
    let right = resolve(
        &registry,
        json!({"request_id": "r-3", "decision": "grant", "principal": "alice", "subject": "deploy"}),
    )
    .await;
    assert!(right.success);
}

#[tokio::test]
async fn the_requester_cannot_grant_its_own_request() {
    let registry = registry();
    let id = open(
        &registry,
        json!({"subject": "s", "requested_by": "agent-7", "request_id": "own"}),
    )
    .await;
    let own = resolve(
        &registry,
        json!({"request_id": id, "decision": "grant", "principal": "agent-7"}),
    )
    .await;
    assert_refused(
        &own,
        ErrorCode::Forbidden,
        "principal",
        "Principal 'agent-7' requested verification 'own' and cannot grant it.",
    );
    // It may withdraw it, though.
    let withdrawn = resolve(
        &registry,
        json!({"request_id": "own", "decision": "reject", "principal": "agent-7", "reason": "never mind"}),
    )
    .await;
    assert!(withdrawn.success);
    assert_eq!(
        withdrawn.meta.get("verification_status"),
        Some(&json!("failed"))
    );
}

#[tokio::test]
async fn the_requester_defaults_to_the_calling_principal() {
    let registry = registry();
    let bot = mcp("bot", &[RESOLVE_SCOPE]);
    let opened = registry
        .call(REQUEST_NAME, json!({"subject": "s"}), &bot)
        .await;
    let id = opened.data["request_id"].clone();
    let own = registry
        .call(
            RESOLVE_NAME,
            json!({"request_id": id, "decision": "grant", "principal": "bot"}),
            &bot,
        )
        .await;
    assert_eq!(own.code(), Some(&ErrorCode::Forbidden));
    // Refused because `bot` asked, not for any other reason a caller could be forbidden.
    let expected = format!(
        "Principal 'bot' requested verification '{}' and cannot grant it.",
        id.as_str().unwrap()
    );
    assert_eq!(own.error.as_deref(), Some(expected.as_str()));
}

#[tokio::test]
async fn dual_needs_two_distinct_principals() {
    let dispatcher = Arc::new(Dispatcher::new());
    let granted = Arc::new(Mutex::new(0));
    let counter = granted.clone();
    dispatcher.subscribe("verification.granted", 0, move |_: &Event<'_>| {
        *counter.lock().unwrap() += 1;
    });
    let registry = registry_with(HumanVerifier::in_memory().with_dispatcher(dispatcher));
    let id = open(
        &registry,
        json!({"subject": "wire funds", "policy": "dual", "request_id": "d-1"}),
    )
    .await;

    let first = resolve(
        &registry,
        json!({"request_id": id, "decision": "grant", "principal": "alice"}),
    )
    .await;
    assert!(first.success);
    assert_eq!(
        first.message.as_deref(),
        Some(
            "Grant recorded for 'd-1': 1 of 2 approvals (policy: dual); the verification is still pending."
        )
    );
    assert_eq!(
        first.meta.get("verification_status"),
        Some(&json!("pending"))
    );
    assert_eq!(first.data["status"], "pending");
    assert_eq!(first.data["metadata"]["approvals"], json!(["alice"]));
    assert_eq!(
        *granted.lock().unwrap(),
        0,
        "no granted event while pending"
    );

    let twice = resolve(
        &registry,
        json!({"request_id": "d-1", "decision": "grant", "principal": " alice "}),
    )
    .await;
    assert_refused(
        &twice,
        ErrorCode::ValidationError,
        "principal",
        "Principal 'alice' already granted verification 'd-1'; policy dual needs 2 distinct principals.",
    );

    let second = resolve(
        &registry,
        json!({"request_id": "d-1", "decision": "grant", "principal": "bob", "subject": "wire funds"}),
    )
    .await;
    assert_eq!(
        second.message.as_deref(),
        Some("Verification granted for 'wire funds'.")
    );
    assert_eq!(
        second.data["metadata"]["approvals"],
        json!(["alice", "bob"])
    );
    assert_eq!(second.data["metadata"]["required_approvals"], 2);
    assert_eq!(*granted.lock().unwrap(), 1);
}

#[tokio::test]
async fn quorum_follows_the_verifier_and_auto_passes_on_the_first_grant() {
    let registry = registry_with(HumanVerifier::in_memory().with_quorum(3));
    let id = open(&registry, json!({"subject": "s", "policy": "quorum"})).await;
    for (principal, status) in [("a", "pending"), ("b", "pending"), ("c", "passed")] {
        let result = resolve(
            &registry,
            json!({"request_id": id, "decision": "grant", "principal": principal}),
        )
        .await;
        assert_eq!(result.meta.get("verification_status"), Some(&json!(status)));
    }
    let default_quorum = registry_with(HumanVerifier::in_memory());
    let id = open(&default_quorum, json!({"subject": "s", "policy": "quorum"})).await;
    let first = resolve(
        &default_quorum,
        json!({"request_id": id, "decision": "grant", "principal": "a"}),
    )
    .await;
    assert_eq!(first.data["metadata"]["required_approvals"], 2);

    let id = open(&registry, json!({"subject": "s", "policy": "auto"})).await;
    let auto = resolve(
        &registry,
        json!({"request_id": id, "decision": "grant", "principal": "a"}),
    )
    .await;
    assert_eq!(auto.meta.get("verification_status"), Some(&json!("passed")));
}

#[tokio::test]
async fn events_carry_the_request_and_the_result() {
    #[derive(Debug, PartialEq)]
    struct Seen {
        name: String,
        request_id: String,
        subject: String,
        status: VerificationStatus,
        result: Option<(VerificationStatus, Option<String>, Option<String>)>,
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let dispatcher = Arc::new(Dispatcher::new());
    dispatcher.subscribe("verification.*", 0, move |event: &Event<'_>| {
        let payload = event.verification().expect("a verification event");
        sink.lock().unwrap().push(Seen {
            name: event.name().to_owned(),
            request_id: payload.request_id().to_owned(),
            subject: payload.subject().to_owned(),
            status: payload.record.status,
            result: payload
                .result
                .as_ref()
                .map(|r| (r.status, r.principal.clone(), r.reason.clone())),
        });
    });
    let registry = registry_with(HumanVerifier::in_memory().with_dispatcher(dispatcher));
    open(&registry, json!({"subject": "a", "request_id": "e-1"})).await;
    open(&registry, json!({"subject": "b", "request_id": "e-2"})).await;
    resolve(
        &registry,
        json!({"request_id": "e-1", "decision": "grant", "principal": "alice"}),
    )
    .await;
    resolve(
        &registry,
        json!({"request_id": "e-2", "decision": "reject", "principal": "bob", "reason": "no"}),
    )
    .await;
    // A refused resolution dispatches nothing.
    resolve(
        &registry,
        json!({"request_id": "e-2", "decision": "grant", "principal": "carol"}),
    )
    .await;

    let seen = seen.lock().unwrap();
    let expect = |name: &str, id: &str, subject: &str, status, result| Seen {
        name: name.into(),
        request_id: id.into(),
        subject: subject.into(),
        status,
        result,
    };
    assert_eq!(
        *seen,
        vec![
            expect(
                "verification.requested",
                "e-1",
                "a",
                VerificationStatus::Pending,
                None
            ),
            expect(
                "verification.requested",
                "e-2",
                "b",
                VerificationStatus::Pending,
                None
            ),
            expect(
                "verification.granted",
                "e-1",
                "a",
                VerificationStatus::Passed,
                Some((VerificationStatus::Passed, Some("alice".into()), None))
            ),
            expect(
                "verification.rejected",
                "e-2",
                "b",
                VerificationStatus::Failed,
                Some((
                    VerificationStatus::Failed,
                    Some("bob".into()),
                    Some("no".into())
                ))
            ),
        ]
    );
}

#[tokio::test]
async fn both_tools_are_mutating_without_the_confirmation_gate() {
    let registry = registry();
    let request = registry.get(REQUEST_NAME).unwrap();
    let resolve = registry.get(RESOLVE_NAME).unwrap();
    assert!(request.is_mutating() && resolve.is_mutating());
    assert!(!request.requires_confirmation() && !resolve.requires_confirmation());
    assert!(request.scopes().is_empty());
    assert_eq!(resolve.scopes(), [RESOLVE_SCOPE]);
    let properties = request.input_schema()["properties"].as_object().unwrap();
    assert_eq!(
        properties.keys().collect::<Vec<_>>(),
        ["subject", "policy", "requested_by", "request_id"]
    );
    assert_eq!(
        properties["policy"]["enum"],
        json!(["single", "dual", "quorum", "auto"])
    );
    assert_eq!(request.input_schema()["required"], json!(["subject"]));
    assert_eq!(
        resolve.input_schema()["required"],
        json!(["request_id", "decision", "principal"])
    );
    assert_eq!(
        resolve.input_schema()["properties"]["decision"]["enum"],
        json!(["grant", "reject"])
    );
}

#[tokio::test]
async fn telegram_still_confirms_mutating_tools() {
    let registry = registry();
    let chat = ToolContext::telegram(42, Some("u1".into()));
    let first = registry
        .call(REQUEST_NAME, json!({"subject": "s"}), &chat)
        .await;
    assert!(first.success);
    assert!(
        first.confirm_token().is_some(),
        "the channel asks first: {first:?}"
    );
}

#[tokio::test]
async fn as_a_tool_provider() {
    let mut registry = ToolRegistry::new();
    let tools = Arc::new(VerificationTools::new(HumanVerifier::in_memory()));
    assert_eq!(registry.register_provider(tools).unwrap(), 2);
    assert_eq!(
        registry.tool_names().collect::<Vec<_>>(),
        [REQUEST_NAME.into(), RESOLVE_NAME.into()]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_grants_of_a_single_request_have_one_winner() {
    let verifier = Arc::new(HumanVerifier::in_memory());
    for round in 0..20 {
        let record = verifier
            .request(VerificationRequest::new(format!("s{round}")))
            .await
            .unwrap();
        let tasks: Vec<_> = (0..8)
            .map(|i| {
                let verifier = verifier.clone();
                let id = record.id.clone();
                tokio::spawn(async move { verifier.grant(&id, &format!("p{i}"), None).await })
            })
            .collect();
        let mut passed = 0;
        for task in tasks {
            match task.await.unwrap() {
                Ok(resolution) => {
                    assert_eq!(resolution.result.status, VerificationStatus::Passed);
                    passed += 1;
                }
                Err(VerificationError::AlreadyResolved { status, .. }) => {
                    assert_eq!(status, VerificationStatus::Passed);
                }
                Err(other) => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(passed, 1);
        let stored = verifier.get(&record.id).await.unwrap().unwrap();
        assert_eq!(stored.grants.len(), 1);
        assert_eq!(stored.revision, 1);
    }
}

#[tokio::test]
async fn the_store_refuses_duplicates_and_stale_writes() {
    let verifier = HumanVerifier::new(Arc::new(InMemoryVerificationStore::new()));
    let record = verifier
        .request(
            VerificationRequest::new("s")
                .id("fixed")
                .policy(ApprovalPolicy::Dual),
        )
        .await
        .unwrap();
    let store = verifier.store();
    assert!(matches!(
        store.create(record.clone()).await,
        Err(VerificationStoreError::AlreadyExists {
            id,
            status: VerificationStatus::Pending
        }) if id == "fixed"
    ));
    let mut changed = record.clone();
    changed.status = VerificationStatus::Waived;
    assert!(store.compare_and_set(0, changed.clone()).await.unwrap());
    assert!(
        !store.compare_and_set(0, changed).await.unwrap(),
        "stale revision"
    );
    let stored = store.get("fixed").await.unwrap().unwrap();
    assert_eq!(stored.revision, 1);
    assert_eq!(stored.status, VerificationStatus::Waived);
    let mut ghost = record;
    ghost.id = "ghost".into();
    assert!(!store.compare_and_set(0, ghost).await.unwrap());
    assert_eq!(store.get("ghost").await.unwrap(), None);
}

#[tokio::test]
async fn an_authenticated_caller_cannot_resolve_as_someone_else() {
    let registry = registry();
    let requester = mcp("agent-7", &["notes:read"]);
    let opened = registry
        .call(REQUEST_NAME, json!({"subject": "deploy"}), &requester)
        .await;
    let id = opened.data["request_id"].as_str().unwrap().to_owned();
    // agent-7 holds the resolve scope too, and claims to be alice to approve its own request.
    let sneaky = mcp("agent-7", &[RESOLVE_SCOPE]);
    let claim = json!({"request_id": id, "decision": "grant", "principal": "alice"});
    let refused = registry.call(RESOLVE_NAME, claim.clone(), &sneaky).await;
    assert_eq!(refused.code(), Some(&ErrorCode::Forbidden));
    assert_eq!(
        refused.error.as_deref(),
        Some(
            "principal 'alice' is not the caller ('agent-7'): resolve_verification records decisions under the caller's own principal."
        )
    );
    // The real alice can; so can a fully trusted operator recording alice's decision.
    let alice = mcp("alice", &[RESOLVE_SCOPE]);
    assert!(registry.call(RESOLVE_NAME, claim, &alice).await.success);
    let second = registry
        .call(REQUEST_NAME, json!({"subject": "restart"}), &requester)
        .await;
    let id = second.data["request_id"].as_str().unwrap().to_owned();
    let on_behalf = json!({"request_id": id, "decision": "grant", "principal": "bob"});
    assert!(resolve(&registry, on_behalf).await.success);
}

#[tokio::test]
async fn a_caller_cannot_name_someone_else_as_the_requester() {
    let registry = registry();
    let alice = mcp("alice", &[RESOLVE_SCOPE]);
    // alice opens a request in someone else's name, hoping to grant it herself.
    let forged = registry
        .call(
            REQUEST_NAME,
            json!({"subject": "deploy", "requested_by": "someone-else", "request_id": "r-1"}),
            &alice,
        )
        .await;
    assert_refused(
        &forged,
        ErrorCode::ValidationError,
        "requested_by",
        "requested_by 'someone-else' is not the caller ('alice'): request_verification records the calling principal as the requester.",
    );
    // Nothing was opened: the id is still free, and her own request is hers.
    let grant = json!({"request_id": "r-1", "decision": "grant", "principal": "alice"});
    assert_eq!(
        registry
            .call(RESOLVE_NAME, grant.clone(), &alice)
            .await
            .code(),
        Some(&ErrorCode::NotFound)
    );
    let own = registry
        .call(
            REQUEST_NAME,
            json!({"subject": "deploy", "requested_by": "alice", "request_id": "r-1"}),
            &alice,
        )
        .await;
    assert!(own.success, "{own:?}");
    assert_eq!(
        registry.call(RESOLVE_NAME, grant, &alice).await.code(),
        Some(&ErrorCode::Forbidden)
    );
    // A fully trusted caller (`*`) may still open a request on someone's behalf.
    let id = open(
        &registry,
        json!({"subject": "s", "requested_by": "someone-else"}),
    )
    .await;
    let granted = registry
        .call(
            RESOLVE_NAME,
            json!({"request_id": id, "decision": "grant", "principal": "alice"}),
            &alice,
        )
        .await;
    assert!(granted.success, "{granted:?}");
}
