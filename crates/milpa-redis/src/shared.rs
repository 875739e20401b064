//! What every store handed out by one [`RedisStore`](crate::RedisStore) shares: the
//! connection, the key space and the retention of decided verifications. Below the store
//! and below each of its stores, so a store never imports the one that hands it out.

use std::time::Duration;

use crate::connection::Link;
use crate::keys::KeySpace;

/// What every store of one [`RedisStore`](crate::RedisStore) shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) link: Link,
    pub(crate) keys: KeySpace,
    pub(crate) verification_retention: Duration,
}
