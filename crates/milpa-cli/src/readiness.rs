//! What `serve --http`'s `/readyz` checks: the store answers, and each upstream is up.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use milpa_gateway::{Upstream, UpstreamState};
use milpa_mcp::{Readiness, ReadinessCheck};

use crate::store::{Stores, chain};

/// A store to ask whether it answers (cheap clones of the stores `serve` uses).
#[derive(Clone)]
enum StorePing {
    /// Lives in the process: ready while the process is.
    Memory,
    Sqlite(milpa_sqlite::SqliteStore),
    Redis(milpa_redis::RedisStore),
}

/// The readiness of one `serve`: its store and its upstreams.
pub(crate) struct ServeReadiness {
    store_name: String,
    store: StorePing,
    upstreams: Arc<Vec<Upstream>>,
}

impl ServeReadiness {
    /// Checks `stores` and `upstreams` (kept alive as long as this is).
    pub(crate) fn new(stores: &Stores, upstreams: Arc<Vec<Upstream>>) -> ServeReadiness {
        let store = match (stores.sqlite(), stores.redis()) {
            (Some(sqlite), _) => StorePing::Sqlite(sqlite.clone()),
            (None, Some(redis)) => StorePing::Redis(redis.clone()),
            (None, None) => StorePing::Memory,
        };
        ServeReadiness {
            store_name: stores.url().to_string(),
            store,
            upstreams,
        }
    }
}

impl Readiness for ServeReadiness {
    fn checks(&self) -> Pin<Box<dyn Future<Output = Vec<ReadinessCheck>> + Send + '_>> {
        Box::pin(async move {
            let answered = match &self.store {
                StorePing::Memory => Ok(()),
                StorePing::Sqlite(store) => store.ping().await,
                StorePing::Redis(store) => store.ping().await,
            };
            let mut checks = vec![match answered {
                Ok(()) => ReadinessCheck::ready("store", self.store_name.clone()),
                Err(error) => ReadinessCheck::not_ready(
                    "store",
                    format!("{}: {}", self.store_name, chain(&error)),
                ),
            }];
            checks.extend(self.upstreams.iter().map(|upstream| {
                let name = format!("upstream:{}", upstream.name());
                match upstream.state() {
                    UpstreamState::Ready => ReadinessCheck::ready(name, "ready"),
                    other => ReadinessCheck::not_ready(name, other.to_string()),
                }
            }));
            checks
        })
    }
}
