//! How SQLite's errors become [`StoreError`]s: a locked or unopenable database is
//! `Unavailable` (the pipeline answers `UNAVAILABLE`), a value that does not read back is
//! `Corrupt`, anything else `Backend`.

use std::sync::Arc;

use milpa::StoreError;
use rusqlite::ErrorCode;

/// The [`StoreError`] for a SQLite error, keeping it as the cause.
pub(crate) fn store_error(error: rusqlite::Error) -> StoreError {
    match classify(&error) {
        Kind::Unavailable => StoreError::unavailable(error),
        Kind::Corrupt => StoreError::corrupt(error),
        Kind::Backend => StoreError::backend(error),
    }
}

/// The [`StoreError`] for an error that several callers share (a failed commit answers
/// every call of its batch).
pub(crate) fn shared_store_error(error: &Arc<rusqlite::Error>) -> StoreError {
    let cause = Arc::clone(error);
    match classify(error) {
        Kind::Unavailable => StoreError::unavailable(cause),
        Kind::Corrupt => StoreError::corrupt(cause),
        Kind::Backend => StoreError::backend(cause),
    }
}

enum Kind {
    Unavailable,
    Corrupt,
    Backend,
}

fn classify(error: &rusqlite::Error) -> Kind {
    match error {
        rusqlite::Error::SqliteFailure(failure, _) => match failure.code {
            ErrorCode::DatabaseBusy
            | ErrorCode::DatabaseLocked
            | ErrorCode::CannotOpen
            | ErrorCode::PermissionDenied
            | ErrorCode::ReadOnly => Kind::Unavailable,
            ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase => Kind::Corrupt,
            _ => Kind::Backend,
        },
        rusqlite::Error::FromSqlConversionFailure(..)
        | rusqlite::Error::IntegralValueOutOfRange(..)
        | rusqlite::Error::InvalidColumnType(..) => Kind::Corrupt,
        _ => Kind::Backend,
    }
}

/// The writer thread is gone (it panicked, or the store is being dropped).
pub(crate) fn writer_stopped() -> StoreError {
    StoreError::unavailable("the SQLite store's writer thread has stopped")
}

/// A stored value that does not parse back.
pub(crate) fn unreadable(what: &str, error: impl std::fmt::Display) -> StoreError {
    StoreError::corrupt(format!("{what} does not read back: {error}"))
}

/// A SQLite-shaped error of `code` with `message`, for failures found outside SQLite that
/// must travel where SQLite's errors do (a batch's shared failure).
pub(crate) fn sqlite_failure(code: std::ffi::c_int, message: String) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), Some(message))
}
