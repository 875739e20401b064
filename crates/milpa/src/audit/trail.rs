//! [`AuditTrail`]: a store's audit records, read back: queried for people (`milpa audit`)
//! and checked as a hash chain (`milpa audit verify`).

use crate::audit::chain::{ChainBreak, ChainSummary};
use crate::store_error::StoreError;

/// Which records [`AuditTrail::query`] returns; every filter set must match. Build it with
/// `AuditQuery::default()` and the `with_*` setters.
///
/// ```
/// use milpa::audit::trail::AuditQuery;
///
/// let query = AuditQuery::default().with_tool("notes_delete").with_limit(20);
/// assert_eq!(query.tool.as_deref(), Some("notes_delete"));
/// assert_eq!(query.principal, None);
/// ```
#[non_exhaustive]
#[derive(Default, Clone, Debug, PartialEq, Eq)]
pub struct AuditQuery {
    /// Only calls of this tool (exact name).
    pub tool: Option<String>,
    /// Only calls by this principal (exact).
    pub principal: Option<String>,
    /// Only this outcome (its wire name, e.g. `rate_limited`).
    pub outcome: Option<String>,
    /// Only records written at or after this time (milliseconds since the Unix epoch).
    pub since_ms: Option<u64>,
    /// At most this many records (the newest).
    pub limit: Option<usize>,
}

impl AuditQuery {
    /// Only calls of `tool`.
    pub fn with_tool(mut self, tool: impl Into<String>) -> Self {
        self.tool = Some(tool.into());
        self
    }

    /// Only calls by `principal`.
    pub fn with_principal(mut self, principal: impl Into<String>) -> Self {
        self.principal = Some(principal.into());
        self
    }

    /// Only records with this outcome (wire name).
    pub fn with_outcome(mut self, outcome: impl Into<String>) -> Self {
        self.outcome = Some(outcome.into());
        self
    }

    /// Only records written at or after `since_ms` (Unix milliseconds).
    pub fn with_since_ms(mut self, since_ms: u64) -> Self {
        self.since_ms = Some(since_ms);
        self
    }

    /// At most `limit` records.
    pub fn with_limit(mut self, limit: usize) -> Self {
        self.limit = Some(limit);
        self
    }
}

/// A store's audit trail, read back.
pub trait AuditTrail: Send + Sync + 'static {
    /// The sealed JSON lines matching `query`, newest first.
    fn query(&self, query: &AuditQuery) -> Result<Vec<String>, StoreError>;

    /// Checks the whole chain, oldest first (see
    /// [`verify_lines`](crate::audit::chain::verify_lines)). The outer error is the store
    /// failing to read; the inner one the first record that breaks the chain.
    fn verify(&self) -> Result<Result<ChainSummary, ChainBreak>, StoreError>;

    /// [`verify`](Self::verify), telling `progress` how far it has got as it goes: records
    /// checked, out of how many the trail held when the check began (`progress(checked,
    /// total)`), for a progress bar over a long trail. A trail that cannot count ahead
    /// reports once, at the end.
    fn verify_reporting(
        &self,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Result<ChainSummary, ChainBreak>, StoreError> {
        let verdict = self.verify()?;
        if let Ok(summary) = &verdict {
            progress(summary.records, summary.records);
        }
        Ok(verdict)
    }
}
