//! [`ApprovalQueue`]: parks calls, lists them for people, records decisions, and lets a
//! granted call run once.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::Value;
use tokio::sync::Notify;

use crate::approval::{
    APPROVE_SCOPE, Approval, ApprovalError, ApprovalState, DEFAULT_TTL, DefinitionChange,
    ParkedAbout, ParkedCall, Verdict, rfc3339,
};
use crate::channel;
use crate::confirm::{ConfirmationBinding, unix_millis};
use crate::context::ToolContext;
use crate::verification::{
    HumanVerifier, VerificationError, VerificationRequest, VerificationStoreError, new_request_id,
};

/// How often [`ApprovalQueue::wait_for_decision`] re-reads the store. Decisions made in
/// this process wake waiters at once; this bounds the delay for decisions made by another
/// process sharing the store (the `milpa approvals` command, a second replica).
const DECISION_POLL: Duration = Duration::from_millis(250);

/// How often claiming a granted call retries after losing a compare-and-set race (to a
/// concurrent replay) before reporting the token spent.
const MAX_CLAIM_ATTEMPTS: usize = 8;

/// The approval queue: parked tool calls and verification requests in one
/// [`VerificationStore`](crate::verification::VerificationStore), decided by people.
///
/// Cheap to share (`Arc` it); every method is safe to call from many tasks and, with a
/// durable store, from many processes.
pub struct ApprovalQueue {
    verifier: Arc<HumanVerifier>,
    ttl: Duration,
    decided: Notify,
    /// What the calls parked here are tagged with.
    server: Option<Arc<str>>,
}

impl std::fmt::Debug for ApprovalQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApprovalQueue")
            .field("verifier", &self.verifier)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

/// What [`ApprovalQueue::gate_access`] decided of a read or prompt request.
pub(crate) enum AccessGate {
    /// A grant was claimed for it: go on.
    Go,
    /// It waits for a person: this approval.
    Pending(Approval),
    /// A person rejected it recently.
    Rejected(Approval),
}

/// How many of the most recent decisions, and of the waiting approvals, a read that waits
/// for a person searches for its own.
pub(crate) const ACCESS_SCAN: usize = 256;

/// What a replay with an approval id may do.
pub(crate) enum Claim {
    /// Granted and now claimed: run these (the parked) arguments.
    Run(Value),
    /// Nobody decided yet.
    Pending(Approval),
    /// A person rejected it.
    Rejected(Approval),
    /// Unknown, not this caller's, expired or run already: the invalid-token refusal.
    Invalid,
}

impl ApprovalQueue {
    /// A queue over `verifier`'s store, with the default TTL of one hour. Share the verifier
    /// with [`VerificationTools`](crate::verification::VerificationTools) so parked calls
    /// and verification requests form one queue.
    pub fn new(verifier: impl Into<Arc<HumanVerifier>>) -> Self {
        ApprovalQueue {
            verifier: verifier.into(),
            ttl: DEFAULT_TTL,
            decided: Notify::new(),
            server: None,
        }
    }

    /// A queue in process memory (lost on restart; fine for tests and one process).
    pub fn in_memory() -> Self {
        Self::new(HumanVerifier::in_memory())
    }

    /// How long a parked call waits for a decision (and then for its replay).
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// The TTL of parked calls.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Tags every call this queue parks with the server's `name`, so that servers sharing
    /// one store can each show their own queue ([`Approval::is_for`]).
    pub fn with_server(mut self, name: impl Into<Arc<str>>) -> Self {
        self.server = Some(name.into());
        self
    }

    /// The name calls parked here are tagged with.
    pub fn server(&self) -> Option<&str> {
        self.server.as_deref()
    }

    /// The verifier (and through it the store) behind the queue.
    pub fn verifier(&self) -> &Arc<HumanVerifier> {
        &self.verifier
    }

    /// The approval with that id, whatever its state.
    pub async fn get(&self, id: &str) -> Result<Option<Approval>, ApprovalError> {
        Ok(self.verifier.get(id).await?.map(Approval::from_record))
    }

    /// Up to `limit` approvals waiting for a decision, oldest first; expired parked calls
    /// are left out.
    pub async fn pending(&self, limit: usize) -> Result<Vec<Approval>, ApprovalError> {
        let now = now_ms();
        // Expired items are filtered after reading: read a margin more so `limit` live
        // items still come back when a few expired ones sit at the front.
        let records = self
            .verifier
            .store()
            .list_pending(limit.saturating_mul(2).max(limit + 16))
            .await
            .map_err(store_failure)?;
        Ok(records
            .into_iter()
            .map(Approval::from_record)
            .filter(|approval| !approval.is_expired(now))
            .take(limit)
            .collect())
    }

    /// Up to `limit` approvals waiting for a decision that this queue's server shows
    /// ([`Approval::is_for`]; all of them when the queue has no server name), oldest first.
    pub async fn pending_here(&self, limit: usize) -> Result<Vec<Approval>, ApprovalError> {
        let Some(server) = self.server.as_deref() else {
            return self.pending(limit).await;
        };
        // Other servers' items are left out after reading: read a margin more.
        let all = self
            .pending(limit.saturating_mul(4).max(limit + 64))
            .await?;
        Ok(all
            .into_iter()
            .filter(|approval| approval.is_for(server))
            .take(limit)
            .collect())
    }

    /// Up to `limit` decided approvals, most recent decision first.
    pub async fn decided(&self, limit: usize) -> Result<Vec<Approval>, ApprovalError> {
        let records = self
            .verifier
            .store()
            .list_resolved(limit)
            .await
            .map_err(store_failure)?;
        Ok(records.into_iter().map(Approval::from_record).collect())
    }

    /// Records `approver`'s decision on approval `id`.
    ///
    /// Refused (nothing recorded): an anonymous approver; one without [`APPROVE_SCOPE`]
    /// unless on the `cli` channel; the caller of a parked call (grant or reject) or the
    /// requester of a verification (grant); an unknown, expired or already decided id.
    /// Concurrent decisions on one id record exactly one (a compare-and-set).
    pub async fn decide(
        &self,
        id: &str,
        verdict: Verdict,
        reason: Option<&str>,
        approver: &ToolContext,
    ) -> Result<Approval, ApprovalError> {
        let id = id.trim();
        let Some(principal) = approver.principal() else {
            return Err(ApprovalError::Anonymous);
        };
        if approver.channel() != channel::CLI && !approver.has_scope(APPROVE_SCOPE) {
            return Err(ApprovalError::NotAllowed {
                principal: principal.to_owned(),
                channel: approver.channel().to_owned(),
            });
        }
        let current = self
            .get(id)
            .await?
            .ok_or_else(|| ApprovalError::NotFound { id: id.to_owned() })?;
        let now = now_ms();
        match current.state(now) {
            ApprovalState::Pending => {}
            ApprovalState::Expired => {
                return Err(ApprovalError::Expired {
                    id: id.to_owned(),
                    expired_at: current.expires_at_ms().map(rfc3339).unwrap_or_default(),
                });
            }
            state => return Err(already_decided(&current, state)),
        }
        if current.parked().is_some() && current.requested_by() == Some(principal) {
            return Err(ApprovalError::SelfApproval {
                id: id.to_owned(),
                principal: principal.to_owned(),
            });
        }
        let outcome = self
            .verifier
            .resolve_approval(id, principal, verdict, reason)
            .await;
        let resolution = match outcome {
            Ok(resolution) => resolution,
            // Lost a race to another decision: report what won.
            Err(VerificationError::AlreadyResolved { .. }) => {
                let now = now_ms();
                return Err(match self.get(id).await? {
                    Some(winner) => already_decided(&winner, winner.state(now)),
                    None => ApprovalError::NotFound { id: id.to_owned() },
                });
            }
            Err(other) => return Err(other.into()),
        };
        self.decided.notify_waiters();
        Ok(Approval::from_record(resolution.record))
    }

    /// Waits until approval `id` is decided (or expires) and returns it as it then stands.
    /// Decisions in this process wake the waiter at once; decisions by other processes are
    /// seen within a quarter of a second. Dropping the future stops waiting (a cancelled
    /// request).
    pub async fn wait_for_decision(&self, id: &str) -> Result<Approval, ApprovalError> {
        self.wait_for_decision_polling(id, DECISION_POLL).await
    }

    /// [`wait_for_decision`](Self::wait_for_decision), re-reading the store every `poll`
    /// for decisions made by other processes: a waiter that may wait for days (a held
    /// definition change) reads less often than a caller waiting on its own call.
    pub async fn wait_for_decision_polling(
        &self,
        id: &str,
        poll: Duration,
    ) -> Result<Approval, ApprovalError> {
        loop {
            let notified = self.decided.notified();
            tokio::pin!(notified);
            // Registered before reading, so a decision between the read and the wait
            // still wakes us.
            notified.as_mut().enable();
            let approval = self
                .get(id)
                .await?
                .ok_or_else(|| ApprovalError::NotFound { id: id.to_owned() })?;
            let now = now_ms();
            let mut poll = poll;
            match approval.state(now) {
                ApprovalState::Pending => {
                    if let Some(expires) = approval.expires_at_ms() {
                        poll = poll.min(Duration::from_millis(expires.saturating_sub(now) + 1));
                    }
                }
                _ => return Ok(approval),
            }
            tokio::select! {
                _ = &mut notified => {}
                _ = tokio::time::sleep(poll) => {}
            }
        }
    }

    /// Holds `change` for a person: opens its approval (the id
    /// [`DefinitionChange::approval_id`], tagged with this queue's server), or finds the one
    /// opened before for the same change (by this process or another). Returns the approval
    /// and whether it was opened now. A held change does not expire.
    pub async fn hold_change(
        &self,
        mut change: DefinitionChange,
    ) -> Result<(Approval, bool), ApprovalError> {
        change.server = self.server.as_deref().map(str::to_owned);
        let id = change.approval_id();
        if let Some(existing) = self.get(&id).await? {
            return Ok((existing, false));
        }
        let request = VerificationRequest::new(change.summary())
            .id(id.clone())
            .payload(change.to_payload());
        match self.verifier.request(request).await {
            Ok(record) => Ok((Approval::from_record(record), true)),
            // Opened by another process between the read and the create.
            Err(VerificationError::AlreadyExists { .. }) => match self.get(&id).await? {
                Some(existing) => Ok((existing, false)),
                None => Err(ApprovalError::NotFound { id }),
            },
            Err(other) => Err(other.into()),
        }
    }

    /// Parks a call: stores it as a pending approval and tells the verifier's dispatcher
    /// (`verification.requested`), which is where notifications hook in.
    pub(crate) async fn park(
        &self,
        summary: String,
        binding: ConfirmationBinding,
        args: Value,
        about: ParkedAbout,
    ) -> Result<Approval, ApprovalError> {
        let expires_at_ms = unix_millis(SystemTime::now() + self.ttl);
        let requested_by = binding.principal.clone();
        let parked = ParkedCall {
            binding,
            args,
            expires_at_ms,
            executed_at_ms: None,
            server: self.server.as_deref().map(str::to_owned),
            about,
        };
        let mut request = VerificationRequest::new(summary)
            .id(new_request_id())
            .payload(parked.to_payload());
        request.requested_by = requested_by;
        let record = self.verifier.request(request).await?;
        Ok(Approval::from_record(record))
    }

    /// Whether a read or a prompt request (`binding`: `resources/read` or `prompts/get` by
    /// a caller; `args`: the URI, or the prompt and its arguments) that waits for a person
    /// may go on. The decisions and the waiting approvals are searched (the most recent
    /// [`ACCESS_SCAN`] of each) for one of the same caller and the same `args`:
    ///
    /// - a grant not used yet is claimed (so it lets one request through): [`AccessGate::Go`];
    /// - a rejection decided within this queue's TTL: [`AccessGate::Rejected`] (after that,
    ///   asking again opens a new approval);
    /// - a waiting one: [`AccessGate::Pending`] with it;
    /// - none: a new approval is opened (`summary`), [`AccessGate::Pending`] with it.
    pub(crate) async fn gate_access(
        &self,
        summary: String,
        binding: ConfirmationBinding,
        args: Value,
        about: ParkedAbout,
    ) -> Result<AccessGate, ApprovalError> {
        let now = now_ms();
        let same = |approval: &Approval| {
            approval
                .parked()
                .is_some_and(|parked| parked.binding == binding && parked.args == args)
        };
        let ttl_ms = u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX);
        for approval in self.decided(ACCESS_SCAN).await? {
            if !same(&approval) {
                continue;
            }
            match approval.state(now) {
                ApprovalState::Granted | ApprovalState::Waived => {
                    if let Claim::Run(_) = self.claim(approval.id(), &binding).await? {
                        return Ok(AccessGate::Go);
                    }
                }
                ApprovalState::Rejected
                    if approval
                        .decided_at_ms()
                        .is_some_and(|at| now.saturating_sub(at) < ttl_ms) =>
                {
                    return Ok(AccessGate::Rejected(approval));
                }
                _ => {}
            }
        }
        if let Some(waiting) = self
            .pending(ACCESS_SCAN)
            .await?
            .into_iter()
            .find(|approval| same(approval))
        {
            return Ok(AccessGate::Pending(waiting));
        }
        let opened = self.park(summary, binding, args, about).await?;
        Ok(AccessGate::Pending(opened))
    }

    /// The parked arguments of approval `id` if it is a parked call of `binding` (whatever
    /// its state); changes nothing. The authorize stage judges a replay on them.
    pub(crate) async fn parked_args(
        &self,
        id: &str,
        binding: &ConfirmationBinding,
    ) -> Result<Option<Value>, ApprovalError> {
        let Some(record) = self.verifier.store().get(id).await.map_err(store_failure)? else {
            return Ok(None);
        };
        Ok(ParkedCall::from_payload(&record.payload)
            .filter(|parked| &parked.binding == binding)
            .map(|parked| parked.args))
    }

    /// What a replay of approval `id` by `binding` may do; claims a granted call (marks it
    /// run) so that it runs once, however many replays race.
    pub(crate) async fn claim(
        &self,
        id: &str,
        binding: &ConfirmationBinding,
    ) -> Result<Claim, ApprovalError> {
        let store = self.verifier.store();
        for _ in 0..MAX_CLAIM_ATTEMPTS {
            let Some(record) = store.get(id).await.map_err(store_failure)? else {
                return Ok(Claim::Invalid);
            };
            let approval = Approval::from_record(record);
            let Some(parked) = approval.parked() else {
                return Ok(Claim::Invalid);
            };
            if &parked.binding != binding {
                return Ok(Claim::Invalid);
            }
            let now = now_ms();
            match approval.state(now) {
                ApprovalState::Pending => return Ok(Claim::Pending(approval)),
                ApprovalState::Rejected => return Ok(Claim::Rejected(approval)),
                ApprovalState::Granted | ApprovalState::Waived if !parked.is_expired(now) => {}
                _ => return Ok(Claim::Invalid),
            }
            let mut claimed = parked.clone();
            claimed.executed_at_ms = Some(now);
            let args = claimed.args.clone();
            let mut next = approval.record().clone();
            next.payload = claimed.to_payload();
            let revision = next.revision;
            if store
                .compare_and_set(revision, next)
                .await
                .map_err(store_failure)?
            {
                return Ok(Claim::Run(args));
            }
        }
        Ok(Claim::Invalid)
    }
}

fn already_decided(approval: &Approval, state: ApprovalState) -> ApprovalError {
    ApprovalError::AlreadyDecided {
        id: approval.id().to_owned(),
        state,
        by: approval.decided_by().map(|(who, _)| who.to_owned()),
    }
}

fn store_failure(error: VerificationStoreError) -> ApprovalError {
    match error {
        VerificationStoreError::Backend(cause) => ApprovalError::Store(cause),
        other => ApprovalError::Verification(VerificationError::Store(other)),
    }
}

fn now_ms() -> u64 {
    unix_millis(SystemTime::now())
}
