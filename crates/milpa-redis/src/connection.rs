//! [`Link`]: the one multiplexed connection every store of a [`RedisStore`](crate::RedisStore)
//! shares, with a deadline on every call and Redis errors turned into [`StoreError`]s.
//!
//! One `ConnectionManager` pipelines the commands of all concurrent callers over one socket
//! (that is how 32 callers in flight get far more than 32 round trips per RTT), and opens a
//! new connection by itself after the old one broke.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use milpa::StoreError;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{ErrorKind, RedisError, ServerErrorKind};

use crate::options::RedisOptions;

/// Reconnection retries per broken connection before the calls waiting on it fail. None:
/// the calls waiting on a reconnection share its one attempt, and the next call after a
/// failed one starts another, so a dead Redis refuses each call in about a millisecond
/// (connection refused) instead of making it wait out a backoff. Measured with
/// `tests/outage.rs`, seven calls against a dead Redis: 1.05 s with one retry (100 ms
/// backoff each), 6.5 s with the crate's default of six, a few ms with none.
const RECONNECT_RETRIES: usize = 0;

/// The shared connection.
#[derive(Clone)]
pub(crate) struct Link {
    manager: ConnectionManager,
    deadline: Duration,
}

impl fmt::Debug for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Link")
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

impl Link {
    /// Connects, failing (with the server's address, never the URL, which may carry a
    /// password) when Redis is not there.
    pub(crate) async fn connect(url: &str, options: &RedisOptions) -> Result<Link, StoreError> {
        let client = redis::Client::open(url).map_err(|error| {
            StoreError::backend(RedisFailure {
                context: "invalid Redis URL".to_owned(),
                source: error,
            })
        })?;
        let address = client.get_connection_info().addr().to_string();
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(options.connect_timeout))
            .set_response_timeout(Some(options.response_timeout))
            .set_number_of_retries(RECONNECT_RETRIES);
        let deadline = options.connect_timeout + options.response_timeout;
        let connecting = ConnectionManager::new_with_config(client, config);
        let manager = match tokio::time::timeout(deadline, connecting).await {
            Ok(Ok(manager)) => manager,
            Ok(Err(error)) => {
                return Err(classify(RedisFailure {
                    context: format!("could not connect to Redis at {address}"),
                    source: error,
                }));
            }
            Err(_) => {
                return Err(StoreError::unavailable(format!(
                    "could not connect to Redis at {address} within {} ms",
                    deadline.as_millis()
                )));
            }
        };
        Ok(Link { manager, deadline })
    }

    /// Runs `op` on the shared connection, within the deadline.
    ///
    /// A call cut off by the deadline may still have reached Redis; the caller refuses its
    /// call either way (fail closed), at worst a token or a budget unit was spent for it.
    pub(crate) async fn run<T, F>(
        &self,
        op: impl FnOnce(ConnectionManager) -> F,
    ) -> Result<T, StoreError>
    where
        F: Future<Output = redis::RedisResult<T>>,
    {
        match tokio::time::timeout(self.deadline, op(self.manager.clone())).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(classify(RedisFailure {
                context: "Redis".to_owned(),
                source: error,
            })),
            Err(_) => Err(StoreError::unavailable(format!(
                "Redis did not answer within {} ms",
                self.deadline.as_millis()
            ))),
        }
    }
}

/// A Redis error and what was being done; the error stays the source.
#[derive(Debug)]
pub(crate) struct RedisFailure {
    context: String,
    source: RedisError,
}

impl fmt::Display for RedisFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.context, self.source)
    }
}

impl std::error::Error for RedisFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Unavailable when Redis could not be reached or cannot serve right now (connection
/// refused, dropped or timed out; loading its data set; a replica in failover), a backend
/// error otherwise (a script error, a wrong type at a key).
fn classify(failure: RedisFailure) -> StoreError {
    let error = &failure.source;
    let unreachable = error.is_io_error()
        || error.is_timeout()
        || error.is_connection_refusal()
        || error.is_connection_dropped()
        || error.is_unrecoverable_error()
        || matches!(
            error.kind(),
            ErrorKind::Server(
                ServerErrorKind::BusyLoading
                    | ServerErrorKind::TryAgain
                    | ServerErrorKind::ClusterDown
                    | ServerErrorKind::MasterDown
                    | ServerErrorKind::ReadOnly
            )
        );
    if unreachable {
        StoreError::unavailable(failure)
    } else {
        StoreError::backend(failure)
    }
}
