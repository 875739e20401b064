//! The Redis confirmation store against a real redis-server: one redemption of N
//! concurrent ones wins, foreign presentations do not burn a token, expiry, TTLs.

mod support;

use std::sync::Arc;
use std::time::SystemTime;

use milpa::confirm::{ConfirmationBinding, PendingConfirmation, unix_millis};
use serde_json::json;
use support::{RedisServer, runtime, unique_prefix};

fn binding(tool: &str, principal: Option<&str>, channel: &str) -> ConfirmationBinding {
    ConfirmationBinding {
        tool: tool.to_owned(),
        principal: principal.map(str::to_owned),
        channel: channel.to_owned(),
    }
}

fn pending(binding: &ConfirmationBinding, expires_at_ms: u64) -> PendingConfirmation {
    PendingConfirmation {
        binding: binding.clone(),
        args: json!({"id": 7, "note": "ünïcode \"quoted\""}),
        action_summary: "delete_note(id=7)".to_owned(),
        expires_at_ms,
    }
}

fn now_ms() -> u64 {
    unix_millis(SystemTime::now())
}

#[test]
fn a_token_presented_eight_times_at_once_is_redeemed_exactly_once() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let store = server.store(&unique_prefix("confirm-race")).await;
        let confirmations = store.confirmations();
        let owner = binding("delete_note", Some("alice"), "mcp");
        let minted = pending(&owner, now_ms() + 60_000);
        confirmations
            .insert("t-race".to_owned(), minted.clone())
            .await
            .unwrap();
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let confirmations = Arc::clone(&confirmations);
                let owner = owner.clone();
                tokio::spawn(async move {
                    confirmations
                        .consume("t-race", &owner, now_ms())
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
        assert_eq!(redeemed, vec![minted]);
    });
}

#[test]
fn a_foreign_presentation_leaves_the_token_to_its_owner() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let store = server.store(&unique_prefix("confirm-foreign")).await;
        let confirmations = store.confirmations();
        let owner = binding("delete_note", Some("alice"), "mcp");
        let minted = pending(&owner, now_ms() + 60_000);
        confirmations
            .insert("t-owned".to_owned(), minted.clone())
            .await
            .unwrap();
        let strangers = [
            binding("delete_all", Some("alice"), "mcp"),
            binding("delete_note", Some("mallory"), "mcp"),
            binding("delete_note", None, "mcp"),
            binding("delete_note", Some("alice"), "http"),
        ];
        for stranger in &strangers {
            assert_eq!(
                confirmations
                    .consume("t-owned", stranger, now_ms())
                    .await
                    .unwrap(),
                None,
                "{stranger:?}"
            );
        }
        assert_eq!(
            confirmations
                .consume("t-owned", &owner, now_ms())
                .await
                .unwrap(),
            Some(minted)
        );
        assert_eq!(
            confirmations
                .consume("t-owned", &owner, now_ms())
                .await
                .unwrap(),
            None,
            "a token works once"
        );
        assert_eq!(
            confirmations
                .consume("never-minted", &owner, now_ms())
                .await
                .unwrap(),
            None
        );
    });
}

#[test]
fn an_anonymous_token_is_not_redeemable_by_a_principal_and_back() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let store = server.store(&unique_prefix("confirm-anon")).await;
        let confirmations = store.confirmations();
        let anonymous = binding("echo", None, "cli");
        let empty_name = binding("echo", Some(""), "cli");
        confirmations
            .insert("t-anon".to_owned(), pending(&anonymous, now_ms() + 60_000))
            .await
            .unwrap();
        assert!(
            confirmations
                .consume("t-anon", &empty_name, now_ms())
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            confirmations
                .consume("t-anon", &anonymous, now_ms())
                .await
                .unwrap()
                .is_some()
        );
    });
}

#[test]
fn an_expired_token_is_refused_and_removed_and_every_token_has_its_expiry_as_ttl() {
    let server = RedisServer::start();
    let prefix = unique_prefix("confirm-expiry");
    runtime().block_on(async {
        let store = server.store(&prefix).await;
        let confirmations = store.confirmations();
        let owner = binding("delete_note", Some("alice"), "mcp");
        let expires_at = now_ms() + 60_000;
        confirmations
            .insert("t-exp".to_owned(), pending(&owner, expires_at))
            .await
            .unwrap();
        let key = format!("{prefix}confirm:t-exp");
        // Redis deletes it one millisecond after the last one it is valid in.
        assert_eq!(
            server.command(&format!("PEXPIRETIME {key}")),
            format!(":{}\r\n", expires_at + 1)
        );
        // Valid up to and including its expiry...
        let stranger = binding("delete_note", Some("mallory"), "mcp");
        assert!(
            confirmations
                .consume("t-exp", &stranger, expires_at)
                .await
                .unwrap()
                .is_none()
        );
        assert_eq!(server.command(&format!("EXISTS {key}")), ":1\r\n");
        // ...and past it refused and removed, even when a stranger presents it.
        assert!(
            confirmations
                .consume("t-exp", &stranger, expires_at + 1)
                .await
                .unwrap()
                .is_none()
        );
        assert_eq!(server.command(&format!("EXISTS {key}")), ":0\r\n");
        assert!(
            confirmations
                .consume("t-exp", &owner, expires_at)
                .await
                .unwrap()
                .is_none()
        );
    });
}

#[test]
fn redis_expires_a_token_on_its_own() {
    let server = RedisServer::start();
    let prefix = unique_prefix("confirm-ttl");
    runtime().block_on(async {
        let store = server.store(&prefix).await;
        let confirmations = store.confirmations();
        let owner = binding("echo", Some("alice"), "mcp");
        confirmations
            .insert("t-short".to_owned(), pending(&owner, now_ms() + 50))
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        // Gone from Redis without anyone presenting it.
        assert_eq!(
            server.command(&format!("EXISTS {prefix}confirm:t-short")),
            ":0\r\n"
        );
    });
}

#[test]
fn two_prefixes_do_not_see_each_other() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let a = server.store(&unique_prefix("confirm-a")).await;
        let b = server.store(&unique_prefix("confirm-b")).await;
        let owner = binding("echo", Some("alice"), "mcp");
        a.confirmations()
            .insert("t-shared".to_owned(), pending(&owner, now_ms() + 60_000))
            .await
            .unwrap();
        assert!(
            b.confirmations()
                .consume("t-shared", &owner, now_ms())
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            a.confirmations()
                .consume("t-shared", &owner, now_ms())
                .await
                .unwrap()
                .is_some()
        );
    });
}

#[test]
fn a_peek_reads_the_owners_token_without_spending_it() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let store = server.store(&unique_prefix("confirm-peek")).await;
        let confirmations = store.confirmations();
        let owner = binding("refund", Some("alice"), "mcp");
        let expires_at = now_ms() + 60_000;
        let minted = pending(&owner, expires_at);
        confirmations
            .insert("t-peek".to_owned(), minted.clone())
            .await
            .unwrap();
        let stranger = binding("refund", Some("mallory"), "mcp");
        assert_eq!(
            confirmations
                .peek("t-peek", &stranger, now_ms())
                .await
                .unwrap(),
            None
        );
        assert_eq!(
            confirmations
                .peek("t-peek", &owner, expires_at + 1)
                .await
                .unwrap(),
            None,
            "expired at that time"
        );
        for _ in 0..2 {
            assert_eq!(
                confirmations
                    .peek("t-peek", &owner, now_ms())
                    .await
                    .unwrap(),
                Some(minted.clone())
            );
        }
        assert_eq!(
            confirmations
                .consume("t-peek", &owner, now_ms())
                .await
                .unwrap(),
            Some(minted)
        );
        assert_eq!(
            confirmations
                .peek("t-peek", &owner, now_ms())
                .await
                .unwrap(),
            None
        );
    });
}
