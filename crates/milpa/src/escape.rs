//! Control characters made visible, for text that ends up on a terminal or in a log line:
//! a tool name or a tool's output carrying `\n`, `\r`, ESC or BEL must not start a forged
//! line, move the cursor or recolour the screen.

use std::fmt;

/// Displays a text with its control characters (C0, DEL and C1, `char::is_control`)
/// written as Rust escapes (`\n`, `\r`, `\u{1b}`), optionally keeping `\n` and `\t`.
/// Writes through to the formatter: nothing is allocated.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EscapeControl<'a> {
    text: &'a str,
    keep_layout: bool,
}

impl<'a> EscapeControl<'a> {
    /// Every control character escaped, `\n` included (one log line stays one line).
    pub(crate) fn all(text: &'a str) -> Self {
        EscapeControl {
            text,
            keep_layout: false,
        }
    }

    /// Every control character escaped except `\n` and `\t` (multi-line output keeps its
    /// layout).
    pub(crate) fn keeping_layout(text: &'a str) -> Self {
        EscapeControl {
            text,
            keep_layout: true,
        }
    }

    fn escapes(&self, c: char) -> bool {
        c.is_control() && !(self.keep_layout && (c == '\n' || c == '\t'))
    }

    /// Whether the text would change.
    pub(crate) fn needed(&self) -> bool {
        self.text.chars().any(|c| self.escapes(c))
    }
}

impl fmt::Display for EscapeControl<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.text;
        while let Some((at, c)) = rest.char_indices().find(|(_, c)| self.escapes(*c)) {
            f.write_str(&rest[..at])?;
            write!(f, "{}", c.escape_default())?;
            rest = &rest[at + c.len_utf8()..];
        }
        f.write_str(rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_become_visible() {
        let text = "a\nb\r\tc\u{1b}[31m\u{7}\u{7f}\u{9b}é";
        assert_eq!(
            EscapeControl::all(text).to_string(),
            "a\\nb\\r\\tc\\u{1b}[31m\\u{7}\\u{7f}\\u{9b}é"
        );
        assert_eq!(
            EscapeControl::keeping_layout(text).to_string(),
            "a\nb\\r\tc\\u{1b}[31m\\u{7}\\u{7f}\\u{9b}é"
        );
        assert!(!EscapeControl::keeping_layout("x\n\ty").needed());
        assert!(EscapeControl::all("x\ny").needed());
        assert_eq!(EscapeControl::all("plain").to_string(), "plain");
    }
}
