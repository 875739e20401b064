//! Pinned definitions against a real redis-server: the first pin stands until repinned,
//! keys are (scope, kind, name) with no two pairs sharing one, pins are seen by a new
//! connection, and of replicas racing to pin one key exactly one pins.

mod support;

use std::sync::Arc;

use milpa::StoreErrorKind;
use milpa::approval::pins::{DefinitionKind, PinStore, PinnedDefinition};
use serde_json::json;
use support::{RedisServer, runtime, unique_prefix};
use tokio::sync::Barrier;

fn read_tool(version: u64, at_ms: u64) -> PinnedDefinition {
    PinnedDefinition::new(
        "fs",
        DefinitionKind::Tool,
        "read",
        json!({"name": "read", "description": format!("reads a file, v{version}"),
               "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}}),
        at_ms,
    )
}

#[test]
fn the_first_pin_stands_until_repinned() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let pins = server.store(&unique_prefix("pins")).await.pins();
        assert_eq!(
            pins.get("fs", DefinitionKind::Tool, "read").await.unwrap(),
            None
        );

        let first = read_tool(1, 1_000);
        assert_eq!(pins.pin_first(first.clone()).await.unwrap(), None);
        assert_eq!(
            pins.get("fs", DefinitionKind::Tool, "read").await.unwrap(),
            Some(first.clone())
        );
        // A second sight, changed or not, gets the first pin back and changes nothing.
        let second = read_tool(2, 2_000);
        assert_eq!(
            pins.pin_first(second.clone()).await.unwrap(),
            Some(first.clone())
        );
        assert_eq!(
            pins.pin_first(first.clone()).await.unwrap(),
            Some(first.clone())
        );
        assert_eq!(
            pins.get("fs", DefinitionKind::Tool, "read").await.unwrap(),
            Some(first)
        );

        // A person granted the change.
        pins.repin(second.clone()).await.unwrap();
        assert_eq!(
            pins.get("fs", DefinitionKind::Tool, "read").await.unwrap(),
            Some(second)
        );
        // Repinning an unknown key adds it.
        let fresh = PinnedDefinition::new("fs", DefinitionKind::Tool, "write", json!({"d": 1}), 3);
        pins.repin(fresh.clone()).await.unwrap();
        assert_eq!(
            pins.get("fs", DefinitionKind::Tool, "write").await.unwrap(),
            Some(fresh)
        );
    });
}

#[test]
fn kinds_scopes_and_prefixes_are_separate_keys() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let prefix = unique_prefix("pins");
        let pins = server.store(&prefix).await.pins();
        let tool = read_tool(1, 1_000);
        assert_eq!(pins.pin_first(tool.clone()).await.unwrap(), None);
        assert_eq!(
            pins.get("fs", DefinitionKind::Prompt, "read")
                .await
                .unwrap(),
            None
        );
        assert_eq!(
            pins.get("git", DefinitionKind::Tool, "read").await.unwrap(),
            None
        );

        let prompt =
            PinnedDefinition::new("fs", DefinitionKind::Prompt, "read", json!({"p": 1}), 5);
        let other_scope =
            PinnedDefinition::new("git", DefinitionKind::Tool, "read", json!({"g": 1}), 6);
        assert_eq!(pins.pin_first(prompt.clone()).await.unwrap(), None);
        assert_eq!(pins.pin_first(other_scope.clone()).await.unwrap(), None);
        assert_eq!(
            pins.get("fs", DefinitionKind::Tool, "read").await.unwrap(),
            Some(tool)
        );
        assert_eq!(
            pins.get("fs", DefinitionKind::Prompt, "read")
                .await
                .unwrap(),
            Some(prompt)
        );
        assert_eq!(
            pins.get("git", DefinitionKind::Tool, "read").await.unwrap(),
            Some(other_scope)
        );

        // A `:` in a scope or a name does not make two pairs one key.
        let left = PinnedDefinition::new("a:b", DefinitionKind::Tool, "c", json!({"l": 1}), 7);
        let right = PinnedDefinition::new("a", DefinitionKind::Tool, "b:c", json!({"r": 1}), 8);
        assert_eq!(pins.pin_first(left.clone()).await.unwrap(), None);
        assert_eq!(pins.pin_first(right.clone()).await.unwrap(), None);
        assert_eq!(
            pins.get("a:b", DefinitionKind::Tool, "c").await.unwrap(),
            Some(left)
        );
        assert_eq!(
            pins.get("a", DefinitionKind::Tool, "b:c").await.unwrap(),
            Some(right)
        );
        let keys = server.command(&format!("KEYS {prefix}pin:*"));
        assert!(
            keys.contains(&format!("{prefix}pin:tool:2:fs:read")),
            "{keys}"
        );

        // Another prefix is another deployment.
        let elsewhere = server.store(&unique_prefix("pins")).await.pins();
        assert_eq!(
            elsewhere
                .get("fs", DefinitionKind::Tool, "read")
                .await
                .unwrap(),
            None
        );
    });
}

#[test]
fn pins_are_seen_by_a_new_connection() {
    let server = RedisServer::start();
    let prefix = unique_prefix("pins");
    let pin = read_tool(1, 1_000);
    runtime().block_on(async {
        let pins = server.store(&prefix).await.pins();
        assert_eq!(pins.pin_first(pin.clone()).await.unwrap(), None);
    });
    runtime().block_on(async {
        let store = server.store(&prefix).await;
        assert_eq!(
            store
                .pins()
                .get("fs", DefinitionKind::Tool, "read")
                .await
                .unwrap(),
            Some(pin.clone())
        );
        assert_eq!(
            store
                .pin_store()
                .pin_first(read_tool(2, 2_000))
                .await
                .unwrap(),
            Some(pin)
        );
    });
}

#[test]
fn a_definition_that_does_not_read_back_is_corrupt() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let prefix = unique_prefix("pins");
        let pins = server.store(&prefix).await.pins();
        let reply = server.command(&format!(
            "HSET {prefix}pin:tool:2:fs:read digest ab definition {{not-json pinned_at_ms 1"
        ));
        assert!(reply.starts_with(':'), "{reply}");
        let error = pins
            .get("fs", DefinitionKind::Tool, "read")
            .await
            .unwrap_err();
        assert_eq!(error.kind(), StoreErrorKind::Corrupt, "{error}");
        let error = pins.pin_first(read_tool(1, 1)).await.unwrap_err();
        assert_eq!(error.kind(), StoreErrorKind::Corrupt, "{error}");
    });
}

#[test]
fn of_replicas_racing_to_pin_one_key_exactly_one_pins() {
    const RACERS: u64 = 8;
    let server = RedisServer::start();
    runtime().block_on(async {
        let prefix = unique_prefix("pins");
        // Each racer its own connection, as a replica of its own, all connected before
        // any starts.
        let mut stores = Vec::new();
        for _ in 0..RACERS {
            stores.push(server.store(&prefix).await.pins());
        }
        let start = Arc::new(Barrier::new(RACERS as usize));
        let racers: Vec<_> = (0..RACERS)
            .zip(stores)
            .map(|(i, pins)| {
                let start = Arc::clone(&start);
                tokio::spawn(async move {
                    let pin = read_tool(i, 1_000 + i);
                    start.wait().await;
                    (pin.clone(), pins.pin_first(pin).await.unwrap())
                })
            })
            .collect();
        let mut answers = Vec::new();
        for racer in racers {
            answers.push(racer.await.unwrap());
        }
        let winners: Vec<&PinnedDefinition> = answers
            .iter()
            .filter(|(_, answer)| answer.is_none())
            .map(|(pin, _)| pin)
            .collect();
        assert_eq!(winners.len(), 1, "{answers:?}");
        let winner = winners[0];
        for (_, answer) in answers.iter().filter(|(_, answer)| answer.is_some()) {
            assert_eq!(answer.as_ref(), Some(winner));
        }
        let pins = server.store(&prefix).await.pins();
        assert_eq!(
            pins.get("fs", DefinitionKind::Tool, "read")
                .await
                .unwrap()
                .as_ref(),
            Some(winner)
        );
    });
}
