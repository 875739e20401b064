//! [`ParkedCall`]: what a human-approval gate keeps of the call it parked.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::confirm::ConfirmationBinding;
use crate::context::ToolContext;
use crate::definition::ToolDefinition;

/// The payload key that marks a verification record as a parked tool call.
///
/// Only the registry's confirm stage writes it: `request_verification` never copies caller
/// data into a payload, so an agent cannot forge a parked call.
pub(crate) const PAYLOAD_KEY: &str = "parked_call";

/// A call held by a `confirm = "human"` gate until a person decides.
///
/// Stored as the `parked_call` field of a verification record's payload, so parked calls and
/// `request_verification` requests share one queue and one compare-and-set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ParkedCall {
    /// The tool, principal and channel of the first call: only the same may replay it.
    pub binding: ConfirmationBinding,
    /// The first call's (validated, clamped) arguments: what a granted replay runs.
    pub args: Value,
    /// Until when a person may decide and the caller may replay (ms since the Unix epoch,
    /// valid up to and including it).
    pub expires_at_ms: u64,
    /// When the granted call was run; set once, by the compare-and-set that claims it.
    #[serde(default)]
    pub executed_at_ms: Option<u64>,
    /// The server that parked it (its queue's
    /// [`with_server`](crate::approval::ApprovalQueue::with_server)), when it has a name:
    /// servers sharing a store each show their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// What a person deciding it is told about the tool and the caller. Calls parked
    /// before these were kept have none of them.
    #[serde(flatten)]
    pub about: ParkedAbout,
}

/// What the approvals page and `milpa approvals show` say about a parked call besides its
/// arguments: what the tool does, whether it changes state, where it goes, and which client
/// asked. Taken from the tool's definition and the caller's context when it is parked.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct ParkedAbout {
    /// The tool's description, cut past [`MAX_DESCRIPTION_CHARS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether the tool changes state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mutating: Option<bool>,
    /// The upstream MCP server a gateway tool forwards the call to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
    /// The client software the call came through ([`ToolContext::client`]), cut past
    /// [`MAX_CLIENT_CHARS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
}

/// How much of a tool's description a parked call keeps, in characters: enough to say what
/// it does, not a manual (an upstream's descriptions can be long).
pub(crate) const MAX_DESCRIPTION_CHARS: usize = 1000;

/// How much of a client's self-chosen name a parked call keeps, in characters.
pub(crate) const MAX_CLIENT_CHARS: usize = 128;

impl ParkedAbout {
    /// What a read or a prompt request by `ctx` is parked with: it changes nothing.
    pub fn of_access(ctx: &ToolContext) -> ParkedAbout {
        ParkedAbout {
            description: None,
            mutating: Some(false),
            upstream: None,
            client: ctx.client().and_then(|name| cut(name, MAX_CLIENT_CHARS)),
        }
    }

    /// What a call of `tool` by `ctx` is parked with.
    pub fn of(tool: &ToolDefinition, ctx: &ToolContext) -> ParkedAbout {
        ParkedAbout {
            description: cut(tool.description(), MAX_DESCRIPTION_CHARS),
            mutating: Some(tool.is_mutating()),
            upstream: tool.upstream().map(str::to_owned),
            client: ctx.client().and_then(|name| cut(name, MAX_CLIENT_CHARS)),
        }
    }
}

/// `text` trimmed, past `max` characters cut and ended with `…`; `None` when empty.
fn cut(text: &str, max: usize) -> Option<String> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    match text.char_indices().nth(max) {
        None => Some(text.to_owned()),
        Some((end, _)) => Some(format!("{}…", text[..end].trim_end())),
    }
}

impl ParkedCall {
    /// The parked call in `payload`, if the record is one.
    pub fn from_payload(payload: &Value) -> Option<ParkedCall> {
        serde_json::from_value(payload.get(PAYLOAD_KEY)?.clone()).ok()
    }

    /// The payload that stores this call.
    pub fn to_payload(&self) -> Value {
        let mut payload = serde_json::Map::new();
        payload.insert(
            PAYLOAD_KEY.to_owned(),
            serde_json::to_value(self).unwrap_or(Value::Null),
        );
        Value::Object(payload)
    }

    /// Whether it can no longer be decided or replayed at `now_ms`.
    pub fn is_expired(&self, now_ms: u64) -> bool {
        now_ms > self.expires_at_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_through_a_payload() {
        let parked = ParkedCall {
            binding: ConfirmationBinding {
                tool: "deploy".into(),
                principal: Some("agent".into()),
                channel: "mcp".into(),
            },
            args: json!({"env": "prod"}),
            expires_at_ms: 10,
            executed_at_ms: None,
            server: Some("ops".into()),
            about: ParkedAbout {
                description: Some("Deploys".into()),
                mutating: Some(true),
                upstream: Some("ci".into()),
                client: Some("claude-code".into()),
            },
        };
        let payload = parked.to_payload();
        assert_eq!(payload["parked_call"]["binding"]["tool"], json!("deploy"));
        assert_eq!(payload["parked_call"]["server"], json!("ops"));
        assert_eq!(payload["parked_call"]["upstream"], json!("ci"));
        assert_eq!(payload["parked_call"]["client"], json!("claude-code"));
        assert_eq!(ParkedCall::from_payload(&payload), Some(parked));
        assert_eq!(ParkedCall::from_payload(&json!({})), None);
        assert_eq!(ParkedCall::from_payload(&json!({"parked_call": 3})), None);
    }

    #[test]
    fn a_call_parked_before_the_facts_were_kept_reads_without_them() {
        let payload = json!({"parked_call": {
            "binding": {"tool": "deploy", "principal": "agent", "channel": "mcp"},
            "args": {}, "expires_at_ms": 10}});
        let parked = ParkedCall::from_payload(&payload).unwrap();
        assert_eq!(parked.about, ParkedAbout::default());
        assert_eq!(parked.server, None);
        // Written back, it gains no keys.
        let payload = parked.to_payload();
        let mut keys: Vec<&String> = payload["parked_call"].as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, ["args", "binding", "executed_at_ms", "expires_at_ms"]);
    }

    #[test]
    fn long_descriptions_and_client_names_are_cut_and_empty_ones_dropped() {
        let tool = ToolDefinition::builder("t")
            .description(format!("  {}  ", "é".repeat(MAX_DESCRIPTION_CHARS + 5)))
            .upstream("up")
            .sync(|_, _| json!(null));
        let ctx = ToolContext::builder("mcp")
            .client("x".repeat(MAX_CLIENT_CHARS + 1))
            .build();
        let about = ParkedAbout::of(&tool, &ctx);
        let description = about.description.unwrap();
        assert_eq!(description.chars().count(), MAX_DESCRIPTION_CHARS + 1);
        assert!(description.ends_with("é…"));
        assert_eq!(about.client.unwrap().chars().count(), MAX_CLIENT_CHARS + 1);
        assert_eq!(about.mutating, Some(false));
        assert_eq!(about.upstream.as_deref(), Some("up"));

        let quiet = ToolDefinition::builder("q")
            .description("   ")
            .mutating(true)
            .sync(|_, _| json!(null));
        let about = ParkedAbout::of(&quiet, &ToolContext::builder("mcp").client(" ").build());
        assert_eq!(about.description, None);
        assert_eq!(about.client, None);
        assert_eq!(about.mutating, Some(true));
        assert_eq!(about.upstream, None);
    }
}
