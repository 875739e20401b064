//! [`UriTemplate`]: a resource template's URI (RFC 6570, the simple `{name}` and the
//! reserved `{+name}` expansions), matched against a URI a client asks to read.

use std::collections::BTreeMap;

/// A parsed URI template: literal text and variables, in order.
///
/// `{id}` matches one path segment (no `/`, `?` or `#`); `{+path}` matches the rest up to
/// the query, slashes included. Two variables must be separated by literal text.
///
/// ```
/// use milpa::catalog::UriTemplate;
///
/// let template = UriTemplate::parse("test://template/{id}/data").unwrap();
/// let vars = template.match_uri("test://template/123/data").unwrap();
/// assert_eq!(vars["id"], "123");
/// assert!(template.match_uri("test://template/1/2/data").is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UriTemplate {
    text: String,
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(String),
    /// One segment.
    Simple(String),
    /// Anything up to the query (`{+name}`).
    Reserved(String),
}

/// Why a template was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid URI template '{template}': {reason}")]
pub struct UriTemplateError {
    template: String,
    reason: &'static str,
}

impl UriTemplate {
    /// Parses `text`; a brace that does not close, an empty or unsupported expression, or
    /// two variables side by side is refused.
    pub fn parse(text: &str) -> Result<UriTemplate, UriTemplateError> {
        let fail = |reason| UriTemplateError {
            template: text.to_owned(),
            reason,
        };
        let mut parts = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                parts.push(Part::Literal(rest[..open].to_owned()));
            } else if matches!(parts.last(), Some(Part::Simple(_) | Part::Reserved(_))) {
                return Err(fail("two variables need literal text between them"));
            }
            let Some(close) = rest[open..].find('}') else {
                return Err(fail("a '{' does not close"));
            };
            let expression = &rest[open + 1..open + close];
            let (reserved, name) = match expression.strip_prefix('+') {
                Some(name) => (true, name),
                None => (false, expression),
            };
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return Err(fail(
                    "only {name} and {+name} with letters, digits and '_' are supported",
                ));
            }
            parts.push(if reserved {
                Part::Reserved(name.to_owned())
            } else {
                Part::Simple(name.to_owned())
            });
            rest = &rest[open + close + 1..];
        }
        if rest.contains('}') {
            return Err(fail("a '}' was never opened"));
        }
        if !rest.is_empty() {
            parts.push(Part::Literal(rest.to_owned()));
        }
        Ok(UriTemplate {
            text: text.to_owned(),
            parts,
        })
    }

    /// The template as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The variable names, in order.
    pub fn variables(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|part| match part {
            Part::Simple(name) | Part::Reserved(name) => Some(name.as_str()),
            Part::Literal(_) => None,
        })
    }

    /// The variables' values if `uri` is an expansion of this template; `None` otherwise.
    /// Values are returned as they appear in the URI (not percent-decoded) and are never
    /// empty.
    pub fn match_uri(&self, uri: &str) -> Option<BTreeMap<String, String>> {
        let mut vars = BTreeMap::new();
        let mut rest = uri;
        let mut parts = self.parts.iter().peekable();
        while let Some(part) = parts.next() {
            match part {
                Part::Literal(text) => rest = rest.strip_prefix(text.as_str())?,
                Part::Simple(name) | Part::Reserved(name) => {
                    let stops: &[char] = if matches!(part, Part::Simple(_)) {
                        &['/', '?', '#']
                    } else {
                        &['?', '#']
                    };
                    // The value ends where the next literal starts (its first occurrence
                    // within the allowed characters), or at a stop character.
                    let limit = rest.find(stops).unwrap_or(rest.len());
                    let end = match parts.peek() {
                        Some(Part::Literal(next)) => rest[..].find(next.as_str())?,
                        _ => limit,
                    };
                    if end == 0 || end > limit {
                        return None;
                    }
                    vars.insert(name.clone(), rest[..end].to_owned());
                    rest = &rest[end..];
                }
            }
        }
        rest.is_empty().then_some(vars)
    }
}

impl std::fmt::Display for UriTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simple_variables_take_one_segment() {
        let t = UriTemplate::parse("test://template/{id}/data").unwrap();
        assert_eq!(t.variables().collect::<Vec<_>>(), ["id"]);
        assert_eq!(
            t.match_uri("test://template/abc/data").unwrap()["id"],
            "abc"
        );
        assert_eq!(t.match_uri("test://template//data"), None);
        assert_eq!(t.match_uri("test://template/a/b/data"), None);
        assert_eq!(t.match_uri("test://template/a/data/more"), None);
        assert_eq!(t.match_uri("other://template/a/data"), None);
    }

    #[test]
    fn reserved_variables_take_slashes_but_not_the_query() {
        let t = UriTemplate::parse("file:///docs/{+path}").unwrap();
        assert_eq!(
            t.match_uri("file:///docs/a/b.md").unwrap()["path"],
            "a/b.md"
        );
        assert_eq!(t.match_uri("file:///docs/a?x=1"), None);
        let two = UriTemplate::parse("db://{table}/rows/{row}").unwrap();
        let vars = two.match_uri("db://users/rows/7").unwrap();
        assert_eq!(
            (vars["table"].as_str(), vars["row"].as_str()),
            ("users", "7")
        );
    }

    #[test]
    fn bad_templates_are_refused() {
        for bad in ["a/{id", "a/{}", "a/{x y}", "a/{?q}", "a/{x}{y}", "a/}"] {
            assert!(UriTemplate::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            UriTemplate::parse("plain://x")
                .unwrap()
                .match_uri("plain://x"),
            Some(BTreeMap::new())
        );
    }
}
