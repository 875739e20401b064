//! Stage 2, `validate`: the arguments must be an object that satisfies the input schema.
//!
//! `confirm_token` is taken off the arguments first, so a schema with
//! `additionalProperties: false` does not refuse a confirmation replay (the original did). A
//! replay that sends only the token is not validated again: it runs the arguments stored
//! when the token was issued, which were validated then.

use serde_json::{Map, Value};

use crate::audit::AuditOutcome;
use crate::pipeline::{Call, Flow, Terminal};
use crate::result::ToolResult;
use crate::schema::json_type_name;

/// The reserved argument that carries a confirmation token.
pub(crate) const CONFIRM_TOKEN: &str = "confirm_token";

pub(crate) fn run(call: &mut Call<'_>) -> Flow {
    match &mut call.args {
        Value::Null => call.args = Value::Object(Map::new()),
        Value::Object(map) => {
            if !map.is_empty() {
                call.confirm_token = map.shift_remove(CONFIRM_TOKEN);
            }
        }
        other => {
            let message = format!(
                "Arguments must be a JSON object, got {}",
                json_type_name(other)
            );
            return invalid(message);
        }
    }
    let tool = call.tool();
    if tool.validator.is_empty() {
        return Flow::Continue;
    }
    let only_token =
        call.confirm_token.is_some() && call.args.as_object().is_some_and(Map::is_empty);
    if only_token && call.requires_confirmation() {
        return Flow::Continue;
    }
    match tool.validator.validate(&call.args) {
        Ok(()) => Flow::Continue,
        Err(errors) => invalid(errors.join("; ")),
    }
}

fn invalid(message: String) -> Flow {
    Flow::Finish(Terminal::new(
        ToolResult::validation_error(message),
        AuditOutcome::InvalidArguments,
    ))
}
