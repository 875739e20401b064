//! Two stores on one file (as two processes), and state that outlives a close and reopen.

use std::time::{Duration, SystemTime};

use milpa::confirm::{ConfirmationBinding, PendingConfirmation, unix_millis};
use milpa::rate_limit::{Quota, RateDecision, RateKey};
use milpa::verification::{
    ApprovalPolicy, HumanVerifier, VerificationRequest, VerificationStatus, VerificationStoreError,
};
use milpa_sqlite::SqliteStore;
use serde_json::json;

fn binding() -> ConfirmationBinding {
    ConfirmationBinding {
        tool: "notes_delete".into(),
        principal: None,
        channel: "cli".into(),
    }
}

fn now_ms() -> u64 {
    unix_millis(SystemTime::now())
}

#[tokio::test]
async fn a_token_minted_in_one_store_is_redeemed_in_another_on_the_same_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/dirs/state.db");
    let minting = SqliteStore::open(&path).unwrap();
    let redeeming = SqliteStore::open(&path).unwrap();
    assert_eq!(minting.path(), path);
    minting
        .confirmations()
        .insert(
            "tok".into(),
            PendingConfirmation {
                binding: binding(),
                args: json!({"id": 3, "why": "cleanup"}),
                action_summary: "notes_delete(id=3)".into(),
                expires_at_ms: now_ms() + 60_000,
            },
        )
        .await
        .unwrap();
    let found = redeeming
        .confirmations()
        .consume("tok", &binding(), now_ms())
        .await
        .unwrap()
        .expect("the other store sees the token");
    assert_eq!(found.args, json!({"id": 3, "why": "cleanup"}));
    assert_eq!(found.action_summary, "notes_delete(id=3)");
    assert!(
        minting
            .confirmations()
            .consume("tok", &binding(), now_ms())
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn tokens_requests_and_budgets_survive_close_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let quota = Quota::new(3, Duration::from_secs(3600));
    let key = RateKey {
        channel: "cli",
        principal: "",
        tool: "echo",
    };
    let request_id = {
        let store = SqliteStore::open(&path).unwrap();
        store
            .confirmations()
            .insert(
                "tok".into(),
                PendingConfirmation {
                    binding: binding(),
                    args: json!({"id": 9}),
                    action_summary: "notes_delete(id=9)".into(),
                    expires_at_ms: now_ms() + 60_000,
                },
            )
            .await
            .unwrap();
        for _ in 0..2 {
            store.rate_limiter().consume(key, 1, quota).await.unwrap();
        }
        let verifier = HumanVerifier::new(store.verifications());
        let record = verifier
            .request(
                VerificationRequest::new("deploy v2")
                    .policy(ApprovalPolicy::Dual)
                    .requested_by("bot"),
            )
            .await
            .unwrap();
        verifier.grant(&record.id, "alice", None).await.unwrap();
        record.id
        // The store and all its handles are dropped here: the writer commits and stops.
    };
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(
        store.rate_limiter().consume(key, 1, quota).await.unwrap(),
        RateDecision::Allowed { remaining: 0 }
    );
    assert!(matches!(
        store.rate_limiter().consume(key, 1, quota).await.unwrap(),
        RateDecision::Denied { .. }
    ));
    let found = store
        .confirmations()
        .consume("tok", &binding(), now_ms())
        .await
        .unwrap();
    assert_eq!(found.unwrap().args, json!({"id": 9}));
    let verifier = HumanVerifier::new(store.verifications());
    // The first grant was kept: alice again does not count twice, bob passes it.
    let passed = verifier.grant(&request_id, "bob", None).await.unwrap();
    assert_eq!(passed.result.status, VerificationStatus::Passed);
    assert_eq!(passed.record.grants.len(), 2);
    let stored = store
        .verifications()
        .get(&request_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.status, VerificationStatus::Passed);
    assert_eq!(stored.revision, 2);
}

#[tokio::test]
async fn verification_create_and_compare_and_set_are_exclusive() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let a = SqliteStore::open(&path).unwrap().verifications();
    let b = SqliteStore::open(&path).unwrap().verifications();
    let verifier = HumanVerifier::new(a.clone());
    let record = verifier
        .request(VerificationRequest::new("rotate keys").id("req-1"))
        .await
        .unwrap();
    let again = b.create(record.clone()).await.unwrap_err();
    assert!(matches!(
        again,
        VerificationStoreError::AlreadyExists { ref id, status: VerificationStatus::Pending } if id == "req-1"
    ));
    let mut changed = record.clone();
    changed.subject = "changed".into();
    // Two CAS from revision 0 in two stores: exactly one wins.
    let (first, second) = tokio::join!(
        a.compare_and_set(0, changed.clone()),
        b.compare_and_set(0, changed.clone())
    );
    assert_eq!(
        [first.unwrap(), second.unwrap()]
            .iter()
            .filter(|won| **won)
            .count(),
        1
    );
    assert!(!a.compare_and_set(0, changed.clone()).await.unwrap());
    assert!(
        !a.compare_and_set(5, {
            let mut unknown = changed.clone();
            unknown.id = "nope".into();
            unknown
        })
        .await
        .unwrap()
    );
    let stored = b.get("req-1").await.unwrap().unwrap();
    assert_eq!((stored.subject.as_str(), stored.revision), ("changed", 1));
    assert!(b.get("nope").await.unwrap().is_none());
}
