//! Escaping for everything the page shows that it did not write itself: summaries and
//! arguments come from agents and are hostile input; principals, reasons and ids too. Text
//! goes through [`esc`]; an id placed in a link or a form's action through
//! [`path_segment`] first.

use std::fmt;

/// Writes its text with `&`, `<`, `>`, `"` and `'` replaced by character references, so it
/// is inert both between tags and inside a quoted attribute value.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Escaped<'a>(pub &'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        while let Some(at) = rest.find(['&', '<', '>', '"', '\'']) {
            f.write_str(&rest[..at])?;
            f.write_str(match rest.as_bytes()[at] {
                b'&' => "&amp;",
                b'<' => "&lt;",
                b'>' => "&gt;",
                b'"' => "&quot;",
                _ => "&#39;",
            })?;
            rest = &rest[at + 1..];
        }
        f.write_str(rest)
    }
}

/// Shorthand for [`Escaped`].
pub(crate) fn esc(text: &str) -> Escaped<'_> {
    Escaped(text)
}

/// `text` as one URL path segment: unreserved characters as they are, every other byte
/// `%XX`, so an id can neither leave its segment (`/`, `..`) nor end the path (`?`, `#`).
pub(crate) fn path_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    if out == "." || out == ".." {
        return out.replace('.', "%2E");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{esc, path_segment};

    #[test]
    fn ids_stay_in_their_path_segment() {
        assert_eq!(path_segment("3f2a-09_b.c~"), "3f2a-09_b.c~");
        assert_eq!(path_segment("../../mcp?x=1#y"), "..%2F..%2Fmcp%3Fx%3D1%23y");
        assert_eq!(path_segment(".."), "%2E%2E");
        assert_eq!(path_segment("é \"<"), "%C3%A9%20%22%3C");
    }

    #[test]
    fn markup_and_quotes_become_references() {
        assert_eq!(
            esc(r#"<script>alert("x")</script> & 'y'"#).to_string(),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
    }

    #[test]
    fn plain_and_non_ascii_text_is_unchanged() {
        assert_eq!(
            esc("deploy(env=prod) – ünïcode ✓").to_string(),
            "deploy(env=prod) – ünïcode ✓"
        );
        assert_eq!(esc("").to_string(), "");
    }
}
