//! Policy rules: a host-provided source of allow/deny decisions checked after scopes.

use serde::{Deserialize, Serialize};

use crate::deferred::Deferred;

/// What a matching rule decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleEffect {
    /// Allow at once (the channel's `block_mutating` is not consulted).
    Allow,
    /// Deny with the rule's description.
    Deny,
}

/// One rule as the gate sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyRule {
    /// Shown in denial messages as `#<id>` (`#` alone when `None`).
    pub id: Option<i64>,
    /// Allow or deny.
    pub effect: RuleEffect,
    /// If not empty, the caller needs one of these scopes or the rule denies.
    #[serde(default)]
    pub requires_scopes: Vec<String>,
    /// The denial message, verbatim, when set.
    #[serde(default)]
    pub description: Option<String>,
}

/// The facts a provider matches rules on.
#[derive(Debug, Clone, Copy)]
pub struct RuleQuery<'a> {
    /// The call's channel.
    pub channel: &'a str,
    /// The caller, `None` when anonymous.
    pub principal: Option<&'a str>,
    /// The tool's name.
    pub tool: &'a str,
    /// Whether the tool is mutating.
    pub mutating: bool,
}

/// A source of policy rules (a database, a config file). How rules are stored and matched is
/// the provider's business; the gate only asks for the first matching one.
pub trait PolicyRuleProvider: Send + Sync + 'static {
    /// The rule that applies to this call, if any.
    fn find_matching_rule<'a>(&'a self, query: RuleQuery<'a>) -> Deferred<'a, Option<PolicyRule>>;
}

/// A rule with the patterns that select the calls it applies to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaticRule {
    /// Tool-name pattern (`*` matches any run of characters).
    pub tool: String,
    /// Principal pattern; `None` matches every caller, anonymous included.
    #[serde(default)]
    pub principal: Option<String>,
    /// Channel; `None` matches every channel.
    #[serde(default)]
    pub channel: Option<String>,
    /// What the rule decides.
    #[serde(flatten)]
    pub rule: PolicyRule,
}

impl StaticRule {
    fn matches(&self, query: &RuleQuery<'_>) -> bool {
        glob_matches(&self.tool, query.tool)
            && self.channel.as_deref().is_none_or(|c| c == query.channel)
            && match (&self.principal, query.principal) {
                (None, _) => true,
                (Some(pattern), Some(p)) => glob_matches(pattern, p),
                (Some(_), None) => false,
            }
    }
}

/// Rules from configuration, checked in order; the first match wins.
///
/// ```
/// use milpa::policy::{PolicyRule, RuleEffect, RuleQuery, StaticRule, StaticRuleProvider, PolicyRuleProvider};
///
/// let rules = StaticRuleProvider::new(vec![StaticRule {
///     tool: "restart_*".into(),
///     principal: None,
///     channel: Some("mcp".into()),
///     rule: PolicyRule { id: Some(1), effect: RuleEffect::Deny, requires_scopes: vec![], description: None },
/// }]);
/// assert_eq!(rules.first_match(&RuleQuery { channel: "mcp", principal: None, tool: "restart_db", mutating: true }).unwrap().id, Some(1));
/// ```
#[derive(Debug, Clone, Default)]
pub struct StaticRuleProvider {
    rules: Vec<StaticRule>,
}

impl StaticRuleProvider {
    /// A provider over `rules`, in priority order.
    pub fn new(rules: Vec<StaticRule>) -> Self {
        StaticRuleProvider { rules }
    }

    /// The first rule that matches.
    pub fn first_match(&self, query: &RuleQuery<'_>) -> Option<&PolicyRule> {
        self.rules
            .iter()
            .find(|r| r.matches(query))
            .map(|r| &r.rule)
    }
}

impl PolicyRuleProvider for StaticRuleProvider {
    fn find_matching_rule<'a>(&'a self, query: RuleQuery<'a>) -> Deferred<'a, Option<PolicyRule>> {
        Deferred::ready(self.first_match(&query).cloned())
    }
}

/// Whether `text` matches `pattern`, where `*` matches any run of characters (even none).
pub fn glob_matches(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let pieces: Vec<&str> = parts.collect();
    let Some((last, middle)) = pieces.split_last() else {
        return rest.is_empty();
    };
    for piece in middle {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::glob_matches;

    #[test]
    fn globs() {
        assert!(glob_matches("restart_*", "restart_db"));
        assert!(glob_matches("*", ""));
        assert!(glob_matches("a*b*c", "abc"));
        assert!(glob_matches("a*b*c", "axxbyyc"));
        assert!(!glob_matches("a*b*c", "axxbyy"));
        assert!(!glob_matches("exact", "exactly"));
        assert!(glob_matches("*ab", "ab"));
        assert!(!glob_matches("a*a", "a"));
    }
}
