//! Property: for random interleavings of mint, redeem (by the owner or someone else),
//! time passing and rate-limit charges, the SQLite stores answer exactly as the in-memory
//! reference implementations do, given the same clock.

use std::time::{Duration, SystemTime};

use milpa::confirm::{
    ConfirmationBinding, ConfirmationStore, InMemoryConfirmationStore, PendingConfirmation,
    unix_millis,
};
use milpa::rate_limit::{InMemoryRateLimiter, Quota, RateKey};
use milpa_sqlite::SqliteStore;
use proptest::prelude::*;
use serde_json::json;

const PRINCIPALS: [&str; 3] = ["alice", "bob", ""];

#[derive(Debug, Clone)]
enum Op {
    Mint {
        token: u8,
        owner: usize,
        ttl_ms: u64,
    },
    Redeem {
        token: u8,
        presenter: usize,
        channel_cli: bool,
    },
    Advance {
        ms: u64,
    },
    Charge {
        principal: usize,
        mutating: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..4, 0usize..3, 0u64..200).prop_map(|(token, owner, ttl_ms)| Op::Mint {
            token,
            owner,
            ttl_ms
        }),
        (0u8..4, 0usize..3, any::<bool>()).prop_map(|(token, presenter, channel_cli)| {
            Op::Redeem {
                token,
                presenter,
                channel_cli,
            }
        }),
        // Multiples of 5 ms: charges land exactly on the 50 ms refill boundaries.
        (0u64..30).prop_map(|steps| Op::Advance { ms: steps * 5 }),
        (0usize..3, any::<bool>()).prop_map(|(principal, mutating)| Op::Charge {
            principal,
            mutating
        }),
    ]
}

fn binding(principal: usize, channel_cli: bool) -> ConfirmationBinding {
    ConfirmationBinding {
        tool: "notes_delete".into(),
        principal: Some(PRINCIPALS[principal])
            .filter(|p| !p.is_empty())
            .map(Into::into),
        channel: if channel_cli { "cli" } else { "mcp" }.into(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn sqlite_stores_agree_with_the_in_memory_reference(ops in prop::collection::vec(op(), 1..80)) {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("state.db")).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(async {
            let sqlite_confirmations = store.confirmation_store();
            let sqlite_limiter = store.sqlite_rate_limiter();
            let memory_confirmations = InMemoryConfirmationStore::new();
            let memory_limiter = InMemoryRateLimiter::new();
            // A budget small enough that random charges run into it.
            let quota = Quota::new(6, Duration::from_millis(300));
            // Both clocks start now, so the stores' own occasional sweeps (by wall clock)
            // never see a simulated token as expired.
            let mut now_ms = unix_millis(SystemTime::now());
            for op in ops {
                match op {
                    Op::Mint { token, owner, ttl_ms } => {
                        let pending = PendingConfirmation {
                            binding: binding(owner, false),
                            args: json!({"token": token, "owner": owner}),
                            action_summary: format!("notes_delete(token={token})"),
                            expires_at_ms: now_ms + ttl_ms,
                        };
                        let token = format!("t{token}");
                        memory_confirmations.insert(token.clone(), pending.clone()).await.unwrap();
                        sqlite_confirmations.insert(token, pending).await.unwrap();
                    }
                    Op::Redeem { token, presenter, channel_cli } => {
                        let token = format!("t{token}");
                        let binding = binding(presenter, channel_cli);
                        let expected = memory_confirmations.consume(&token, &binding, now_ms).await.unwrap();
                        let actual = sqlite_confirmations.consume(&token, &binding, now_ms).await.unwrap();
                        prop_assert_eq!(actual, expected, "redeem {} by {:?} at {}", token, binding, now_ms);
                    }
                    Op::Advance { ms } => now_ms += ms,
                    Op::Charge { principal, mutating } => {
                        let key = RateKey { channel: "mcp", principal: PRINCIPALS[principal], tool: "notes_delete" };
                        let cost = if mutating { 5 } else { 1 };
                        let now_ns = now_ms * 1_000_000;
                        let expected = memory_limiter.charge_at(key, cost, quota, now_ns);
                        let actual = sqlite_limiter.consume_at(key, cost, quota, now_ns).await.unwrap();
                        prop_assert_eq!(actual, expected, "charge {} cost {} at {}", key, cost, now_ns);
                    }
                }
            }
            Ok(())
        })?;
    }
}
