//! Approvals a person gives: the queue behind `confirm = "human"` gates and
//! `request_verification` requests.
//!
//! A caller confirmation (`confirm = true`) is a speed bump: the token goes back to the
//! caller, who can replay it alone. A **human approval** parks the exact call in the store
//! instead, and only another principal can release it:
//!
//! 1. The first call of a gated tool stores its validated, clamped arguments with the tool,
//!    principal and channel that sent it, and its outcome is an
//!    [`ApprovalTicket`](crate::ApprovalTicket) (id, summary, expiry), which renders as
//!    `APPROVAL_PENDING` with `data {approval_id, action_summary, expires_at}`. Nothing runs.
//! 2. A person lists the queue ([`ApprovalQueue::pending`]) and decides
//!    ([`ApprovalQueue::decide`], or [`ToolRegistry::decide_approval`], which also audits
//!    the decision). The approver must be another principal than the caller and, except on
//!    the `cli` channel, hold [`APPROVE_SCOPE`].
//! 3. The caller redeems the ticket ([`ToolRegistry::redeem`], or replays with
//!    `confirm_token = <approval_id>` through the legacy edges): still `APPROVAL_PENDING` while
//!    nobody decided; after a grant the parked arguments run, once (a compare-and-set claims
//!    the run); after a reject the call is `FORBIDDEN`, naming who rejected and why; once
//!    expired, or run already, the token is refused like any invalid confirmation token.
//!
//! Parked calls live in the [`VerificationStore`](crate::verification::VerificationStore)
//! as verification records (one queue, one compare-and-set), so a durable store keeps them
//! across restarts and shares them between processes.
//!
//! ```
//! use milpa::approval::{ApprovalQueue, Verdict};
//! use milpa::{ErrorCode, ToolContext, ToolDefinition, ToolRegistry};
//! use serde_json::json;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let mut registry = ToolRegistry::new();
//! registry.register(
//!     ToolDefinition::builder("deploy")
//!         .mutating(true)
//!         .requires_human_approval(true)
//!         .sync(|args, _| json!(format!("deployed {}", args["env"]))),
//! ).unwrap();
//!
//! let agent = ToolContext::mcp("r1", Some("agent-7".into()), ["*"]);
//! let parked = registry.call("deploy", json!({"env": "prod"}), &agent).await;
//! assert_eq!(parked.code(), Some(&ErrorCode::ApprovalPending));
//! let id = parked.data["approval_id"].as_str().unwrap().to_owned();
//!
//! // The agent cannot approve its own call; a person holding approvals:grant can.
//! assert!(registry.decide_approval(&id, Verdict::Grant, None, &agent).await.is_err());
//! let alice = ToolContext::web("alice", ["approvals:grant"]);
//! registry.decide_approval(&id, Verdict::Grant, Some("looks right"), &alice).await.unwrap();
//!
//! let ran = registry.redeem("deploy", &id, &agent).await.into_result();
//! assert_eq!(ran.data, json!("deployed \"prod\""));
//! // Once (a legacy replay with the argument is refused the same way).
//! let again = registry.call("deploy", json!({"confirm_token": id}), &agent).await;
//! assert_eq!(again.code(), Some(&ErrorCode::ValidationError));
//! # });
//! ```
//!
//! [`ToolRegistry::decide_approval`]: crate::ToolRegistry::decide_approval
//! [`ToolRegistry::redeem`]: crate::ToolRegistry::redeem

mod change;
mod parked;
pub mod passkeys;
pub mod pins;
mod queue;

use std::fmt;
use std::time::Duration;

use serde_json::{Value, json};

use crate::audit::Redactor;
use crate::result::ErrorCode;
use crate::store_error::StoreError;
use crate::verification::{VerificationError, VerificationRecord, VerificationStatus};

pub use change::DefinitionChange;
pub(crate) use parked::{ParkedAbout, ParkedCall};
pub use queue::ApprovalQueue;
pub(crate) use queue::{AccessGate, Claim};

/// The scope an approver needs on every channel but `cli`.
pub const APPROVE_SCOPE: &str = "approvals:grant";

/// How long a parked call waits for a decision when nothing else is configured: one hour.
pub const DEFAULT_TTL: Duration = Duration::from_secs(3600);

/// A person's decision on an approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Verdict {
    /// Let it run (or count one grant towards a `dual`/`quorum` verification).
    Grant,
    /// Refuse it; final.
    Reject,
}

impl Verdict {
    /// The wire name, `grant` or `reject`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Grant => "grant",
            Verdict::Reject => "reject",
        }
    }

    /// Parses `grant` or `reject`.
    pub fn parse(text: &str) -> Option<Verdict> {
        match text {
            "grant" => Some(Verdict::Grant),
            "reject" => Some(Verdict::Reject),
            _ => None,
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an approval holds back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ApprovalKind {
    /// A tool call parked by a human-approval gate; a grant lets its caller replay it.
    ToolCall,
    /// A request opened with `request_verification`.
    Verification,
    /// An upstream tool or prompt whose definition changed since it was pinned; a grant
    /// serves the new definition (see [`DefinitionChange`]).
    DefinitionChange,
}

impl ApprovalKind {
    /// The wire name, `tool_call` or `verification`.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalKind::ToolCall => "tool_call",
            ApprovalKind::Verification => "verification",
            ApprovalKind::DefinitionChange => "definition_change",
        }
    }
}

/// Where an approval stands, as a person reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ApprovalState {
    /// Waiting for a decision.
    Pending,
    /// Nobody decided in time; it can no longer be decided or replayed.
    Expired,
    /// Granted; a parked call not yet replayed.
    Granted,
    /// Granted, and the parked call ran.
    Executed,
    /// Rejected.
    Rejected,
    /// Let through without a decision (a status other verifiers may store).
    Waived,
}

impl ApprovalState {
    /// The wire name, e.g. `pending`.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalState::Pending => "pending",
            ApprovalState::Expired => "expired",
            ApprovalState::Granted => "granted",
            ApprovalState::Executed => "executed",
            ApprovalState::Rejected => "rejected",
            ApprovalState::Waived => "waived",
        }
    }
}

impl fmt::Display for ApprovalState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One item of the approval queue: a parked tool call or a verification request, read from
/// its stored record.
#[derive(Debug, Clone, PartialEq)]
pub struct Approval {
    record: VerificationRecord,
    parked: Option<ParkedCall>,
    change: Option<DefinitionChange>,
}

impl Approval {
    /// The approval as stored in `record`.
    pub fn from_record(record: VerificationRecord) -> Approval {
        let parked = ParkedCall::from_payload(&record.payload);
        let change = match parked {
            Some(_) => None,
            None => DefinitionChange::from_payload(&record.payload),
        };
        Approval {
            record,
            parked,
            change,
        }
    }

    /// The id: the `approval_id` a caller replays with, or the verification `request_id`.
    pub fn id(&self) -> &str {
        &self.record.id
    }

    /// What it holds back.
    pub fn kind(&self) -> ApprovalKind {
        if self.parked.is_some() {
            ApprovalKind::ToolCall
        } else if self.change.is_some() {
            ApprovalKind::DefinitionChange
        } else {
            ApprovalKind::Verification
        }
    }

    /// For people: `tool(key=value, …)` of a parked call (secrets redacted), or a
    /// verification's subject.
    pub fn summary(&self) -> &str {
        &self.record.subject
    }

    /// Who asked (the caller of a parked call); that principal cannot decide it.
    pub fn requested_by(&self) -> Option<&str> {
        self.record.requested_by.as_deref()
    }

    /// The parked call's tool, or the tool (or prompt) a held change is about, by the
    /// name clients know it by.
    pub fn tool(&self) -> Option<&str> {
        match (&self.parked, &self.change) {
            (Some(parked), _) => Some(parked.binding.tool.as_str()),
            (None, Some(change)) => Some(change.served_as.as_str()),
            (None, None) => None,
        }
    }

    /// The server that parked the call or holds the change, when its queue has a name.
    pub fn server(&self) -> Option<&str> {
        match (&self.parked, &self.change) {
            (Some(parked), _) => parked.server.as_deref(),
            (None, Some(change)) => change.server.as_deref(),
            (None, None) => None,
        }
    }

    /// The held definition change, when it is one.
    pub fn change(&self) -> Option<&DefinitionChange> {
        self.change.as_ref()
    }

    /// What the parked call's tool does (its description when the call was parked).
    /// For a held change, the description the upstream offers now.
    pub fn description(&self) -> Option<&str> {
        match (&self.parked, &self.change) {
            (Some(parked), _) => parked.about.description.as_deref(),
            (None, Some(change)) => change.descriptions().1,
            (None, None) => None,
        }
    }

    /// Whether the parked call's tool changes state; `None` for a verification request
    /// and for calls parked before this was kept.
    pub fn mutating(&self) -> Option<bool> {
        self.parked.as_ref()?.about.mutating
    }

    /// The upstream MCP server the parked call goes to, when its tool is a gateway tool.
    /// For a held change, the upstream that changed the definition.
    pub fn upstream(&self) -> Option<&str> {
        match (&self.parked, &self.change) {
            (Some(parked), _) => parked.about.upstream.as_deref(),
            (None, Some(change)) => Some(change.upstream.as_str()),
            (None, None) => None,
        }
    }

    /// The client software the parked call came through, as it named itself (MCP
    /// `clientInfo.name`; self-reported), when it was known.
    pub fn client(&self) -> Option<&str> {
        self.parked.as_ref()?.about.client.as_deref()
    }

    /// Whether a view of `server`'s queue shows it: a call parked by that server, or one
    /// no server tagged (a verification request, or a call from an untagged queue), which
    /// every server's view shows rather than hide.
    pub fn is_for(&self, server: &str) -> bool {
        self.server().is_none_or(|tag| tag == server)
    }

    /// The channel the parked call came over.
    pub fn channel(&self) -> Option<&str> {
        self.parked.as_ref().map(|p| p.binding.channel.as_str())
    }

    /// The parked call's arguments with secret fields redacted by `redactor`.
    pub fn redacted_args(&self, redactor: &Redactor) -> Option<Value> {
        self.parked.as_ref().map(|p| redactor.redact(&p.args))
    }

    /// When it was opened (ms since the Unix epoch).
    pub fn created_at_ms(&self) -> u64 {
        self.record.created_at_ms
    }

    /// Until when it may be decided and replayed (parked calls only).
    pub fn expires_at_ms(&self) -> Option<u64> {
        self.parked.as_ref().map(|p| p.expires_at_ms)
    }

    /// When the granted call ran, if it did.
    pub fn executed_at_ms(&self) -> Option<u64> {
        self.parked.as_ref().and_then(|p| p.executed_at_ms)
    }

    /// Whether a pending parked call ran out of time at `now_ms`.
    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.record.status == VerificationStatus::Pending
            && self.parked.as_ref().is_some_and(|p| p.is_expired(now_ms))
    }

    /// Where it stands at `now_ms`.
    pub fn state(&self, now_ms: u64) -> ApprovalState {
        match self.record.status {
            VerificationStatus::Pending if self.is_expired(now_ms) => ApprovalState::Expired,
            VerificationStatus::Pending => ApprovalState::Pending,
            VerificationStatus::Passed if self.executed_at_ms().is_some() => {
                ApprovalState::Executed
            }
            VerificationStatus::Passed => ApprovalState::Granted,
            VerificationStatus::Failed => ApprovalState::Rejected,
            VerificationStatus::Waived => ApprovalState::Waived,
        }
    }

    /// Who decided it last (the rejecter, or the last granter), with the reason they gave.
    pub fn decided_by(&self) -> Option<(&str, Option<&str>)> {
        let decision = self
            .record
            .rejection
            .as_ref()
            .or(self.record.grants.last())?;
        Some((decision.principal.as_str(), decision.reason.as_deref()))
    }

    /// When it was decided (ms since the Unix epoch).
    pub fn decided_at_ms(&self) -> Option<u64> {
        self.record.resolved_at_ms
    }

    /// The stored record.
    pub fn record(&self) -> &VerificationRecord {
        &self.record
    }

    /// The approval as JSON for people and scripts (`milpa approvals --json`, the page):
    /// `id, kind, state, summary, requested_by, tool, description, mutating, upstream,
    /// client, channel, server, args (redacted), policy, grants, rejection, created_at,
    /// expires_at, decided_at, executed_at, change` (a held definition change: `kind, name,
    /// served_as, previous, previous_digest, current, current_digest`; times as RFC 3339 UTC; a fact not known is
    /// `null`).
    pub fn to_json(&self, redactor: &Redactor, now_ms: u64) -> Value {
        let decision = |d: &crate::verification::Decision| json!({"principal": d.principal, "reason": d.reason, "at": rfc3339(d.at_ms)});
        json!({
            "id": self.id(),
            "kind": self.kind().as_str(),
            "state": self.state(now_ms).as_str(),
            "summary": self.summary(),
            "requested_by": self.requested_by(),
            "tool": self.tool(),
            "description": self.description(),
            "mutating": self.mutating(),
            "upstream": self.upstream(),
            "client": self.client(),
            "channel": self.channel(),
            "server": self.server(),
            "args": self.redacted_args(redactor),
            "policy": self.record.policy.as_str(),
            "required_grants": self.record.required_grants,
            "grants": self.record.grants.iter().map(decision).collect::<Vec<_>>(),
            "rejection": self.record.rejection.as_ref().map(decision),
            "created_at": rfc3339(self.created_at_ms()),
            "expires_at": self.expires_at_ms().map(rfc3339),
            "decided_at": self.decided_at_ms().map(rfc3339),
            "executed_at": self.executed_at_ms().map(rfc3339),
            "change": self.change.as_ref().map(|change| json!({
                "kind": change.kind.as_str(),
                "name": change.name,
                "served_as": change.served_as,
                "previous": change.previous,
                "previous_digest": change.previous_digest,
                "current": change.current,
                "current_digest": change.current_digest,
            })),
        })
    }

    pub(crate) fn parked(&self) -> Option<&ParkedCall> {
        self.parked.as_ref()
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ` for milliseconds since the Unix epoch.
pub fn rfc3339(ms: u64) -> String {
    let format =
        time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
    time::OffsetDateTime::from_unix_timestamp((ms / 1000) as i64)
        .ok()
        .and_then(|t| t.format(&format).ok())
        .unwrap_or_default()
}

/// Why a decision was refused. Nothing was recorded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApprovalError {
    /// No approval has that id.
    #[error("No approval with id '{id}'.")]
    NotFound {
        /// The id asked for.
        id: String,
    },
    /// It was decided already.
    #[error("Approval '{id}' is already decided: {state}{}.", by.as_deref().map(|p| format!(" by {p}")).unwrap_or_default())]
    AlreadyDecided {
        /// The approval.
        id: String,
        /// Where it stands.
        state: ApprovalState,
        /// Who decided it.
        by: Option<String>,
    },
    /// Nobody decided in time.
    #[error("Approval '{id}' expired at {expired_at}; it can no longer be decided.")]
    Expired {
        /// The approval.
        id: String,
        /// When it expired (RFC 3339).
        expired_at: String,
    },
    /// The caller of the parked call (or the requester of a verification) tried to grant it.
    #[error(
        "'{principal}' asked for approval '{id}' and cannot decide it; another principal must."
    )]
    SelfApproval {
        /// The approval.
        id: String,
        /// The principal.
        principal: String,
    },
    /// The approver lacks [`APPROVE_SCOPE`] on a channel other than `cli`.
    #[error(
        "'{principal}' may not decide approvals on channel '{channel}': the scope '{APPROVE_SCOPE}' is required."
    )]
    NotAllowed {
        /// The approver.
        principal: String,
        /// Its channel.
        channel: String,
    },
    /// The approver is anonymous.
    #[error("An approval must be decided by a named principal.")]
    Anonymous,
    /// The verifier refused the decision (a duplicate grant, contention).
    #[error("{0}")]
    Verification(#[source] VerificationError),
    /// The store failed; nothing was recorded.
    #[error("The approval store is unavailable: {0}")]
    Store(#[source] StoreError),
}

impl ApprovalError {
    /// The code a result reporting this error carries.
    pub fn code(&self) -> ErrorCode {
        match self {
            ApprovalError::NotFound { .. } => ErrorCode::NotFound,
            ApprovalError::SelfApproval { .. }
            | ApprovalError::NotAllowed { .. }
            | ApprovalError::Anonymous => ErrorCode::Forbidden,
            ApprovalError::AlreadyDecided { .. } | ApprovalError::Expired { .. } => {
                ErrorCode::ValidationError
            }
            ApprovalError::Verification(error) => error.code(),
            ApprovalError::Store(_) => ErrorCode::Unavailable,
        }
    }
}

impl From<VerificationError> for ApprovalError {
    fn from(error: VerificationError) -> Self {
        match error {
            VerificationError::NotFound { id } => ApprovalError::NotFound { id },
            VerificationError::SelfApproval { id, principal } => {
                ApprovalError::SelfApproval { id, principal }
            }
            VerificationError::Store(crate::verification::VerificationStoreError::Backend(
                cause,
            )) => ApprovalError::Store(cause),
            other => ApprovalError::Verification(other),
        }
    }
}
