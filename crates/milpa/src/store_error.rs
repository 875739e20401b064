//! [`StoreError`]: what a store (confirmations, verifications, rate-limit budgets) answers
//! when it could not do its job. The pipeline fails closed on it: the call is refused with
//! `UNAVAILABLE`, never let through unchecked.

use std::error::Error;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

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

impl StoreErrorKind {
    /// Every kind.
    pub const ALL: [StoreErrorKind; 3] = [
        StoreErrorKind::Unavailable,
        StoreErrorKind::Backend,
        StoreErrorKind::Corrupt,
    ];

    /// A short name for labels and logs: `unavailable`, `backend` or `corrupt`.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreErrorKind::Unavailable => "unavailable",
            StoreErrorKind::Backend => "backend",
            StoreErrorKind::Corrupt => "corrupt",
        }
    }

    /// Its slot in [`MADE`].
    fn slot(self) -> usize {
        match self {
            StoreErrorKind::Unavailable => 0,
            StoreErrorKind::Backend => 1,
            StoreErrorKind::Corrupt => 2,
        }
    }
}

/// How many store errors of each kind this process has made, by [`StoreErrorKind::slot`].
/// Every backend builds its errors with [`StoreError`]'s constructors, so this counts every
/// failure any store answered, whichever part of the program asked.
static MADE: [AtomicU64; 3] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];

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
        MADE[kind.slot()].fetch_add(1, Ordering::Relaxed);
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

    /// How many store errors of `kind` this process has made so far, by any store (every
    /// backend builds its errors with these constructors): what a metrics endpoint reports
    /// as store errors. A failure shared by several callers (a failed batch commit) counts
    /// once for each caller it answers.
    ///
    /// ```
    /// use milpa::{StoreError, StoreErrorKind};
    ///
    /// let before = StoreError::made(StoreErrorKind::Corrupt);
    /// let _ = StoreError::corrupt("a stored value does not parse");
    /// assert!(StoreError::made(StoreErrorKind::Corrupt) > before);
    /// ```
    pub fn made(kind: StoreErrorKind) -> u64 {
        MADE[kind.slot()].load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_own_slot_and_name() {
        let slots: Vec<usize> = StoreErrorKind::ALL.iter().map(|k| k.slot()).collect();
        assert_eq!(slots, [0, 1, 2]);
        let names: Vec<&str> = StoreErrorKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(names, ["unavailable", "backend", "corrupt"]);
    }
}
