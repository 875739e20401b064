//! The escaper of the page's templates (`askama.toml` names it for `.html`): every value a
//! template writes goes through it, and summaries and arguments come from agents, hostile
//! input; principals, reasons and ids too. It writes the named references (`&lt;`, `&quot;`)
//! and `&#39;` for `'`, where askama's own HTML escaper writes numeric ones for every
//! character (`&#60;`), so the page reads as it did before it had templates.

use std::fmt::{self, Write};

/// Writes its text with `&`, `<`, `>`, `"` and `'` replaced by character references, so it
/// is inert both between tags and inside a quoted attribute value.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PageHtml;

impl askama::filters::Escaper for PageHtml {
    fn write_escaped_str<W: Write>(&self, mut dest: W, text: &str) -> fmt::Result {
        let mut rest = text;
        while let Some(at) = rest.find(['&', '<', '>', '"', '\'']) {
            dest.write_str(&rest[..at])?;
            dest.write_str(reference(rest.as_bytes()[at]))?;
            rest = &rest[at + 1..];
        }
        dest.write_str(rest)
    }

    fn write_escaped_char<W: Write>(&self, mut dest: W, c: char) -> fmt::Result {
        match u8::try_from(c) {
            Ok(byte @ (b'&' | b'<' | b'>' | b'"' | b'\'')) => dest.write_str(reference(byte)),
            _ => dest.write_char(c),
        }
    }
}

/// The character reference for one of the five characters [`PageHtml`] replaces.
fn reference(byte: u8) -> &'static str {
    match byte {
        b'&' => "&amp;",
        b'<' => "&lt;",
        b'>' => "&gt;",
        b'"' => "&quot;",
        _ => "&#39;",
    }
}

#[cfg(test)]
mod tests {
    use askama::filters::Escaper as _;

    use super::PageHtml;

    fn esc(text: &str) -> String {
        let mut out = String::new();
        PageHtml.write_escaped_str(&mut out, text).unwrap();
        out
    }

    #[test]
    fn markup_and_quotes_become_references() {
        assert_eq!(
            esc(r#"<script>alert("x")</script> & 'y'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
    }

    #[test]
    fn plain_and_non_ascii_text_is_unchanged() {
        assert_eq!(
            esc("deploy(env=prod) – ünïcode ✓"),
            "deploy(env=prod) – ünïcode ✓"
        );
        assert_eq!(esc(""), "");
    }

    #[test]
    fn single_characters_escape_as_strings_do() {
        for c in ['&', '<', '>', '"', '\'', 'a', 'é', '✓'] {
            let mut out = String::new();
            PageHtml.write_escaped_char(&mut out, c).unwrap();
            assert_eq!(out, esc(c.encode_utf8(&mut [0; 4])), "{c:?}");
        }
    }
}
