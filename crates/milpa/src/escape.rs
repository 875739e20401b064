//! Control and invisible format characters made visible, for text that ends up on a
//! terminal or in a log line: a tool name or a tool's output carrying `\n`, `\r`, ESC or BEL
//! must not start a forged line, move the cursor or recolour the screen, and one carrying a
//! bidi override (U+202E), a line separator (U+2028) or a zero-width character must not show
//! a person something other than what it says.

use std::fmt;

use unicode_general_category::{GeneralCategory, get_general_category};

/// Displays a text with its control characters (C0, DEL and C1, `char::is_control`), its
/// format characters (Unicode category Cf: bidi embeddings, overrides and isolates,
/// zero-width spaces and joiners, the byte order mark, tag characters…) and the line and
/// paragraph separators (U+2028, U+2029) written as Rust escapes (`\n`, `\r`, `\u{1b}`,
/// `\u{202e}`), optionally keeping `\n` and `\t`. Writes through to the formatter: nothing
/// is allocated.
///
/// ```
/// use milpa::escape::EscapeControl;
///
/// assert_eq!(EscapeControl::all("a\u{202E}b\u{2028}c\n").to_string(), "a\\u{202e}b\\u{2028}c\\n");
/// assert_eq!(EscapeControl::keeping_layout("a\tb\n").to_string(), "a\tb\n");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct EscapeControl<'a> {
    text: &'a str,
    keep_layout: bool,
}

impl<'a> EscapeControl<'a> {
    /// Every control character escaped, `\n` included (one log line stays one line).
    pub fn all(text: &'a str) -> Self {
        EscapeControl {
            text,
            keep_layout: false,
        }
    }

    /// Every control character escaped except `\n` and `\t` (multi-line output keeps its
    /// layout).
    pub fn keeping_layout(text: &'a str) -> Self {
        EscapeControl {
            text,
            keep_layout: true,
        }
    }

    fn escapes(&self, c: char) -> bool {
        if c.is_ascii() {
            return c.is_ascii_control() && !(self.keep_layout && (c == '\n' || c == '\t'));
        }
        c.is_control()
            || matches!(
                get_general_category(c),
                GeneralCategory::Format
                    | GeneralCategory::LineSeparator
                    | GeneralCategory::ParagraphSeparator
            )
    }

    /// Whether the text would change.
    pub fn needed(&self) -> bool {
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

    #[test]
    fn format_characters_and_separators_become_visible() {
        let text = "\u{202a}\u{202b}\u{202c}\u{202d}\u{202e}\u{2066}\u{2067}\u{2068}\u{2069}\
                    \u{200b}\u{200c}\u{200d}\u{200e}\u{200f}\u{feff}\u{ad}\u{e0041}\u{2028}\u{2029}";
        let shown = EscapeControl::keeping_layout(text).to_string();
        assert_eq!(
            shown,
            "\\u{202a}\\u{202b}\\u{202c}\\u{202d}\\u{202e}\\u{2066}\\u{2067}\\u{2068}\\u{2069}\
             \\u{200b}\\u{200c}\\u{200d}\\u{200e}\\u{200f}\\u{feff}\\u{ad}\\u{e0041}\\u{2028}\\u{2029}"
        );
        assert!(shown.is_ascii());
        // Visible letters, marks and symbols of any script stay as they are.
        let kept = "é ñ 日本 עברית ✓ ⚠\u{fe0f} 👍";
        assert!(!EscapeControl::all(kept).needed());
    }
}
