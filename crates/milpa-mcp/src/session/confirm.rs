//! Confirmation through `elicitation/create`: the client asks its user, and the answer
//! redeems the ticket (accept) or ends it in the registry's refusal path (decline,
//! cancel).

use milpa::{CallOutcome, ConfirmationRefusal, ConfirmationTicket, ToolContext, ToolRegistry};
use serde_json::{Map, Value, json};

use crate::client_link::ClientLink;
use crate::peer::Peer;

/// The form a client shows its user to confirm `ticket`: the `message` and the
/// `requestedSchema` (one boolean, `confirm`) of an `elicitation/create`, shared by the
/// request the server sends and the 2026-07-28 `input_required` round.
pub(super) fn confirmation_form(ticket: &ConfirmationTicket) -> Map<String, Value> {
    let summary = ticket.summary();
    let mut form = Map::new();
    form.insert(
        "message".into(),
        Value::String(format!("Confirm this action: {summary}")),
    );
    form.insert(
        "requestedSchema".into(),
        json!({
            "type": "object",
            "properties": {
                "confirm": {
                    "type": "boolean",
                    "title": "Confirm",
                    "description": format!("Run {summary}?"),
                    "default": false
                }
            },
            "required": ["confirm"]
        }),
    );
    form
}

/// What the user answered an elicitation of a confirmation form.
pub(super) enum FormAnswer {
    /// Run the parked call.
    Accept,
    /// Do not run it: declined (or accepted with `confirm: false`) or cancelled.
    Refuse(ConfirmationRefusal),
    /// An action this server does not know.
    Unknown,
}

/// Reads an elicitation result (`action`, `content.confirm`) of [`confirmation_form`].
pub(super) fn read_answer(answer: Option<&Value>) -> FormAnswer {
    let action = answer
        .and_then(|a| a.get("action"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let confirmed = answer
        .and_then(|a| a.get("content"))
        .and_then(|c| c.get("confirm"))
        .and_then(Value::as_bool);
    match (action, confirmed) {
        ("accept", Some(false)) | ("decline", _) => {
            FormAnswer::Refuse(ConfirmationRefusal::Declined)
        }
        ("accept", _) => FormAnswer::Accept,
        ("cancel", _) => FormAnswer::Refuse(ConfirmationRefusal::Cancelled),
        _ => FormAnswer::Unknown,
    }
}

/// Asks the client to confirm `ticket` through `elicitation/create` (on `peer`, in the
/// form its negotiated version of `client` reads); redeems it through `registry` on
/// accept. Falls back to the token round trip (the ticket goes back) when the client
/// cannot be asked.
pub(super) async fn confirm_by_elicitation(
    registry: &ToolRegistry,
    client: &ClientLink,
    ticket: ConfirmationTicket,
    ctx: &ToolContext,
    peer: &Peer,
) -> CallOutcome {
    let tool = ticket.tool().to_owned();
    let tool = tool.as_str();
    let mut params = Value::Object(confirmation_form(&ticket));
    if client.protocol_version() == Some("2025-11-25") {
        params["mode"] = json!("form");
    }
    let answer = match peer.request_client("elicitation/create", params).await {
        Ok(answer) => answer,
        Err(error) => {
            tracing::warn!(target: "milpa_mcp", tool, %error, "elicitation failed; falling back to confirm_token");
            return CallOutcome::NeedsConfirmation(ticket);
        }
    };
    let refusal = match read_answer(Some(&answer)) {
        FormAnswer::Accept => {
            return registry.redeem(tool, ticket.token(), ctx).await;
        }
        FormAnswer::Refuse(refusal) => refusal,
        FormAnswer::Unknown => {
            let action = answer.get("action").and_then(Value::as_str).unwrap_or("");
            tracing::warn!(target: "milpa_mcp", tool, action, "unknown elicitation action; falling back to confirm_token");
            return CallOutcome::NeedsConfirmation(ticket);
        }
    };
    tracing::info!(target: "milpa_mcp", tool, request_id = ctx.request_id(), outcome = refusal.as_str(), "confirmation refused by the client");
    CallOutcome::Done(registry.decline_ticket(&ticket, refusal, ctx).await)
}
