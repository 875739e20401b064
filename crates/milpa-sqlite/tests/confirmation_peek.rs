//! Peeking at a confirmation token on SQLite: the owner reads the parked call without
//! spending it; strangers and late readers see nothing; a redeemed token is gone.

use milpa::confirm::{ConfirmationBinding, PendingConfirmation, unix_millis};
use milpa_sqlite::SqliteStore;
use serde_json::json;

#[tokio::test]
async fn a_peek_reads_the_owners_token_without_spending_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("state.db")).unwrap();
    let confirmations = store.confirmations();
    let owner = ConfirmationBinding {
        tool: "refund".into(),
        principal: Some("alice".into()),
        channel: "mcp".into(),
    };
    let now = unix_millis(std::time::SystemTime::now());
    let minted = PendingConfirmation {
        binding: owner.clone(),
        args: json!({"amount": 50}),
        action_summary: "refund(amount=50)".into(),
        expires_at_ms: now + 60_000,
    };
    confirmations
        .insert("t".into(), minted.clone())
        .await
        .unwrap();
    let stranger = ConfirmationBinding {
        principal: None,
        ..owner.clone()
    };
    assert_eq!(confirmations.peek("t", &stranger, now).await.unwrap(), None);
    assert_eq!(
        confirmations.peek("t", &owner, now + 60_001).await.unwrap(),
        None
    );
    for _ in 0..2 {
        assert_eq!(
            confirmations.peek("t", &owner, now).await.unwrap(),
            Some(minted.clone())
        );
    }
    assert_eq!(
        confirmations.consume("t", &owner, now).await.unwrap(),
        Some(minted)
    );
    assert_eq!(confirmations.peek("t", &owner, now).await.unwrap(), None);
}
