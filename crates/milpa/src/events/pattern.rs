//! [`EventPattern`]: an event name, or a pattern where `*` stands for one segment part.

/// An exact event name, or a pattern in which each `*` matches one or more characters other
/// than `.` (so `tool.*` matches `tool.executed` but not `tool.a.b`, and `*` alone matches
/// only names without a dot). Matching is anchored and case-sensitive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventPattern {
    text: String,
    wildcard: bool,
}

impl EventPattern {
    /// Parses a name or pattern.
    pub fn new(text: impl Into<String>) -> Self {
        let text = text.into();
        let wildcard = text.contains('*');
        EventPattern { text, wildcard }
    }

    /// Whether this is a wildcard pattern.
    pub fn is_wildcard(&self) -> bool {
        self.wildcard
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        if !self.wildcard {
            return self.text == name;
        }
        matches_from(self.text.as_bytes(), name.as_bytes())
    }
}

fn matches_from(pattern: &[u8], name: &[u8]) -> bool {
    match pattern.split_first() {
        None => name.is_empty(),
        Some((b'*', rest)) => {
            // One or more non-dot characters, then the rest of the pattern.
            let run = name.iter().take_while(|c| **c != b'.').count();
            (1..=run).any(|taken| matches_from(rest, &name[taken..]))
        }
        Some((c, rest)) => name.first() == Some(c) && matches_from(rest, &name[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::EventPattern;

    #[test]
    fn a_star_is_one_segment_part() {
        let p = EventPattern::new("tool.*");
        assert!(p.matches("tool.executed"));
        assert!(!p.matches("tool.a.b"));
        assert!(!p.matches("tool."));
        assert!(EventPattern::new("*").matches("ping"));
        assert!(!EventPattern::new("*").matches("tool.failed"));
        assert!(EventPattern::new("*.failed").matches("tool.failed"));
        assert!(EventPattern::new("verification.gr*").matches("verification.granted"));
        assert!(!EventPattern::new("Tool.*").matches("tool.failed"));
    }
}
