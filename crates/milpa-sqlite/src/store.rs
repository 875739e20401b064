//! [`SqliteStore`]: one SQLite file holding every store, and the handles onto it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use milpa::StoreError;
use milpa::approval::passkeys::PasskeyStore;
use milpa::approval::pins::PinStore;
use milpa::audit::AuditSink;
use milpa::audit::trail::AuditTrail;
use milpa::confirm::ConfirmationStore;
use milpa::rate_limit::RateLimiter;
use milpa::verification::VerificationStore;
use rusqlite::Connection;

use crate::audit::{SqliteAuditSink, SqliteAuditTrail};
use crate::confirmations::SqliteConfirmationStore;
use crate::connection;
use crate::migrations::{MIGRATIONS, migrate};
use crate::passkeys::SqlitePasskeyStore;
use crate::pins::SqlitePinStore;
use crate::private_files;
use crate::rate_limit::SqliteRateLimiter;
use crate::shared::Shared;
use crate::verifications::SqliteVerificationStore;
use crate::writer::Writer;

/// How long audit records wait for company before their commit by default: at a call
/// every 10 ms ten records share one wake-up of the writer and one commit (fifty at a call
/// every 2 ms), and a `kill -9` loses at most this much of the trail (calls already
/// answered; never a token, a budget or a parked call, which do not wait).
///
/// Measured with `bench_paced` on `milpa serve` (server CPU per call, medians of three
/// interleaved runs on a two-core VM): at 100 calls a second the store added 119 µs per
/// call over `--store memory` with a 25 ms linger and 35 µs with this one; at 500 calls a
/// second 30 and 8 µs. Each commit is a handful of WAL writes and file locks, whatever the
/// number of records in it.
pub const DEFAULT_AUDIT_LINGER: Duration = Duration::from_millis(100);

/// How a [`SqliteStore`] is opened.
///
/// ```
/// use std::time::Duration;
/// use milpa_sqlite::{SqliteOptions, SqliteStore};
///
/// # let dir = tempfile::tempdir().unwrap();
/// // Commit every record as soon as it comes.
/// let options = SqliteOptions::default().with_audit_linger(Duration::ZERO);
/// let store = SqliteStore::open_with(dir.path().join("state.db"), options)?;
/// # Ok::<(), milpa::StoreError>(())
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SqliteOptions {
    /// How long an audit record waits for others before the writer commits it (default
    /// [`DEFAULT_AUDIT_LINGER`]; zero commits at once). Nobody waits for an audit record
    /// (the call is answered already), so waiting costs no call anything; it spares a
    /// thread wake-up and a commit per call at a slow pace. Any other write (a token, a
    /// budget, an approval), [`AuditSink::flush`] and dropping the store end the wait at
    /// once: those are committed before they are answered, and a clean shutdown loses
    /// nothing. A crash of the process loses at most the records of the last linger,
    /// each batch being one transaction (never a torn or unchained record).
    pub audit_linger: Duration,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            audit_linger: DEFAULT_AUDIT_LINGER,
        }
    }
}

impl SqliteOptions {
    /// Sets how long an audit record waits for others before its commit (zero: at once).
    pub fn with_audit_linger(mut self, linger: Duration) -> SqliteOptions {
        self.audit_linger = linger;
        self
    }
}

/// Confirmations, verifications, rate budgets and the audit trail in one SQLite file.
///
/// Cheap to clone (an `Arc` inside). Every process that opens the same file shares the
/// same state: a token minted by one is redeemed by another, and their audit records
/// form one hash chain. All writes go through one writer thread per open store, committed
/// in groups; the async runtime never waits on SQLite. Dropping the last handle (the
/// store and every handle its methods returned) commits whatever is queued and stops the
/// thread.
///
/// ```
/// use milpa::audit::trail::AuditQuery;
/// use milpa::{ToolContext, ToolDefinition, ToolRegistry};
/// use milpa_sqlite::SqliteStore;
/// use serde_json::json;
///
/// # let dir = tempfile::tempdir().unwrap();
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let store = SqliteStore::open(dir.path().join("state.db"))?;
/// let mut registry = ToolRegistry::builder()
///     .confirmation_store(store.confirmations())
///     .rate_limiter(store.rate_limiter())
///     .audit_sink(store.audit_sink())
///     .build();
/// registry.register(ToolDefinition::builder("echo").sync(|args, _ctx| args.clone()))?;
/// registry.call("echo", json!({"text": "hi"}), &ToolContext::cli()).await;
///
/// store.audit_sink().flush();
/// let lines = store.audit_trail().query(&AuditQuery::default().with_tool("echo"))?;
/// assert_eq!(lines.len(), 1);
/// assert!(store.audit_trail().verify()?.is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct SqliteStore {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.shared.path)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens (creating it, and its parent folders, when missing) the store at `path`: WAL
    /// mode, a busy timeout, and the schema migrated to this build's version. Refuses a
    /// file written by a newer version, changing nothing. A folder it creates is `0700`, the
    /// file (and so its `-wal` and `-shm`) `0600`; a file or folder other users may write is
    /// refused with an `Unavailable` error whose source is a
    /// [`PrivateFileError`](crate::private_files::PrivateFileError).
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        SqliteStore::open_with(path, SqliteOptions::default())
    }

    /// [`open`](SqliteStore::open) with `options` (how long audit records linger before
    /// their commit).
    pub fn open_with(
        path: impl AsRef<Path>,
        options: SqliteOptions,
    ) -> Result<SqliteStore, StoreError> {
        let path = path.as_ref().to_path_buf();
        private_files::prepare(&path).map_err(StoreError::unavailable)?;
        let mut writer = connection::open(&path)?;
        migrate(&mut writer, MIGRATIONS, &path)?;
        let reader = connection::open(&path)?;
        Ok(SqliteStore {
            shared: Arc::new(Shared::new(
                path,
                Writer::start(writer, options.audit_linger)?,
                reader,
            )),
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// Whether the store can be written now: a round trip through its writer thread
    /// (`SELECT 1` on the writer's connection), what a readiness probe asks.
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.shared
            .writer
            .call(|conn| {
                crate::writer::sql(conn.query_row("SELECT 1", [], |row| row.get::<_, i64>(0)))?;
                Ok(())
            })
            .await
    }

    /// Pending confirmation tokens.
    pub fn confirmations(&self) -> Arc<dyn ConfirmationStore> {
        Arc::new(self.confirmation_store())
    }

    /// Verification requests.
    pub fn verifications(&self) -> Arc<dyn VerificationStore> {
        Arc::new(self.verification_store())
    }

    /// Rate budgets.
    pub fn rate_limiter(&self) -> Arc<dyn RateLimiter> {
        Arc::new(self.sqlite_rate_limiter())
    }

    /// The audit sink: records are sealed onto the trail's chain and group-committed;
    /// `flush()` (and the last handle's drop) returns once all are written.
    pub fn audit_sink(&self) -> Arc<dyn AuditSink> {
        Arc::new(SqliteAuditSink::new(Arc::clone(&self.shared)))
    }

    /// The audit trail, read back.
    pub fn audit_trail(&self) -> Arc<dyn AuditTrail> {
        Arc::new(SqliteAuditTrail::new(Arc::clone(&self.shared)))
    }

    /// Approvers' passkeys and enrolment tokens in this file.
    pub fn passkeys(&self) -> Arc<dyn PasskeyStore> {
        Arc::new(self.passkey_store())
    }

    /// The passkey store as its concrete type.
    pub fn passkey_store(&self) -> SqlitePasskeyStore {
        SqlitePasskeyStore::new(Arc::clone(&self.shared))
    }

    /// Pinned tool and prompt definitions in this file.
    pub fn pins(&self) -> Arc<dyn PinStore> {
        Arc::new(self.pin_store())
    }

    /// The pin store as its concrete type.
    pub fn pin_store(&self) -> SqlitePinStore {
        SqlitePinStore::new(Arc::clone(&self.shared))
    }

    /// The confirmation store as its concrete type.
    pub fn confirmation_store(&self) -> SqliteConfirmationStore {
        SqliteConfirmationStore::new(Arc::clone(&self.shared))
    }

    /// The verification store as its concrete type.
    pub fn verification_store(&self) -> SqliteVerificationStore {
        SqliteVerificationStore::new(Arc::clone(&self.shared))
    }

    /// The rate limiter as its concrete type (it can charge at a given instant).
    pub fn sqlite_rate_limiter(&self) -> SqliteRateLimiter {
        SqliteRateLimiter::new(Arc::clone(&self.shared))
    }

    /// A new connection to the same file with the same pragmas (WAL, busy timeout), for an
    /// application's own tables. Name them without the `milpa_` prefix, which the store's
    /// tables use. Its writes do not go through the store's writer: keep its transactions
    /// short, since they hold the file's write lock.
    pub fn open_connection(&self) -> Result<Connection, StoreError> {
        connection::open(&self.shared.path)
    }
}
