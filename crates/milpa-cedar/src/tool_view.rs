//! Per tool, what does not change from call to call: the tool's entity and the part of the
//! policy set that can apply to it.
//!
//! Measured reason (benches/policy.rs): Cedar's authorizer rebuilds and evaluates every
//! policy's scope and condition on each request (about 1.2 µs a policy on the bench machine):
//! with the whole 20-policy set a trivial call cost 29 µs, 15 µs with this. Policies pinned by
//! their resource scope to another tool can never match, so leaving them out gives the same
//! decision for a fraction of the work. `policy::tests` holds this path to the whole set.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use cedar_policy::{Entity, Policy, PolicySet};
use milpa::ToolDefinition;

use crate::entity_model::{RequestBuildError, RequestTemplate};

/// One tool's entity and applicable policies, with the attributes the entity was built from
/// (a tool re-registered under the same name with other attributes gets a new view).
pub(crate) struct ToolView {
    mutating: bool,
    upstream: Option<String>,
    pub(crate) entity: Entity,
    pub(crate) policies: PolicySet,
}

/// The views, by tool name, built on a tool's first call.
#[derive(Default)]
pub(crate) struct ToolViews {
    by_tool: RwLock<HashMap<String, Arc<ToolView>>>,
}

impl ToolViews {
    /// The view of `tool`, built from `all` (the policies `can_apply` admits) when missing or
    /// stale.
    pub(crate) fn get(
        &self,
        tool: &ToolDefinition,
        all: &PolicySet,
        request: &RequestTemplate,
        can_apply: impl Fn(&Policy) -> bool,
    ) -> Result<Arc<ToolView>, RequestBuildError> {
        let fresh = |view: &ToolView| {
            view.mutating == tool.is_mutating() && view.upstream.as_deref() == tool.upstream()
        };
        if let Some(view) = self
            .by_tool
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(tool.name())
            .filter(|view| fresh(view))
        {
            return Ok(view.clone());
        }
        let mut policies = PolicySet::new();
        for policy in all.policies().filter(|p| can_apply(p)) {
            policies
                .add(policy.clone())
                .expect("a subset of a valid set of static policies is valid");
        }
        let view = Arc::new(ToolView {
            mutating: tool.is_mutating(),
            upstream: tool.upstream().map(str::to_owned),
            entity: request.tool_entity(tool)?,
            policies,
        });
        self.by_tool
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(tool.name().to_owned(), view.clone());
        Ok(view)
    }
}
