//! Stage 2, `validate`: the arguments must be an object that satisfies the input schema.
//!
//! A refusal's `error` is the original's words (`id: Expected integer, got string`, joined
//! with `; `); its `message` says the same in the schema's words, one failure a line
//! (`'id' must be an integer ≥ 1 (got a string)`), for the person or model that reads it.
//!
//! A replay that sends only its token (split off the arguments at the edge, see
//! [`split_confirm_token`](crate::split_confirm_token)) is not validated again: it runs the
//! arguments stored when the token was issued, which were validated then.

use serde_json::{Map, Value};

use crate::audit::AuditOutcome;
use crate::inspect::StageFacts;
use crate::inspect::{InvocationStep, StepPresence, StepRole};
use crate::pipeline::{Call, Flow};
use crate::pipeline::{StepKind, step};
use crate::result::ToolResult;
use crate::schema::{json_type_name, normalise_args};

// Inlined into the pipeline: the common cases (no arguments, or no schema) end here
// without a call. The schema check is out of line.
#[inline]
pub(crate) fn run(call: &mut Call<'_>) -> Flow {
    match &call.args {
        // No arguments read as `{}`. The `null` replaced owns nothing, so it is forgotten
        // rather than dropped: the assignment called `Value`'s drop glue, 24 instructions
        // of every call without arguments (callgrind, `trivial_cli`).
        Value::Null => {
            std::mem::forget(std::mem::replace(&mut call.args, Value::Object(Map::new())))
        }
        Value::Object(_) => {}
        other => {
            let message = format!(
                "Arguments must be a JSON object, got {}",
                json_type_name(other)
            );
            return invalid(call, message);
        }
    }
    // Path arguments take their normal form before the schema and the policies see them.
    if !call.tool().definition.options().paths.is_empty() {
        let tool = call.tool();
        if let Err(message) = normalise_args(&tool.definition.options().paths, &mut call.args) {
            return invalid(call, message);
        }
    }
    if call.tool().validator.is_empty() {
        return Flow::Continue;
    }
    check_schema(call)
}

fn check_schema(call: &mut Call<'_>) -> Flow {
    let only_token = call.is_replay() && call.args.as_object().is_some_and(Map::is_empty);
    if only_token && call.requires_confirmation() {
        return Flow::Continue;
    }
    match call.tool().validator.validate(&call.args) {
        Ok(()) => Flow::Continue,
        Err(errors) => {
            // The slow path, for the refused only: the same failures in the schema's words
            // (`'id' must be an integer ≥ 1 (got a string)`), one a line, as the message a
            // person reads; the error keeps the original's words (DESIGN §4).
            let words = call
                .tool()
                .validator
                .problems(&call.args)
                .into_iter()
                .map(|problem| problem.words)
                .collect::<Vec<_>>()
                .join("\n");
            let mut result = ToolResult::validation_error(errors.join("; "));
            if !words.is_empty() {
                result.message = Some(words);
            }
            call.finish(result, AuditOutcome::InvalidArguments)
        }
    }
}

fn invalid(call: &mut Call<'_>, message: String) -> Flow {
    call.finish(
        ToolResult::validation_error(message),
        AuditOutcome::InvalidArguments,
    )
}

pub(crate) fn describe(facts: &StageFacts<'_>) -> InvocationStep {
    let declared = facts
        .tool
        .input_schema()
        .as_object()
        .is_some_and(|s| !s.is_empty());
    if declared {
        step(
            StepKind::Validate,
            StepRole::Guard,
            StepPresence::Active,
            true,
            false,
            "the tool's input schema (JSON Schema 2020-12, compiled at registration); confirm_token is taken off first",
        )
    } else {
        step(
            StepKind::Validate,
            StepRole::Guard,
            StepPresence::Skipped,
            false,
            false,
            "the tool declares no input schema: any argument object passes",
        )
    }
}
