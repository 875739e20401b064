//! What the two gates of stage 7 share: the caller's gate (`confirm`, a one-time token) and
//! the human gate (`approval_gate`, a person's decision). Both summarise the action the same
//! way when they hold a call back, and both go on the same way when the call comes back with
//! its token or approval id: the parked arguments run, or the same refusal is given.
//!
//! Kept apart from both gates so that neither imports the other's internals (`confirm`
//! hands a human-confirmed call to `approval_gate`, never the other way round).

use serde_json::Value;

use crate::audit::{AuditOutcome, REDACTED_IN_TEXT, Redactor};
use crate::confirm::INVALID_TOKEN_MESSAGE;
use crate::pipeline::{Call, Flow, TokenArg};
use crate::result::ToolResult;

/// Goes on with the parked arguments (the contract: they run). Other arguments sent with
/// the token are ignored, and the result says so.
///
/// Under a call policy, the parked arguments run only if they are the ones `authorize`
/// judged (`judged`); anything else (a token that could not be read there but redeems
/// here) is refused, so no argument runs that the policy did not see.
pub(crate) fn run_parked(
    call: &mut Call<'_>,
    parked: serde_json::Value,
    judged: Option<Value>,
) -> Flow {
    if call.wiring.gate.call_policy().is_some() && judged.as_ref() != Some(&parked) {
        return refuse(call);
    }
    let sent_others = call.args.as_object().is_some_and(|a| !a.is_empty());
    call.confirm_token = TokenArg::Redeemed {
        other_args_ignored: sent_others && call.args != parked,
    };
    call.args = parked;
    Flow::Continue
}

/// The invalid-token refusal, for caller tokens and approval ids alike.
pub(crate) fn refuse(call: &mut Call<'_>) -> Flow {
    call.finish(
        ToolResult::validation_error(INVALID_TOKEN_MESSAGE),
        AuditOutcome::InvalidConfirmation,
    )
}

/// Added to the message of a replay whose other arguments were ignored.
pub(crate) const REPLAY_ARGS_IGNORED: &str =
    "Ran the confirmed arguments; the arguments sent with the token were ignored.";

/// `tool(key=value, …)` with the first three scalar arguments. The summary is shown to
/// people (the result's message, the MCP elicitation) and stored with the token, so a
/// secret argument reads `key=[REDACTED]` and any secret quoted elsewhere is scrubbed.
pub(crate) fn action_summary(name: &str, args: &Value, redactor: &Redactor) -> String {
    let parts: Vec<String> = args
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| {
            let text = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                _ => return None,
            };
            if redactor.is_sensitive(k) {
                Some(format!("{k}={REDACTED_IN_TEXT}"))
            } else {
                // Each value on its own: a `key=value` pattern must not run into the
                // summary's own punctuation.
                Some(format!("{k}={}", redactor.scrub(&text, args)))
            }
        })
        .take(3)
        .collect();
    format!("{name}({})", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn summary_takes_three_scalars() {
        let args = json!({"a": 1, "list": [1], "b": "x", "n": null, "c": true, "d": 4});
        assert_eq!(
            action_summary("t", &args, &Redactor::default()),
            "t(a=1, b=x, c=true)"
        );
    }

    #[test]
    fn summary_hides_secrets() {
        let args = json!({
            "password": "hunter22",
            "note": "hunter22 again",
            "url": "https://u:pw12@h",
        });
        let last = json!({"user": "ann", "new_password": "hunter22"});
        assert_eq!(
            action_summary("rotate", &last, &Redactor::default()),
            "rotate(user=ann, new_password=[REDACTED])"
        );
        let summary = action_summary("login", &args, &Redactor::default());
        assert_eq!(
            summary,
            "login(password=[REDACTED], note=[REDACTED] again, url=https://u:[REDACTED]@h)"
        );
    }
}
