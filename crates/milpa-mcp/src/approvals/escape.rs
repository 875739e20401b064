//! HTML escaping for everything the page shows that it did not write itself: summaries and
//! arguments come from agents and are hostile input; principals, reasons and ids too.

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

#[cfg(test)]
mod tests {
    use super::esc;

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
