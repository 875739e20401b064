//! The Redis verification store against a real redis-server: create and compare-and-set
//! are atomic, records keep their retention TTL, and the HumanVerifier works on it.

mod support;

use std::sync::Arc;

use milpa::verification::{
    ApprovalPolicy, VerificationRecord, VerificationStatus, VerificationStoreError,
};
use serde_json::json;
use support::{RedisServer, runtime, unique_prefix};

fn record(id: &str) -> VerificationRecord {
    VerificationRecord {
        id: id.to_owned(),
        subject: "deploy v2".to_owned(),
        policy: ApprovalPolicy::Dual,
        required_grants: 2,
        requested_by: Some("agent-7".to_owned()),
        payload: json!({"env": "prod"}),
        status: VerificationStatus::Pending,
        grants: Vec::new(),
        rejection: None,
        created_at_ms: 1_700_000_000_000,
        resolved_at_ms: None,
        revision: 0,
    }
}

#[test]
fn of_concurrent_creates_with_one_id_exactly_one_wins() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let store = server.store(&unique_prefix("verify-create")).await;
        let verifications = store.verifications();
        let tasks: Vec<_> = (0..16)
            .map(|n| {
                let verifications = Arc::clone(&verifications);
                tokio::spawn(async move {
                    let mut mine = record("req-1");
                    mine.subject = format!("creator {n}");
                    (n, verifications.create(mine).await)
                })
            })
            .collect();
        let mut winners = Vec::new();
        for task in tasks {
            match task.await.unwrap() {
                (n, Ok(())) => winners.push(n),
                (_, Err(VerificationStoreError::AlreadyExists { id, status })) => {
                    assert_eq!(id, "req-1");
                    assert_eq!(status, VerificationStatus::Pending);
                }
                (_, Err(other)) => panic!("unexpected error {other}"),
            }
        }
        assert_eq!(winners.len(), 1);
        let stored = verifications.get("req-1").await.unwrap().unwrap();
        assert_eq!(stored.subject, format!("creator {}", winners[0]));
        assert_eq!(stored.revision, 0);
    });
}

#[test]
fn of_concurrent_compare_and_sets_on_one_revision_exactly_one_wins() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let store = server.store(&unique_prefix("verify-cas")).await;
        let verifications = store.verifications();
        verifications.create(record("req-2")).await.unwrap();
        let tasks: Vec<_> = (0..16)
            .map(|n| {
                let verifications = Arc::clone(&verifications);
                tokio::spawn(async move {
                    let mut changed = record("req-2");
                    changed.payload = json!({"writer": n});
                    (n, verifications.compare_and_set(0, changed).await.unwrap())
                })
            })
            .collect();
        let mut winners = Vec::new();
        for task in tasks {
            let (n, swapped) = task.await.unwrap();
            if swapped {
                winners.push(n);
            }
        }
        assert_eq!(winners.len(), 1);
        let stored = verifications.get("req-2").await.unwrap().unwrap();
        assert_eq!(stored.payload, json!({"writer": winners[0]}));
        assert_eq!(stored.revision, 1, "the store sets the revision");
        // A stale revision changes nothing; the current one does.
        let mut resolved = stored.clone();
        resolved.status = VerificationStatus::Failed;
        assert!(
            !verifications
                .compare_and_set(0, resolved.clone())
                .await
                .unwrap()
        );
        assert!(verifications.compare_and_set(1, resolved).await.unwrap());
        let stored = verifications.get("req-2").await.unwrap().unwrap();
        assert_eq!(
            (stored.status, stored.revision),
            (VerificationStatus::Failed, 2)
        );
        // A resolved request still answers AlreadyExists with its status.
        match verifications.create(record("req-2")).await {
            Err(VerificationStoreError::AlreadyExists { status, .. }) => {
                assert_eq!(status, VerificationStatus::Failed)
            }
            other => panic!("expected AlreadyExists, got {other:?}"),
        }
    });
}

#[test]
fn a_missing_request_reads_as_none_and_cannot_be_swapped() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let store = server.store(&unique_prefix("verify-missing")).await;
        let verifications = store.verifications();
        assert!(verifications.get("nope").await.unwrap().is_none());
        assert!(
            !verifications
                .compare_and_set(0, record("nope"))
                .await
                .unwrap()
        );
        assert!(verifications.get("nope").await.unwrap().is_none());
    });
}

#[test]
fn every_request_is_kept_for_the_retention_and_each_change_restarts_it() {
    let server = RedisServer::start();
    let prefix = unique_prefix("verify-ttl");
    runtime().block_on(async {
        let store = server.store(&prefix).await;
        let verifications = store.verifications();
        verifications.create(record("req-3")).await.unwrap();
        let key = format!("{prefix}{{verification}}:request:req-3");
        let week_ms = 7 * 24 * 3600 * 1000_i64;
        let ttl = |server: &RedisServer| -> i64 {
            server
                .command(&format!("PTTL {key}"))
                .trim()
                .trim_start_matches(':')
                .parse()
                .unwrap()
        };
        assert!((week_ms - 5_000..=week_ms).contains(&ttl(&server)));
        server.command(&format!("PEXPIRE {key} 10000"));
        let mut changed = record("req-3");
        changed.status = VerificationStatus::Passed;
        assert!(verifications.compare_and_set(0, changed).await.unwrap());
        assert!((week_ms - 5_000..=week_ms).contains(&ttl(&server)));
    });
}

#[test]
fn a_dual_request_needs_two_distinct_approvers_across_two_stores() {
    use milpa::verification::{HumanVerifier, VerificationRequest};
    let server = RedisServer::start();
    let prefix = unique_prefix("verify-dual");
    runtime().block_on(async {
        // Two replicas: two connections, one Redis.
        let first = server.store(&prefix).await;
        let second = server.store(&prefix).await;
        let opener = HumanVerifier::new(first.verifications());
        let resolver = HumanVerifier::new(second.verifications());
        let request = VerificationRequest::new("deploy v2")
            .policy(ApprovalPolicy::Dual)
            .requested_by("agent-7")
            .id("req-dual");
        let opened = opener.request(request).await.unwrap();
        assert_eq!(opened.status, VerificationStatus::Pending);
        let after_one = resolver.grant("req-dual", "alice", None).await.unwrap();
        assert_eq!(after_one.record.status, VerificationStatus::Pending);
        assert!(resolver.grant("req-dual", "alice", None).await.is_err());
        let after_two = opener.grant("req-dual", "bob", None).await.unwrap();
        assert_eq!(after_two.record.status, VerificationStatus::Passed);
        let seen = second
            .verifications()
            .get("req-dual")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(seen.approvals(), vec!["alice", "bob"]);
    });
}

#[test]
fn a_quorum_request_granted_by_many_approvers_at_once_records_exactly_the_quorum() {
    use milpa::verification::{HumanVerifier, VerificationRequest};
    let server = RedisServer::start();
    let prefix = unique_prefix("verify-quorum");
    runtime().block_on(async {
        let store = server.store(&prefix).await;
        let opener = HumanVerifier::new(store.verifications()).with_quorum(3);
        opener
            .request(
                VerificationRequest::new("rotate keys")
                    .policy(ApprovalPolicy::Quorum)
                    .id("req-quorum"),
            )
            .await
            .unwrap();
        let tasks: Vec<_> = (0..8)
            .map(|n| {
                let verifier = HumanVerifier::new(store.verifications()).with_quorum(3);
                tokio::spawn(async move {
                    verifier
                        .grant("req-quorum", &format!("approver-{n}"), None)
                        .await
                })
            })
            .collect();
        for task in tasks {
            // Late grants are refused (already resolved, or lost every retry): never counted.
            let _ = task.await.unwrap();
        }
        let stored = store
            .verifications()
            .get("req-quorum")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stored.status, VerificationStatus::Passed);
        let mut approvers = stored.approvals();
        assert_eq!(approvers.len(), 3, "{approvers:?}");
        approvers.sort();
        approvers.dedup();
        assert_eq!(approvers.len(), 3);
    });
}
