//! 2026-07-28 confirmation and human approval through `input_required` results (MRTR).
//!
//! The revision has no server-to-client requests: a call that needs the caller's
//! confirmation, or a person's approval, answers `resultType: "input_required"` with an
//! elicitation for the client to put to its user, and a `requestState` the client echoes
//! when it retries the call (a new request, same tool and arguments) with its
//! `inputResponses`.
//!
//! - A caller confirmation (`requires_confirmation`) is a form elicitation (`confirm`: a
//!   boolean) under the key [`CONFIRM_KEY`], sent when the request declared form-mode
//!   elicitation and [`ServerOptions::elicitation_confirmation`] is on; otherwise the
//!   confirmation result with its `confirm_token` goes back as before.
//! - A human approval (`APPROVAL_PENDING` with an approvals page) is a URL elicitation
//!   (the `approve_url`, `elicitationId` = the approval id) under [`APPROVAL_KEY`], sent
//!   when the request declared URL-mode elicitation. The client's accept only means "I
//!   opened the page"; the decision is the person's, and while nobody decided the retry
//!   gets the same `input_required` again.
//!
//! `requestState` is attacker-controlled, so it is sealed: `base64url(state) "."
//! base64url(HMAC-SHA-256(secret, state))`, where the state binds the principal, the tool,
//! a digest of the canonical arguments, an expiry, and the core's confirmation token (or
//! approval id). The secret is [`ServerOptions::state_secret`], else 32 random bytes drawn
//! at start (then a state only opens on the server that sealed it). A state that does not
//! open, or opens for another principal, tool or arguments, or expired, is refused with
//! `-32602` and changes nothing. Single use is the core's: the retry replays the call with
//! the token, which the confirmation store consumes (a second retry gets the core's
//! invalid-token refusal), and an approval is settled once.
//!
//! [`ServerOptions::elicitation_confirmation`]: crate::ServerOptions::elicitation_confirmation
//! [`ServerOptions::state_secret`]: crate::ServerOptions::state_secret

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use milpa::{ApprovalTicket, CallOutcome, ToolContext, split_confirm_token};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::Sha256;

use super::approval::{self, HumanApproval};
use super::argument_digest::ArgumentDigest;
use super::call_params::CallParams;
use super::confirm::{FormAnswer, confirmation_form, read_answer};
use crate::client_link::RequestMeta;
use crate::jsonrpc::{ErrorObject, INVALID_PARAMS};
use crate::peer::Peer;
use crate::protocol::StateSecret;

/// The `inputRequests` key of a caller confirmation.
pub(crate) const CONFIRM_KEY: &str = "confirm";
/// The `inputRequests` key of a human approval.
pub(crate) const APPROVAL_KEY: &str = "approval";

/// How long a sealed `requestState` opens (the core's confirmation and approval expiries
/// still apply on top).
const STATE_TTL: Duration = Duration::from_secs(15 * 60);

/// What a call ends with on the 2026-07-28 path.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// A complete result (or a ticket the client gets as its confirmation result).
    Done(CallOutcome),
    /// `resultType: "input_required"` (the whole result object).
    InputRequired(Value),
    /// A protocol error (a `requestState` that does not open).
    Refused(ErrorObject),
}

/// What a prompt's `requestState` is bound to instead of a tool name: a `:` no tool name
/// holds, so a prompt's state never opens for a tool of the same name (nor the reverse).
fn prompt_subject(prompt: &str) -> String {
    format!("prompt:{prompt}")
}

/// Seals and opens `requestState`s.
pub(crate) struct StateSeal {
    key: StateSecret,
}

impl std::fmt::Debug for StateSeal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateSeal(..)")
    }
}

/// The sealed content.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct SealedState {
    /// Principal (`None`: anonymous).
    p: Option<String>,
    /// Tool name.
    t: String,
    /// SHA-256 of the canonical arguments, hex.
    d: String,
    /// Expiry, seconds since the epoch.
    e: u64,
    /// The core's confirmation token, or the approval id (empty for a tool's own inputs).
    k: String,
    /// A human approval (else a caller confirmation).
    h: bool,
    /// The answers a tool's own requests got in earlier rounds, by input key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    a: Option<serde_json::Map<String, Value>>,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl StateSeal {
    pub fn new(key: StateSecret) -> StateSeal {
        StateSeal { key }
    }

    fn mac(&self) -> Hmac<Sha256> {
        // HMAC takes a key of any length.
        <Hmac<Sha256> as KeyInit>::new_from_slice(self.key.bytes())
            .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"))
    }

    fn seal(&self, state: &SealedState) -> String {
        let payload = serde_json::to_vec(state).unwrap_or_default();
        let mut mac = self.mac();
        mac.update(&payload);
        let tag = mac.finalize().into_bytes();
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(&payload),
            URL_SAFE_NO_PAD.encode(tag)
        )
    }

    fn open(&self, text: &str) -> Result<SealedState, &'static str> {
        let (payload, tag) = text.split_once('.').ok_or("is malformed")?;
        let payload = URL_SAFE_NO_PAD
            .decode(payload)
            .map_err(|_| "is malformed")?;
        let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| "is malformed")?;
        let mut mac = self.mac();
        mac.update(&payload);
        // Constant-time comparison.
        mac.verify_slice(&tag)
            .map_err(|_| "failed its integrity check")?;
        serde_json::from_slice(&payload).map_err(|_| "is malformed")
    }
}

fn invalid_state(why: &str) -> ErrorObject {
    ErrorObject::new(
        INVALID_PARAMS,
        format!("Invalid params: requestState {why}"),
    )
}

/// Whether the request declared elicitation in `mode` (`form`: an empty object or `form`).
fn declares_elicitation(meta: &RequestMeta, mode: &str) -> bool {
    match meta.capabilities.get("elicitation") {
        Some(Value::Object(map)) => match mode {
            "form" => map.is_empty() || map.contains_key("form"),
            _ => map.get(mode).is_some_and(|v| !v.is_null()),
        },
        _ => false,
    }
}

/// What a 2026-07-28 call's input rounds work with: the seal of its `requestState`s, the
/// approval path (the registry and the approvals page) and whether confirmations go out as
/// elicitations. Borrowed from the server's shared state for one call.
#[derive(Debug, Clone, Copy)]
pub(super) struct InputRounds<'a> {
    /// Seals and opens the call's `requestState`s.
    pub seal: &'a StateSeal,
    /// The registry the call runs through, and where a person approves.
    pub approvals: HumanApproval<'a>,
    /// [`ServerOptions::elicitation_confirmation`](crate::ServerOptions::elicitation_confirmation).
    pub elicitation_confirmation: bool,
}

impl InputRounds<'_> {
    /// A 2026-07-28 call: a retry carrying a confirmation's or an approval's state settles
    /// it; otherwise the tool runs (again, with the answers of earlier rounds), and what it
    /// asked the client without an answer yet makes an `input_required` round. The
    /// arguments are digested once, from a borrow, and then move into the tool.
    pub async fn run(
        &self,
        call: CallParams,
        meta: &RequestMeta,
        ctx: &ToolContext,
        peer: &Peer,
    ) -> (String, Outcome) {
        let CallParams {
            name,
            mut arguments,
            input_responses,
            request_state,
            ..
        } = call;
        let digest = ArgumentDigest::of(&arguments);
        if let Some(state) = request_state.as_deref() {
            match self.tool_answers(&name, &digest, state, ctx) {
                Err(error) => return (name, Outcome::Refused(error)),
                Ok(None) => {
                    let outcome = self
                        .next_round(&name, &digest, state, input_responses.as_ref(), ctx)
                        .await;
                    return (name, outcome);
                }
                Ok(Some(answers)) => peer.add_answers(answers),
            }
        }
        if let Some(Value::Object(responses)) = input_responses {
            peer.add_answers(responses);
        }
        let sent = split_confirm_token(&mut arguments);
        let outcome = self
            .approvals
            .registry
            .invoke_sent(&name, arguments, sent, ctx)
            .await;
        let (asked, answers) = peer.take_inputs();
        let outcome = if !asked.is_empty() && peer.missing_capability().is_none() {
            Outcome::InputRequired(Value::Object(
                self.input_round(&name, &digest, ctx, asked, answers),
            ))
        } else {
            self.first_round(&name, &digest, outcome, ctx, meta)
        };
        (name, outcome)
    }

    /// The 2026-07-28 ending of a call's first round: an `input_required` result when the
    /// call waits for a confirmation or an approval the client can ask for, else the
    /// outcome.
    fn first_round(
        &self,
        tool: &str,
        digest: &ArgumentDigest,
        outcome: CallOutcome,
        ctx: &ToolContext,
        meta: &RequestMeta,
    ) -> Outcome {
        match outcome {
            CallOutcome::AwaitingApproval(pending) => {
                let pending = self.approvals.link(pending);
                if pending.url().is_none() || !declares_elicitation(meta, "url") {
                    return Outcome::Done(CallOutcome::AwaitingApproval(pending));
                }
                Outcome::InputRequired(self.approval_request(digest, ctx, &pending))
            }
            CallOutcome::NeedsConfirmation(ticket)
                if self.elicitation_confirmation && declares_elicitation(meta, "form") =>
            {
                let state = self.seal_state(tool, digest, ctx, ticket.token().to_owned(), false);
                let mut params = serde_json::Map::new();
                params.insert("mode".into(), json!("form"));
                params.extend(confirmation_form(&ticket));
                Outcome::InputRequired(json!({
                    "resultType": "input_required",
                    "inputRequests": {CONFIRM_KEY: {
                        "method": "elicitation/create",
                        "params": params,
                    }},
                    "requestState": state,
                }))
            }
            other => Outcome::Done(other),
        }
    }

    /// Opens a retry's `requestState` and checks what it is bound to.
    fn open_state(
        &self,
        tool: &str,
        digest: &ArgumentDigest,
        request_state: &str,
        ctx: &ToolContext,
    ) -> Result<SealedState, ErrorObject> {
        let state = self.seal.open(request_state).map_err(invalid_state)?;
        if state.e < now_secs() {
            return Err(invalid_state("expired; call the tool again"));
        }
        if state.t != tool || state.p.as_deref() != ctx.principal() || state.d != digest.as_str() {
            return Err(invalid_state(
                "was issued for another caller, tool or arguments",
            ));
        }
        Ok(state)
    }

    /// A retry's `requestState` when it carries a tool's own inputs: the answers gathered
    /// in earlier rounds (`Ok(None)`: the state is a confirmation's or an approval's).
    fn tool_answers(
        &self,
        tool: &str,
        digest: &ArgumentDigest,
        request_state: &str,
        ctx: &ToolContext,
    ) -> Result<Option<serde_json::Map<String, Value>>, ErrorObject> {
        Ok(self.open_state(tool, digest, request_state, ctx)?.a)
    }

    /// A round that asked the client: the `input_required` result, its state carrying
    /// every answer so far. `subject` is the tool's name or a prompt's [`prompt_subject`].
    fn input_round(
        &self,
        subject: &str,
        digest: &ArgumentDigest,
        ctx: &ToolContext,
        asked: serde_json::Map<String, Value>,
        answers: serde_json::Map<String, Value>,
    ) -> serde_json::Map<String, Value> {
        let state = self.seal.seal(&SealedState {
            p: ctx.principal().map(str::to_owned),
            t: subject.to_owned(),
            d: digest.as_str().to_owned(),
            e: now_secs() + STATE_TTL.as_secs(),
            k: String::new(),
            h: false,
            a: Some(answers),
        });
        serde_json::Map::from_iter([
            ("resultType".to_owned(), json!("input_required")),
            ("inputRequests".to_owned(), Value::Object(asked)),
            ("requestState".to_owned(), Value::String(state)),
        ])
    }

    /// A `prompts/get` retry: the answers of earlier rounds its `requestState` carries,
    /// once its seal and its bindings (caller, prompt, arguments) check out.
    pub fn prompt_answers(
        &self,
        prompt: &str,
        arguments: &ArgumentDigest,
        request_state: &str,
        ctx: &ToolContext,
    ) -> Result<serde_json::Map<String, Value>, ErrorObject> {
        let state = self.open_state(&prompt_subject(prompt), arguments, request_state, ctx)?;
        Ok(state.a.unwrap_or_default())
    }

    /// A `prompts/get` round whose prompt asked the client: the `input_required` result.
    pub fn prompt_input_round(
        &self,
        prompt: &str,
        arguments: &ArgumentDigest,
        ctx: &ToolContext,
        asked: serde_json::Map<String, Value>,
        answers: serde_json::Map<String, Value>,
    ) -> serde_json::Map<String, Value> {
        self.input_round(&prompt_subject(prompt), arguments, ctx, asked, answers)
    }

    /// A retry carrying a confirmation's or an approval's `requestState`: checks its seal
    /// and bindings, then settles the confirmation (or replays the approved call) through
    /// the core.
    async fn next_round(
        &self,
        tool: &str,
        digest: &ArgumentDigest,
        request_state: &str,
        input_responses: Option<&Value>,
        ctx: &ToolContext,
    ) -> Outcome {
        let state = match self.open_state(tool, digest, request_state, ctx) {
            Ok(state) => state,
            Err(error) => return Outcome::Refused(error),
        };
        let key = if state.h { APPROVAL_KEY } else { CONFIRM_KEY };
        let answer = input_responses.and_then(|r| r.get(key));
        let registry = self.approvals.registry;
        if state.h {
            let action = answer
                .and_then(|a| a.get("action"))
                .and_then(Value::as_str)
                .unwrap_or("");
            // The person decides on the page; the client's answer only says whether it
            // keeps waiting.
            return match registry.redeem(tool, &state.k, ctx).await {
                CallOutcome::AwaitingApproval(pending) => {
                    let pending = self.approvals.link(pending);
                    if pending.url().is_some() && action == "accept" {
                        Outcome::InputRequired(self.approval_request(digest, ctx, &pending))
                    } else {
                        Outcome::Done(CallOutcome::AwaitingApproval(pending))
                    }
                }
                other => Outcome::Done(other),
            };
        }
        let refusal = match read_answer(answer) {
            FormAnswer::Accept => return Outcome::Done(registry.redeem(tool, &state.k, ctx).await),
            FormAnswer::Refuse(refusal) => refusal,
            FormAnswer::Unknown => {
                return Outcome::Refused(ErrorObject::new(
                    INVALID_PARAMS,
                    format!(
                        "Invalid params: inputResponses.{CONFIRM_KEY} (an elicitation result) is required"
                    ),
                ));
            }
        };
        Outcome::Done(CallOutcome::Done(
            registry
                .decline_confirmation(tool, &state.k, refusal, ctx)
                .await,
        ))
    }

    fn seal_state(
        &self,
        tool: &str,
        digest: &ArgumentDigest,
        ctx: &ToolContext,
        token: String,
        human: bool,
    ) -> String {
        self.seal.seal(&SealedState {
            p: ctx.principal().map(str::to_owned),
            t: tool.to_owned(),
            d: digest.as_str().to_owned(),
            e: now_secs() + STATE_TTL.as_secs(),
            k: token,
            h: human,
            a: None,
        })
    }

    /// The `input_required` round that sends the client's user to the approvals page
    /// (`pending` has its URL).
    fn approval_request(
        &self,
        digest: &ArgumentDigest,
        ctx: &ToolContext,
        pending: &ApprovalTicket,
    ) -> Value {
        let id = pending.id();
        let state = self.seal_state(pending.tool(), digest, ctx, id.to_owned(), true);
        json!({
            "resultType": "input_required",
            "inputRequests": {APPROVAL_KEY: {
                "method": "elicitation/create",
                "params": {
                    "mode": "url",
                    "elicitationId": id,
                    "url": pending.url().unwrap_or_default(),
                    "message": approval::approval_message(pending, true),
                }
            }},
            "requestState": state,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seal() -> StateSeal {
        StateSeal::new(StateSecret::new(
            b"0123456789abcdef0123456789abcdef".to_vec(),
        ))
    }

    fn state() -> SealedState {
        SealedState {
            p: Some("alice".into()),
            t: "delete_note".into(),
            d: ArgumentDigest::of(&json!({"id": 1})).as_str().to_owned(),
            e: 42,
            k: "token".into(),
            h: false,
            a: None,
        }
    }

    #[test]
    fn a_sealed_state_opens_and_a_changed_one_does_not() {
        let seal = seal();
        let text = seal.seal(&state());
        assert_eq!(seal.open(&text).unwrap(), state());
        let (payload, tag) = text.split_once('.').unwrap();
        let mut forged = state();
        forged.p = Some("mallory".into());
        let forged_payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&forged).unwrap());
        assert_eq!(
            seal.open(&format!("{forged_payload}.{tag}")),
            Err("failed its integrity check")
        );
        // What the conformance suite does to a state.
        assert!(seal.open(&format!("{text}-TAMPERED")).is_err());
        assert!(seal.open(payload).is_err());
        // Another secret does not open it.
        let other = StateSeal::new(StateSecret::new(vec![7; 32]));
        assert!(other.open(&text).is_err());
    }
}
