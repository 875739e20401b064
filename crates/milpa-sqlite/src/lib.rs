//! # milpa-sqlite
//!
//! milpa's state in one SQLite file: confirmation tokens, verification requests, rate
//! budgets and a tamper-evident audit trail, shared by every process that opens the file
//! and kept across restarts. Open a [`SqliteStore`] and hand its stores to a
//! [`ToolRegistry`](milpa::ToolRegistry) builder.
//!
//! Durability: WAL mode, `synchronous = NORMAL`. Every write is committed before the store
//! answers it, so a crash of the process loses no committed state, and only the audit
//! records still queued for the writer: those of the last
//! [`audit_linger`](SqliteOptions::audit_linger) at most (100 ms by default), each batch
//! being one transaction, so never a torn or unchained record. A clean shutdown (dropping
//! the store, or [`AuditSink::flush`](milpa::audit::AuditSink::flush)) loses nothing. A
//! power loss may roll back the transactions committed since the last WAL checkpoint (the
//! file stays consistent).

mod audit;
mod confirmations;
mod connection;
mod error;
mod migrations;
mod passkeys;
mod pins;
pub mod private_files;
mod rate_limit;
mod secrets;
mod shared;
mod store;
mod verifications;
mod write_queue;
mod writer;

pub use audit::{SqliteAuditSink, SqliteAuditTrail};
pub use confirmations::SqliteConfirmationStore;
pub use passkeys::SqlitePasskeyStore;
pub use pins::SqlitePinStore;
pub use rate_limit::{MAX_WINDOW, SqliteRateLimiter};
pub use rusqlite;
pub use store::{DEFAULT_AUDIT_LINGER, SqliteOptions, SqliteStore};
pub use verifications::SqliteVerificationStore;
