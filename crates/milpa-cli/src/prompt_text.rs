//! [`PromptText`]: a prompt template's text, `{argument}` placeholders between literal text
//! (`{{` and `}}` for braces). Parsed when the manifest is checked, rendered per request.

use std::collections::BTreeMap;

/// A template's text, split into literal text and placeholders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PromptText {
    pieces: Vec<Piece>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Argument(String),
}

impl PromptText {
    /// Reads `text`: `{name}` is an argument, `{{` and `}}` are braces; any other brace is
    /// refused.
    pub(crate) fn parse(text: &str) -> Result<PromptText, String> {
        let mut pieces = Vec::new();
        let mut literal = String::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    literal.push('{');
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    literal.push('}');
                }
                '{' => {
                    let mut name = String::new();
                    let mut closed = false;
                    for c in chars.by_ref() {
                        if c == '}' {
                            closed = true;
                            break;
                        }
                        name.push(c);
                    }
                    if !closed {
                        return Err("a `{` that does not close (write `{{` for a brace)".into());
                    }
                    if name.is_empty()
                        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    {
                        return Err(format!(
                            "`{{{name}` is not a placeholder (write `{{name}}`, or `{{{{` for a brace)"
                        ));
                    }
                    pieces.push(Piece::Text(std::mem::take(&mut literal)));
                    pieces.push(Piece::Argument(name));
                }
                '}' => return Err("a `}` that closes nothing (write `}}` for a brace)".into()),
                c => literal.push(c),
            }
        }
        pieces.push(Piece::Text(literal));
        pieces.retain(|p| !matches!(p, Piece::Text(t) if t.is_empty()));
        Ok(PromptText { pieces })
    }

    /// The arguments it uses, in order of first use.
    pub(crate) fn arguments(&self) -> impl Iterator<Item = &str> {
        let mut seen = Vec::new();
        self.pieces.iter().filter_map(move |p| match p {
            Piece::Argument(name) if !seen.contains(name) => {
                seen.push(name.clone());
                Some(name.as_str())
            }
            _ => None,
        })
    }

    /// The text with each argument's value in place (a missing optional one is empty).
    pub(crate) fn render(&self, values: &BTreeMap<String, String>) -> String {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(text) => out.push_str(text),
                Piece::Argument(name) => {
                    out.push_str(values.get(name).map(String::as_str).unwrap_or(""))
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_braces_and_refusals() {
        let text = PromptText::parse("Review {diff} for {who} ({{not}} {diff})").unwrap();
        assert_eq!(text.arguments().collect::<Vec<_>>(), ["diff", "who"]);
        let values = BTreeMap::from([("diff".to_owned(), "D".to_owned())]);
        assert_eq!(text.render(&values), "Review D for  ({not} D)");
        for bad in ["a {", "a {b", "a {b c}", "a }", "{}"] {
            assert!(PromptText::parse(bad).is_err(), "{bad}");
        }
    }
}
