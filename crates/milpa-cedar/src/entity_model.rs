//! The entity model policies are written against (DESIGN §7), as a Cedar schema and as the
//! per-call request.
//!
//! `Principal::"<name>"` (attribute `scopes`), `Action::"call"`, `Tool::"<name>"` (attributes
//! `mutating`, `upstream`), context `{channel, mode, authenticated, args}`. An anonymous
//! caller is `Principal::"anonymous"` with `context.authenticated == false`: the flag, not
//! the name, tells it from a principal that happens to be called "anonymous".

use std::collections::{HashMap, HashSet};
use std::str::FromStr;

use cedar_policy::{
    Context, Entities, Entity, EntityId, EntityTypeName, EntityUid, Request, RestrictedExpression,
    Schema,
};
use milpa::policy::PolicyInput;
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
    Schema::from_json_value(json!({
        "": {
            "entityTypes": {
                "Principal": {"shape": {"type": "Record", "attributes": {
                    "scopes": {"type": "Set", "element": {"type": "String"}}
                }}},
                "Tool": {"shape": {"type": "Record", "attributes": {
                    "mutating": {"type": "Boolean"},
                    "upstream": {"type": "String"}
                }}}
            },
            "actions": {
                "call": {"appliesTo": {
                    "principalTypes": ["Principal"],
                    "resourceTypes": ["Tool"],
                    "context": {"type": "Record", "attributes": {
                        "channel": {"type": "String"},
                        "mode": {"type": "String"},
                        "authenticated": {"type": "Boolean"},
                        "args": args
                    }}
                }}
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
        }
    }

    /// `Principal::"<name>"` (or the anonymous one).
    fn principal_uid(&self, ctx: &ToolContext) -> EntityUid {
        EntityUid::from_type_name_and_id(
            self.principal_type.clone(),
            EntityId::new(ctx.principal().unwrap_or(ANONYMOUS)),
        )
    }

    /// The entities a call's policies read: the caller (with its scopes) and the tool.
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
        let ctx = input.ctx;
        let context = Context::from_pairs([
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
            ("args".to_owned(), args_record(input.args)),
        ])
        .map_err(|e| RequestBuildError(e.to_string()))?;
        // No schema check per call: the request is built to the schema by construction.
        Request::new(
            self.principal_uid(ctx),
            self.action.clone(),
            self.tool_uid(input.tool.name()),
            context,
            None,
        )
        .map_err(|e| RequestBuildError(e.to_string()))
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
