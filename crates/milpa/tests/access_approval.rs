//! A resource (or prompt) marked `with_human_approval` waits for a person: the caller's
//! first read is parked in the approval queue and refused `APPROVAL_PENDING` (nothing is
//! read); while nobody decided, reading again names the same approval; after a grant by
//! someone else, the caller's next read of the same URI goes through once; after a
//! rejection, reads are `FORBIDDEN` naming who and why. Every request leaves its record.

mod support;

use std::collections::BTreeMap;

use milpa::approval::{ApprovalKind, Verdict};
use milpa::audit::AuditOutcome;
use milpa::catalog::{
    CatalogError, Prompt, PromptArgument, PromptMessage, PromptProvider, PromptReply, Resource,
    ResourceContents, ResourceProvider,
};
use milpa::{Deferred, ErrorCode, ToolContext, ToolRegistry};
use support::{Runs, audited};

/// `vault://key` (waits for a person) and `vault://public` (does not); counts reads.
struct Vault(Runs);

impl ResourceProvider for Vault {
    fn resources(&self) -> Vec<Resource> {
        vec![
            Resource::new("vault://key", "key").with_human_approval(true),
            Resource::new("vault://public", "public"),
        ]
    }

    fn read<'a>(
        &'a self,
        uri: &'a str,
        _ctx: &'a ToolContext,
    ) -> Deferred<'a, Result<Vec<ResourceContents>, CatalogError>> {
        self.0.hit();
        Deferred::ready(Ok(vec![ResourceContents::text(
            uri,
            "text/plain",
            format!("text of {uri}"),
        )]))
    }
}

/// `review(path)`, which waits for a person.
struct Reviews;

impl PromptProvider for Reviews {
    fn prompts(&self) -> Vec<Prompt> {
        vec![
            Prompt::new("review", "Reviews a file")
                .with_argument(PromptArgument::required("path"))
                .with_human_approval(true),
        ]
    }

    fn get<'a>(
        &'a self,
        _name: &'a str,
        arguments: &'a BTreeMap<String, String>,
        _ctx: &'a ToolContext,
    ) -> Deferred<'a, Result<PromptReply, CatalogError>> {
        let text = format!("Review {}", arguments["path"]);
        Deferred::ready(Ok(PromptReply::new(vec![PromptMessage::user(text)])))
    }
}

fn agent() -> ToolContext {
    ToolContext::mcp("r1", Some("agent".into()), Vec::<String>::new())
}

fn alice() -> ToolContext {
    ToolContext::web("alice", ["approvals:grant"])
}

#[tokio::test]
async fn a_read_waits_for_a_grant_and_then_goes_through_once() {
    let reads = Runs::default();
    let (mut registry, sink) = audited(ToolRegistry::builder());
    registry.register_resources(Vault(reads.clone())).unwrap();

    // Not marked: read at once.
    assert!(
        registry
            .read_resource("vault://public", &agent())
            .await
            .is_ok()
    );
    assert_eq!(reads.count(), 1);

    let refused = registry
        .read_resource("vault://key", &agent())
        .await
        .unwrap_err();
    assert_eq!(refused.code(), &ErrorCode::ApprovalPending, "{refused}");
    let id = refused.approval_id().expect("an approval id").to_owned();
    assert!(refused.message().contains(&id), "{refused}");
    assert_eq!(reads.count(), 1, "nothing was read");

    // Asking again while nobody decided names the same approval, and opens no other.
    let again = registry
        .read_resource("vault://key", &agent())
        .await
        .unwrap_err();
    assert_eq!(again.approval_id(), Some(id.as_str()));
    let queue = registry.approvals();
    let pending = queue.pending(10).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].kind(), ApprovalKind::ToolCall);
    assert_eq!(pending[0].tool(), Some("resources/read"));
    assert_eq!(pending[0].requested_by(), Some("agent"));
    assert!(pending[0].summary().contains("vault://key"));

    // The caller cannot grant it; another person can.
    assert!(
        queue
            .decide(&id, Verdict::Grant, None, &agent())
            .await
            .is_err()
    );
    queue
        .decide(&id, Verdict::Grant, None, &alice())
        .await
        .unwrap();

    // Another caller's read is not covered by this grant.
    let other = ToolContext::mcp("r2", Some("other".into()), Vec::<String>::new());
    let refused = registry
        .read_resource("vault://key", &other)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), &ErrorCode::ApprovalPending);
    assert_ne!(refused.approval_id(), Some(id.as_str()));

    // The caller's next read goes through, once.
    let read = registry
        .read_resource("vault://key", &agent())
        .await
        .unwrap();
    assert_eq!(read[0].uri(), "vault://key");
    assert_eq!(reads.count(), 2);
    let after = registry
        .read_resource("vault://key", &agent())
        .await
        .unwrap_err();
    assert_eq!(after.code(), &ErrorCode::ApprovalPending);
    assert_ne!(after.approval_id(), Some(id.as_str()), "a new approval");
    assert_eq!(reads.count(), 2);

    let outcomes: Vec<AuditOutcome> = sink
        .take()
        .iter()
        .filter(|record| record.tool == "vault://key")
        .map(|record| record.outcome)
        .collect();
    assert_eq!(
        outcomes,
        [
            AuditOutcome::ApprovalPending,
            AuditOutcome::ApprovalPending,
            AuditOutcome::ApprovalPending,
            AuditOutcome::Executed,
            AuditOutcome::ApprovalPending,
        ]
    );
}

#[tokio::test]
async fn a_rejected_read_is_forbidden_naming_who_and_why() {
    let reads = Runs::default();
    let (mut registry, _sink) = audited(ToolRegistry::builder());
    registry.register_resources(Vault(reads.clone())).unwrap();
    let id = registry
        .read_resource("vault://key", &agent())
        .await
        .unwrap_err()
        .approval_id()
        .unwrap()
        .to_owned();
    registry
        .approvals()
        .decide(&id, Verdict::Reject, Some("not today"), &alice())
        .await
        .unwrap();
    let refused = registry
        .read_resource("vault://key", &agent())
        .await
        .unwrap_err();
    assert_eq!(refused.code(), &ErrorCode::Forbidden);
    assert!(
        refused
            .message()
            .starts_with("Rejected by alice: not today"),
        "{refused}"
    );
    assert_eq!(reads.count(), 0);
}

#[tokio::test]
async fn a_prompt_waits_for_a_grant_of_its_arguments() {
    let (mut registry, _sink) = audited(ToolRegistry::builder());
    registry.register_prompts(Reviews).unwrap();
    let args = |path: &str| BTreeMap::from([("path".to_owned(), path.to_owned())]);
    let refused = registry
        .get_prompt("review", &args("a.rs"), &agent())
        .await
        .unwrap_err();
    assert_eq!(refused.code(), &ErrorCode::ApprovalPending);
    let id = refused.approval_id().unwrap().to_owned();
    registry
        .approvals()
        .decide(&id, Verdict::Grant, None, &alice())
        .await
        .unwrap();
    // Granted for a.rs, not for b.rs.
    let other = registry
        .get_prompt("review", &args("b.rs"), &agent())
        .await
        .unwrap_err();
    assert_eq!(other.code(), &ErrorCode::ApprovalPending);
    let reply = registry
        .get_prompt("review", &args("a.rs"), &agent())
        .await
        .unwrap();
    assert_eq!(reply.messages[0], PromptMessage::user("Review a.rs"));
}
