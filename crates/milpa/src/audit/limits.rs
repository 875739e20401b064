//! [`AuditLimits`]: how large one audit record may grow. A caller controls the tool name,
//! the arguments and (through the tool) the error text; without a cap, three calls with a
//! 4 MiB name wrote 25 MB of audit. Over a cap the text is cut with a visible marker.

use std::borrow::Cow;

/// The longest tool name a call may use, in bytes (the names MCP clients accept). A longer
/// one is refused by `resolve` and quoted only up to this length.
pub const MAX_TOOL_NAME_BYTES: usize = 128;

/// Size caps of one audit record. Over a cap, the field is cut and ends with a marker
/// `…(+N bytes)` saying how much was left out.
///
/// ```
/// use milpa::audit::AuditLimits;
///
/// let limits = AuditLimits::default().with_max_args_bytes(1024);
/// assert_eq!(limits.max_args_bytes, 1024);
/// assert_eq!(limits.max_error_bytes, 4 * 1024);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct AuditLimits {
    /// The arguments, rendered as JSON (default 16 KiB). Larger arguments are recorded as
    /// a string: their redacted JSON, cut.
    pub max_args_bytes: usize,
    /// The error text (default 4 KiB).
    pub max_error_bytes: usize,
}

impl Default for AuditLimits {
    fn default() -> Self {
        AuditLimits {
            max_args_bytes: 16 * 1024,
            max_error_bytes: 4 * 1024,
        }
    }
}

impl AuditLimits {
    /// The same limits with another cap on the arguments.
    pub fn with_max_args_bytes(mut self, max: usize) -> Self {
        self.max_args_bytes = max;
        self
    }

    /// The same limits with another cap on the error text.
    pub fn with_max_error_bytes(mut self, max: usize) -> Self {
        self.max_error_bytes = max;
        self
    }
}

/// `text` if it fits in `max` bytes, else its first `max` bytes (cut at a character
/// boundary) followed by `…(+N bytes)`.
#[inline]
pub fn clip(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    cut(text, max)
}

#[cold]
fn cut(text: &str, max: usize) -> Cow<'_, str> {
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}…(+{} bytes)", &text[..end], text.len() - end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_kept_and_long_text_is_cut_with_a_marker() {
        assert_eq!(clip("abc", 3), "abc");
        assert_eq!(clip("abcdef", 3), "abc…(+3 bytes)");
        // Never inside a character.
        assert_eq!(clip("日本語", 4), "日…(+6 bytes)");
    }
}
