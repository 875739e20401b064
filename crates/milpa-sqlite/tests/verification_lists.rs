//! The approval queue's two lists: pending requests oldest first, resolved ones most
//! recently resolved first, both in the in-memory store's exact order, cut at the limit,
//! and a request resolved by compare-and-set moving from one list to the other.

use milpa::verification::{
    ApprovalPolicy, Decision, HumanVerifier, InMemoryVerificationStore, VerificationRecord,
    VerificationRequest, VerificationStatus, VerificationStore,
};
use milpa_sqlite::SqliteStore;
use serde_json::json;

fn record(
    id: &str,
    created_at_ms: u64,
    status: VerificationStatus,
    resolved_at_ms: Option<u64>,
) -> VerificationRecord {
    VerificationRecord {
        id: id.to_owned(),
        subject: format!("subject of {id}"),
        policy: ApprovalPolicy::Single,
        required_grants: 1,
        requested_by: Some("agent-7".to_owned()),
        payload: json!({"id": id}),
        status,
        grants: Vec::new(),
        rejection: None,
        created_at_ms,
        resolved_at_ms,
        revision: 0,
    }
}

/// Requests whose times tie, so the order by id is exercised in both directions.
fn queue() -> Vec<VerificationRecord> {
    use VerificationStatus::{Failed, Passed, Pending, Waived};
    vec![
        record("p-b", 20, Pending, None),
        record("p-a", 30, Pending, None),
        record("p-c", 10, Pending, None),
        record("p-e", 20, Pending, None),
        record("p-d", 20, Pending, None),
        record("r-x", 1, Passed, Some(100)),
        record("r-y", 2, Failed, Some(200)),
        record("r-b", 3, Waived, Some(100)),
        record("r-z", 4, Passed, Some(100)),
        // Resolved without a time: the in-memory store sorts it as 0, so last.
        record("r-untimed", 5, Failed, None),
    ]
}

fn ids(records: &[VerificationRecord]) -> Vec<&str> {
    records.iter().map(|r| r.id.as_str()).collect()
}

async fn filled(store: &dyn VerificationStore) {
    for record in queue() {
        store.create(record).await.unwrap();
    }
}

#[tokio::test]
async fn pending_requests_list_oldest_first_and_resolved_ones_newest_first_ties_by_id() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("state.db"))
        .unwrap()
        .verifications();
    filled(store.as_ref()).await;
    let pending = store.list_pending(100).await.unwrap();
    assert_eq!(ids(&pending), ["p-c", "p-b", "p-d", "p-e", "p-a"]);
    let resolved = store.list_resolved(100).await.unwrap();
    assert_eq!(ids(&resolved), ["r-y", "r-z", "r-x", "r-b", "r-untimed"]);
    // Whole records, exactly as the in-memory store lists them.
    let memory = InMemoryVerificationStore::new();
    filled(&memory).await;
    assert_eq!(pending, memory.list_pending(100).await.unwrap());
    assert_eq!(resolved, memory.list_resolved(100).await.unwrap());
}

#[tokio::test]
async fn each_list_stops_at_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("state.db"))
        .unwrap()
        .verifications();
    filled(store.as_ref()).await;
    assert!(store.list_pending(0).await.unwrap().is_empty());
    assert!(store.list_resolved(0).await.unwrap().is_empty());
    assert_eq!(ids(&store.list_pending(1).await.unwrap()), ["p-c"]);
    assert_eq!(
        ids(&store.list_pending(3).await.unwrap()),
        ["p-c", "p-b", "p-d"]
    );
    assert_eq!(ids(&store.list_resolved(2).await.unwrap()), ["r-y", "r-z"]);
    // More than SQLite's LIMIT holds means no limit.
    assert_eq!(store.list_pending(usize::MAX).await.unwrap().len(), 5);
    assert_eq!(store.list_resolved(usize::MAX).await.unwrap().len(), 5);
}

#[tokio::test]
async fn a_request_resolved_by_compare_and_set_moves_to_the_resolved_list() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let store = SqliteStore::open(&path).unwrap().verifications();
    filled(store.as_ref()).await;

    let mut granted = store.get("p-b").await.unwrap().unwrap();
    granted.status = VerificationStatus::Passed;
    granted.grants.push(Decision {
        principal: "alice".to_owned(),
        reason: None,
        at_ms: 300,
    });
    granted.resolved_at_ms = Some(300);
    assert!(store.compare_and_set(0, granted).await.unwrap());

    let pending = store.list_pending(100).await.unwrap();
    assert_eq!(ids(&pending), ["p-c", "p-d", "p-e", "p-a"]);
    let resolved = store.list_resolved(2).await.unwrap();
    assert_eq!(ids(&resolved), ["p-b", "r-y"]);
    assert_eq!(
        resolved[0].revision, 1,
        "the listed record is the stored one"
    );
    assert_eq!(resolved[0].approvals(), ["alice"]);

    // Through the verifier, as `milpa approvals grant` resolves one, seen by another
    // process on the same file.
    let verifier = HumanVerifier::new(store.clone());
    let opened = verifier
        .request(VerificationRequest::new("rotate keys").id("through-verifier"))
        .await
        .unwrap();
    let other = SqliteStore::open(&path).unwrap().verifications();
    assert!(
        ids(&other.list_pending(100).await.unwrap()).contains(&"through-verifier"),
        "a new request is pending"
    );
    let outcome = verifier
        .reject(&opened.id, "bob", Some("not now"))
        .await
        .unwrap();
    assert_eq!(outcome.record.status, VerificationStatus::Failed);
    assert!(!ids(&other.list_pending(100).await.unwrap()).contains(&"through-verifier"));
    let newest = other.list_resolved(1).await.unwrap();
    assert_eq!(ids(&newest), ["through-verifier"]);
    assert_eq!(
        newest[0],
        other.get("through-verifier").await.unwrap().unwrap()
    );
}
