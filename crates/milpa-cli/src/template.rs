//! argv templates: `{param}` placeholders inside one argv element.
//!
//! An element is text with placeholders; `{{` and `}}` are literal braces, and a `{` not
//! starting a `{name}` placeholder is literal too (so `awk '{print $1}'` needs no escaping).
//! Rendering an element always yields exactly one element, whatever the values hold:
//! spaces, quotes, `;`, `$(…)` or a leading `-` are just bytes of that one element. An
//! element naming a param the call left out (and that has no default) is left out whole.

use serde_json::{Map, Value};

/// One piece of an argv element.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Param(String),
}

/// One argv element with its placeholders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ArgTemplate {
    pieces: Vec<Piece>,
}

/// Whether `name` can be a placeholder: ASCII letters, digits and `_`, not first a digit.
pub(crate) fn is_identifier(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

impl ArgTemplate {
    /// Parses one element.
    pub(crate) fn parse(text: &str) -> ArgTemplate {
        let mut pieces = Vec::new();
        let mut literal = String::new();
        let mut rest = text;
        while let Some(c) = rest.chars().next() {
            if let Some(after) = rest.strip_prefix("{{") {
                literal.push('{');
                rest = after;
            } else if let Some(after) = rest.strip_prefix("}}") {
                literal.push('}');
                rest = after;
            } else if c == '{' {
                let inner = &rest[1..];
                match inner.find('}') {
                    Some(end) if is_identifier(&inner[..end]) => {
                        if !literal.is_empty() {
                            pieces.push(Piece::Text(std::mem::take(&mut literal)));
                        }
                        pieces.push(Piece::Param(inner[..end].to_owned()));
                        rest = &inner[end + 1..];
                    }
                    _ => {
                        literal.push('{');
                        rest = inner;
                    }
                }
            } else {
                literal.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
        if !literal.is_empty() || pieces.is_empty() {
            pieces.push(Piece::Text(literal));
        }
        ArgTemplate { pieces }
    }

    /// The params named, in order.
    pub(crate) fn params(&self) -> Vec<&str> {
        self.pieces
            .iter()
            .filter_map(|p| match p {
                Piece::Param(name) => Some(name.as_str()),
                Piece::Text(_) => None,
            })
            .collect()
    }

    /// Whether the element is the literal `--` (no placeholder): most programs read every
    /// later element as an operand, never as an option.
    pub(crate) fn is_end_of_options(&self) -> bool {
        matches!(self.pieces.as_slice(), [Piece::Text(text)] if text == "--")
    }

    /// The param whose value would start this element with `-` (so that the program could
    /// read the element as an option), if any: the first piece that renders to something
    /// is a placeholder whose value starts with `-`. Literal text first (`--path={p}`, or
    /// `-n{count}` which the manifest chose as an option) never counts.
    pub(crate) fn leading_dash_param(&self, args: &Map<String, Value>) -> Option<&str> {
        for piece in &self.pieces {
            match piece {
                Piece::Text(text) if text.is_empty() => continue,
                Piece::Text(_) => return None,
                Piece::Param(name) => match args.get(name) {
                    None | Some(Value::Null) => return None,
                    Some(Value::String(text)) if text.is_empty() => continue,
                    Some(Value::String(text)) => {
                        return text.starts_with('-').then_some(name.as_str());
                    }
                    Some(Value::Number(n)) => {
                        return n.to_string().starts_with('-').then_some(name.as_str());
                    }
                    Some(_) => return None,
                },
            }
        }
        None
    }

    /// The element for these arguments, or `None` when it names an argument that is absent
    /// (or null).
    pub(crate) fn render(&self, args: &Map<String, Value>) -> Option<String> {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(text) => out.push_str(text),
                Piece::Param(name) => match args.get(name)? {
                    Value::Null => return None,
                    Value::String(text) => out.push_str(text),
                    Value::Number(n) => out.push_str(&n.to_string()),
                    Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
                    other => out.push_str(&other.to_string()),
                },
            }
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn placeholders_render_into_one_element() {
        let t = ArgTemplate::parse("--path={dir}/x {{literal}} {not a placeholder}");
        assert_eq!(t.params(), ["dir"]);
        let args = json!({"dir": "a b; rm -rf /"});
        assert_eq!(
            t.render(args.as_object().unwrap()).as_deref(),
            Some("--path=a b; rm -rf //x {literal} {not a placeholder}")
        );
    }

    #[test]
    fn a_leading_dash_counts_only_from_a_placeholder() {
        let args = json!({"p": "--version", "n": -1, "e": ""});
        let args = args.as_object().unwrap();
        assert_eq!(
            ArgTemplate::parse("{p}").leading_dash_param(args),
            Some("p")
        );
        assert_eq!(
            ArgTemplate::parse("{e}{n}").leading_dash_param(args),
            Some("n")
        );
        assert_eq!(
            ArgTemplate::parse("--path={p}").leading_dash_param(args),
            None
        );
        assert_eq!(ArgTemplate::parse("x{p}").leading_dash_param(args), None);
    }

    fn render(template: &str, args: Value) -> Option<String> {
        ArgTemplate::parse(template).render(args.as_object().unwrap())
    }

    #[test]
    fn placeholders_and_literals() {
        assert_eq!(render("{a}", json!({"a": "x y"})).as_deref(), Some("x y"));
        assert_eq!(
            render("{a}{b}", json!({"a": 1, "b": true})).as_deref(),
            Some("1true")
        );
        assert_eq!(render("{{a}}", json!({"a": 1})).as_deref(), Some("{a}"));
        assert_eq!(
            render("{print $1}", json!({})).as_deref(),
            Some("{print $1}")
        );
        assert_eq!(render("{", json!({})).as_deref(), Some("{"));
        assert_eq!(render("}", json!({})).as_deref(), Some("}"));
        assert_eq!(render("", json!({})).as_deref(), Some(""));
        assert_eq!(render("é{a}ñ", json!({"a": "-"})).as_deref(), Some("é-ñ"));
        assert_eq!(render("--x={a}", json!({})), None);
        assert_eq!(render("{a}", json!({"a": null})), None);
        assert_eq!(ArgTemplate::parse("{a}-{b}-{1x}").params(), ["a", "b"]);
    }

    #[test]
    fn identifiers() {
        assert!(is_identifier("path_2"));
        assert!(is_identifier("_x"));
        assert!(!is_identifier("2x"));
        assert!(!is_identifier(""));
        assert!(!is_identifier("a-b"));
    }
}
