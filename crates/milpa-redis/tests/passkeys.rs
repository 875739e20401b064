//! Approvers' passkeys and enrolment tokens against a real redis-server: shared by
//! replicas on one prefix, credential ids unique, an enrolment taken once and not after it
//! expires, only the token's hash kept.

mod support;

use std::future::IntoFuture;

use milpa::approval::passkeys::{PasskeyRecord, enrolment_token_hash};
use support::{RedisServer, runtime, unique_prefix};

#[test]
fn replicas_share_passkeys_and_credential_ids_stay_unique() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let prefix = unique_prefix("passkeys");
        let (a, b) = (server.store(&prefix).await, server.store(&prefix).await);
        let first = PasskeyRecord::new("alice", "Y3JlZC0x", r#"{"cred":"public"}"#, 1_000);
        let second = PasskeyRecord::new("alice", "Y3JlZC0y", r#"{"cred":"other"}"#, 2_000);
        assert!(a.passkeys().add(second.clone()).await.unwrap());
        assert!(a.passkeys().add(first.clone()).await.unwrap());
        let taken = PasskeyRecord::new("mallory", "Y3JlZC0x", "{}", 3_000);
        assert!(!b.passkeys().add(taken).await.unwrap());
        assert_eq!(
            b.passkeys().for_actor("alice").await.unwrap(),
            vec![first, second]
        );
        assert!(b.passkeys().for_actor("mallory").await.unwrap().is_empty());
        assert!(
            b.passkeys()
                .update("alice", "Y3JlZC0x", r#"{"cred":"counter 2"}"#)
                .await
                .unwrap()
        );
        assert!(
            !b.passkeys()
                .update("mallory", "Y3JlZC0x", "{}")
                .await
                .unwrap()
        );
        assert_eq!(
            a.passkeys().for_actor("alice").await.unwrap()[0].public_credential,
            r#"{"cred":"counter 2"}"#
        );
        // Another prefix is another deployment.
        let elsewhere = server.store(&unique_prefix("passkeys")).await;
        assert!(
            elsewhere
                .passkeys()
                .for_actor("alice")
                .await
                .unwrap()
                .is_empty()
        );
    });
}

#[test]
fn an_enrolment_is_taken_once_and_only_its_hash_is_kept() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let prefix = unique_prefix("enrol");
        let (a, b) = (server.store(&prefix).await, server.store(&prefix).await);
        let token = "enrol-token-7f3a";
        let hash = enrolment_token_hash(token);
        let far = 4_102_444_800_000; // 2100-01-01
        a.passkeys()
            .create_enrolment(&hash, "alice", far)
            .await
            .unwrap();
        let keys = server.command(&format!("KEYS {prefix}*"));
        assert!(keys.contains(&hash), "{keys}");
        assert!(!keys.contains(token), "{keys}");
        assert_eq!(
            b.passkeys()
                .peek_enrolment(&hash, 1_000)
                .await
                .unwrap()
                .as_deref(),
            Some("alice")
        );
        let (pa, pb) = (a.passkeys(), b.passkeys());
        let (first, second) = futures_util::future::join(
            pa.take_enrolment(&hash, 1_000).into_future(),
            pb.take_enrolment(&hash, 1_000).into_future(),
        )
        .await;
        let taken: Vec<_> = [first.unwrap(), second.unwrap()]
            .into_iter()
            .flatten()
            .collect();
        assert_eq!(taken, vec!["alice".to_owned()]);
        assert_eq!(
            b.passkeys().peek_enrolment(&hash, 1_000).await.unwrap(),
            None
        );

        // Past its expiry (on the caller's clock) it is neither shown nor taken.
        a.passkeys()
            .create_enrolment(&hash, "alice", far)
            .await
            .unwrap();
        assert_eq!(b.passkeys().peek_enrolment(&hash, far).await.unwrap(), None);
        assert_eq!(b.passkeys().take_enrolment(&hash, far).await.unwrap(), None);
    });
}
