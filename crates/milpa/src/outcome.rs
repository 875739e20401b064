//! [`CallOutcome`]: how a call ended, as a type a transport can act on.
//!
//! A call either finished ([`CallOutcome::Done`]), waits for its caller to confirm
//! ([`CallOutcome::NeedsConfirmation`], a [`ConfirmationTicket`]), or waits for a person's
//! approval ([`CallOutcome::AwaitingApproval`], an [`ApprovalTicket`]). A transport that can
//! ask its user (an MCP elicitation, a terminal prompt) reads the ticket's fields and settles
//! it with [`ToolRegistry::redeem`](crate::ToolRegistry::redeem) or
//! [`ToolRegistry::decline_confirmation`](crate::ToolRegistry::decline_confirmation); one that
//! cannot renders the ticket ([`ConfirmationTicket::to_result`],
//! [`ApprovalTicket::to_result`]) into the PHP-compatible result (DESIGN §4) that `--json`
//! and legacy MCP clients read, and the caller replays with `confirm_token`.
//!
//! Legacy callers put that token among the arguments. [`split_confirm_token`] takes it off
//! at the edge ([`ToolRegistry::call`](crate::ToolRegistry::call), the MCP server, the CLI),
//! so the pipeline never sees a reserved argument.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use crate::result::{ErrorCode, RuntimeMeta, ToolResult};

/// The reserved argument that carries a confirmation token or an approval id on the wire.
pub const CONFIRM_TOKEN_ARG: &str = "confirm_token";

/// How a call ended.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CallOutcome {
    /// The call finished: the tool's result, or a refusal or failure with `meta.code`.
    Done(ToolResult),
    /// Nothing ran: the caller must confirm (replay the token) first.
    NeedsConfirmation(ConfirmationTicket),
    /// Nothing ran: the call is parked until a person other than the caller decides.
    AwaitingApproval(ApprovalTicket),
}

impl CallOutcome {
    /// The result a transport without a typed channel sends: the tool's result, or the
    /// ticket rendered as the PHP-compatible confirmation / `APPROVAL_PENDING` result.
    pub fn into_result(self) -> ToolResult {
        match self {
            CallOutcome::Done(result) => result,
            CallOutcome::NeedsConfirmation(ticket) => ticket.to_result(),
            CallOutcome::AwaitingApproval(ticket) => ticket.to_result(),
        }
    }

    /// The finished call's result, if it finished.
    pub fn done(&self) -> Option<&ToolResult> {
        match self {
            CallOutcome::Done(result) => Some(result),
            _ => None,
        }
    }
}

/// A confirmation the caller owes before its call runs: a one-time token bound to the
/// tool, principal and channel that asked, and the summary a person is shown.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfirmationTicket {
    token: String,
    tool: Arc<str>,
    summary: String,
    expires_at: SystemTime,
    runtime: Option<RuntimeMeta>,
}

impl ConfirmationTicket {
    pub(crate) fn new(
        token: String,
        tool: Arc<str>,
        summary: String,
        expires_at: SystemTime,
    ) -> Self {
        ConfirmationTicket {
            token,
            tool,
            summary,
            expires_at,
            runtime: None,
        }
    }

    /// The one-time token that redeems the parked call.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The tool the call was for.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// `tool(key=value, …)`, secrets redacted: what a person confirms.
    pub fn summary(&self) -> &str {
        &self.summary
    }

    /// When the token stops redeeming.
    pub fn expires_at(&self) -> SystemTime {
        self.expires_at
    }

    /// The expiry as the original wrote it, `YYYY-MM-DDTHH:MM:SS+00:00`.
    pub fn expires_at_text(&self) -> String {
        iso_seconds(self.expires_at)
    }

    /// The runtime meta of the call that issued the ticket (set once the call was audited).
    pub fn runtime(&self) -> Option<&RuntimeMeta> {
        self.runtime.as_ref()
    }

    pub(crate) fn set_runtime(&mut self, runtime: Option<RuntimeMeta>) {
        self.runtime = runtime;
    }

    /// The PHP-compatible confirmation result: success, `data {requires_confirmation,
    /// confirm_token, action_summary, expires_at}`, the summary as message, and
    /// `meta {type: "confirmation", requires_confirmation: true}` after the runtime meta.
    pub fn to_result(&self) -> ToolResult {
        let data = json!({
            "requires_confirmation": true,
            "confirm_token": self.token,
            "action_summary": self.summary,
            "expires_at": self.expires_at_text(),
        });
        let mut result = ToolResult::success(data).with_message(self.summary.clone());
        if let Some(runtime) = &self.runtime {
            result.meta.set_runtime(runtime.clone());
        }
        result.meta.insert("type", json!("confirmation"));
        result.meta.insert("requires_confirmation", json!(true));
        result
    }
}

/// A call parked until a person other than the caller decides it; the caller replays
/// the id (or a transport waits for the decision) to run it.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalTicket {
    id: String,
    tool: Arc<str>,
    summary: String,
    expires_at: Option<SystemTime>,
    url: Option<String>,
    runtime: Option<RuntimeMeta>,
}

impl ApprovalTicket {
    pub(crate) fn new(
        id: String,
        tool: Arc<str>,
        summary: String,
        expires_at: Option<SystemTime>,
    ) -> Self {
        ApprovalTicket {
            id,
            tool,
            summary,
            expires_at,
            url: None,
            runtime: None,
        }
    }

    /// The approval id (what the caller replays as its token).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The tool the parked call is for.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// `tool(key=value, …)`, secrets redacted: what the person decides on.
    pub fn summary(&self) -> &str {
        &self.summary
    }

    /// When the approval expires, if it does.
    pub fn expires_at(&self) -> Option<SystemTime> {
        self.expires_at
    }

    /// The expiry as the original wrote it (empty when the approval does not expire).
    pub fn expires_at_text(&self) -> String {
        self.expires_at.map(iso_seconds).unwrap_or_default()
    }

    /// The page where a person decides, when a transport serves one.
    pub fn url(&self) -> Option<&str> {
        self.url.as_deref()
    }

    /// The ticket with the page where a person decides (rendered as `data.approve_url`).
    pub fn with_url(mut self, url: impl Into<String>) -> Self {
        self.url = Some(url.into());
        self
    }

    /// The runtime meta of the call that parked (set once the call was audited).
    pub fn runtime(&self) -> Option<&RuntimeMeta> {
        self.runtime.as_ref()
    }

    pub(crate) fn set_runtime(&mut self, runtime: Option<RuntimeMeta>) {
        self.runtime = runtime;
    }

    /// The `APPROVAL_PENDING` result (DESIGN §5): `success: false` (nothing ran), a message
    /// saying how to replay, `data {approval_id, action_summary, expires_at}` (and
    /// `approve_url` when a page was linked), `meta.type = "approval"`.
    pub fn to_result(&self) -> ToolResult {
        let expires_at = self.expires_at_text();
        let message = format!(
            "Waiting for a person to approve {summary} (approval {id}, expires at {expires_at}); nothing ran. Replay with confirm_token={id} once it is approved.",
            summary = self.summary,
            id = self.id,
        );
        let mut result = ToolResult::error_with_code(ErrorCode::ApprovalPending, message);
        result.data = json!({
            "approval_id": self.id,
            "action_summary": self.summary,
            "expires_at": expires_at,
        });
        if let (Some(url), Value::Object(data)) = (&self.url, &mut result.data) {
            data.insert("approve_url".into(), Value::String(url.clone()));
        }
        if let Some(runtime) = &self.runtime {
            result.meta.set_runtime(runtime.clone());
        }
        result.meta.insert("type", json!("approval"));
        result
    }
}

/// The `confirm_token` a legacy caller sent among its arguments, taken off by
/// [`split_confirm_token`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SentToken {
    /// None was sent (or it was `null`): a fresh call.
    None,
    /// A string: a replay of a confirmation token or an approval id.
    Token(String),
    /// Something that cannot be a token (a number, an object, …): a tool that confirms
    /// refuses it like any invalid token.
    Malformed,
}

/// Takes the reserved `confirm_token` argument off object arguments (arguments that are not
/// an object are left for `validate` to refuse). What every legacy edge calls before
/// handing the call to the core, so a schema with `additionalProperties: false` does not
/// refuse a replay.
#[inline]
pub fn split_confirm_token(args: &mut Value) -> SentToken {
    let Value::Object(map) = args else {
        return SentToken::None;
    };
    // A linear scan of a few keys is cheaper than hashing the key to look it up.
    if !map.keys().any(|k| k == CONFIRM_TOKEN_ARG) {
        return SentToken::None;
    }
    match map.shift_remove(CONFIRM_TOKEN_ARG) {
        None | Some(Value::Null) => SentToken::None,
        Some(Value::String(token)) => SentToken::Token(token),
        Some(_) => SentToken::Malformed,
    }
}

/// What a call produced when it issued a ticket (kept on the call's state until the end).
#[derive(Debug)]
pub(crate) enum Ticket {
    Confirmation(ConfirmationTicket),
    Approval(ApprovalTicket),
}

impl Ticket {
    pub(crate) fn to_result(&self) -> ToolResult {
        match self {
            Ticket::Confirmation(ticket) => ticket.to_result(),
            Ticket::Approval(ticket) => ticket.to_result(),
        }
    }
}

/// What the executor hands back: the legacy [`ToolResult`] (the audited result, which a
/// ticket's call rendered from the ticket) or the typed [`CallOutcome`]. Generic so that
/// the legacy path pays nothing for the typed one.
pub(crate) trait Conclusion {
    /// A call that ended without a ticket.
    fn done(result: ToolResult) -> Self;
    /// A call that issued `ticket`; `audited` is the result rendered from it and audited.
    fn ticketed(audited: ToolResult, ticket: Ticket) -> Self;
}

impl Conclusion for ToolResult {
    #[inline(always)]
    fn done(result: ToolResult) -> Self {
        result
    }

    fn ticketed(audited: ToolResult, _ticket: Ticket) -> Self {
        audited
    }
}

impl Conclusion for CallOutcome {
    #[inline(always)]
    fn done(result: ToolResult) -> Self {
        CallOutcome::Done(result)
    }

    fn ticketed(audited: ToolResult, ticket: Ticket) -> Self {
        let runtime = audited.meta.runtime().cloned();
        match ticket {
            Ticket::Confirmation(mut ticket) => {
                ticket.set_runtime(runtime);
                CallOutcome::NeedsConfirmation(ticket)
            }
            Ticket::Approval(mut ticket) => {
                ticket.set_runtime(runtime);
                CallOutcome::AwaitingApproval(ticket)
            }
        }
    }
}

/// `YYYY-MM-DDTHH:MM:SS+00:00`, as the original wrote expiries.
fn iso_seconds(time: SystemTime) -> String {
    let secs = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs();
    let format =
        time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]+00:00");
    time::OffsetDateTime::from_unix_timestamp(secs as i64)
        .ok()
        .and_then(|t| t.format(&format).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_has_the_original_shape() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(iso_seconds(t), "2023-11-14T22:13:20+00:00");
    }
}
