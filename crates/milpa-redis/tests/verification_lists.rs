//! The approval queue's two lists on a real redis-server: pending requests oldest first,
//! resolved ones most recently resolved first, both in the in-memory store's exact order,
//! cut at the limit; a request resolved by compare-and-set moves from one index to the
//! other; members whose request expired are skipped and removed.

mod support;

use std::time::{Duration, SystemTime};

use milpa::confirm::unix_millis;
use milpa::verification::{
    ApprovalPolicy, Decision, HumanVerifier, InMemoryVerificationStore, VerificationRecord,
    VerificationRequest, VerificationStatus, VerificationStore,
};
use milpa_redis::RedisStore;
use serde_json::json;
use support::{RedisServer, options, runtime, unique_prefix};

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

fn now_ms() -> u64 {
    unix_millis(SystemTime::now())
}

/// Requests whose times tie, so the order by id is exercised in both directions. Times
/// are seconds after `base` (now: the resolved index forgets resolutions older than the
/// retention).
fn queue(base: u64) -> Vec<VerificationRecord> {
    use VerificationStatus::{Failed, Passed, Pending, Waived};
    let at = |s: u64| base + 1_000 * s;
    vec![
        record("p-b", at(20), Pending, None),
        record("p-a", at(30), Pending, None),
        record("p-c", at(10), Pending, None),
        record("p-e", at(20), Pending, None),
        record("p-d", at(20), Pending, None),
        record("r-x", at(1), Passed, Some(at(100))),
        record("r-y", at(2), Failed, Some(at(200))),
        record("r-b", at(3), Waived, Some(at(100))),
        record("r-z", at(4), Passed, Some(at(100))),
        // Resolved without a time: the in-memory store sorts it as 0, so last.
        record("r-untimed", at(5), Failed, None),
    ]
}

fn ids(records: &[VerificationRecord]) -> Vec<&str> {
    records.iter().map(|r| r.id.as_str()).collect()
}

async fn filled(store: &dyn VerificationStore, base: u64) {
    for record in queue(base) {
        store.create(record).await.unwrap();
    }
}

/// `ZCARD` of one of the store's indexes, read over a plain socket.
fn index_size(server: &RedisServer, prefix: &str, index: &str) -> i64 {
    let reply = server.command(&format!("ZCARD {prefix}{{verification}}:{index}"));
    reply.trim().trim_start_matches(':').parse().unwrap()
}

/// Whether `id` is a member of one of the store's indexes.
fn indexed(server: &RedisServer, prefix: &str, index: &str, id: &str) -> bool {
    let reply = server.command(&format!("ZSCORE {prefix}{{verification}}:{index} {id}"));
    !reply.starts_with("$-1")
}

/// Lets request `id`'s hash expire, as its retention would.
fn expire(server: &RedisServer, prefix: &str, id: &str) {
    let key = format!("{prefix}{{verification}}:request:{id}");
    assert_eq!(server.command(&format!("PEXPIRE {key} 1")).trim(), ":1");
    while server.command(&format!("EXISTS {key}")).trim() != ":0" {
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn pending_requests_list_oldest_first_and_resolved_ones_newest_first_ties_by_id() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let store = server.store(&unique_prefix("lists-order")).await;
        let verifications = store.verifications();
        let base = now_ms();
        filled(verifications.as_ref(), base).await;
        let pending = verifications.list_pending(100).await.unwrap();
        assert_eq!(ids(&pending), ["p-c", "p-b", "p-d", "p-e", "p-a"]);
        let resolved = verifications.list_resolved(100).await.unwrap();
        assert_eq!(ids(&resolved), ["r-y", "r-z", "r-x", "r-b", "r-untimed"]);
        // Whole records, exactly as the in-memory store lists them.
        let memory = InMemoryVerificationStore::new();
        filled(&memory, base).await;
        assert_eq!(pending, memory.list_pending(100).await.unwrap());
        assert_eq!(resolved, memory.list_resolved(100).await.unwrap());
    });
}

#[test]
fn each_list_stops_at_its_limit() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let store = server.store(&unique_prefix("lists-limit")).await;
        let verifications = store.verifications();
        filled(verifications.as_ref(), now_ms()).await;
        assert!(verifications.list_pending(0).await.unwrap().is_empty());
        assert!(verifications.list_resolved(0).await.unwrap().is_empty());
        assert_eq!(ids(&verifications.list_pending(1).await.unwrap()), ["p-c"]);
        assert_eq!(
            ids(&verifications.list_pending(3).await.unwrap()),
            ["p-c", "p-b", "p-d"]
        );
        assert_eq!(
            ids(&verifications.list_resolved(2).await.unwrap()),
            ["r-y", "r-z"]
        );
        assert_eq!(
            verifications.list_pending(usize::MAX).await.unwrap().len(),
            5
        );
        assert_eq!(
            verifications.list_resolved(usize::MAX).await.unwrap().len(),
            5
        );
    });
}

#[test]
fn a_request_resolved_by_compare_and_set_moves_to_the_resolved_list() {
    let server = RedisServer::start();
    let prefix = unique_prefix("lists-move");
    runtime().block_on(async {
        let store = server.store(&prefix).await;
        let verifications = store.verifications();
        let base = now_ms();
        filled(verifications.as_ref(), base).await;

        let mut granted = verifications.get("p-b").await.unwrap().unwrap();
        granted.status = VerificationStatus::Passed;
        granted.grants.push(Decision {
            principal: "alice".to_owned(),
            reason: None,
            at_ms: base + 300_000,
        });
        granted.resolved_at_ms = Some(base + 300_000);
        assert!(verifications.compare_and_set(0, granted).await.unwrap());
        assert!(!indexed(&server, &prefix, "pending", "p-b"));
        assert!(indexed(&server, &prefix, "resolved", "p-b"));

        let pending = verifications.list_pending(100).await.unwrap();
        assert_eq!(ids(&pending), ["p-c", "p-d", "p-e", "p-a"]);
        let resolved = verifications.list_resolved(2).await.unwrap();
        assert_eq!(ids(&resolved), ["p-b", "r-y"]);
        assert_eq!(
            resolved[0].revision, 1,
            "the listed record is the stored one"
        );
        assert_eq!(resolved[0].approvals(), ["alice"]);

        // Through the verifier, as `milpa approvals reject` resolves one, seen by another
        // replica.
        let verifier = HumanVerifier::new(verifications.clone());
        let opened = verifier
            .request(VerificationRequest::new("rotate keys").id("through-verifier"))
            .await
            .unwrap();
        let other = server.store(&prefix).await.verifications();
        assert!(ids(&other.list_pending(100).await.unwrap()).contains(&"through-verifier"));
        let outcome = verifier
            .reject(&opened.id, "bob", Some("not now"))
            .await
            .unwrap();
        assert_eq!(outcome.record.status, VerificationStatus::Failed);
        assert!(!ids(&other.list_pending(100).await.unwrap()).contains(&"through-verifier"));
        // Resolved at the wall clock: before the queue's resolutions, which are dated
        // minutes ahead, after the one without a time.
        let resolved = other.list_resolved(10).await.unwrap();
        assert_eq!(
            ids(&resolved),
            [
                "p-b",
                "r-y",
                "r-z",
                "r-x",
                "r-b",
                "through-verifier",
                "r-untimed"
            ]
        );
        assert_eq!(
            resolved[5],
            other.get("through-verifier").await.unwrap().unwrap()
        );
    });
}

#[test]
fn lists_longer_than_a_page_keep_the_order_across_pages() {
    let server = RedisServer::start();
    let prefix = unique_prefix("lists-pages");
    runtime().block_on(async {
        let store = server.store(&prefix).await;
        let verifications = store.verifications();
        let memory = InMemoryVerificationStore::new();
        let base = now_ms();
        // 300 of each (pages are 128 ids), times in 7 values so that most tie.
        for n in 0..300u64 {
            let at = base + 1_000 * (n % 7);
            for record in [
                record(&format!("p{n:03}"), at, VerificationStatus::Pending, None),
                record(
                    &format!("r{n:03}"),
                    base,
                    VerificationStatus::Passed,
                    Some(at),
                ),
            ] {
                memory.create(record.clone()).await.unwrap();
                verifications.create(record).await.unwrap();
            }
        }
        for limit in [128, 129, 300, usize::MAX] {
            assert_eq!(
                verifications.list_pending(limit).await.unwrap(),
                memory.list_pending(limit).await.unwrap(),
                "pending, limit {limit}"
            );
            assert_eq!(
                verifications.list_resolved(limit).await.unwrap(),
                memory.list_resolved(limit).await.unwrap(),
                "resolved, limit {limit}"
            );
        }
        // More than a page of the oldest pending requests expire: the list reads past
        // them, removing them, to the live ones.
        let oldest: Vec<String> = ids(&memory.list_pending(150).await.unwrap())
            .into_iter()
            .map(str::to_owned)
            .collect();
        for id in &oldest {
            expire(&server, &prefix, id);
        }
        let live = verifications.list_pending(10).await.unwrap();
        let expected = memory.list_pending(160).await.unwrap();
        assert_eq!(live, expected[150..]);
        assert_eq!(index_size(&server, &prefix, "pending"), 150);
    });
}

#[test]
fn members_whose_request_expired_are_skipped_and_removed() {
    let server = RedisServer::start();
    let prefix = unique_prefix("lists-expired");
    runtime().block_on(async {
        let store = server.store(&prefix).await;
        let verifications = store.verifications();
        filled(verifications.as_ref(), now_ms()).await;
        // The three oldest pending requests and the two newest resolved ones expire: a
        // list of two must read past a whole page of dead members.
        for id in ["p-c", "p-b", "p-d", "r-y", "r-z"] {
            expire(&server, &prefix, id);
        }
        assert_eq!(index_size(&server, &prefix, "pending"), 5);
        assert_eq!(index_size(&server, &prefix, "resolved"), 5);

        let pending = verifications.list_pending(2).await.unwrap();
        assert_eq!(ids(&pending), ["p-e", "p-a"]);
        let resolved = verifications.list_resolved(2).await.unwrap();
        assert_eq!(ids(&resolved), ["r-x", "r-b"]);
        for id in ["p-c", "p-b", "p-d"] {
            assert!(!indexed(&server, &prefix, "pending", id), "{id} removed");
        }
        for id in ["r-y", "r-z"] {
            assert!(!indexed(&server, &prefix, "resolved", id), "{id} removed");
        }
        assert_eq!(index_size(&server, &prefix, "pending"), 2);
        assert_eq!(index_size(&server, &prefix, "resolved"), 3);

        // A request opened again under an expired id is filed anew (by its new time,
        // before the others, which are dated seconds ahead).
        verifications
            .create(record("p-c", now_ms(), VerificationStatus::Pending, None))
            .await
            .unwrap();
        assert_eq!(
            ids(&verifications.list_pending(10).await.unwrap()),
            ["p-c", "p-e", "p-a"]
        );
    });
}

#[test]
fn the_resolved_index_forgets_resolutions_older_than_the_retention() {
    let server = RedisServer::start();
    let prefix = unique_prefix("lists-trim");
    runtime().block_on(async {
        let retention = Duration::from_millis(300);
        let short = RedisStore::connect(
            &server.url(),
            options(&prefix).with_verification_retention(retention),
        )
        .await
        .unwrap()
        .verifications();
        // The same requests through a store that keeps them a week.
        let long = server.store(&prefix).await.verifications();
        let decided = |id: &str| record(id, now_ms(), VerificationStatus::Passed, Some(now_ms()));
        let waiting = |id: &str| record(id, now_ms(), VerificationStatus::Pending, None);

        short.create(decided("old-1")).await.unwrap();
        short.create(waiting("expires-pending")).await.unwrap();
        long.create(waiting("kept")).await.unwrap();
        tokio::time::sleep(retention + Duration::from_millis(100)).await;
        assert!(short.get("old-1").await.unwrap().is_none(), "expired");
        // Nobody lists: resolving another request alone drops the expired one from the
        // index, which a newest-first list would never reach.
        let mut resolved = long.get("kept").await.unwrap().unwrap();
        resolved.status = VerificationStatus::Passed;
        resolved.resolved_at_ms = Some(now_ms());
        assert!(short.compare_and_set(0, resolved).await.unwrap());
        assert!(!indexed(&server, &prefix, "resolved", "old-1"));
        assert!(indexed(&server, &prefix, "resolved", "kept"));

        // And so does creating one (the cut is the creating store's retention).
        short.create(decided("old-2")).await.unwrap();
        tokio::time::sleep(retention + Duration::from_millis(100)).await;
        short.create(decided("trigger")).await.unwrap();
        assert!(!indexed(&server, &prefix, "resolved", "old-2"));
        assert!(
            !indexed(&server, &prefix, "resolved", "kept"),
            "expired too"
        );
        assert_eq!(index_size(&server, &prefix, "resolved"), 1);
        long.create(waiting("new")).await.unwrap();

        // The pending index is kept by its list, which reads the oldest (the expired) first.
        assert_eq!(index_size(&server, &prefix, "pending"), 2);
        assert_eq!(ids(&long.list_pending(10).await.unwrap()), ["new"]);
        assert_eq!(index_size(&server, &prefix, "pending"), 1);
    });
}
