//! [`ManifestError`]: which manifest file, which line, what is wrong. Below the manifest and
//! its sections, which all report through it.

use std::fmt;

/// A manifest that could not be read: which file, which line, what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestError {
    file: String,
    line: Option<usize>,
    message: String,
}

impl ManifestError {
    /// An error about `file` at `line` (1-based), if known.
    pub(crate) fn new(
        file: impl Into<String>,
        line: Option<usize>,
        message: impl Into<String>,
    ) -> Self {
        ManifestError {
            file: file.into(),
            line,
            message: message.into(),
        }
    }

    /// The file as the user named it.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The 1-based line the error is on, when known.
    pub fn line(&self) -> Option<usize> {
        self.line
    }

    /// What is wrong.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.file, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for ManifestError {}
