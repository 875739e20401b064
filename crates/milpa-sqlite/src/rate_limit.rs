//! [`SqliteRateLimiter`]: GCRA budgets in the `milpa_rate_limits` table, shared by every
//! process that opens the file.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use milpa::rate_limit::{Gcra, GcraState, Quota, RateDecision, RateKey, RateLimiter};
use milpa::{Deferred, StoreError};
use rusqlite::{Connection, OptionalExtension, params};

use crate::shared::Shared;
use crate::writer::sql;

/// Windows longer than this are charged as this long: the theoretical arrival times are
/// stored as SQLite's signed 64-bit nanoseconds since the Unix epoch, and now + two windows
/// must fit (until about the year 2160).
pub const MAX_WINDOW: Duration = Duration::from_secs(50 * 365 * 24 * 3600);

/// Idle keys (budget full again) are deleted once every this many charges (per process).
const SWEEP_EVERY: u64 = 4096;

/// Rate budgets in the store's file. A charge is one upsert in the writer's transaction,
/// deciding exactly as the core's [`Gcra`] does:
///
/// ```sql
/// INSERT INTO milpa_rate_limits (key, tat) VALUES (?key, ?now + ?cost_ns)
/// ON CONFLICT (key) DO UPDATE SET tat = max(tat, ?now) + ?cost_ns
///   WHERE max(tat, ?now) + ?cost_ns - ?window <= ?now
/// RETURNING tat
/// ```
///
/// A returned row is an allowed charge; none is a denial, whose `retry_after` is computed
/// from the stored state by [`Gcra::charge`]. Time is the wall clock in nanoseconds, the one
/// clock every process on the machine shares.
#[derive(Clone)]
pub struct SqliteRateLimiter {
    shared: Arc<Shared>,
    charges: Arc<AtomicU64>,
}

impl SqliteRateLimiter {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        SqliteRateLimiter {
            shared,
            charges: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Charges at `now`, nanoseconds since the Unix epoch (what
    /// [`RateLimiter::consume`] does with the wall clock). For tests that step time.
    pub fn consume_at(
        &self,
        key: RateKey<'_>,
        cost: u32,
        quota: Quota,
        now: u64,
    ) -> Deferred<'static, Result<RateDecision, StoreError>> {
        let key = key.to_string();
        let quota = Quota::new(quota.max_tokens, quota.window.min(MAX_WINDOW));
        let sweep = self.charges.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1;
        self.shared.writer.call(move |conn| {
            let decision = charge(conn, &key, cost, quota, now)?;
            if sweep {
                sql(conn
                    .prepare_cached("DELETE FROM milpa_rate_limits WHERE tat <= ?1")
                    .and_then(|mut delete| delete.execute([nanos(now)])))?;
            }
            Ok(decision)
        })
    }
}

fn nanos(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// The charge, inside the writer's transaction.
fn charge(
    conn: &Connection,
    key: &str,
    cost: u32,
    quota: Quota,
    now: u64,
) -> Result<RateDecision, StoreError> {
    let gcra = Gcra::new(quota);
    let cost_ns = gcra.interval_nanos().saturating_mul(u64::from(cost));
    let window = gcra.window_nanos();
    // A cost above the whole budget never fits (and a fresh key must not be inserted).
    if cost_ns <= window {
        let tat: Option<i64> = sql(conn
            .prepare_cached(
                "INSERT INTO milpa_rate_limits (key, tat) VALUES (?1, ?2 + ?3)
                 ON CONFLICT (key) DO UPDATE SET tat = max(tat, ?2) + ?3
                   WHERE max(tat, ?2) + ?3 - ?4 <= ?2
                 RETURNING tat",
            )
            .and_then(|mut upsert| {
                upsert
                    .query_row(
                        params![key, nanos(now), nanos(cost_ns), nanos(window)],
                        |row| row.get(0),
                    )
                    .optional()
            }))?;
        if let Some(tat) = tat {
            return Ok(RateDecision::Allowed {
                remaining: gcra.remaining(tat as u64, now),
            });
        }
    }
    // Denied: the core arithmetic on the stored state says for how long.
    let tat: Option<i64> = sql(conn
        .prepare_cached("SELECT tat FROM milpa_rate_limits WHERE key = ?1")
        .and_then(|mut select| select.query_row([key], |row| row.get(0)).optional()))?;
    let state = GcraState {
        tat: tat.map_or(0, |tat| tat.max(0) as u64),
    };
    let (decision, next) = gcra.charge(state, now, cost);
    if let Some(next) = next {
        // Unreachable while the upsert above mirrors `Gcra::charge`; kept so that a
        // divergence still charges what it allows rather than letting a call through free.
        sql(conn
            .prepare_cached("INSERT OR REPLACE INTO milpa_rate_limits (key, tat) VALUES (?1, ?2)")
            .and_then(|mut upsert| upsert.execute(params![key, nanos(next.tat)])))?;
    }
    Ok(decision)
}

/// Nanoseconds since the Unix epoch.
fn wall_clock_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos().min(u128::from(u64::MAX)) as u64)
}

impl RateLimiter for SqliteRateLimiter {
    fn consume<'a>(
        &'a self,
        key: RateKey<'a>,
        cost: u32,
        quota: Quota,
    ) -> Deferred<'a, Result<RateDecision, StoreError>> {
        self.consume_at(key, cost, quota, wall_clock_nanos())
    }

    fn reset<'a>(&'a self, key: RateKey<'a>) -> Deferred<'a, Result<(), StoreError>> {
        let key = key.to_string();
        self.shared.writer.call(move |conn| {
            sql(conn
                .prepare_cached("DELETE FROM milpa_rate_limits WHERE key = ?1")
                .and_then(|mut delete| delete.execute([key])))?;
            Ok(())
        })
    }
}
