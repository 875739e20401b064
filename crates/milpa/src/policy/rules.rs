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
///
/// Built with [`PolicyRule::new`] (or [`allow`](PolicyRule::allow) /
/// [`deny`](PolicyRule::deny)) and the `with_*` methods: `#[non_exhaustive]`, so that a rule
/// can learn a new condition without breaking the code that builds one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
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

impl PolicyRule {
    /// A rule with this effect, no id, no scope requirement and the default message.
    pub fn new(effect: RuleEffect) -> PolicyRule {
        PolicyRule {
            id: None,
            effect,
            requires_scopes: Vec::new(),
            description: None,
        }
    }

    /// `PolicyRule::new(RuleEffect::Allow)`.
    pub fn allow() -> PolicyRule {
        PolicyRule::new(RuleEffect::Allow)
    }

    /// `PolicyRule::new(RuleEffect::Deny)`.
    pub fn deny() -> PolicyRule {
        PolicyRule::new(RuleEffect::Deny)
    }

    /// The id shown in denial messages (`#<id>`).
    pub fn with_id(mut self, id: i64) -> PolicyRule {
        self.id = Some(id);
        self
    }

    /// The scopes of which the caller needs one (none given: no requirement).
    pub fn with_requires_scopes<S: Into<String>>(
        mut self,
        scopes: impl IntoIterator<Item = S>,
    ) -> PolicyRule {
        self.requires_scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// The denial message, shown verbatim.
    pub fn with_description(mut self, description: impl Into<String>) -> PolicyRule {
        self.description = Some(description.into());
        self
    }
}

/// The facts a provider matches rules on.
///
/// Built with [`RuleQuery::new`] and the `with_*` methods: `#[non_exhaustive]`, so that the
/// gate can pass a provider one more fact without breaking the providers' tests.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
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

impl<'a> RuleQuery<'a> {
    /// A call of `tool` on `channel` by an anonymous caller, the tool read-only.
    pub fn new(channel: &'a str, tool: &'a str) -> RuleQuery<'a> {
        RuleQuery {
            channel,
            principal: None,
            tool,
            mutating: false,
        }
    }

    /// The caller (`None`: anonymous).
    pub fn with_principal(mut self, principal: Option<&'a str>) -> RuleQuery<'a> {
        self.principal = principal;
        self
    }

    /// Whether the tool is mutating.
    pub fn with_mutating(mut self, mutating: bool) -> RuleQuery<'a> {
        self.mutating = mutating;
        self
    }
}

/// A source of policy rules (a database, a config file). How rules are stored and matched is
/// the provider's business; the gate only asks for the first matching one.
pub trait PolicyRuleProvider: Send + Sync + 'static {
    /// The rule that applies to this call, if any.
    fn find_matching_rule<'a>(&'a self, query: RuleQuery<'a>) -> Deferred<'a, Option<PolicyRule>>;
}

/// A rule with the patterns that select the calls it applies to.
///
/// Built with [`StaticRule::new`] and the `with_*` methods (or deserialized):
/// `#[non_exhaustive]`, so that a new selector does not break the code that builds one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
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
    /// `rule` for the tools whose name matches `tool` (`*`: any run of characters), from
    /// every caller on every channel.
    pub fn new(tool: impl Into<String>, rule: PolicyRule) -> StaticRule {
        StaticRule {
            tool: tool.into(),
            principal: None,
            channel: None,
            rule,
        }
    }

    /// Only callers whose principal matches this pattern (anonymous callers never do).
    pub fn with_principal(mut self, principal: impl Into<String>) -> StaticRule {
        self.principal = Some(principal.into());
        self
    }

    /// Only calls on this channel.
    pub fn with_channel(mut self, channel: impl Into<String>) -> StaticRule {
        self.channel = Some(channel.into());
        self
    }

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
/// let rules = StaticRuleProvider::new(vec![
///     StaticRule::new("restart_*", PolicyRule::new(RuleEffect::Deny).with_id(1)).with_channel("mcp"),
/// ]);
/// let query = RuleQuery::new("mcp", "restart_db").with_mutating(true);
/// assert_eq!(rules.first_match(&query).unwrap().id, Some(1));
/// assert!(rules.first_match(&RuleQuery::new("ops", "restart_db")).is_none());
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
    use super::*;

    #[test]
    fn builders_fill_the_fields() {
        let rule = PolicyRule::deny()
            .with_id(3)
            .with_requires_scopes(["ops"])
            .with_description("no");
        assert_eq!(rule.id, Some(3));
        assert_eq!(rule.effect, RuleEffect::Deny);
        assert_eq!(rule.requires_scopes, ["ops"]);
        assert_eq!(rule.description.as_deref(), Some("no"));
        assert_eq!(PolicyRule::allow(), PolicyRule::new(RuleEffect::Allow));

        let query = RuleQuery::new("mcp", "read")
            .with_principal(Some("alice"))
            .with_mutating(true);
        assert_eq!(
            (query.channel, query.principal, query.tool, query.mutating),
            ("mcp", Some("alice"), "read", true)
        );

        let scoped = StaticRule::new("re*", PolicyRule::allow())
            .with_principal("al*")
            .with_channel("mcp");
        assert!(scoped.matches(&query));
        assert!(!scoped.matches(&query.with_principal(None)));
        assert!(!scoped.matches(&RuleQuery::new("ops", "read").with_principal(Some("alice"))));
        assert!(StaticRule::new("*", PolicyRule::deny()).matches(&RuleQuery::new("ops", "x")));
    }

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
