//! Approvers' passkeys and enrolment tokens in a SQLite file: kept across a reopen, shared
//! by two stores on one file (as two processes), an enrolment taken once.

use std::future::IntoFuture;

use milpa::approval::passkeys::{PasskeyRecord, enrolment_token_hash};
use milpa_sqlite::SqliteStore;

#[tokio::test]
async fn passkeys_outlive_a_reopen_and_credential_ids_stay_unique() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let first = PasskeyRecord::new("alice", "Y3JlZC0x", r#"{"cred":"public"}"#, 1_000);
    let second = PasskeyRecord::new("alice", "Y3JlZC0y", r#"{"cred":"other"}"#, 2_000);
    {
        let store = SqliteStore::open(&path).unwrap().passkeys();
        assert!(store.add(second.clone()).await.unwrap());
        assert!(store.add(first.clone()).await.unwrap());
        let taken = PasskeyRecord::new("mallory", "Y3JlZC0x", "{}", 3_000);
        assert!(
            !store.add(taken).await.unwrap(),
            "a credential id is enrolled once"
        );
    }
    let store = SqliteStore::open(&path).unwrap().passkeys();
    assert_eq!(
        store.for_actor("alice").await.unwrap(),
        vec![first.clone(), second]
    );
    assert!(store.for_actor("mallory").await.unwrap().is_empty());
    assert!(
        store
            .update("alice", "Y3JlZC0x", r#"{"cred":"counter 2"}"#)
            .await
            .unwrap()
    );
    assert!(!store.update("mallory", "Y3JlZC0x", "{}").await.unwrap());
    assert_eq!(
        store.for_actor("alice").await.unwrap()[0].public_credential,
        r#"{"cred":"counter 2"}"#
    );
}

#[tokio::test]
async fn an_enrolment_is_kept_as_a_hash_and_taken_once_across_stores() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let (a, b) = (
        SqliteStore::open(&path).unwrap(),
        SqliteStore::open(&path).unwrap(),
    );
    let token = "enrol-token-7f3a";
    let hash = enrolment_token_hash(token);
    a.passkeys()
        .create_enrolment(&hash, "alice", 10_000)
        .await
        .unwrap();
    let conn = a.open_connection().unwrap();
    let stored: String = conn
        .query_row("SELECT token_hash FROM milpa_passkey_enrolments", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(stored, hash);
    assert_ne!(stored, token);

    assert_eq!(
        b.passkeys()
            .peek_enrolment(&hash, 9_999)
            .await
            .unwrap()
            .as_deref(),
        Some("alice")
    );
    let (pa, pb) = (a.passkeys(), b.passkeys());
    let (first, second) = futures_util::future::join(
        pa.take_enrolment(&hash, 9_999).into_future(),
        pb.take_enrolment(&hash, 9_999).into_future(),
    )
    .await;
    let taken: Vec<_> = [first.unwrap(), second.unwrap()]
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(taken, vec!["alice".to_owned()]);

    // An expired one is not taken (and is gone).
    a.passkeys()
        .create_enrolment(&hash, "alice", 10_000)
        .await
        .unwrap();
    assert_eq!(
        b.passkeys().peek_enrolment(&hash, 10_000).await.unwrap(),
        None
    );
    assert_eq!(
        b.passkeys().take_enrolment(&hash, 10_000).await.unwrap(),
        None
    );
    let left: i64 = conn
        .query_row("SELECT count(*) FROM milpa_passkey_enrolments", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(left, 0);
}
