//! [`StoreError`]: what a store (confirmations, verifications, rate-limit budgets) answers
//! when it could not do its job. The pipeline fails closed on it: the call is refused with
//! `UNAVAILABLE`, never let through unchecked.

use std::error::Error;
use std::fmt;

/// What kind of failure a [`StoreError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreErrorKind {
    /// The backend could not be reached (connection refused, timed out, pool exhausted).
    Unavailable,
    /// The backend answered with an error.
    Backend,
    /// Stored data could not be read back (corrupt or from an incompatible version).
    Corrupt,
}

impl fmt::Display for StoreErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StoreErrorKind::Unavailable => "store unreachable",
            StoreErrorKind::Backend => "store error",
            StoreErrorKind::Corrupt => "stored data unreadable",
        })
    }
}

/// A store that could not do what was asked; nothing was changed. Keeps its cause.
///
/// ```
/// use milpa::{StoreError, StoreErrorKind};
/// use std::error::Error;
///
/// let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
/// let error = StoreError::unavailable(io);
/// assert_eq!(error.kind(), StoreErrorKind::Unavailable);
/// assert_eq!(error.to_string(), "store unreachable: connection refused");
/// assert_eq!(error.source().unwrap().to_string(), "connection refused");
/// ```
#[derive(Debug, thiserror::Error)]
#[error("{kind}: {source}")]
pub struct StoreError {
    kind: StoreErrorKind,
    #[source]
    source: Box<dyn Error + Send + Sync>,
}

impl StoreError {
    /// A store error of `kind` caused by `source` (an error, or a message).
    pub fn new(kind: StoreErrorKind, source: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        StoreError {
            kind,
            source: source.into(),
        }
    }

    /// The backend could not be reached.
    pub fn unavailable(source: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        Self::new(StoreErrorKind::Unavailable, source)
    }

    /// The backend answered with an error.
    pub fn backend(source: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        Self::new(StoreErrorKind::Backend, source)
    }

    /// Stored data could not be read back.
    pub fn corrupt(source: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        Self::new(StoreErrorKind::Corrupt, source)
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> StoreErrorKind {
        self.kind
    }
}
