//! The governed path of a resource read and a prompt request: [`AccessStep::ORDER`], run
//! by [`read_resource`] and [`get_prompt`] step by step.
//!
//! ```text
//! resolve → authorize → rate_limit → approve → execute → audit
//! ```
//!
//! A tool call's other stages have nothing to do here: there are no arguments to validate
//! against a schema or clamp (a prompt's required arguments are checked at `resolve`), a
//! read changes nothing (so no plan mode and no caller's confirmation token, which a read
//! has no way to send back), and there is no listener that could answer instead. What a
//! read may wait for is a person: `approve` holds a resource or prompt marked
//! [`with_human_approval`](crate::catalog::Resource::with_human_approval) until a person
//! other than the caller grants it (see [`ApprovalQueue`](crate::approval::ApprovalQueue)). What is left runs in the call's order, with the call's
//! collaborators: the same gate, limiter, audit sink and redactor.

use crate::events::{Accessed, Event};
use std::collections::BTreeMap;
use std::future::IntoFuture;

use serde_json::{Map, Value};

use crate::approval::{AccessGate, Approval, ParkedAbout};
use crate::audit::{AuditOutcome, AuditRecord, MAX_TOOL_NAME_BYTES, clip};
use crate::catalog::{CatalogError, PromptReply, ResourceContents};
use crate::confirm::ConfirmationBinding;
use crate::context::ToolContext;
use crate::policy::{Access, AccessInput, Authorization, PolicyDecision, Subject};
use crate::rate_limit::{COST_READ, RateDecision, RateKey};
use crate::registry::ToolRegistry;
use crate::result::ErrorCode;
use crate::wiring::Wiring;

/// One stage of a read or a prompt request, in execution order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AccessStep {
    /// Find who serves the URI or the prompt (and check a prompt's required arguments).
    Resolve,
    /// Ask the policy gate, then the call policy.
    Authorize,
    /// Charge the caller's budget.
    RateLimit,
    /// For a resource or prompt that waits for a person: go on only with a grant (one
    /// grant, one request); otherwise park the request in the approval queue and refuse it
    /// `APPROVAL_PENDING`.
    Approve,
    /// Read the resource, or render the prompt.
    Execute,
    /// Record the outcome.
    Audit,
}

impl AccessStep {
    /// Every stage, in the order [`ToolRegistry::read_resource`] and
    /// [`ToolRegistry::get_prompt`] run them.
    pub const ORDER: [AccessStep; 6] = [
        AccessStep::Resolve,
        AccessStep::Authorize,
        AccessStep::RateLimit,
        AccessStep::Approve,
        AccessStep::Execute,
        AccessStep::Audit,
    ];

    /// The wire name, e.g. `rate_limit` (as the call's [`StepKind`](crate::StepKind)).
    pub fn as_str(self) -> &'static str {
        match self {
            AccessStep::Resolve => "resolve",
            AccessStep::Authorize => "authorize",
            AccessStep::RateLimit => "rate_limit",
            AccessStep::Approve => "approve",
            AccessStep::Execute => "execute",
            AccessStep::Audit => "audit",
        }
    }
}

/// Why a read or a prompt request was refused or failed: the call's error code and
/// message (the same self-explaining denials a tool call gets).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
#[non_exhaustive]
pub struct AccessRefusal {
    code: ErrorCode,
    message: String,
    required_scopes: Vec<String>,
    retry_after_seconds: Option<u64>,
    approval_id: Option<String>,
}

impl AccessRefusal {
    pub(crate) fn new(code: ErrorCode, message: impl Into<String>) -> AccessRefusal {
        AccessRefusal {
            code,
            message: message.into(),
            required_scopes: Vec::new(),
            retry_after_seconds: None,
            approval_id: None,
        }
    }

    /// For a request that waits for a person (`APPROVAL_PENDING`), or one a person
    /// rejected: the approval's id (`milpa approvals show ID`, the approvals page).
    pub fn approval_id(&self) -> Option<&str> {
        self.approval_id.as_deref()
    }

    /// The code, as a tool result would carry it: `NOT_FOUND`, `VALIDATION_ERROR`,
    /// `FORBIDDEN`, `RATE_LIMITED`, `APPROVAL_PENDING`, `RESULT_TOO_LARGE`, `UNAVAILABLE`,
    /// `INTERNAL_ERROR`.
    pub fn code(&self) -> &ErrorCode {
        &self.code
    }

    /// What the caller is told.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// For a missing scope: every scope the request needs (for an OAuth challenge).
    pub fn required_scopes(&self) -> &[String] {
        &self.required_scopes
    }

    /// For a rate limit: when to try again, in seconds.
    pub fn retry_after_seconds(&self) -> Option<u64> {
        self.retry_after_seconds
    }
}

/// One request on its way through the stages.
struct Governed<'a> {
    wiring: &'a Wiring,
    ctx: &'a ToolContext,
    access: Access,
    /// What the caller asked for (a URI, a prompt name).
    asked: &'a str,
    /// What the gate and the limiter see: the resource's URI or its template, the prompt.
    name: &'a str,
    scopes: &'a [String],
    /// Whether it waits for a person's approval (found at `resolve`).
    human_approval: bool,
    args: &'a Value,
    started: crate::pipeline::clock::Tick,
}

impl<'a> Governed<'a> {
    fn new(
        wiring: &'a Wiring,
        ctx: &'a ToolContext,
        access: Access,
        asked: &'a str,
        args: &'a Value,
    ) -> Self {
        Governed {
            wiring,
            ctx,
            access,
            asked,
            name: asked,
            scopes: &[],
            human_approval: false,
            args,
            started: wiring.clock.now(),
        }
    }

    /// The caller's own budget, spent before anything is looked up (as a call's).
    fn charge_caller(&self) -> Result<(), (AccessRefusal, AuditOutcome)> {
        if let Some(budget) = &self.wiring.caller_budget
            && let RateDecision::Denied { retry_after } = budget.charge(self.ctx)
        {
            let quota = budget.quota();
            let mut refusal = AccessRefusal::new(
                ErrorCode::RateLimited,
                format!(
                    "Rate limit exceeded for caller '{}': max {} tokens per {}s.",
                    self.ctx.principal().unwrap_or("(anonymous)"),
                    quota.max_tokens,
                    quota.window.as_secs()
                ),
            );
            refusal.retry_after_seconds = Some(whole_seconds(retry_after));
            return Err((refusal, AuditOutcome::RateLimited));
        }
        Ok(())
    }

    async fn authorize(&self) -> Result<(), (AccessRefusal, AuditOutcome)> {
        let gate = &self.wiring.gate;
        let policy = gate.lookup_warning_if_unknown(self.ctx.channel());
        let subject = Subject::read(self.access, self.name, self.scopes);
        let denied = |refusal| Err((refusal, AuditOutcome::Denied));
        match gate.authorize_subject(&policy, self.ctx, subject).await {
            Authorization::Allowed => {}
            Authorization::InsufficientScope { reason, needed } => {
                let mut refusal = AccessRefusal::new(ErrorCode::Forbidden, reason);
                refusal.required_scopes = needed;
                return denied(refusal);
            }
            Authorization::Denied(reason) => {
                return denied(AccessRefusal::new(ErrorCode::Forbidden, reason));
            }
        }
        if let Some(policy) = gate.call_policy() {
            let input = AccessInput::new(self.ctx, self.access, self.asked, self.args);
            if let PolicyDecision::Deny(reason) = policy.evaluate_access(input).await {
                return denied(AccessRefusal::new(ErrorCode::Forbidden, reason));
            }
        }
        Ok(())
    }

    async fn rate_limit(
        &self,
        registry: &ToolRegistry,
    ) -> Result<(), (AccessRefusal, AuditOutcome)> {
        let Some(limiter) = self.wiring.rate_limiter.as_ref() else {
            return Ok(());
        };
        // Its own bucket per resource (or template) and prompt: a read never spends a
        // tool's budget of the same name.
        let subject = format!("{}:{}", self.access.noun(), self.name);
        let key = RateKey {
            channel: self.ctx.channel(),
            principal: self.ctx.raw_principal().unwrap_or(""),
            tool: &subject,
        };
        let quota = registry.default_quota();
        match limiter.consume(key, COST_READ, quota).await {
            Ok(RateDecision::Allowed { .. }) => Ok(()),
            Ok(RateDecision::Denied { retry_after }) => {
                let mut refusal = AccessRefusal::new(
                    ErrorCode::RateLimited,
                    format!(
                        "Rate limit exceeded for '{key}': max {} tokens per {}s.",
                        quota.max_tokens,
                        quota.window.as_secs()
                    ),
                );
                refusal.retry_after_seconds = Some(whole_seconds(retry_after));
                Err((refusal, AuditOutcome::RateLimited))
            }
            Err(error) => Err((
                AccessRefusal::new(
                    ErrorCode::Unavailable,
                    format!("The rate limiter is unavailable ({error}); the request was refused."),
                ),
                AuditOutcome::Unavailable,
            )),
        }
    }

    /// Goes on for a request that needs no person, or one a person granted (the grant is
    /// used up); parks the request for a person otherwise (see
    /// [`ApprovalQueue::gate_access`](crate::approval::ApprovalQueue)).
    async fn approve(&self) -> Result<(), (AccessRefusal, AuditOutcome)> {
        if !self.human_approval {
            return Ok(());
        }
        let (method, what, args) = match self.access {
            Access::GetPrompt => (
                "prompts/get",
                format!(
                    "Render the prompt '{}'",
                    clip(self.asked, MAX_TOOL_NAME_BYTES)
                ),
                serde_json::json!({"name": self.asked, "arguments": self.args}),
            ),
            _ => (
                "resources/read",
                format!(
                    "Read the resource {}",
                    clip(self.asked, MAX_TOOL_NAME_BYTES)
                ),
                serde_json::json!({"uri": self.asked}),
            ),
        };
        let binding = ConfirmationBinding::for_call(method, self.ctx);
        let gate = self
            .wiring
            .approvals
            .gate_access(
                what.clone(),
                binding,
                args,
                ParkedAbout::of_access(self.ctx),
            )
            .await;
        let refused = |code, message: String, approval: &Approval| {
            let mut refusal = AccessRefusal::new(code, message);
            refusal.approval_id = Some(approval.id().to_owned());
            refusal
        };
        match gate {
            Ok(AccessGate::Go) => Ok(()),
            Ok(AccessGate::Pending(approval)) => Err((
                refused(
                    ErrorCode::ApprovalPending,
                    format!(
                        "{what} waits for a person's approval (approval {id}): someone other than the caller grants it with `milpa approvals grant {id}` or on the approvals page, then the same request goes through once.",
                        id = approval.id()
                    ),
                    &approval,
                ),
                AuditOutcome::ApprovalPending,
            )),
            Ok(AccessGate::Rejected(approval)) => {
                let (who, reason) = approval.decided_by().unwrap_or(("someone", None));
                Err((
                    refused(
                        ErrorCode::Forbidden,
                        format!(
                            "Rejected by {who}: {reason} (approval {id}); nothing was read.",
                            reason = reason.unwrap_or("no reason given"),
                            id = approval.id()
                        ),
                        &approval,
                    ),
                    AuditOutcome::Denied,
                ))
            }
            // Fail closed: without the queue nothing can be approved.
            Err(error) => Err((
                AccessRefusal::new(
                    ErrorCode::Unavailable,
                    format!(
                        "The approval queue is unavailable ({error}); the request was refused."
                    ),
                ),
                AuditOutcome::Unavailable,
            )),
        }
    }

    /// What the provider answered, capped like a tool's result.
    fn executed<T>(
        &self,
        answer: Result<T, CatalogError>,
        wire_len: impl Fn(&T) -> usize,
    ) -> Result<T, (AccessRefusal, AuditOutcome)> {
        match answer {
            Ok(value) => {
                let cap = self.wiring.max_result_bytes;
                let len = wire_len(&value);
                if len > cap {
                    return Err((
                        AccessRefusal::new(
                            ErrorCode::ResultTooLarge,
                            format!(
                                "The {} '{}' is {len} bytes, over the {cap}-byte cap.",
                                self.access.noun(),
                                clip(self.asked, MAX_TOOL_NAME_BYTES)
                            ),
                        ),
                        AuditOutcome::Failed,
                    ));
                }
                Ok(value)
            }
            Err(CatalogError::NotFound(_)) => Err(self.not_found()),
            Err(CatalogError::InvalidArguments(message)) => Err((
                AccessRefusal::new(ErrorCode::ValidationError, message),
                AuditOutcome::InvalidArguments,
            )),
            Err(error) => {
                tracing::warn!(target: "milpa::catalog", name = self.asked, error = &error as &dyn std::error::Error, "provider failed");
                Err((
                    AccessRefusal::new(ErrorCode::InternalError, error.to_string()),
                    AuditOutcome::Failed,
                ))
            }
        }
    }

    fn not_found(&self) -> (AccessRefusal, AuditOutcome) {
        not_found(self.access, self.asked)
    }

    /// The one record of the request, however it ended.
    fn audit(&self, ended: Result<(), &(AccessRefusal, AuditOutcome)>) {
        let (outcome, refusal) = match ended {
            Ok(()) => (AuditOutcome::Executed, None),
            Err((refusal, outcome)) => (*outcome, Some(refusal)),
        };
        let wiring = self.wiring;
        let error = refusal.map(|r| {
            let scrubbed = wiring.redactor.scrub(&r.message, self.args);
            clip(&scrubbed, wiring.audit_limits.max_error_bytes).into_owned()
        });
        let took_ms = wiring
            .clock
            .millis_between(self.started, wiring.clock.now());
        wiring.audit.record(&AuditRecord {
            request_id: self.ctx.request_id(),
            channel: self.ctx.channel(),
            tool: &clip(self.asked, MAX_TOOL_NAME_BYTES),
            kind: self.access,
            principal: self.ctx.principal(),
            outcome,
            success: refusal.is_none(),
            code: refusal.map(|r| &r.code),
            error: error.as_deref(),
            took_ms,
            timeout_exceeded: false,
            args: self.args,
            redactor: &wiring.redactor,
            count: 1,
            ip: self.ctx.ip(),
            max_args_bytes: wiring.audit_limits.max_args_bytes,
        });
        // After the record, as a call's events: only for what ran (its provider answered
        // or failed); a refusal by the gates has its record only. The message is the
        // record's, secrets scrubbed.
        if let Some(dispatcher) = &wiring.dispatcher
            && matches!(outcome, AuditOutcome::Executed | AuditOutcome::Failed)
        {
            dispatcher.dispatch(&Event::Accessed(Accessed {
                access: self.access,
                name: self.asked,
                ctx: self.ctx,
                failure: refusal.map(|r| (&r.code, error.as_deref().unwrap_or_default())),
                took_ms,
            }));
        }
    }
}

/// Nothing serves what was asked (a URI, a prompt name; quoted cut when long).
fn not_found(access: Access, asked: &str) -> Stop {
    let asked = clip(asked, MAX_TOOL_NAME_BYTES);
    let message = match access {
        Access::GetPrompt => format!("Prompt not found: {asked}"),
        _ => format!("Resource not found: {asked}"),
    };
    (
        AccessRefusal::new(ErrorCode::NotFound, message),
        AuditOutcome::NotFound,
    )
}

fn whole_seconds(wait: std::time::Duration) -> u64 {
    wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
}

/// Why a request stopped before its end: what the caller is told, and the record's outcome.
type Stop = (AccessRefusal, AuditOutcome);

/// What `resolve` found: the name and scopes the gate sees, whether it waits for a
/// person, and the work `execute` then runs.
type Found<'a, Work> = (&'a str, &'a [String], bool, Work);

/// The one executor of [`AccessStep::ORDER`]. `resolve` finds who serves the request,
/// returning what the gate sees and the work `execute` then runs; every way the request
/// ends is audited once.
async fn run_steps<'a, T, Work, Done>(
    request: &mut Governed<'a>,
    registry: &ToolRegistry,
    resolve: impl FnOnce() -> Result<Found<'a, Work>, Stop>,
    wire_len: impl Fn(&T) -> usize,
) -> Result<T, AccessRefusal>
where
    Work: FnOnce() -> Done,
    Done: IntoFuture<Output = Result<T, CatalogError>>,
{
    let mut resolve = Some(resolve);
    let mut work = None;
    let mut value = None;
    let mut ended: Result<(), Stop> = Ok(());
    for step in AccessStep::ORDER {
        let flow = match step {
            AccessStep::Resolve => match resolve.take() {
                Some(resolve) => request.charge_caller().and_then(|()| resolve()).map(
                    |(name, scopes, human_approval, found)| {
                        (request.name, request.scopes) = (name, scopes);
                        request.human_approval = human_approval;
                        work = Some(found);
                    },
                ),
                None => Err(request.not_found()),
            },
            AccessStep::Authorize => request.authorize().await,
            AccessStep::RateLimit => request.rate_limit(registry).await,
            AccessStep::Approve => request.approve().await,
            AccessStep::Execute => match work.take() {
                Some(work) => {
                    let answer = work().await;
                    request
                        .executed(answer, &wire_len)
                        .map(|answer| value = Some(answer))
                }
                None => Err(request.not_found()),
            },
            AccessStep::Audit => {
                request.audit(ended.as_ref().map(|_| ()));
                break;
            }
        };
        if let Err(stop) = flow {
            ended = Err(stop);
            request.audit(ended.as_ref().map(|_| ()));
            break;
        }
    }
    match (ended, value) {
        (Err((refusal, _)), _) => Err(refusal),
        (Ok(()), Some(value)) => Ok(value),
        (Ok(()), None) => Err(request.not_found().0),
    }
}

/// Reads `uri` for `ctx` through [`AccessStep::ORDER`].
pub(crate) async fn read_resource(
    registry: &ToolRegistry,
    uri: &str,
    ctx: &ToolContext,
) -> Result<Vec<ResourceContents>, AccessRefusal> {
    let args = Value::Object(Map::new());
    // Held to the request's end: a change of the lists meanwhile does not pull its
    // provider away.
    let catalog = registry.catalog().snapshot();
    let mut request = Governed::new(registry.wiring(), ctx, Access::ReadResource, uri, &args);
    let resolve = || {
        let found = catalog
            .resolve_resource(uri)
            .ok_or_else(|| not_found(Access::ReadResource, uri))?;
        let provider = found.provider;
        Ok((found.name, found.scopes, found.human_approval, move || {
            provider.read(uri, ctx)
        }))
    };
    run_steps(
        &mut request,
        registry,
        resolve,
        |pieces: &Vec<ResourceContents>| pieces.iter().map(ResourceContents::wire_len).sum(),
    )
    .await
}

/// Renders prompt `name` with `arguments` for `ctx` through [`AccessStep::ORDER`].
pub(crate) async fn get_prompt(
    registry: &ToolRegistry,
    name: &str,
    arguments: &BTreeMap<String, String>,
    ctx: &ToolContext,
) -> Result<PromptReply, AccessRefusal> {
    // The arguments as the record (and the call policy) see them.
    let args = Value::Object(
        arguments
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect(),
    );
    let catalog = registry.catalog().snapshot();
    let mut request = Governed::new(registry.wiring(), ctx, Access::GetPrompt, name, &args);
    let resolve = || {
        let (prompt, provider) = catalog
            .prompt(name)
            .ok_or_else(|| not_found(Access::GetPrompt, name))?;
        let missing = prompt.missing(arguments);
        if !missing.is_empty() {
            return Err((
                AccessRefusal::new(
                    ErrorCode::ValidationError,
                    format!(
                        "Missing required argument(s) for prompt '{name}': {}",
                        missing.join(", ")
                    ),
                ),
                AuditOutcome::InvalidArguments,
            ));
        }
        Ok((
            prompt.name(),
            prompt.scopes(),
            prompt.requires_human_approval(),
            move || provider.get(name, arguments, ctx),
        ))
    };
    run_steps(&mut request, registry, resolve, |reply: &PromptReply| {
        reply.messages.iter().map(|m| m.wire_len()).sum()
    })
    .await
}
