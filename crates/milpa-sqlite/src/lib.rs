#![allow(missing_docs, unused)]
use milpa::StoreError;
use milpa::audit::AuditSink;
use milpa::audit::trail::AuditTrail;
use milpa::confirm::ConfirmationStore;
use milpa::rate_limit::RateLimiter;
use milpa::verification::VerificationStore;
pub use rusqlite;
use std::path::Path;
use std::sync::Arc;
#[derive(Clone)]
pub struct SqliteStore;
impl SqliteStore {
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        todo!()
    }
    pub fn path(&self) -> &Path {
        todo!()
    }
    pub fn confirmations(&self) -> Arc<dyn ConfirmationStore> {
        todo!()
    }
    pub fn verifications(&self) -> Arc<dyn VerificationStore> {
        todo!()
    }
    pub fn rate_limiter(&self) -> Arc<dyn RateLimiter> {
        todo!()
    }
    pub fn audit_sink(&self) -> Arc<dyn AuditSink> {
        todo!()
    }
    pub fn audit_trail(&self) -> Arc<dyn AuditTrail> {
        todo!()
    }
    pub fn open_connection(&self) -> Result<rusqlite::Connection, StoreError> {
        todo!()
    }
}
