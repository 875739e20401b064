//! [`HumanVerifier`]: opens, grants and rejects verification requests through a store.

use std::sync::Arc;
use std::time::SystemTime;

use serde_json::{Map, json};

use crate::approval::ParkedCall;
use crate::confirm::unix_millis;
use crate::events::{Dispatcher, Event};
use crate::verification::{
    Decision, InMemoryVerificationStore, VerificationError, VerificationEvent, VerificationRecord,
    VerificationRequest, VerificationResult, VerificationStatus, VerificationStore, new_request_id,
};

/// How often a resolution re-reads and retries after losing a compare-and-set race before
/// giving up with [`VerificationError::Contention`].
const MAX_ATTEMPTS: usize = 16;

/// The reason recorded for a reject that gave none (as in the original).
pub const DEFAULT_REJECT_REASON: &str = "rejected";

/// A resolution: the request as stored afterwards, and the result in wire shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolution {
    /// The request after this decision.
    pub record: VerificationRecord,
    /// What the decision amounted to (`pending` for a grant that is not yet enough).
    pub result: VerificationResult,
}

/// The reference verifier: a person (or another agent) decides, later, out of band.
///
/// [`request`](Self::request) stores a pending request and dispatches
/// `verification.requested`; [`grant`](Self::grant) and [`reject`](Self::reject) record a
/// decision with a compare-and-set on the store, so two concurrent resolutions never both
/// win. `verification.granted` is dispatched when a request *passes* (its last required
/// grant), so a listener on it may act at once; a grant that leaves a `dual` or `quorum`
/// request pending dispatches nothing. `verification.rejected` is dispatched on a reject.
///
/// ```
/// use milpa::verification::{ApprovalPolicy, HumanVerifier, VerificationRequest, VerificationStatus};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let verifier = HumanVerifier::in_memory();
/// let record = verifier
///     .request(VerificationRequest::new("rotate keys").policy(ApprovalPolicy::Dual).requested_by("bot"))
///     .await
///     .unwrap();
/// // The requester cannot approve its own request.
/// assert!(verifier.grant(&record.id, "bot", None).await.is_err());
/// let first = verifier.grant(&record.id, "alice", None).await.unwrap();
/// assert_eq!(first.result.status, VerificationStatus::Pending);
/// let second = verifier.grant(&record.id, "bob", Some("looks right")).await.unwrap();
/// assert_eq!(second.result.status, VerificationStatus::Passed);
/// # });
/// ```
pub struct HumanVerifier {
    store: Arc<dyn VerificationStore>,
    dispatcher: Option<Arc<Dispatcher>>,
    quorum: u32,
}

impl std::fmt::Debug for HumanVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HumanVerifier")
            .field("dispatcher", &self.dispatcher.is_some())
            .field("quorum", &self.quorum)
            .finish_non_exhaustive()
    }
}

enum Verdict<'a> {
    Grant(Option<&'a str>),
    Reject(&'a str),
}

impl HumanVerifier {
    /// The verifier's name, reported as `verifier` in results.
    pub const NAME: &'static str = "human_verifier";

    /// Grants a `quorum` request needs unless [`with_quorum`](Self::with_quorum) says
    /// otherwise.
    pub const DEFAULT_QUORUM: u32 = 2;

    /// A verifier keeping its requests in `store`, without events.
    pub fn new(store: Arc<dyn VerificationStore>) -> Self {
        HumanVerifier {
            store,
            dispatcher: None,
            quorum: Self::DEFAULT_QUORUM,
        }
    }

    /// A verifier with a fresh [`InMemoryVerificationStore`].
    pub fn in_memory() -> Self {
        Self::new(Arc::new(InMemoryVerificationStore::new()))
    }

    /// Dispatches `verification.requested|granted|rejected` through `dispatcher`.
    pub fn with_dispatcher(mut self, dispatcher: Arc<Dispatcher>) -> Self {
        self.dispatcher = Some(dispatcher);
        self
    }

    /// How many distinct grants a `quorum` request needs (at least 1; default 2). Fixed
    /// per request when it is opened, so changing it does not move requests in flight.
    pub fn with_quorum(mut self, quorum: u32) -> Self {
        self.quorum = quorum.max(1);
        self
    }

    /// The quorum for `quorum` requests.
    pub fn quorum(&self) -> u32 {
        self.quorum
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn VerificationStore> {
        &self.store
    }

    /// The request with that id, if any.
    pub async fn get(&self, id: &str) -> Result<Option<VerificationRecord>, VerificationError> {
        Ok(self.store.get(id).await?)
    }

    /// Opens a pending request and dispatches `verification.requested`.
    ///
    /// The subject and requester are trimmed; a blank subject is refused, a blank requester
    /// is anonymous, a blank id is generated (UUIDv4). A caller-chosen id that exists is
    /// refused with [`VerificationError::AlreadyExists`].
    pub async fn request(
        &self,
        request: VerificationRequest,
    ) -> Result<VerificationRecord, VerificationError> {
        let subject = request.subject.trim();
        if subject.is_empty() {
            return Err(VerificationError::invalid("subject", "subject is required"));
        }
        let id = non_blank(request.id.as_deref()).map_or_else(new_request_id, str::to_owned);
        let record = VerificationRecord {
            id,
            subject: subject.to_owned(),
            policy: request.policy,
            required_grants: request.policy.required_grants(self.quorum),
            requested_by: non_blank(request.requested_by.as_deref()).map(str::to_owned),
            payload: request.payload,
            status: VerificationStatus::Pending,
            grants: Vec::new(),
            rejection: None,
            created_at_ms: now_ms(),
            resolved_at_ms: None,
            revision: 0,
        };
        self.store.create(record.clone()).await?;
        self.dispatch(|p| Event::VerificationRequested(p), &record, None);
        Ok(record)
    }

    /// Records `principal`'s grant. The request passes when it has as many distinct
    /// grants as its policy needs; until then the result is `pending`.
    ///
    /// Refused: an unknown or already resolved id, a blank principal, the requester itself,
    /// and a principal that granted this request already.
    pub async fn grant(
        &self,
        id: &str,
        principal: &str,
        reason: Option<&str>,
    ) -> Result<Resolution, VerificationError> {
        self.resolve(id, principal, Verdict::Grant(non_blank(reason)), false)
            .await
    }

    /// Records `principal`'s reject, which is final. A blank or missing reason reads as
    /// `"rejected"`.
    ///
    /// Refused: an unknown or already resolved id, and a blank principal. The requester
    /// may reject (withdraw) its own request.
    pub async fn reject(
        &self,
        id: &str,
        principal: &str,
        reason: Option<&str>,
    ) -> Result<Resolution, VerificationError> {
        let reason = non_blank(reason).unwrap_or(DEFAULT_REJECT_REASON);
        self.resolve(id, principal, Verdict::Reject(reason), false)
            .await
    }

    /// A decision through the [`ApprovalQueue`](crate::approval::ApprovalQueue), which has
    /// checked the approver (scope, not the parked call's caller) and may decide parked
    /// calls, unlike [`grant`](Self::grant) and [`reject`](Self::reject).
    pub(crate) async fn resolve_approval(
        &self,
        id: &str,
        principal: &str,
        verdict: crate::approval::Verdict,
        reason: Option<&str>,
    ) -> Result<Resolution, VerificationError> {
        let verdict = match verdict {
            crate::approval::Verdict::Grant => Verdict::Grant(non_blank(reason)),
            crate::approval::Verdict::Reject => {
                Verdict::Reject(non_blank(reason).unwrap_or(DEFAULT_REJECT_REASON))
            }
        };
        self.resolve(id, principal, verdict, true).await
    }

    async fn resolve(
        &self,
        id: &str,
        principal: &str,
        verdict: Verdict<'_>,
        parked_calls_too: bool,
    ) -> Result<Resolution, VerificationError> {
        let id = id.trim();
        let principal = principal.trim();
        if id.is_empty() {
            return Err(VerificationError::invalid(
                "request_id",
                "request_id is required",
            ));
        }
        if principal.is_empty() {
            return Err(VerificationError::invalid(
                "principal",
                "principal is required",
            ));
        }
        for _ in 0..MAX_ATTEMPTS {
            let current = self
                .store
                .get(id)
                .await?
                .ok_or_else(|| VerificationError::NotFound { id: id.to_owned() })?;
            if !parked_calls_too && ParkedCall::from_payload(&current.payload).is_some() {
                return Err(VerificationError::ParkedCall { id: id.to_owned() });
            }
            let (next, result) = decide(&current, principal, &verdict)?;
            if self
                .store
                .compare_and_set(current.revision, next.clone())
                .await?
            {
                let mut record = next;
                record.revision = current.revision + 1;
                match record.status {
                    VerificationStatus::Passed => {
                        self.dispatch(|p| Event::VerificationGranted(p), &record, Some(&result));
                    }
                    VerificationStatus::Failed => {
                        self.dispatch(|p| Event::VerificationRejected(p), &record, Some(&result));
                    }
                    _ => {}
                }
                return Ok(Resolution { record, result });
            }
        }
        Err(VerificationError::Contention { id: id.to_owned() })
    }

    /// Tells the dispatcher, if one is wired; the payload is copied only then.
    fn dispatch(
        &self,
        event: for<'e> fn(&'e VerificationEvent) -> Event<'e>,
        record: &VerificationRecord,
        result: Option<&VerificationResult>,
    ) {
        if let Some(dispatcher) = &self.dispatcher {
            let payload = VerificationEvent {
                record: record.clone(),
                result: result.cloned(),
            };
            dispatcher.dispatch(&event(&payload));
        }
    }
}

/// The record after `verdict`, and the result to report, or why it is refused.
fn decide(
    current: &VerificationRecord,
    principal: &str,
    verdict: &Verdict<'_>,
) -> Result<(VerificationRecord, VerificationResult), VerificationError> {
    if current.status.is_final() {
        return Err(VerificationError::AlreadyResolved {
            id: current.id.clone(),
            status: current.status,
        });
    }
    let now = now_ms();
    let mut next = current.clone();
    let mut metadata = Map::new();
    let result = match *verdict {
        Verdict::Grant(reason) => {
            if current.requested_by.as_deref() == Some(principal) {
                return Err(VerificationError::SelfApproval {
                    id: current.id.clone(),
                    principal: principal.to_owned(),
                });
            }
            if current.grants.iter().any(|g| g.principal == principal) {
                return Err(VerificationError::DuplicateGrant {
                    id: current.id.clone(),
                    principal: principal.to_owned(),
                    policy: current.policy,
                    required: current.required_grants,
                });
            }
            next.grants.push(Decision {
                principal: principal.to_owned(),
                reason: reason.map(str::to_owned),
                at_ms: now,
            });
            if next.grants.len() >= current.required_grants.max(1) as usize {
                next.status = VerificationStatus::Passed;
                next.resolved_at_ms = Some(now);
            }
            if let Some(reason) = reason {
                metadata.insert("reason".into(), json!(reason));
            }
            metadata.insert("approvals".into(), json!(next.approvals()));
            metadata.insert("required_approvals".into(), json!(next.required_grants));
            VerificationResult {
                status: next.status,
                reason: None,
                verifier: Some(HumanVerifier::NAME.to_owned()),
                principal: Some(principal.to_owned()),
                missing: Vec::new(),
                metadata,
            }
        }
        Verdict::Reject(reason) => {
            next.status = VerificationStatus::Failed;
            next.resolved_at_ms = Some(now);
            next.rejection = Some(Decision {
                principal: principal.to_owned(),
                reason: Some(reason.to_owned()),
                at_ms: now,
            });
            VerificationResult {
                status: VerificationStatus::Failed,
                reason: Some(reason.to_owned()),
                verifier: Some(HumanVerifier::NAME.to_owned()),
                principal: Some(principal.to_owned()),
                missing: Vec::new(),
                metadata,
            }
        }
    };
    Ok((next, result))
}

fn non_blank(text: Option<&str>) -> Option<&str> {
    text.map(str::trim).filter(|t| !t.is_empty())
}

fn now_ms() -> u64 {
    unix_millis(SystemTime::now())
}
