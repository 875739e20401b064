//! Through the pipeline: a rate-limited, confirmed, audited call with every store on
//! SQLite, and its records in the trail.

use std::time::Duration;

use milpa::audit::trail::AuditQuery;
use milpa::rate_limit::Quota;
use milpa::{ErrorCode, ToolContext, ToolDefinition, ToolRegistry};
use milpa_sqlite::SqliteStore;
use serde_json::{Value, json};

fn registry(store: &SqliteStore, quota: Quota) -> ToolRegistry {
    let mut registry = ToolRegistry::builder()
        .rate_limiter(store.rate_limiter())
        .default_quota(quota)
        .confirmation_store(store.confirmations())
        .audit_sink(store.audit_sink())
        .build();
    registry
        .register(
            ToolDefinition::builder("echo")
                .description("Echoes its arguments")
                .sync(|args: &Value, _ctx: &ToolContext| args.clone()),
        )
        .unwrap();
    registry
}

#[tokio::test]
async fn a_rate_limited_audited_call_runs_on_sqlite_stores_and_is_in_the_trail() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("state.db")).unwrap();
    let registry = registry(&store, Quota::new(2, Duration::from_secs(3600)));
    let ctx = ToolContext::builder("mcp")
        .principal("alice")
        .request_id("req-1")
        .build();
    let first = registry
        .call("echo", json!({"text": "hi", "password": "p"}), &ctx)
        .await;
    assert!(first.success, "{first:?}");
    assert_eq!(first.data, json!({"text": "hi", "password": "p"}));
    assert!(
        registry
            .call("echo", json!({"text": "2"}), &ctx)
            .await
            .success
    );
    let third = registry.call("echo", json!({"text": "3"}), &ctx).await;
    assert_eq!(third.code(), Some(&ErrorCode::RateLimited));

    store.audit_sink().flush();
    let trail = store.audit_trail();
    let lines = trail.query(&AuditQuery::default()).unwrap();
    assert_eq!(lines.len(), 3);
    let newest: Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(newest["outcome"], "rate_limited");
    let oldest: Value = serde_json::from_str(&lines[2]).unwrap();
    assert_eq!(oldest["request_id"], "req-1");
    assert_eq!(oldest["principal"], "alice");
    assert_eq!(oldest["outcome"], "executed");
    assert_eq!(
        oldest["args"],
        json!({"text": "hi", "password": "***REDACTED***"})
    );
    assert_eq!(oldest["seq"], 1);
    let executed = trail
        .query(
            &AuditQuery::default()
                .with_outcome("executed")
                .with_principal("alice"),
        )
        .unwrap();
    assert_eq!(executed.len(), 2);
    assert_eq!(trail.verify().unwrap().unwrap().records, 3);
}

#[tokio::test]
async fn a_confirmation_minted_by_one_registry_is_redeemed_by_another_on_the_same_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let tool = || {
        ToolDefinition::builder("notes_delete")
            .description("Deletes a note")
            .mutating(true)
            .requires_confirmation(true)
            .sync(|args: &Value, _ctx: &ToolContext| json!({"deleted": args["id"]}))
    };
    let first_store = SqliteStore::open(&path).unwrap();
    let mut first = registry(&first_store, Quota::DEFAULT);
    first.register(tool()).unwrap();
    let ctx = ToolContext::cli();
    let asked = first.call("notes_delete", json!({"id": 7}), &ctx).await;
    let token = asked.data["confirm_token"]
        .as_str()
        .unwrap_or_else(|| panic!("no token in {asked:?}"))
        .to_owned();
    drop(first);
    drop(first_store);

    let second_store = SqliteStore::open(&path).unwrap();
    let mut second = registry(&second_store, Quota::DEFAULT);
    second.register(tool()).unwrap();
    let done = second
        .call(
            "notes_delete",
            json!({"id": 999, "confirm_token": token}),
            &ctx,
        )
        .await;
    assert!(done.success, "{done:?}");
    // The stored (first) arguments ran.
    assert_eq!(done.data, json!({"deleted": 7}));
    let again = second
        .call(
            "notes_delete",
            json!({"id": 7, "confirm_token": token}),
            &ctx,
        )
        .await;
    assert!(!again.success);
}
