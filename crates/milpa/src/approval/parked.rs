//! [`ParkedCall`]: what a human-approval gate keeps of the call it parked.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::confirm::ConfirmationBinding;

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
        };
        let payload = parked.to_payload();
        assert_eq!(payload["parked_call"]["binding"]["tool"], json!("deploy"));
        assert_eq!(payload["parked_call"]["server"], json!("ops"));
        assert_eq!(ParkedCall::from_payload(&payload), Some(parked));
        assert_eq!(ParkedCall::from_payload(&json!({})), None);
        assert_eq!(ParkedCall::from_payload(&json!({"parked_call": 3})), None);
    }
}
