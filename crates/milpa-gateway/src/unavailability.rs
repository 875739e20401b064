//! [`Unavailability`]: why an upstream's session is gone (or never was), worded for the
//! caller and keeping the error behind it. Every request waiting on a session that ends
//! gets the same one, so it is cheap to clone and shares its cause.

use std::error::Error;
use std::fmt;
use std::sync::Arc;

/// Why a request to an upstream could not be answered by it: the reason as callers read it
/// ("could not read from it (…)", "the server exited (…)"), and the error it came from when
/// there is one (the I/O error, the HTTP exchange that failed, the timer that ran out).
///
/// The reason already words the cause, so [`Display`](fmt::Display) is the reason alone;
/// the cause is the [`source`](Error::source).
#[derive(Debug, Clone)]
pub struct Unavailability {
    reason: String,
    cause: Option<Arc<dyn Error + Send + Sync + 'static>>,
}

impl Unavailability {
    /// A reason with no error behind it (the server closed its output, the gateway shut
    /// down).
    pub(crate) fn new(reason: impl Into<String>) -> Unavailability {
        Unavailability {
            reason: reason.into(),
            cause: None,
        }
    }

    /// The same reason, caused by `cause`: kept so that logs and callers can follow the
    /// chain down to what failed.
    pub(crate) fn with_cause(mut self, cause: impl Error + Send + Sync + 'static) -> Self {
        self.cause = Some(Arc::new(cause));
        self
    }

    /// The reason, as the caller reads it.
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// The error the reason came from, if any; its own [`source`](Error::source) continues
    /// the chain.
    pub fn cause(&self) -> Option<&(dyn Error + Send + Sync + 'static)> {
        self.cause.as_deref()
    }
}

/// Two are equal when callers read the same reason (a cause has no equality of its own).
impl PartialEq for Unavailability {
    fn eq(&self, other: &Self) -> bool {
        self.reason == other.reason
    }
}

impl Eq for Unavailability {}

impl fmt::Display for Unavailability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

impl Error for Unavailability {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.cause
            .as_deref()
            .map(|cause| cause as &(dyn Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reason is what shows; the cause is the source, shared by clones, and plays no
    /// part in equality.
    #[test]
    fn the_reason_shows_and_the_cause_is_the_source() {
        let io = std::io::Error::new(std::io::ErrorKind::BrokenPipe, "pipe closed");
        let why = Unavailability::new("could not write to it (pipe closed)").with_cause(io);
        assert_eq!(why.to_string(), "could not write to it (pipe closed)");
        assert_eq!(why.reason(), why.to_string());
        let clone = why.clone();
        let cause = clone.source().expect("a clone shares the cause");
        let io = cause.downcast_ref::<std::io::Error>().expect("of its kind");
        assert_eq!(io.kind(), std::io::ErrorKind::BrokenPipe);
        assert!(why.cause().is_some());
        assert_eq!(
            why,
            Unavailability::new("could not write to it (pipe closed)")
        );
        assert!(
            Unavailability::new("it closed its output")
                .source()
                .is_none()
        );
    }
}
