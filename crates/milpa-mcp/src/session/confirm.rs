//! Confirmation through `elicitation/create`: the client asks its user, and the answer
//! runs the parked call (accept) or ends it in the registry's refusal path (decline,
//! cancel).

use milpa::{ConfirmationRefusal, ToolContext, ToolResult};
use serde_json::{Value, json};

use super::Session;
use crate::peer::Peer;

impl Session {
    /// Asks the client to confirm through `elicitation/create`; runs the stored call on
    /// accept. Falls back to the token round trip when the client cannot be asked.
    pub(super) async fn confirm_by_elicitation(
        &self,
        tool: &str,
        first: ToolResult,
        ctx: &ToolContext,
        peer: &Peer,
    ) -> ToolResult {
        let Some(token) = first.confirm_token().map(str::to_owned) else {
            return first;
        };
        let summary = first
            .data
            .get("action_summary")
            .and_then(Value::as_str)
            .unwrap_or(tool)
            .to_owned();
        let mut params = json!({
            "message": format!("Confirm this action: {summary}"),
            "requestedSchema": {
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
            }
        });
        if self.client.protocol_version() == Some("2025-11-25") {
            params["mode"] = json!("form");
        }
        let answer = match peer.request_client("elicitation/create", params).await {
            Ok(answer) => answer,
            Err(error) => {
                tracing::warn!(target: "milpa_mcp", tool, %error, "elicitation failed; falling back to confirm_token");
                return first;
            }
        };
        let action = answer.get("action").and_then(Value::as_str).unwrap_or("");
        let confirmed = answer
            .get("content")
            .and_then(|c| c.get("confirm"))
            .and_then(Value::as_bool);
        let refusal = match (action, confirmed) {
            ("accept", Some(false)) | ("decline", _) => ConfirmationRefusal::Declined,
            ("accept", _) => {
                return self
                    .shared
                    .registry
                    .call(tool, json!({"confirm_token": token}), ctx)
                    .await;
            }
            ("cancel", _) => ConfirmationRefusal::Cancelled,
            _ => {
                tracing::warn!(target: "milpa_mcp", tool, action, "unknown elicitation action; falling back to confirm_token");
                return first;
            }
        };
        tracing::info!(target: "milpa_mcp", tool, request_id = ctx.request_id(), outcome = refusal.as_str(), "confirmation refused by the client");
        self.shared
            .registry
            .decline_confirmation(tool, &token, refusal, ctx)
            .await
    }
}
