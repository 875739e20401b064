//! Per tool, what does not change from call to call: the tool's entity, the part of the
//! policy set that can apply to it, and the entities of its recent callers.
//!
//! Measured reason (benches/policy.rs): Cedar's authorizer rebuilds and evaluates every
//! policy's scope and condition on each request (about 1.2 µs a policy on the bench machine):
//! with the whole 20-policy set a trivial call cost 29 µs. Policies pinned by their resource
//! scope to another tool can never match, so leaving them out gives the same decision for a
//! fraction of the work (15 µs); keeping the callers' entities saves building them and
//! Cedar's closure over them on every call (12 µs). `policy::tests` holds this path to the
//! whole set and to freshly built entities.

use std::collections::HashMap;
use std::sync::Arc;

use cedar_policy::{Entities, Entity, Policy, PolicySet};
use milpa::{ToolContext, ToolDefinition};
use parking_lot::RwLock;

use crate::entity_model::{RequestBuildError, RequestTemplate};

/// One tool's entity and applicable policies, with the attributes the entity was built from
/// (a tool re-registered under the same name with other attributes gets a new view).
pub(crate) struct ToolView {
    mutating: bool,
    upstream: Option<String>,
    entity: Entity,
    pub(crate) policies: PolicySet,
    /// The entities of recent callers (principal and scopes) with this tool, at most
    /// [`CALLERS`]; emptied when full, so a crowd of callers costs what no cache would.
    callers: RwLock<Vec<CallerEntities>>,
}

/// How many callers' entities a tool keeps.
const CALLERS: usize = 64;

struct CallerEntities {
    principal: Option<String>,
    scopes: Vec<String>,
    entities: Arc<Entities>,
}

impl ToolView {
    /// The entities (caller and tool) for a call by `ctx`.
    pub(crate) fn entities(
        &self,
        ctx: &ToolContext,
        request: &RequestTemplate,
    ) -> Result<Arc<Entities>, RequestBuildError> {
        let same = |c: &CallerEntities| {
            c.principal.as_deref() == ctx.principal() && c.scopes == ctx.scopes()
        };
        if let Some(known) = self.callers.read().iter().find(|c| same(c)) {
            return Ok(known.entities.clone());
        }
        let entities = Arc::new(request.entities(ctx, self.entity.clone())?);
        let mut callers = self.callers.write();
        if callers.len() >= CALLERS {
            callers.clear();
        }
        callers.push(CallerEntities {
            principal: ctx.principal().map(str::to_owned),
            scopes: ctx.scopes().to_vec(),
            entities: entities.clone(),
        });
        Ok(entities)
    }
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
            callers: RwLock::default(),
        });
        self.by_tool
            .write()
            .insert(tool.name().to_owned(), view.clone());
        Ok(view)
    }
}
