//! A `mutating` + `confirm` tool declared with the macro runs the confirmation dance end to
//! end through `ToolRegistry::call`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use milpa::{ErrorCode, ToolContext, ToolRegistry, tools};
use serde_json::json;

#[derive(Default)]
struct Bank {
    balance: AtomicU64,
    transfers: AtomicU64,
}

#[tools]
impl Bank {
    /// Moves money out of the account.
    #[tool(mutating, confirm, scopes = ["bank:write"])]
    fn transfer(&self, amount: u64, to: &str) -> serde_json::Value {
        self.balance.fetch_sub(amount, Ordering::SeqCst);
        self.transfers.fetch_add(1, Ordering::SeqCst);
        json!({"sent": amount, "to": to})
    }
}

#[tokio::test]
async fn confirmation_dance() {
    let bank = Arc::new(Bank::default());
    bank.balance.store(1_000, Ordering::SeqCst);
    let mut registry = ToolRegistry::new();
    assert_eq!(registry.register_provider(bank.clone()).unwrap(), 1);
    let definition = registry.get("transfer").unwrap();
    assert!(definition.is_mutating());
    assert!(definition.requires_confirmation());

    let ctx = ToolContext::web("alice", ["bank:write"]);
    let first = registry
        .call("transfer", json!({"amount": 250, "to": "bob"}), &ctx)
        .await;
    assert!(first.success, "{first:?}");
    assert!(first.requires_confirmation());
    let token = first.confirm_token().expect("a token").to_owned();
    assert_eq!(bank.transfers.load(Ordering::SeqCst), 0, "nothing ran yet");

    let replay = registry
        .call("transfer", json!({"confirm_token": token}), &ctx)
        .await;
    assert!(replay.success, "{replay:?}");
    assert_eq!(replay.data, json!({"sent": 250, "to": "bob"}));
    assert_eq!(bank.transfers.load(Ordering::SeqCst), 1);
    assert_eq!(bank.balance.load(Ordering::SeqCst), 750);

    let again = registry
        .call("transfer", json!({"confirm_token": token}), &ctx)
        .await;
    assert!(!again.success);
    assert_eq!(again.code(), Some(&ErrorCode::ValidationError));
    assert_eq!(
        again.error.as_deref(),
        Some("Invalid or expired confirmation token")
    );
    assert_eq!(bank.transfers.load(Ordering::SeqCst), 1);
}

struct Deployer;

#[tools]
impl Deployer {
    /// Deploys to an environment; a person approves every deploy.
    #[tool(mutating, confirm = "human", scopes = ["ops:deploy"])]
    fn deploy(&self, env: String) -> String {
        format!("deployed {env}")
    }
}

#[tokio::test]
async fn a_human_gate_declared_with_the_macro_parks_the_call_until_a_person_grants_it() {
    let mut registry = ToolRegistry::new();
    registry.register_provider(Arc::new(Deployer)).unwrap();
    let definition = registry.get("deploy").unwrap();
    assert!(definition.requires_human_approval());
    assert!(!definition.requires_confirmation());

    let agent = ToolContext::mcp("r1", Some("agent".into()), ["ops:deploy"]);
    let parked = registry
        .call("deploy", json!({"env": "prod"}), &agent)
        .await;
    assert_eq!(
        parked.code(),
        Some(&ErrorCode::ApprovalPending),
        "{parked:?}"
    );
    let id = parked.data["approval_id"].as_str().unwrap().to_owned();

    let person = ToolContext::web("alice", ["approvals:grant"]);
    registry
        .decide_approval(&id, milpa::approval::Verdict::Grant, None, &person)
        .await
        .unwrap();
    let ran = registry
        .call("deploy", json!({"confirm_token": id}), &agent)
        .await;
    assert_eq!(ran.data, json!("deployed prod"), "{ran:?}");
}
