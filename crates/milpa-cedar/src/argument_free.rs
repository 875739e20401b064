//! The part of a policy set that does not read `context.args`, for listings: what it
//! decides holds whatever the arguments, so an entry it denies can be left out of a
//! listing (see [`CallPolicy::denies_whatever_the_arguments`](milpa::policy::CallPolicy)).

use cedar_policy::{Effect, Policy, PolicySet};
use serde_json::Value;

/// The forbids that read no argument, and the permits too when they decide alone.
pub(crate) struct ArgumentFree {
    pub(crate) policies: PolicySet,
    /// Under default deny with every permit argument-free, a request none of them permits
    /// is denied whatever the arguments.
    pub(crate) permits_decide: bool,
}

impl ArgumentFree {
    /// The argument-free part of `all`; `default_deny` as the set was loaded.
    pub(crate) fn of(all: &PolicySet, default_deny: bool) -> Self {
        let permits_decide = default_deny
            && all
                .policies()
                .filter(|p| p.effect() == Effect::Permit)
                .all(|p| !reads_arguments(p));
        let mut policies = PolicySet::new();
        for policy in all.policies() {
            let kept = match policy.effect() {
                Effect::Forbid => !reads_arguments(policy),
                Effect::Permit => permits_decide,
            };
            if kept {
                policies
                    .add(policy.clone())
                    .expect("a subset of a valid set of static policies is valid");
            }
        }
        ArgumentFree {
            policies,
            permits_decide,
        }
    }
}

/// Whether `policy` may read the arguments: `context.args` anywhere in it, or `context`
/// used as a whole (`context == …`), which reaches them too. Read off Cedar's JSON form of
/// the policy, where an attribute access is `{".": {"left": …, "attr": …}}` and a `has`
/// test `{"has": {"left": …, "attr": …}}`. A policy that cannot be rendered counts as
/// reading them.
fn reads_arguments(policy: &Policy) -> bool {
    policy
        .to_json()
        .map_or(true, |json| mentions_arguments(&json))
}

fn mentions_arguments(json: &Value) -> bool {
    match json {
        Value::Object(map) => {
            for op in [".", "has"] {
                if let Some(Value::Object(access)) = map.get(op)
                    && is_context(access.get("left"))
                {
                    return access.get("attr").and_then(Value::as_str) == Some("args");
                }
            }
            is_context(Some(json)) || map.values().any(mentions_arguments)
        }
        Value::Array(items) => items.iter().any(mentions_arguments),
        _ => false,
    }
}

fn is_context(json: Option<&Value>) -> bool {
    json.and_then(|v| v.get("Var"))
        .and_then(Value::as_str)
        .is_some_and(|var| var == "context")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn reads(text: &str) -> bool {
        reads_arguments(&Policy::from_str(text).unwrap())
    }

    #[test]
    fn only_policies_that_reach_the_arguments_read_them() {
        assert!(reads(
            r#"forbid(principal, action, resource) when { context.args.amount > 1 };"#
        ));
        assert!(reads(
            r#"forbid(principal, action, resource) when { context has args };"#
        ));
        assert!(reads(
            r#"forbid(principal, action, resource) when { !(context.args has confirm) };"#
        ));
        assert!(reads(
            r#"forbid(principal, action, resource) when { context == {"channel": "mcp"} };"#
        ));
        assert!(!reads(
            r#"forbid(principal, action, resource) when { context.channel == "mcp" && resource.mutating };"#
        ));
        assert!(!reads(
            r#"forbid(principal, action, resource == Tool::"x") unless { principal.scopes.contains("admin") };"#
        ));
        assert!(!reads(r#"permit(principal, action, resource);"#));
    }
}
