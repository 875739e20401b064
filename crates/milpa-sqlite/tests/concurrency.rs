//! Concurrent charges and redemptions: the budget and the one-time token hold under
//! contention, within one store and across two stores on one file (as two processes).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use milpa::confirm::{ConfirmationBinding, ConfirmationStore, PendingConfirmation, unix_millis};
use milpa::rate_limit::{Quota, RateDecision, RateKey, RateLimiter};
use milpa_sqlite::SqliteStore;
use serde_json::json;

fn binding(principal: &str) -> ConfirmationBinding {
    ConfirmationBinding {
        tool: "notes_delete".into(),
        principal: Some(principal.into()),
        channel: "mcp".into(),
    }
}

fn pending(principal: &str) -> PendingConfirmation {
    PendingConfirmation {
        binding: binding(principal),
        args: json!({"id": 1}),
        action_summary: "notes_delete(id=1)".into(),
        expires_at_ms: unix_millis(SystemTime::now()) + 60_000,
    }
}

fn now_ms() -> u64 {
    unix_millis(SystemTime::now())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_concurrent_charges_against_a_budget_of_twenty_allow_exactly_twenty() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    // Two stores on one file, as two processes would have.
    let limiters: [Arc<dyn RateLimiter>; 2] = [
        SqliteStore::open(&path).unwrap().rate_limiter(),
        SqliteStore::open(&path).unwrap().rate_limiter(),
    ];
    let quota = Quota::new(20, Duration::from_secs(3600));
    let tasks: Vec<_> = (0..200)
        .map(|i| {
            let limiter = Arc::clone(&limiters[i % 2]);
            tokio::spawn(async move {
                let key = RateKey {
                    channel: "mcp",
                    principal: "alice",
                    tool: "echo",
                };
                limiter.consume(key, 1, quota).await.unwrap()
            })
        })
        .collect();
    let mut allowed = 0;
    for task in tasks {
        if matches!(task.await.unwrap(), RateDecision::Allowed { .. }) {
            allowed += 1;
        }
    }
    assert_eq!(allowed, 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_concurrent_redemptions_of_one_token_succeed_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let stores: [Arc<dyn ConfirmationStore>; 2] = [
        SqliteStore::open(&path).unwrap().confirmations(),
        SqliteStore::open(&path).unwrap().confirmations(),
    ];
    stores[0]
        .insert("tok-1".into(), pending("alice"))
        .await
        .unwrap();
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let store = Arc::clone(&stores[i % 2]);
            tokio::spawn(async move {
                store
                    .consume("tok-1", &binding("alice"), now_ms())
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut redeemed = Vec::new();
    for task in tasks {
        if let Some(found) = task.await.unwrap() {
            redeemed.push(found);
        }
    }
    assert_eq!(redeemed.len(), 1);
    assert_eq!(redeemed[0].args, json!({"id": 1}));
    assert_eq!(redeemed[0].binding, binding("alice"));
}

#[tokio::test]
async fn a_foreign_presentation_leaves_the_token_for_its_owner() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("state.db")).unwrap();
    let confirmations = store.confirmations();
    confirmations
        .insert("tok-2".into(), pending("alice"))
        .await
        .unwrap();
    let foreign = [
        binding("mallory"),
        ConfirmationBinding {
            principal: None,
            ..binding("alice")
        },
        ConfirmationBinding {
            channel: "cli".into(),
            ..binding("alice")
        },
        ConfirmationBinding {
            tool: "notes_add".into(),
            ..binding("alice")
        },
    ];
    for other in &foreign {
        let found = confirmations
            .consume("tok-2", other, now_ms())
            .await
            .unwrap();
        assert!(found.is_none(), "{other:?} redeemed alice's token");
    }
    let found = confirmations
        .consume("tok-2", &binding("alice"), now_ms())
        .await
        .unwrap();
    assert!(found.is_some());
    assert!(
        confirmations
            .consume("tok-2", &binding("alice"), now_ms())
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn an_expired_token_is_refused_and_removed() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("state.db")).unwrap();
    let confirmations = store.confirmations();
    let mut old = pending("alice");
    old.expires_at_ms = 1_000;
    confirmations.insert("tok-3".into(), old).await.unwrap();
    // Valid up to and including its expiry.
    let at_expiry = confirmations
        .consume("tok-3", &binding("mallory"), 1_000)
        .await
        .unwrap();
    assert!(at_expiry.is_none());
    assert!(
        confirmations
            .consume("tok-3", &binding("alice"), 1_001)
            .await
            .unwrap()
            .is_none()
    );
    // Gone: not even its owner at an earlier clock gets it back.
    assert!(
        confirmations
            .consume("tok-3", &binding("alice"), 500)
            .await
            .unwrap()
            .is_none()
    );
    let rows: i64 = store
        .open_connection()
        .unwrap()
        .query_row("SELECT count(*) FROM milpa_confirmations", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 0);
}
