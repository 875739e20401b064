//! The entity model policies are written against (DESIGN §7), as a Cedar schema and as the
//! per-request entities and request.
//!
//! | action | resource | attributes of the resource |
//! |---|---|---|
//! | `Action::"call"` | `Tool::"<name>"` | `mutating`, `upstream` |
//! | `Action::"read_resource"` | `Resource::"<uri>"` | `mutating` (`false`), `upstream` (`""`), `uri` |
//! | `Action::"get_prompt"` | `Prompt::"<name>"` | `mutating` (`false`), `upstream` (`""`), `name` |
//!
//! The principal is `Principal::"<name>"` (attribute `scopes`) and the context
//! `{channel, mode, authenticated, args}` for all three. An anonymous caller is
//! `Principal::"anonymous"` with `context.authenticated == false`: the flag, not the name,
//! tells it from a principal that happens to be called "anonymous".
//!
//! Why `Resource` and `Prompt` carry `mutating` and `upstream`: policies written before
//! resources and prompts existed leave the action open
//! (`forbid(principal, action, resource) when { resource.mutating }`), and Cedar's validator
//! types such a policy for every action the schema has. Were the attributes missing on the
//! new types, those policies would stop validating; were they optional, each would need a
//! `has` guard. With the same attributes, typed the same, every such policy still validates
//! and still means what it meant: a read changes nothing (`mutating` is `false`) and comes
//! from no upstream tool server (`upstream` is `""`), as the gate itself treats it.
//!
//! Why `uri` and `name`: Cedar's `like` matches strings, and an entity uid is not one
//! (`resource.id` does not exist on a uid), so a pattern over URIs needs the URI as an
//! attribute: `resource.uri like "docs://private/*"`. `Prompt` has `name` for the same use.
//! Each exists on its own type only; a policy open on the action reaches it through
//! `resource is Resource && resource.uri like …` (or by pinning the action), which the
//! validator accepts, and which leaves tool calls alone.
//!
//! The same context for all three actions keeps every existing condition on `context`
//! well-typed for reads and prompts. A read's `args` is the empty record and a prompt's
//! holds its arguments (all strings), so an unguarded `context.args.amount` in a policy open
//! on the action fails to evaluate for a read, which a `forbid` counts as denying (see the
//! crate docs): guard it with `has`, or pin the action.

use std::collections::{HashMap, HashSet};
use std::str::FromStr;

use cedar_policy::{
    Context, Entities, Entity, EntityId, EntityTypeName, EntityUid, Request, RestrictedExpression,
    Schema,
};
use milpa::policy::{Access, AccessInput, PolicyInput};
use milpa::{ToolContext, ToolDefinition};
use serde_json::json;

use crate::args::args_record;

/// The name an anonymous caller's principal entity carries.
pub(crate) const ANONYMOUS: &str = "anonymous";

/// The schema, with `context.args` an open record (any attributes): the arguments differ
/// per tool and the schema cannot know them.
pub(crate) fn schema(open_args: bool) -> Schema {
    let args = if open_args {
        json!({"type": "Record", "attributes": {}, "additionalAttributes": true})
    } else {
        json!({"type": "Record", "attributes": {}})
    };
    let context = json!({"type": "Record", "attributes": {
        "channel": {"type": "String"},
        "mode": {"type": "String"},
        "authenticated": {"type": "Boolean"},
        "args": args
    }});
    let action = |resource: &str| {
        json!({"appliesTo": {
            "principalTypes": ["Principal"],
            "resourceTypes": [resource],
            "context": context.clone()
        }})
    };
    // `mutating` and `upstream` on every resource type: see the module docs.
    let subject = |own: Option<&str>| {
        let mut attributes = json!({
            "mutating": {"type": "Boolean"},
            "upstream": {"type": "String"}
        });
        if let Some(own) = own {
            attributes[own] = json!({"type": "String"});
        }
        json!({"shape": {"type": "Record", "attributes": attributes}})
    };
    Schema::from_json_value(json!({
        "": {
            "entityTypes": {
                "Principal": {"shape": {"type": "Record", "attributes": {
                    "scopes": {"type": "Set", "element": {"type": "String"}}
                }}},
                "Tool": subject(None),
                "Resource": subject(Some("uri")),
                "Prompt": subject(Some("name"))
            },
            "actions": {
                "call": action("Tool"),
                "read_resource": action("Resource"),
                "get_prompt": action("Prompt")
            }
        }
    }))
    .expect("the built-in schema is valid")
}

/// What stays the same from call to call: the entity type names and the action.
pub(crate) struct RequestTemplate {
    principal_type: EntityTypeName,
    tool_type: EntityTypeName,
    action: EntityUid,
    resource_type: EntityTypeName,
    read_action: EntityUid,
    prompt_type: EntityTypeName,
    prompt_action: EntityUid,
}

/// A request failed to build (an argument Cedar cannot hold, e.g. an out-of-range decimal).
#[derive(Debug)]
pub(crate) struct RequestBuildError(pub(crate) String);

impl RequestTemplate {
    pub(crate) fn new() -> Self {
        RequestTemplate {
            principal_type: EntityTypeName::from_str("Principal").expect("valid type name"),
            tool_type: EntityTypeName::from_str("Tool").expect("valid type name"),
            action: EntityUid::from_str(r#"Action::"call""#).expect("valid action uid"),
            resource_type: EntityTypeName::from_str("Resource").expect("valid type name"),
            read_action: EntityUid::from_str(r#"Action::"read_resource""#)
                .expect("valid action uid"),
            prompt_type: EntityTypeName::from_str("Prompt").expect("valid type name"),
            prompt_action: EntityUid::from_str(r#"Action::"get_prompt""#)
                .expect("valid action uid"),
        }
    }

    /// `Principal::"<name>"` (or the anonymous one).
    fn principal_uid(&self, ctx: &ToolContext) -> EntityUid {
        EntityUid::from_type_name_and_id(
            self.principal_type.clone(),
            EntityId::new(ctx.principal().unwrap_or(ANONYMOUS)),
        )
    }

    /// The entities a request's policies read: the caller (with its scopes) and the tool,
    /// resource or prompt.
    pub(crate) fn entities(
        &self,
        ctx: &ToolContext,
        tool: Entity,
    ) -> Result<Entities, RequestBuildError> {
        let scopes = RestrictedExpression::new_set(
            ctx.scopes()
                .iter()
                .map(|s| RestrictedExpression::new_string(s.clone())),
        );
        let principal = Entity::new(
            self.principal_uid(ctx),
            HashMap::from([("scopes".to_owned(), scopes)]),
            HashSet::new(),
        )
        .map_err(|e| RequestBuildError(e.to_string()))?;
        Entities::from_entities([principal, tool], None)
            .map_err(|e| RequestBuildError(e.to_string()))
    }

    /// The request for one call: who, `Action::"call"`, which tool, and the context.
    pub(crate) fn request(&self, input: &PolicyInput<'_>) -> Result<Request, RequestBuildError> {
        // No schema check per call: the request is built to the schema by construction.
        Request::new(
            self.principal_uid(input.ctx),
            self.action.clone(),
            self.tool_uid(input.tool.name()),
            context(input.ctx, input.args)?,
            None,
        )
        .map_err(|e| RequestBuildError(e.to_string()))
    }

    /// The request and entities for a read or a prompt: who, `Action::"read_resource"` or
    /// `Action::"get_prompt"`, `Resource::"<uri>"` or `Prompt::"<name>"`, and the context.
    ///
    /// Built whole on each request, unlike a call's ([`ToolViews`](crate::tool_view)): reads
    /// have no measured need of a cache yet.
    pub(crate) fn access(
        &self,
        input: &AccessInput<'_>,
    ) -> Result<(Request, Entities), RequestBuildError> {
        let (ty, action, own) = match input.access {
            Access::ReadResource => (&self.resource_type, &self.read_action, "uri"),
            Access::GetPrompt => (&self.prompt_type, &self.prompt_action, "name"),
            other => {
                return Err(RequestBuildError(format!(
                    "'{}' is not a read or a prompt",
                    other.as_str()
                )));
            }
        };
        let uid = EntityUid::from_type_name_and_id(ty.clone(), EntityId::new(input.name));
        let subject = Entity::new(
            uid.clone(),
            HashMap::from([
                ("mutating".to_owned(), RestrictedExpression::new_bool(false)),
                (
                    "upstream".to_owned(),
                    RestrictedExpression::new_string(String::new()),
                ),
                (
                    own.to_owned(),
                    RestrictedExpression::new_string(input.name.to_owned()),
                ),
            ]),
            HashSet::new(),
        )
        .map_err(|e| RequestBuildError(e.to_string()))?;
        let request = Request::new(
            self.principal_uid(input.ctx),
            action.clone(),
            uid,
            context(input.ctx, input.args)?,
            None,
        )
        .map_err(|e| RequestBuildError(e.to_string()))?;
        Ok((request, self.entities(input.ctx, subject)?))
    }

    /// `Tool::"<name>"` with its attributes.
    pub(crate) fn tool_entity(&self, tool: &ToolDefinition) -> Result<Entity, RequestBuildError> {
        Entity::new(
            self.tool_uid(tool.name()),
            HashMap::from([
                (
                    "mutating".to_owned(),
                    RestrictedExpression::new_bool(tool.is_mutating()),
                ),
                (
                    "upstream".to_owned(),
                    RestrictedExpression::new_string(tool.upstream().unwrap_or("").to_owned()),
                ),
            ]),
            HashSet::new(),
        )
        .map_err(|e| RequestBuildError(e.to_string()))
    }

    /// `Tool::"<name>"`.
    pub(crate) fn tool_uid(&self, name: &str) -> EntityUid {
        EntityUid::from_type_name_and_id(self.tool_type.clone(), EntityId::new(name))
    }

    /// Whether `ty` is the tool entity type.
    pub(crate) fn is_tool_type(&self, ty: &EntityTypeName) -> bool {
        *ty == self.tool_type
    }
}

/// `{channel, mode, authenticated, args}`, the same for every action.
fn context(ctx: &ToolContext, args: &serde_json::Value) -> Result<Context, RequestBuildError> {
    Context::from_pairs([
        (
            "channel".to_owned(),
            RestrictedExpression::new_string(ctx.channel().to_owned()),
        ),
        (
            "mode".to_owned(),
            RestrictedExpression::new_string(ctx.mode().as_str().to_owned()),
        ),
        (
            "authenticated".to_owned(),
            RestrictedExpression::new_bool(ctx.principal().is_some()),
        ),
        ("args".to_owned(), args_record(args)),
    ])
    .map_err(|e| RequestBuildError(e.to_string()))
}
