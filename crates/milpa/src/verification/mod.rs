//! Verification: a human (or another agent) approves an action out of band, through two
//! ordinary tools.
//!
//! Some actions cannot be authorized by scopes alone: someone has to say yes. An agent opens
//! a request with `request_verification` and gets a `request_id`; later a principal resolves
//! it with `resolve_verification` (`decision = grant | reject`). Both are plain tools, so they
//! run through the same pipeline as every other tool, and a host can leave
//! `request_verification` open while restricting `resolve_verification` with scopes (the
//! "policy dividend", see [`VerificationTools::resolve_scopes`]).
//!
//! Unlike the original, which kept no state (resolving an id that was never requested
//! "succeeded"), every request lives in a [`VerificationStore`] and a resolution is a
//! compare-and-set on it:
//!
//! * an unknown request id, or one already resolved, is refused with an error naming the id
//!   (and its status);
//! * a caller-chosen request id that already exists is refused;
//! * the principal that opened a request (`requested_by`) cannot grant it;
//! * a reject is final;
//! * [`ApprovalPolicy`] counts distinct granting principals: `single` and `auto` pass on the
//!   first grant, `dual` on the second, `quorum` on the verifier's quorum (default 2, see
//!   [`HumanVerifier::with_quorum`]).
//!
//! ```
//! use milpa::verification::{HumanVerifier, VerificationTools};
//! use milpa::{ToolContext, ToolRegistry};
//! use serde_json::json;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let mut registry = ToolRegistry::new();
//! VerificationTools::new(HumanVerifier::in_memory())
//!     .resolve_scopes(["verification:resolve"])
//!     .register(&mut registry)?;
//!
//! let ctx = ToolContext::cli();
//! let opened = registry
//!     .call("request_verification", json!({"subject": "deploy v2", "requested_by": "agent-7"}), &ctx)
//!     .await;
//! let id = opened.data["request_id"].as_str().unwrap().to_owned();
//!
//! let resolved = registry
//!     .call("resolve_verification", json!({"request_id": id, "decision": "grant", "principal": "alice"}), &ctx)
//!     .await;
//! assert_eq!(resolved.message.as_deref(), Some(format!("Verification granted for '{id}'.").as_str()));
//! assert_eq!(resolved.meta.get("verification_status"), Some(&json!("passed")));
//! # Ok::<(), milpa::RegistryError>(())
//! # }).unwrap();
//! ```

mod store;
mod tools;
mod verifier;

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::result::ErrorCode;

pub use store::{InMemoryVerificationStore, VerificationStore, VerificationStoreError};
pub use tools::{REQUEST_NAME, RESOLVE_NAME, VerificationTools};
pub use verifier::{DEFAULT_REJECT_REASON, HumanVerifier, Resolution};

/// Name of the event dispatched when a request is opened.
pub const VERIFICATION_REQUESTED: &str = "verification.requested";
/// Name of the event dispatched when a request passes (its last required grant).
pub const VERIFICATION_GRANTED: &str = "verification.granted";
/// Name of the event dispatched when a request is rejected.
pub const VERIFICATION_REJECTED: &str = "verification.rejected";

/// How many approvals a request needs before it passes.
///
/// The verifier counts *distinct* granting principals, never counting the requester.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ApprovalPolicy {
    /// One grant.
    #[default]
    Single,
    /// Two grants from two different principals (four eyes).
    Dual,
    /// As many grants as the verifier's quorum (default 2).
    Quorum,
    /// In the original, decided by evidence; a human verifier has none, so it passes on the
    /// first grant, like `single`. A verifier that evaluates evidence may do better.
    Auto,
}

impl ApprovalPolicy {
    /// Every policy, in wire order.
    pub const ALL: [ApprovalPolicy; 4] = [
        ApprovalPolicy::Single,
        ApprovalPolicy::Dual,
        ApprovalPolicy::Quorum,
        ApprovalPolicy::Auto,
    ];

    /// The wire name: `single`, `dual`, `quorum` or `auto`.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalPolicy::Single => "single",
            ApprovalPolicy::Dual => "dual",
            ApprovalPolicy::Quorum => "quorum",
            ApprovalPolicy::Auto => "auto",
        }
    }

    /// Parses a wire name (exact, lowercase).
    pub fn parse(text: &str) -> Option<ApprovalPolicy> {
        ApprovalPolicy::ALL
            .into_iter()
            .find(|policy| policy.as_str() == text)
    }

    /// Distinct grants needed to pass, given the verifier's quorum (at least 1).
    pub fn required_grants(self, quorum: u32) -> u32 {
        match self {
            ApprovalPolicy::Single | ApprovalPolicy::Auto => 1,
            ApprovalPolicy::Dual => 2,
            ApprovalPolicy::Quorum => quorum.max(1),
        }
    }
}

impl fmt::Display for ApprovalPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum VerificationStatus {
    /// Waiting for (more) grants or a reject.
    #[default]
    Pending,
    /// Granted by enough principals.
    Passed,
    /// Rejected.
    Failed,
    /// Let through without a decision (not produced by [`HumanVerifier`]; kept for stores
    /// shared with other verifiers).
    Waived,
}

impl VerificationStatus {
    /// The wire name: `pending`, `passed`, `failed` or `waived`.
    pub fn as_str(self) -> &'static str {
        match self {
            VerificationStatus::Pending => "pending",
            VerificationStatus::Passed => "passed",
            VerificationStatus::Failed => "failed",
            VerificationStatus::Waived => "waived",
        }
    }

    /// Parses a wire name.
    pub fn parse(text: &str) -> Option<VerificationStatus> {
        [
            VerificationStatus::Pending,
            VerificationStatus::Passed,
            VerificationStatus::Failed,
            VerificationStatus::Waived,
        ]
        .into_iter()
        .find(|status| status.as_str() == text)
    }

    /// Whether the action may go ahead (`passed` or `waived`).
    pub fn is_satisfied(self) -> bool {
        matches!(
            self,
            VerificationStatus::Passed | VerificationStatus::Waived
        )
    }

    /// Whether the request can no longer change (anything but `pending`).
    pub fn is_final(self) -> bool {
        self != VerificationStatus::Pending
    }
}

impl fmt::Display for VerificationStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a caller asks to have verified. Build it with [`VerificationRequest::new`].
///
/// ```
/// use milpa::verification::{ApprovalPolicy, VerificationRequest};
///
/// let request = VerificationRequest::new("deploy v2")
///     .policy(ApprovalPolicy::Dual)
///     .requested_by("agent-7");
/// assert_eq!(request.subject, "deploy v2");
/// assert!(request.id.is_none());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct VerificationRequest {
    /// What needs approval, for people (must not be blank).
    pub subject: String,
    /// How many approvals it needs.
    pub policy: ApprovalPolicy,
    /// Who asked; that principal cannot grant it.
    pub requested_by: Option<String>,
    /// The id to use; a UUIDv4 is generated when `None` or blank.
    pub id: Option<String>,
    /// Anything the host wants to keep with the request.
    pub payload: Value,
}

impl VerificationRequest {
    /// A `single`-policy request for `subject`, anonymous, with a generated id.
    pub fn new(subject: impl Into<String>) -> VerificationRequest {
        VerificationRequest {
            subject: subject.into(),
            policy: ApprovalPolicy::Single,
            requested_by: None,
            id: None,
            payload: Value::Object(Map::new()),
        }
    }

    /// Sets the approval policy.
    pub fn policy(mut self, policy: ApprovalPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Sets who asked.
    pub fn requested_by(mut self, principal: impl Into<String>) -> Self {
        self.requested_by = Some(principal.into());
        self
    }

    /// Uses a caller-chosen id (refused later if it exists already).
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Attaches host data.
    pub fn payload(mut self, payload: Value) -> Self {
        self.payload = payload;
        self
    }
}

/// One principal's decision on a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// Who decided.
    pub principal: String,
    /// Why, if they said.
    pub reason: Option<String>,
    /// When, in milliseconds since the Unix epoch.
    pub at_ms: u64,
}

/// A request as stored: what was asked, the decisions so far, and where it stands.
///
/// `revision` is the store's compare-and-set counter: it starts at 0 and the store bumps it
/// on every successful [`VerificationStore::compare_and_set`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerificationRecord {
    /// The request id.
    pub id: String,
    /// What needs approval.
    pub subject: String,
    /// The approval policy.
    pub policy: ApprovalPolicy,
    /// Distinct grants needed, fixed when the request was opened.
    pub required_grants: u32,
    /// Who asked.
    pub requested_by: Option<String>,
    /// Host data.
    pub payload: Value,
    /// Where it stands.
    pub status: VerificationStatus,
    /// The grants so far, in order (distinct principals).
    pub grants: Vec<Decision>,
    /// The reject, once there is one.
    pub rejection: Option<Decision>,
    /// When it was opened (ms since the Unix epoch).
    pub created_at_ms: u64,
    /// When it was resolved (ms since the Unix epoch).
    pub resolved_at_ms: Option<u64>,
    /// Compare-and-set counter.
    pub revision: u64,
}

impl VerificationRecord {
    /// The principals that granted it so far.
    pub fn approvals(&self) -> Vec<&str> {
        self.grants.iter().map(|g| g.principal.as_str()).collect()
    }
}

/// The outcome of one resolution, in the original's wire shape: `status, reason, verifier,
/// principal, missing, metadata` (what `resolve_verification` returns as `data`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerificationResult {
    /// `passed`, `failed` or (a grant that is not yet enough) `pending`.
    pub status: VerificationStatus,
    /// The reject's reason.
    pub reason: Option<String>,
    /// Which verifier decided ([`HumanVerifier::NAME`]).
    pub verifier: Option<String>,
    /// Who decided.
    pub principal: Option<String>,
    /// What is still missing (always empty for a human verifier).
    pub missing: Vec<String>,
    /// For grants: `reason` (when given), `approvals` and `required_approvals`.
    pub metadata: Map<String, Value>,
}

impl VerificationResult {
    /// The result as JSON.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// What a `verification.*` event carries: the request as stored after the change, and for
/// `granted`/`rejected` the resolution's result.
#[derive(Debug, Clone, PartialEq)]
pub struct VerificationEvent {
    /// The request after the change.
    pub record: VerificationRecord,
    /// The result (`None` for `verification.requested`).
    pub result: Option<VerificationResult>,
}

impl VerificationEvent {
    /// The request id.
    pub fn request_id(&self) -> &str {
        &self.record.id
    }

    /// The request's subject.
    pub fn subject(&self) -> &str {
        &self.record.subject
    }
}

/// Why a verification could not be opened or resolved.
///
/// Each variant maps to an [`ErrorCode`] and the argument it concerns, which the tools put
/// in the error result (`data = {field, message}`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerificationError {
    /// An argument is missing or malformed.
    #[error("{message}")]
    Invalid {
        /// The argument.
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// No request has that id.
    #[error("Verification request '{id}' not found.")]
    NotFound {
        /// The id asked for.
        id: String,
    },
    /// The request was resolved already.
    #[error("Verification request '{id}' is already resolved (status: {status}).")]
    AlreadyResolved {
        /// The request id.
        id: String,
        /// Its final status.
        status: VerificationStatus,
    },
    /// A caller-chosen id is taken.
    #[error("Verification request '{id}' already exists (status: {status}).")]
    AlreadyExists {
        /// The request id.
        id: String,
        /// The existing request's status.
        status: VerificationStatus,
    },
    /// The requester tried to grant its own request.
    #[error("Principal '{principal}' requested verification '{id}' and cannot grant it.")]
    SelfApproval {
        /// The request id.
        id: String,
        /// The requester.
        principal: String,
    },
    /// The principal granted this request already.
    #[error(
        "Principal '{principal}' already granted verification '{id}'; policy {policy} needs {required} distinct principals."
    )]
    DuplicateGrant {
        /// The request id.
        id: String,
        /// The principal.
        principal: String,
        /// The request's policy.
        policy: ApprovalPolicy,
        /// Distinct grants it needs.
        required: u32,
    },
    /// The subject given on resolution is not the request's.
    #[error("Subject '{subject}' does not match verification request '{id}'.")]
    SubjectMismatch {
        /// The request id.
        id: String,
        /// The subject given.
        subject: String,
    },
    /// The request kept changing under us (many concurrent resolutions); nothing was recorded.
    #[error("Verification request '{id}' changed concurrently; nothing was recorded, try again.")]
    Contention {
        /// The request id.
        id: String,
    },
    /// The id is a tool call parked for a person's approval: it is decided through the
    /// approval queue (`milpa approvals`, the approvals page), never by a tool.
    #[error(
        "Request '{id}' is a tool call waiting for a person's approval; it is decided with `milpa approvals` or on the approvals page, not by a tool."
    )]
    ParkedCall {
        /// The approval id.
        id: String,
    },
    /// The store failed.
    #[error("{0}")]
    Store(#[source] VerificationStoreError),
}

impl VerificationError {
    /// The code the tools report in `meta.code`.
    pub fn code(&self) -> ErrorCode {
        match self {
            VerificationError::NotFound { .. } => ErrorCode::NotFound,
            VerificationError::SelfApproval { .. } | VerificationError::ParkedCall { .. } => {
                ErrorCode::Forbidden
            }
            VerificationError::Contention { .. } | VerificationError::Store(_) => {
                ErrorCode::InternalError
            }
            VerificationError::Invalid { .. }
            | VerificationError::AlreadyResolved { .. }
            | VerificationError::AlreadyExists { .. }
            | VerificationError::DuplicateGrant { .. }
            | VerificationError::SubjectMismatch { .. } => ErrorCode::ValidationError,
        }
    }

    /// The argument the error is about, if one is.
    pub fn field(&self) -> Option<&'static str> {
        match self {
            VerificationError::Invalid { field, .. } => Some(field),
            VerificationError::NotFound { .. }
            | VerificationError::AlreadyResolved { .. }
            | VerificationError::AlreadyExists { .. }
            | VerificationError::ParkedCall { .. }
            | VerificationError::Contention { .. } => Some("request_id"),
            VerificationError::SelfApproval { .. } | VerificationError::DuplicateGrant { .. } => {
                Some("principal")
            }
            VerificationError::SubjectMismatch { .. } => Some("subject"),
            VerificationError::Store(_) => None,
        }
    }

    pub(crate) fn invalid(field: &'static str, message: impl Into<String>) -> VerificationError {
        VerificationError::Invalid {
            field,
            message: message.into(),
        }
    }
}

impl From<VerificationStoreError> for VerificationError {
    fn from(error: VerificationStoreError) -> Self {
        match error {
            VerificationStoreError::AlreadyExists { id, status } => {
                VerificationError::AlreadyExists { id, status }
            }
            other => VerificationError::Store(other),
        }
    }
}

/// A fresh request id: a random (version 4) UUID, as the original used.
pub fn new_request_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_are_uuid_v4() {
        let id = new_request_id();
        assert_eq!(id.len(), 36);
        let parts: Vec<&str> = id.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(parts[2].starts_with('4'));
        assert!(matches!(parts[3].as_bytes()[0], b'8' | b'9' | b'a' | b'b'));
        assert_ne!(id, new_request_id());
    }

    #[test]
    fn policies_need_their_counts() {
        assert_eq!(ApprovalPolicy::Single.required_grants(5), 1);
        assert_eq!(ApprovalPolicy::Auto.required_grants(5), 1);
        assert_eq!(ApprovalPolicy::Dual.required_grants(5), 2);
        assert_eq!(ApprovalPolicy::Quorum.required_grants(5), 5);
        assert_eq!(ApprovalPolicy::Quorum.required_grants(0), 1);
        assert_eq!(ApprovalPolicy::parse("dual"), Some(ApprovalPolicy::Dual));
        assert_eq!(ApprovalPolicy::parse("Dual"), None);
        assert_eq!(
            VerificationStatus::parse("failed"),
            Some(VerificationStatus::Failed)
        );
        assert!(VerificationStatus::Waived.is_satisfied());
        assert!(!VerificationStatus::Pending.is_final());
    }
}
