//! Shared secrets against a real redis-server: made once, the same for every replica on
//! one prefix, separate per prefix and per name.

mod support;

use support::{RedisServer, runtime, unique_prefix};

#[test]
fn replicas_starting_together_agree_on_one_secret() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let prefix = unique_prefix("secret");
        let (a, b) = (server.store(&prefix).await, server.store(&prefix).await);
        let (ka, kb) =
            futures_util::future::join(a.shared_secret("state"), b.shared_secret("state")).await;
        let (ka, kb) = (ka.unwrap(), kb.unwrap());
        assert_eq!(ka.len(), 32);
        assert_eq!(ka, kb);
        // Asked again later, by a replica that starts after them: the same bytes.
        let later = server.store(&prefix).await;
        assert_eq!(later.shared_secret("state").await.unwrap(), ka);
        // Another name, another prefix: other bytes.
        assert_ne!(a.shared_secret("other").await.unwrap(), ka);
        let elsewhere = server.store(&unique_prefix("secret")).await;
        assert_ne!(elsewhere.shared_secret("state").await.unwrap(), ka);
    });
}

#[test]
fn a_secret_that_is_too_short_is_refused() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let prefix = unique_prefix("secret-short");
        let store = server.store(&prefix).await;
        server.command(&format!("SET {prefix}secret:state short"));
        let error = store.shared_secret("state").await.unwrap_err();
        assert_eq!(error.kind(), milpa::StoreErrorKind::Corrupt, "{error}");
    });
}
