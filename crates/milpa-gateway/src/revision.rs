//! Which revision of the protocol the gateway speaks to an upstream, and what a request
//! carries in the 2026-07-28 revision.
//!
//! The 2026-07-28 revision has no `initialize` and no session: a client asks
//! `server/discover` what the server is, and every request carries the protocol version,
//! the client's capabilities and identity (and, in place of `logging/setLevel`, the log
//! level it wants) in `params._meta`. The older revisions open a session with
//! `initialize`. With [`ProtocolChoice::Discover`] (the default) the gateway asks
//! `server/discover` first and speaks 2026-07-28 to a server that lists it, the older
//! revisions to any other (one that does not know the method, answers with an error, or
//! says nothing within [`DISCOVER_TIMEOUT`]).
//!
//! What differs for a user between the two is what the revisions differ in: over
//! 2026-07-28 the upstream's requests to the client (sampling, elicitation, roots) come as
//! `input_required` results, relayed the same way (see [`crate::relay`]); its list changes
//! come through `subscriptions/listen`; and it logs only during a request, at the level the
//! clients asked for.

use std::time::Duration;

use milpa::LogLevel;
use milpa_mcp::protocol::{
    META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL, META_PROTOCOL_VERSION,
    MODERN_VERSION,
};
use serde_json::{Map, Value, json};

/// Which revisions of the protocol to speak to an upstream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProtocolChoice {
    /// Ask `server/discover` first: 2026-07-28 when the server lists it, else `initialize`
    /// and the newest older revision both speak (the default).
    #[default]
    Discover,
    /// 2026-07-28 only: a server that does not speak it fails to start.
    Stateless,
    /// `initialize` and sessions (2025-11-25 and older) only, never `server/discover`.
    Sessions,
}

impl ProtocolChoice {
    /// Reads a manifest's `protocol`: `auto`, `2026-07-28` or `2025-11-25`.
    pub fn parse(text: &str) -> Option<ProtocolChoice> {
        match text {
            "auto" => Some(ProtocolChoice::Discover),
            MODERN_VERSION => Some(ProtocolChoice::Stateless),
            crate::PROTOCOL_VERSION => Some(ProtocolChoice::Sessions),
            _ => None,
        }
    }
}

/// How long a server may take to answer `server/discover` before it is taken for one that
/// does not know the method (and is spoken to with `initialize`). A server that answers
/// at all answers at once; one that drops unknown requests silently would otherwise hold
/// the start until its timeout.
pub(crate) const DISCOVER_TIMEOUT: Duration = Duration::from_secs(5);

/// An `input_required` answer is retried at most this many times for one request: a
/// server that keeps asking is failed instead of looping for ever.
pub(crate) const MAX_INPUT_ROUNDS: usize = 16;

/// The `_meta` of a 2026-07-28 request: the revision, the capabilities the gateway
/// declares (as at `initialize`: what it can relay, decided per call as there, see
/// [`crate::relay`]), the gateway as the client, and the log level the clients asked for,
/// else `info`. (A 2026-07-28 server logs only when a request names a level; `info` is
/// what a server of the older revisions sends before any `logging/setLevel`, milpa's
/// included, so the clients hear the same either way.) `progress_token` goes in beside
/// them when the request has one.
pub(crate) fn request_meta(log_level: Option<LogLevel>, progress_token: Option<&str>) -> Value {
    let mut meta = Map::new();
    meta.insert(META_PROTOCOL_VERSION.into(), json!(MODERN_VERSION));
    meta.insert(
        META_CLIENT_CAPABILITIES.into(),
        crate::relay::declared_capabilities(),
    );
    meta.insert(META_CLIENT_INFO.into(), client_info());
    meta.insert(
        META_LOG_LEVEL.into(),
        json!(log_level.unwrap_or(LogLevel::Info)),
    );
    if let Some(token) = progress_token {
        meta.insert("progressToken".into(), json!(token));
    }
    Value::Object(meta)
}

/// Who the gateway is, as a client (`clientInfo`).
pub(crate) fn client_info() -> Value {
    json!({"name": "milpa-gateway", "version": env!("CARGO_PKG_VERSION")})
}

/// Whether a `server/discover` answer lists the 2026-07-28 revision.
pub(crate) fn offers_stateless(discovered: &Value) -> bool {
    discovered
        .get("supportedVersions")
        .and_then(Value::as_array)
        .is_some_and(|versions| versions.iter().any(|v| v == MODERN_VERSION))
}

/// What a 2026-07-28 answer is: a result, or a request for input from the client.
#[derive(Debug, PartialEq)]
pub(crate) enum Answered {
    /// The request is done: its result, `resultType` taken off (no older client knows it).
    Complete(Value),
    /// The server needs answers first: its `inputRequests` (by key, each a method and its
    /// params) and the `requestState` to send back with the answers.
    InputRequired {
        requests: Map<String, Value>,
        state: Option<Value>,
    },
}

impl Answered {
    /// Reads an answer by its `resultType` (absent: complete).
    pub(crate) fn read(mut result: Value) -> Answered {
        let Some(fields) = result.as_object_mut() else {
            return Answered::Complete(result);
        };
        match fields.remove("resultType") {
            Some(kind) if kind == "input_required" => {
                let requests = match fields.remove("inputRequests") {
                    Some(Value::Object(requests)) => requests,
                    _ => Map::new(),
                };
                Answered::InputRequired {
                    requests,
                    state: fields.remove("requestState"),
                }
            }
            _ => Answered::Complete(result),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_meta_names_the_revision_the_client_and_what_it_may_be_asked() {
        let meta = request_meta(Some(LogLevel::Warning), Some("milpa-3"));
        assert_eq!(meta[META_PROTOCOL_VERSION], "2026-07-28");
        assert_eq!(
            meta[META_CLIENT_CAPABILITIES],
            crate::relay::declared_capabilities()
        );
        assert_eq!(meta[META_CLIENT_INFO]["name"], "milpa-gateway");
        assert_eq!(meta[META_LOG_LEVEL], "warning");
        assert_eq!(meta["progressToken"], "milpa-3");
        let bare = request_meta(None, None);
        assert_eq!(bare[META_LOG_LEVEL], "info");
        assert!(bare.get("progressToken").is_none());
    }

    #[test]
    fn answers_are_read_by_their_result_type() {
        assert_eq!(
            Answered::read(json!({"resultType": "complete", "content": []})),
            Answered::Complete(json!({"content": []}))
        );
        assert_eq!(
            Answered::read(json!({"content": []})),
            Answered::Complete(json!({"content": []}))
        );
        let asked = Answered::read(json!({
            "resultType": "input_required",
            "inputRequests": {"k": {"method": "roots/list", "params": {}}},
            "requestState": "sealed",
        }));
        let Answered::InputRequired { requests, state } = asked else {
            panic!("not read as input_required");
        };
        assert_eq!(requests["k"]["method"], "roots/list");
        assert_eq!(state, Some(json!("sealed")));
    }

    #[test]
    fn a_discover_answer_offers_the_revision_only_when_it_lists_it() {
        assert!(offers_stateless(
            &json!({"supportedVersions": ["2026-07-28", "2025-11-25"]})
        ));
        assert!(!offers_stateless(
            &json!({"supportedVersions": ["2025-11-25"]})
        ));
        assert!(!offers_stateless(&json!({})));
    }

    #[test]
    fn the_manifest_names_the_choice_by_revision() {
        assert_eq!(
            ProtocolChoice::parse("auto"),
            Some(ProtocolChoice::Discover)
        );
        assert_eq!(
            ProtocolChoice::parse("2026-07-28"),
            Some(ProtocolChoice::Stateless)
        );
        assert_eq!(
            ProtocolChoice::parse("2025-11-25"),
            Some(ProtocolChoice::Sessions)
        );
        assert_eq!(ProtocolChoice::parse("2025-06-18"), None);
    }
}
