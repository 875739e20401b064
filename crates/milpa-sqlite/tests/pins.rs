//! Pinned definitions in a SQLite file: the first pin stands until repinned, keys are
//! (scope, kind, name), pins outlive a reopen, and of stores on one file racing to pin one
//! key exactly one pins.

use std::future::IntoFuture;
use std::sync::{Arc, Barrier};

use milpa::StoreErrorKind;
use milpa::approval::pins::{DefinitionKind, PinStore, PinnedDefinition};
use milpa_sqlite::SqliteStore;
use serde_json::json;

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

#[tokio::test]
async fn the_first_pin_stands_until_repinned() {
    let dir = tempfile::tempdir().unwrap();
    let pins = SqliteStore::open(dir.path().join("state.db"))
        .unwrap()
        .pins();
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
        Some(second.clone())
    );
    // Repinning an unknown key adds it.
    let fresh = PinnedDefinition::new("fs", DefinitionKind::Tool, "write", json!({"d": 1}), 3);
    pins.repin(fresh.clone()).await.unwrap();
    assert_eq!(
        pins.get("fs", DefinitionKind::Tool, "write").await.unwrap(),
        Some(fresh)
    );
}

#[tokio::test]
async fn kinds_and_scopes_are_separate_keys() {
    let dir = tempfile::tempdir().unwrap();
    let pins = SqliteStore::open(dir.path().join("state.db"))
        .unwrap()
        .pins();
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

    let prompt = PinnedDefinition::new("fs", DefinitionKind::Prompt, "read", json!({"p": 1}), 5);
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
}

#[tokio::test]
async fn pins_outlive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let pin = read_tool(1, 1_000);
    {
        let pins = SqliteStore::open(&path).unwrap().pins();
        assert_eq!(pins.pin_first(pin.clone()).await.unwrap(), None);
    }
    let store = SqliteStore::open(&path).unwrap();
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
}

#[tokio::test]
async fn a_definition_that_does_not_read_back_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("state.db")).unwrap();
    store
        .open_connection()
        .unwrap()
        .execute(
            "INSERT INTO milpa_pins (scope, kind, name, digest, definition, pinned_at_ms)
             VALUES ('fs', 'tool', 'read', 'ab', '{not json', 1)",
            [],
        )
        .unwrap();
    let error = store
        .pins()
        .get("fs", DefinitionKind::Tool, "read")
        .await
        .unwrap_err();
    assert_eq!(error.kind(), StoreErrorKind::Corrupt, "{error}");
    let error = store.pins().pin_first(read_tool(1, 1)).await.unwrap_err();
    assert_eq!(error.kind(), StoreErrorKind::Corrupt, "{error}");
}

#[test]
fn of_stores_racing_to_pin_one_key_exactly_one_pins() {
    const RACERS: u64 = 8;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    // Two stores on one file, as two processes; each thread uses one of them.
    let stores = [
        SqliteStore::open(&path).unwrap(),
        SqliteStore::open(&path).unwrap(),
    ];
    let start = Arc::new(Barrier::new(RACERS as usize));
    let racers: Vec<_> = (0..RACERS)
        .map(|i| {
            let pins = stores[(i % 2) as usize].pins();
            let start = Arc::clone(&start);
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                let pin = read_tool(i, 1_000 + i);
                start.wait();
                (
                    pin.clone(),
                    runtime.block_on(pins.pin_first(pin).into_future()).unwrap(),
                )
            })
        })
        .collect();
    let answers: Vec<_> = racers.into_iter().map(|r| r.join().unwrap()).collect();
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
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for store in &stores {
        assert_eq!(
            runtime
                .block_on(
                    store
                        .pins()
                        .get("fs", DefinitionKind::Tool, "read")
                        .into_future(),
                )
                .unwrap()
                .as_ref(),
            Some(winner)
        );
    }
}
