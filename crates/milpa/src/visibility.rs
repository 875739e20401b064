//! What a listing shows a caller: only what it could use.
//!
//! `tools/list`, `resources/list`, `resources/templates/list` and `prompts/list` (and the
//! CLI's listings) leave out an entry the caller could never use: one whose scopes it holds
//! none of, one on a channel that requires a principal it does not have, a mutating tool
//! the channel blocks, and one the call policy denies whatever the arguments (for Cedar, a
//! `forbid` that does not read `context.args`). What depends on the arguments, or on a rule
//! provider, stays listed: a listing may show what a call will be denied, never hide what it
//! would allow.

use crate::catalog::{Prompt, Resource, ResourceTemplate};
use crate::context::ToolContext;
use crate::definition::ToolDefinition;
use crate::policy::{Access, ListingInput, Subject};
use crate::registry::ToolRegistry;

/// One entry of a listing.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Listed<'a> {
    /// A tool (`tools/list`).
    Tool(&'a ToolDefinition),
    /// A fixed resource (`resources/list`).
    Resource(&'a Resource),
    /// A resource template (`resources/templates/list`). Its URIs are not known until a
    /// read, so the call policy is not asked: only scopes and the channel decide.
    Template(&'a ResourceTemplate),
    /// A prompt (`prompts/list`).
    Prompt(&'a Prompt),
}

impl ToolRegistry {
    /// Whether a listing for `ctx` shows `entry`: not when the caller holds none of its
    /// scopes, lacks the principal the channel requires, meets a mutating tool the channel
    /// blocks, or the call policy denies it whatever the arguments
    /// ([`CallPolicy::denies_whatever_the_arguments`](crate::policy::CallPolicy::denies_whatever_the_arguments)).
    /// Rules and argument-dependent policies are not consulted: a listing may show what a
    /// call will be denied, never hide what it would allow.
    ///
    /// ```
    /// use milpa::{Listed, ToolContext, ToolDefinition, ToolRegistry};
    /// use serde_json::json;
    ///
    /// let mut registry = ToolRegistry::new();
    /// registry.register(ToolDefinition::builder("refund").scopes(["billing"]).sync(|_, _| json!(1))).unwrap();
    /// let refund = registry.get("refund").unwrap();
    /// let clerk = ToolContext::mcp("r1", Some("clerk".into()), ["billing"]);
    /// let guest = ToolContext::mcp("r2", Some("guest".into()), Vec::<String>::new());
    /// assert!(registry.could_use(Listed::Tool(&refund), &clerk));
    /// assert!(!registry.could_use(Listed::Tool(&refund), &guest));
    /// ```
    pub fn could_use(&self, entry: Listed<'_>, ctx: &ToolContext) -> bool {
        let gate = self.policy_gate();
        match entry {
            Listed::Tool(tool) => gate.could_use(
                ctx,
                Subject::tool(tool),
                Some(ListingInput::tool(ctx, tool)),
            ),
            Listed::Resource(resource) => gate.could_use(
                ctx,
                Subject::read(Access::ReadResource, resource.uri(), resource.scopes()),
                Some(ListingInput::entry(
                    ctx,
                    Access::ReadResource,
                    resource.uri(),
                )),
            ),
            Listed::Template(template) => gate.could_use(
                ctx,
                Subject::read(
                    Access::ReadResource,
                    template.template().as_str(),
                    template.scopes(),
                ),
                None,
            ),
            Listed::Prompt(prompt) => gate.could_use(
                ctx,
                Subject::read(Access::GetPrompt, prompt.name(), prompt.scopes()),
                Some(ListingInput::entry(ctx, Access::GetPrompt, prompt.name())),
            ),
        }
    }
}
