//! [`CedarPolicy`]: a Cedar policy set as milpa's [`CallPolicy`].

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use cedar_policy::{
    AuthorizationError, Authorizer, Decision, Effect, Entities, Policy, PolicyId, PolicySet,
    Request, ResourceConstraint, ValidationError, ValidationMode, Validator,
};
use milpa::policy::{AccessInput, CallPolicy, ListingInput, PolicyDecision, PolicyInput};
use milpa::{Deferred, ToolContext, ToolDefinition};
use serde_json::Value;

use crate::argument_free::ArgumentFree;
use crate::entity_model::{RequestBuildError, RequestTemplate, schema};
use crate::error::CedarLoadError;
use crate::location::{first_offset, line_column, message};
use crate::tool_view::ToolViews;

/// What a call no policy decides gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum DefaultEffect {
    /// Only a `forbid` denies; a call no `permit` covers goes on to the rest of the gate.
    #[default]
    Allow,
    /// A call no `permit` covers is denied too.
    Deny,
}

impl DefaultEffect {
    /// `allow` or `deny`, as in the manifest.
    pub fn as_str(self) -> &'static str {
        match self {
            DefaultEffect::Allow => "allow",
            DefaultEffect::Deny => "deny",
        }
    }
}

/// One policy text and the name errors give it (a file path, or a name for a string).
struct Source {
    origin: String,
    text: String,
}

/// A Cedar policy set judging every call, checked last in the authorize stage.
///
/// Built once (parsed, validated against the entity model); each call then builds only its
/// request (caller, tool, context) and asks Cedar's authorizer.
pub struct CedarPolicy {
    policies: PolicySet,
    default: DefaultEffect,
    /// The files (or names), for `describe`.
    origins: Vec<String>,
    /// The name each policy goes by in messages: its `@id`, else Cedar's id, in load order.
    names: Vec<(PolicyId, String)>,
    request: RequestTemplate,
    authorizer: Authorizer,
    views: ToolViews,
    /// What listings consult: the policies whose decision holds whatever the arguments.
    argument_free: ArgumentFree,
}

impl std::fmt::Debug for CedarPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CedarPolicy")
            .field("origins", &self.origins)
            .field("default", &self.default)
            .field("policies", &self.names.len())
            .finish()
    }
}

impl CedarPolicy {
    /// Loads, parses and validates the policies in `paths` (one set across all files).
    pub fn from_files<P: AsRef<Path>>(
        paths: impl IntoIterator<Item = P>,
        default: DefaultEffect,
    ) -> Result<Self, CedarLoadError> {
        let mut sources = Vec::new();
        for path in paths {
            let path = path.as_ref();
            let text = std::fs::read_to_string(path).map_err(|source| CedarLoadError::Read {
                path: PathBuf::from(path),
                source,
            })?;
            sources.push(Source {
                origin: path.display().to_string(),
                text,
            });
        }
        Self::load(sources, default)
    }

    /// Parses and validates policies given as text; `origin` names it in errors.
    pub fn from_str(
        origin: impl Into<String>,
        text: impl Into<String>,
        default: DefaultEffect,
    ) -> Result<Self, CedarLoadError> {
        Self::load(
            vec![Source {
                origin: origin.into(),
                text: text.into(),
            }],
            default,
        )
    }

    /// How many policies the set holds.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether the set holds no policy.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    fn load(sources: Vec<Source>, default: DefaultEffect) -> Result<Self, CedarLoadError> {
        if sources.is_empty() {
            return Err(CedarLoadError::Empty);
        }
        let mut policies = PolicySet::new();
        let mut names = Vec::new();
        // Which source each policy came from, to place validation errors.
        let mut source_of = Vec::new();
        for (index, source) in sources.iter().enumerate() {
            let parsed = PolicySet::from_str(&source.text).map_err(|e| {
                policy_error(
                    source,
                    "syntax error",
                    first_offset(&e),
                    message(&e),
                    Box::new(e),
                )
            })?;
            if parsed.templates().next().is_some() {
                let offset = ["?principal", "?resource"]
                    .iter()
                    .filter_map(|slot| source.text.find(slot))
                    .min()
                    .unwrap_or(0);
                return Err(policy_error_no_cause(
                    source,
                    "unsupported",
                    offset,
                    "a template (a policy with ?principal or ?resource) is never linked here; write a static policy".into(),
                ));
            }
            // Cedar numbers the policies of each text from policy0; across files they are
            // renumbered so that ids stay unique (the same as Cedar's for one file).
            let mut in_order: Vec<&Policy> = parsed.policies().collect();
            in_order.sort_by_key(|p| policy_number(p.id()));
            for policy in in_order {
                let id = PolicyId::new(format!("policy{}", names.len()));
                let name = policy
                    .annotation("id")
                    .map_or_else(|| id.to_string(), str::to_owned);
                let renamed = policy.new_id(id.clone());
                policies
                    .add(renamed)
                    .expect("ids are fresh and the policy is static");
                names.push((id, name));
                source_of.push(index);
            }
        }
        validate(&policies, &sources, &names, &source_of)?;
        Ok(CedarPolicy {
            argument_free: ArgumentFree::of(&policies, default == DefaultEffect::Deny),
            policies,
            default,
            origins: sources.into_iter().map(|s| s.origin).collect(),
            names,
            request: RequestTemplate::new(),
            authorizer: Authorizer::new(),
            views: ToolViews::default(),
        })
    }

    fn name_of<'a>(&'a self, id: &'a PolicyId) -> &'a str {
        self.names
            .iter()
            .find(|(known, _)| known == id)
            .map_or(AsRef::<str>::as_ref(id), |(_, name)| name.as_str())
    }

    fn decide(&self, input: &PolicyInput<'_>) -> PolicyDecision {
        let judged = Judged::call(input);
        match self
            .views
            .get(input.tool, &self.policies, &self.request, |p| {
                self.can_apply(p, input.tool.name())
            }) {
            Ok(view) => {
                let built = self.call_request(input, view.entities(input.ctx, &self.request));
                self.decide_against(&judged, &view.policies, built)
            }
            Err(e) => self.decide_against(&judged, &self.policies, Err(e)),
        }
    }

    /// A call's request, with its entities (cached per tool and caller, or not).
    fn call_request(
        &self,
        input: &PolicyInput<'_>,
        entities: Result<Arc<Entities>, RequestBuildError>,
    ) -> Result<(Request, Arc<Entities>), RequestBuildError> {
        entities.and_then(|entities| Ok((self.request.request(input)?, entities)))
    }

    /// A read or a prompt, judged by the whole set (scopes pinned to tools fall out at once).
    fn decide_access(&self, input: &AccessInput<'_>) -> PolicyDecision {
        let judged = Judged {
            noun: input.access.noun(),
            name: input.name,
            ctx: input.ctx,
        };
        let built = self
            .request
            .access(input)
            .map(|(request, entities)| (request, Arc::new(entities)));
        self.decide_against(&judged, &self.policies, built)
    }

    /// Whether `input`'s entry is denied whatever the arguments: judged with no arguments
    /// by the argument-free policies only. A request that cannot be built is listed (its
    /// use is refused with the reason).
    fn denied_whatever(&self, input: &ListingInput<'_>) -> bool {
        let no_args = Value::Object(serde_json::Map::new());
        let built = match input.tool {
            Some(tool) => self.request.tool_entity(tool).and_then(|entity| {
                let call = PolicyInput::new(input.ctx, tool, &no_args);
                Ok((
                    self.request.request(&call)?,
                    self.request.entities(input.ctx, entity)?,
                ))
            }),
            None => self.request.access(&AccessInput::new(
                input.ctx,
                input.access,
                input.name,
                &no_args,
            )),
        };
        let Ok((request, entities)) = built else {
            return false;
        };
        let fixed = &self.argument_free;
        let response = self
            .authorizer
            .is_authorized(&request, &fixed.policies, &entities);
        let forbidden = response.diagnostics().reason().any(|id| {
            fixed
                .policies
                .policy(id)
                .is_some_and(|p| p.effect() == Effect::Forbid)
        });
        // A forbid that errs denies every call it is asked about (see `decide_against`).
        let erring = response.diagnostics().errors().any(|error| {
            let AuthorizationError::PolicyEvaluationError(error) = error;
            fixed
                .policies
                .policy(error.policy_id())
                .is_some_and(|p| p.effect() == Effect::Forbid)
        });
        forbidden || erring || (fixed.permits_decide && response.decision() == Decision::Deny)
    }

    /// The decision on `judged` by `policies` (the whole set, or for a call the part of it
    /// that can apply to the tool: the same decision, see [`ToolViews`]).
    fn decide_against(
        &self,
        judged: &Judged<'_>,
        policies: &PolicySet,
        built: Result<(Request, Arc<Entities>), RequestBuildError>,
    ) -> PolicyDecision {
        let Judged { noun, name, ctx } = *judged;
        let channel = ctx.channel();
        let principal = ctx.principal().unwrap_or("(none)");
        let (request, entities) = match built {
            Ok(built) => built,
            // Fail closed: a request Cedar cannot judge is refused.
            Err(e) => {
                return PolicyDecision::Deny(format!(
                    "Denied by Cedar policy for {noun} '{name}' on channel '{channel}' (principal: {principal}): the request cannot be judged: {}.",
                    e.0
                ));
            }
        };
        let response = self.authorizer.is_authorized(&request, policies, &entities);
        // Cedar skips a policy whose condition fails to evaluate (an argument missing or of
        // another type). A forbid that errs counts as denying: fail closed.
        let mut erring_forbids = Vec::new();
        for error in response.diagnostics().errors() {
            let AuthorizationError::PolicyEvaluationError(error) = error;
            let id = error.policy_id();
            if self
                .policies
                .policy(id)
                .is_some_and(|p| p.effect() == Effect::Forbid)
            {
                erring_forbids.push((self.name_of(id), error.inner().to_string()));
            }
        }
        if response.decision() == Decision::Deny {
            // In load order, so the message is stable (Cedar's reasons are a set).
            let reasons: Vec<&PolicyId> = response.diagnostics().reason().collect();
            let forbids: Vec<&str> = self
                .names
                .iter()
                .filter(|(id, _)| reasons.contains(&id))
                .map(|(_, name)| name.as_str())
                .collect();
            if !forbids.is_empty() {
                return PolicyDecision::Deny(format!(
                    "Denied by policy {} for {noun} '{name}' on channel '{channel}' (principal: {principal}).",
                    quoted(forbids.iter().copied())
                ));
            }
        }
        if !erring_forbids.is_empty() {
            let mut why = String::new();
            for (i, (_, error)) in erring_forbids.iter().enumerate() {
                let _ = write!(why, "{}{error}", if i == 0 { "" } else { "; " });
            }
            return PolicyDecision::Deny(format!(
                "Denied by policy {} for {noun} '{name}' on channel '{channel}' (principal: {principal}): the policy could not be evaluated, which counts as denying ({why}).",
                quoted(erring_forbids.iter().map(|(name, _)| *name))
            ));
        }
        if response.decision() == Decision::Deny && self.default == DefaultEffect::Deny {
            return PolicyDecision::Deny(format!(
                "Denied for {noun} '{name}' on channel '{channel}' (principal: {principal}): no Cedar policy permits it (default deny)."
            ));
        }
        PolicyDecision::Continue
    }

    /// Whether `policy`'s resource scope lets it apply to `tool`. Tools have no parents, so
    /// `resource in Tool::"x"` is `resource == Tool::"x"`.
    fn can_apply(&self, policy: &Policy, tool: &str) -> bool {
        match policy.resource_constraint() {
            ResourceConstraint::Eq(uid) | ResourceConstraint::In(uid) => {
                uid == self.request.tool_uid(tool)
            }
            ResourceConstraint::IsIn(ty, uid) => {
                self.request.is_tool_type(&ty) && uid == self.request.tool_uid(tool)
            }
            ResourceConstraint::Is(ty) => self.request.is_tool_type(&ty),
            ResourceConstraint::Any => true,
        }
    }
}

/// What a decision is about, as its messages name it: `tool 'x'`, `resource 'notes://all'`.
#[derive(Clone, Copy)]
struct Judged<'a> {
    noun: &'static str,
    name: &'a str,
    ctx: &'a ToolContext,
}

impl<'a> Judged<'a> {
    fn call(input: &PolicyInput<'a>) -> Self {
        Judged {
            noun: "tool",
            name: input.tool.name(),
            ctx: input.ctx,
        }
    }
}

/// `'a'` or `'a', 'b'`.
fn quoted<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The number in Cedar's `policyN` ids, to keep the file's order.
fn policy_number(id: &PolicyId) -> usize {
    AsRef::<str>::as_ref(id)
        .strip_prefix("policy")
        .and_then(|n| n.parse().ok())
        .unwrap_or(usize::MAX)
}

fn policy_error(
    source: &Source,
    what: &'static str,
    offset: usize,
    message: String,
    cause: Box<dyn std::error::Error + Send + Sync>,
) -> CedarLoadError {
    let (line, column) = line_column(&source.text, offset);
    CedarLoadError::Policy {
        origin: source.origin.clone(),
        line,
        column,
        what,
        message,
        source: Some(cause),
    }
}

fn policy_error_no_cause(
    source: &Source,
    what: &'static str,
    offset: usize,
    message: String,
) -> CedarLoadError {
    let (line, column) = line_column(&source.text, offset);
    CedarLoadError::Policy {
        origin: source.origin.clone(),
        line,
        column,
        what,
        message,
        source: None,
    }
}

/// Validates the set against the entity model, reporting the first error (in load order).
///
/// Two passes, because Cedar's validator can type an open record (our `context.args`: the
/// arguments differ per tool) only in its partial mode, and the partial mode skips the checks
/// that entity types and actions exist. So: a strict pass with `args` an empty record, whose
/// attribute-access errors are dropped (they are the args accesses, and the partial pass
/// re-checks every other access), then a partial pass with `args` open.
fn validate(
    policies: &PolicySet,
    sources: &[Source],
    names: &[(PolicyId, String)],
    source_of: &[usize],
) -> Result<(), CedarLoadError> {
    let strict = Validator::new(schema(false)).validate(policies, ValidationMode::Strict);
    let partial = Validator::new(schema(true)).validate(policies, ValidationMode::Partial);
    let errors = strict
        .validation_errors()
        .filter(|e| {
            !matches!(
                e,
                ValidationError::UnsafeAttributeAccess(_)
                    | ValidationError::UnsafeOptionalAttributeAccess(_)
            )
        })
        .chain(partial.validation_errors());
    let first = errors.min_by_key(|e| {
        let index = names
            .iter()
            .position(|(id, _)| id == e.policy_id())
            .unwrap_or(usize::MAX);
        (index, first_offset(*e))
    });
    match first {
        None => Ok(()),
        Some(error) => {
            let index = names
                .iter()
                .position(|(id, _)| id == error.policy_id())
                .unwrap_or(0);
            let source = &sources[source_of.get(index).copied().unwrap_or(0)];
            Err(policy_error(
                source,
                "invalid policy",
                first_offset(error),
                // Cedar's own prefix names the renumbered id; ours names the `@id`.
                format!(
                    "policy '{}': {}",
                    names[index].1,
                    message(error).replacen(
                        &format!("for policy `{}`, ", error.policy_id()),
                        "",
                        1
                    )
                ),
                Box::new(error.clone()),
            ))
        }
    }
}

impl CallPolicy for CedarPolicy {
    fn evaluate<'a>(&'a self, input: PolicyInput<'a>) -> Deferred<'a, PolicyDecision> {
        Deferred::ready(self.decide(&input))
    }

    fn evaluate_access<'a>(&'a self, input: AccessInput<'a>) -> Deferred<'a, PolicyDecision> {
        Deferred::ready(self.decide_access(&input))
    }

    fn denies_whatever_the_arguments(&self, input: ListingInput<'_>) -> bool {
        self.denied_whatever(&input)
    }

    fn describe(&self, tool: &ToolDefinition) -> String {
        let applicable: Vec<&str> = self
            .names
            .iter()
            .filter(|(id, _)| {
                self.policies
                    .policy(id)
                    .is_some_and(|p| self.can_apply(p, tool.name()))
            })
            .map(|(_, name)| name.as_str())
            .collect();
        format!(
            "cedar ({}, default {}): policies that can apply: {}",
            self.origins.join(", "),
            self.default.as_str(),
            if applicable.is_empty() {
                "none".to_owned()
            } else {
                applicable.join(", ")
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The per-tool subset ([`ToolViews`]) decides as the whole set does, for tools named in
    /// resource scopes and not, with and without default deny, allowed, denied and erring; and
    /// so do the cached callers' entities.
    #[test]
    fn the_per_tool_policies_decide_as_the_whole_set() {
        let text = r#"
@id("r-big") forbid(principal, action, resource == Tool::"refund") when { context.args.amount >= 100 };
@id("r-in") forbid(principal, action, resource in Tool::"refund") when { context.args.amount == 7 };
@id("w-etc") forbid(principal, action, resource == Tool::"write") when { context.args.path like "/etc/*" };
@id("is-tool") forbid(principal, action, resource is Tool) when { context.args has x && context.args.x == 1 };
@id("is-in") forbid(principal, action, resource is Tool in Tool::"write") when { context.args has y };
@id("any") forbid(principal, action, resource) when { context.channel == "http" && resource.mutating };
@id("p-read") permit(principal, action, resource == Tool::"read");
@id("p-admin") permit(principal, action, resource) when { principal.scopes.contains("admin") };
"#;
        let tools = [
            ToolDefinition::builder("refund")
                .mutating(true)
                .sync(|_, _| json!(1)),
            ToolDefinition::builder("write")
                .upstream("fs")
                .sync(|_, _| json!(1)),
            ToolDefinition::builder("read")
                .mutating(false)
                .sync(|_, _| json!(1)),
            ToolDefinition::builder("other").sync(|_, _| json!(1)),
        ];
        let contexts = [
            ToolContext::builder("mcp")
                .principal("a")
                .scopes(["admin"])
                .build(),
            ToolContext::builder("http").principal("b").build(),
            ToolContext::builder("cli").build(),
            // The same principal with other scopes: the cached entities must not be reused.
            ToolContext::builder("mcp").principal("a").build(),
        ];
        let args = [
            json!({"amount": 5}),
            json!({"amount": 7}),
            json!({"amount": 500}),
            json!({"path": "/etc/x", "x": 1}),
            json!({"path": "/srv/x", "y": true}),
            json!({}),
        ];
        let mut denials = 0;
        for default in [DefaultEffect::Allow, DefaultEffect::Deny] {
            let policy = CedarPolicy::from_str("t.cedar", text, default).unwrap();
            for tool in &tools {
                for ctx in &contexts {
                    for args in &args {
                        let input = PolicyInput::new(ctx, tool, args);
                        let entities = policy
                            .request
                            .entities(ctx, policy.request.tool_entity(tool).unwrap())
                            .map(Arc::new);
                        let whole = policy.decide_against(
                            &Judged::call(&input),
                            &policy.policies,
                            policy.call_request(&input, entities),
                        );
                        assert_eq!(policy.decide(&input), whole, "{} {args}", tool.name());
                        denials += usize::from(whole != PolicyDecision::Continue);
                    }
                }
            }
            // The subset really is smaller for a tool others' policies are pinned to.
            let view = policy
                .views
                .get(&tools[2], &policy.policies, &policy.request, |p| {
                    policy.can_apply(p, "read")
                })
                .unwrap();
            assert_eq!(view.policies.policies().count(), 4);
        }
        assert!(denials > 20, "{denials}");
    }
}
