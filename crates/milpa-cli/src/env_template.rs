//! `${VAR}` and `${VAR:-default}` in an upstream's settings (`command`, `env`, `url`,
//! `headers`): read once when the manifest is parsed (a malformed one is an error naming
//! its line), expanded from milpa's environment when the upstream is started. `$${` is a
//! literal `${`; any other `$` is itself. The text as written (with `${VAR}`, never a
//! value) is what listings and logs show.

use std::fmt;

/// A setting's text with its `${…}` placeholders found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvTemplate {
    written: String,
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Variable {
        name: String,
        default: Option<String>,
    },
}

/// A variable a template needs that is not set, and has no default.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the variable `{0}` is not set (write `${{{0}:-default}}` for a default)")]
pub struct Unset(pub String);

impl EnvTemplate {
    /// Finds the placeholders of `text`; says what is wrong with a malformed one.
    ///
    /// ```
    /// use milpa_cli::env_template::EnvTemplate;
    ///
    /// let env = |name: &str| (name == "TOKEN").then(|| "s3cret".to_owned());
    /// let header = EnvTemplate::parse("Bearer ${TOKEN}").unwrap();
    /// assert_eq!(header.expand(&env).unwrap(), "Bearer s3cret");
    /// assert_eq!(header.to_string(), "Bearer ${TOKEN}");
    /// let level = EnvTemplate::parse("${LEVEL:-warn} costs $$5, $${NOT}").unwrap();
    /// assert_eq!(level.expand(&env).unwrap(), "warn costs $$5, ${NOT}");
    /// assert!(EnvTemplate::parse("${OPEN").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<EnvTemplate, String> {
        let mut parts = Vec::new();
        let mut literal = String::new();
        let mut rest = text;
        while let Some(at) = rest.find('$') {
            literal.push_str(&rest[..at]);
            let after = &rest[at..];
            if let Some(tail) = after.strip_prefix("$${") {
                literal.push_str("${");
                rest = tail;
            } else if let Some(tail) = after.strip_prefix("${") {
                let Some(end) = tail.find('}') else {
                    return Err(format!("`${{` without a closing `}}` in {text:?}"));
                };
                let inner = &tail[..end];
                let (name, default) = match inner.split_once(":-") {
                    Some((name, default)) => (name, Some(default.to_owned())),
                    None => (inner, None),
                };
                if !valid_name(name) {
                    return Err(format!(
                        "`${{{inner}}}` in {text:?}: a variable name is letters, digits and `_`, \
                         not starting with a digit (write `$${{` for a literal `${{`)"
                    ));
                }
                if !literal.is_empty() {
                    parts.push(Part::Text(std::mem::take(&mut literal)));
                }
                parts.push(Part::Variable {
                    name: name.to_owned(),
                    default,
                });
                rest = &tail[end + 1..];
            } else {
                literal.push('$');
                rest = &after[1..];
            }
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            parts.push(Part::Text(literal));
        }
        Ok(EnvTemplate {
            written: text.to_owned(),
            parts,
        })
    }

    /// The text with each variable's value from `env` (its default when unset or empty, as
    /// a shell's `:-` does).
    pub fn expand(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<String, Unset> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Text(text) => out.push_str(text),
                Part::Variable { name, default } => {
                    match (env(name).filter(|v| !v.is_empty()), default) {
                        (Some(value), _) => out.push_str(&value),
                        (None, Some(default)) => out.push_str(default),
                        (None, None) => return Err(Unset(name.clone())),
                    }
                }
            }
        }
        Ok(out)
    }

    /// The variables it reads, in order.
    pub fn variables(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|part| match part {
            Part::Variable { name, .. } => Some(name.as_str()),
            Part::Text(_) => None,
        })
    }
}

/// As written: placeholders, never values.
impl fmt::Display for EnvTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.written)
    }
}

fn valid_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOME_DIR" => Some("/home/ana".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn placeholders_expand_with_defaults_and_escapes() {
        let cases = [
            ("plain", "plain"),
            ("${HOME_DIR}/x", "/home/ana/x"),
            ("${UNSET:-fallback}", "fallback"),
            ("${EMPTY:-used}", "used"),
            ("${UNSET:-}", ""),
            ("a $b $$c $${HOME_DIR}", "a $b $$c ${HOME_DIR}"),
            ("${HOME_DIR}${HOME_DIR}", "/home/ana/home/ana"),
            ("trailing $", "trailing $"),
        ];
        for (written, expanded) in cases {
            let template = EnvTemplate::parse(written).unwrap();
            assert_eq!(template.expand(&env).unwrap(), expanded, "{written}");
            assert_eq!(template.to_string(), written);
        }
    }

    #[test]
    fn an_unset_variable_without_default_is_named_and_malformed_ones_refused() {
        let template = EnvTemplate::parse("x ${HOME_DIR} ${API_TOKEN}").unwrap();
        assert_eq!(template.expand(&env), Err(Unset("API_TOKEN".into())));
        assert_eq!(
            template.variables().collect::<Vec<_>>(),
            ["HOME_DIR", "API_TOKEN"]
        );
        for bad in ["${", "${}", "${1X}", "${A-B}", "${A B}", "x ${Y"] {
            assert!(EnvTemplate::parse(bad).is_err(), "{bad}");
        }
    }
}
