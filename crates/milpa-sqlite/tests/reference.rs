//! Property: for random interleavings of mint, redeem (by the owner or someone else),
//! time passing, rate-limit charges, and verification requests opened, changed by
//! compare-and-set and listed (pending and resolved, at random limits), the SQLite stores
//! answer exactly as the in-memory reference implementations do, given the same clock.

use std::time::{Duration, SystemTime};

use milpa::confirm::{
    ConfirmationBinding, ConfirmationStore, InMemoryConfirmationStore, PendingConfirmation,
    unix_millis,
};
use milpa::rate_limit::{InMemoryRateLimiter, Quota, RateKey};
use milpa::verification::{
    ApprovalPolicy, InMemoryVerificationStore, VerificationRecord, VerificationStatus,
    VerificationStore,
};
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
    /// Opens request `id` with a status (final ones too) and times from small sets, so
    /// that times tie and the lists order by id.
    Open {
        id: u8,
        created: u8,
        status: usize,
        resolved: Option<u8>,
    },
    /// Compare-and-set on request `id` from its current revision (or a stale one).
    Change {
        id: u8,
        status: usize,
        resolved: Option<u8>,
        stale: bool,
    },
    List {
        resolved: bool,
        limit: usize,
    },
}

const STATUSES: [VerificationStatus; 4] = [
    VerificationStatus::Pending,
    VerificationStatus::Passed,
    VerificationStatus::Failed,
    VerificationStatus::Waived,
];

fn verification(id: u8, created: u8, status: usize, resolved: Option<u8>) -> VerificationRecord {
    VerificationRecord {
        id: format!("v{id}"),
        subject: format!("request {id}"),
        policy: ApprovalPolicy::Single,
        required_grants: 1,
        requested_by: None,
        payload: json!({"created": created}),
        status: STATUSES[status],
        grants: Vec::new(),
        rejection: None,
        created_at_ms: 1_000 * u64::from(created),
        resolved_at_ms: resolved.map(|at| 1_000 * u64::from(at)),
        revision: 0,
    }
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
        (0u8..8, 0u8..3, 0usize..4, prop::option::of(0u8..3)).prop_map(
            |(id, created, status, resolved)| Op::Open {
                id,
                created,
                status,
                resolved
            }
        ),
        (0u8..8, 0usize..4, prop::option::of(0u8..3), any::<bool>()).prop_map(
            |(id, status, resolved, stale)| Op::Change {
                id,
                status,
                resolved,
                stale
            }
        ),
        (any::<bool>(), 0usize..10).prop_map(|(resolved, limit)| Op::List { resolved, limit }),
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
            let sqlite_verifications = store.verification_store();
            let memory_verifications = InMemoryVerificationStore::new();
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
                    Op::Open { id, created, status, resolved } => {
                        let record = verification(id, created, status, resolved);
                        let expected = memory_verifications.create(record.clone()).await;
                        let actual = sqlite_verifications.create(record).await;
                        prop_assert_eq!(format!("{actual:?}"), format!("{expected:?}"), "open v{}", id);
                    }
                    Op::Change { id, status, resolved, stale } => {
                        let current = memory_verifications.get(&format!("v{id}")).await.unwrap();
                        let (created, revision) = current
                            .map(|r| ((r.created_at_ms / 1_000) as u8, r.revision))
                            .unwrap_or((0, 0));
                        let expected_revision = if stale { revision + 1 } else { revision };
                        let record = verification(id, created, status, resolved);
                        let expected = memory_verifications
                            .compare_and_set(expected_revision, record.clone())
                            .await
                            .unwrap();
                        let actual = sqlite_verifications
                            .compare_and_set(expected_revision, record)
                            .await
                            .unwrap();
                        prop_assert_eq!(actual, expected, "change v{} from revision {}", id, expected_revision);
                    }
                    Op::List { resolved, limit } => {
                        let (expected, actual) = if resolved {
                            (
                                memory_verifications.list_resolved(limit).await.unwrap(),
                                sqlite_verifications.list_resolved(limit).await.unwrap(),
                            )
                        } else {
                            (
                                memory_verifications.list_pending(limit).await.unwrap(),
                                sqlite_verifications.list_pending(limit).await.unwrap(),
                            )
                        };
                        prop_assert_eq!(actual, expected, "list resolved={} limit {}", resolved, limit);
                    }
                }
            }
            Ok(())
        })?;
    }
}
