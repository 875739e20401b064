//! Why a policy set could not be loaded.

use std::path::PathBuf;

/// A policy file could not be read, parsed or validated. Its `Display` names the file, the
/// line and the column (`policy.cedar:3:14: ...`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CedarLoadError {
    /// The file could not be read.
    #[error("{}: cannot read the Cedar policy file: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The policy text is not Cedar, or it does not fit the entity model (an unknown entity
    /// type, attribute or action, a type error), or it uses what this engine refuses (a
    /// template).
    #[error("{origin}:{line}:{column}: {what}: {message}")]
    Policy {
        /// The file (or the name given to a policy text).
        origin: String,
        /// 1-based line.
        line: usize,
        /// 1-based column, in characters.
        column: usize,
        /// `syntax error`, `invalid policy` or `unsupported`.
        what: &'static str,
        /// Cedar's message, with its help when it has one.
        message: String,
        /// Cedar's error, when there is one.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// No policy source was given.
    #[error("no Cedar policy file given")]
    Empty,
}
