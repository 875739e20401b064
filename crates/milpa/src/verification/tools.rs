//! [`VerificationTools`]: `request_verification` and `resolve_verification`.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::context::ToolContext;
use crate::definition::{ToolDefinition, ToolProvider};
use crate::registry::{RegistryError, ToolRegistry};
use crate::result::ToolResult;
use crate::verification::{
    ApprovalPolicy, HumanVerifier, VerificationError, VerificationRequest, VerificationStatus,
};

/// Name of the tool that opens a request.
pub const REQUEST_NAME: &str = "request_verification";
/// Name of the tool that resolves one.
pub const RESOLVE_NAME: &str = "resolve_verification";

/// The two verification tools over one [`HumanVerifier`].
///
/// Both register as mutating and *without* the registry's confirmation gate: opening a
/// request and resolving it already is a two-phase confirmation, and stacking a
/// confirmation token on top would turn two calls into four. (A channel whose policy
/// confirms every mutating tool, like `telegram`, still asks for a token.)
///
/// `request_verification` has no `decision` or `principal` argument at all: it can only
/// open a request. [`resolve_scopes`](Self::resolve_scopes) applies to
/// `resolve_verification` only, so a host can let any caller ask while only some may answer:
///
/// ```
/// use milpa::verification::{HumanVerifier, VerificationTools};
/// use milpa::{ErrorCode, ToolContext, ToolRegistry};
/// use serde_json::json;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let mut registry = ToolRegistry::new();
/// VerificationTools::new(HumanVerifier::in_memory())
///     .resolve_scopes(["verification:resolve"])
///     .register(&mut registry)?;
///
/// let agent = ToolContext::mcp("r1", Some("agent-7".into()), ["notes:read"]);
/// let opened = registry.call("request_verification", json!({"subject": "drop table"}), &agent).await;
/// assert!(opened.success);
/// let id = opened.data["request_id"].clone();
/// let answer = json!({"request_id": id, "decision": "grant", "principal": "alice"});
/// let refused = registry.call("resolve_verification", answer, &agent).await;
/// assert_eq!(refused.code(), Some(&ErrorCode::Forbidden));
/// # Ok::<(), milpa::RegistryError>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct VerificationTools {
    verifier: Arc<HumanVerifier>,
    resolve_scopes: Vec<String>,
}

impl VerificationTools {
    /// The tools over `verifier` (a [`HumanVerifier`] or an `Arc` of one, to share it with
    /// host code that checks request status).
    pub fn new(verifier: impl Into<Arc<HumanVerifier>>) -> Self {
        VerificationTools {
            verifier: verifier.into(),
            resolve_scopes: Vec::new(),
        }
    }

    /// Scopes of which a caller of `resolve_verification` needs one (none by default).
    pub fn resolve_scopes(mut self, scopes: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.resolve_scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// The verifier behind the tools.
    pub fn verifier(&self) -> &Arc<HumanVerifier> {
        &self.verifier
    }

    /// The two definitions: `request_verification`, then `resolve_verification`.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        let verifier = self.verifier.clone();
        let request = ToolDefinition::builder(REQUEST_NAME)
            .description(
                "Ask a human (or another agent) to approve an action. Returns a request_id; \
                 the action is approved only once someone resolves it with resolve_verification.",
            )
            .input_schema(request_schema())
            .mutating(true)
            .requires_confirmation(false)
            .asynchronous(move |args: Value, ctx: ToolContext| {
                let verifier = verifier.clone();
                async move { handle_request(&verifier, &args, &ctx).await }
            });
        let verifier = self.verifier.clone();
        let resolve = ToolDefinition::builder(RESOLVE_NAME)
            .description(
                "Grant or reject a pending verification request opened with \
                 request_verification. principal is who decides: it must be the caller itself \
                 (only a fully trusted caller may record someone else's decision).",
            )
            .input_schema(resolve_schema())
            .scopes(self.resolve_scopes.clone())
            .mutating(true)
            .requires_confirmation(false)
            .asynchronous(move |args: Value, ctx: ToolContext| {
                let verifier = verifier.clone();
                async move { handle_resolve(&verifier, &args, &ctx).await }
            });
        vec![request, resolve]
    }

    /// Registers both tools.
    pub fn register(&self, registry: &mut ToolRegistry) -> Result<(), RegistryError> {
        for definition in self.definitions() {
            registry.register(definition)?;
        }
        Ok(())
    }
}

impl ToolProvider for VerificationTools {
    fn tool_definitions(self: Arc<Self>) -> Vec<ToolDefinition> {
        self.definitions()
    }

    fn prompt_sections(&self) -> Vec<String> {
        vec![format!(
            "Before an action that needs a person's approval, call {REQUEST_NAME} with a short \
             subject and wait: the action is approved only when {RESOLVE_NAME} reports \
             verification_status \"passed\"."
        )]
    }
}

fn request_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "subject": {
                "type": "string",
                "description": "What needs approval, in words a person understands."
            },
            "policy": {
                "type": "string",
                "enum": ApprovalPolicy::ALL.map(ApprovalPolicy::as_str),
                "default": "single",
                "description": "How many distinct approvals it needs: single (1), dual (2), quorum (the host's quorum), auto (1)."
            },
            "requested_by": {
                "type": "string",
                "description": "Who asks; that principal cannot grant it. The caller; naming anyone else is refused unless the caller holds `*`."
            },
            "request_id": {
                "type": "string",
                "description": "An id of your own for the request (refused if it exists); one is generated otherwise."
            }
        },
        "required": ["subject"]
    })
}

fn resolve_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "request_id": {
                "type": "string",
                "description": "The request_id request_verification returned."
            },
            "decision": {
                "type": "string",
                "enum": ["grant", "reject"],
                "description": "grant or reject."
            },
            "principal": {
                "type": "string",
                "description": "Who decides."
            },
            "subject": {
                "type": "string",
                "description": "The request's subject, to guard against resolving the wrong request."
            },
            "reason": {
                "type": "string",
                "description": "Why (recorded with the decision)."
            }
        },
        "required": ["request_id", "decision", "principal"]
    })
}

/// `request_verification`: opens a request and answers with a confirmation result.
async fn handle_request(verifier: &HumanVerifier, args: &Value, ctx: &ToolContext) -> ToolResult {
    let Some(subject) = text_arg(args, "subject") else {
        return refusal(&VerificationError::invalid(
            "subject",
            "subject is required",
        ));
    };
    let policy = args
        .get("policy")
        .and_then(Value::as_str)
        .and_then(ApprovalPolicy::parse)
        .unwrap_or_default();
    // The requester is the caller: a `requested_by` naming someone else would let the
    // caller grant its own request. Only a fully trusted caller (holding `*`) may open a
    // request on someone's behalf.
    let requested_by = match (text_arg(args, "requested_by"), ctx.principal()) {
        (Some(named), caller) if Some(named) != caller && !holds_wildcard(ctx) => {
            return refusal(&VerificationError::invalid(
                "requested_by",
                format!(
                    "requested_by '{named}' is not the caller ('{}'): request_verification \
                     records the calling principal as the requester.",
                    caller.unwrap_or("anonymous")
                ),
            ));
        }
        (named, caller) => named.or(caller),
    };
    let mut request = VerificationRequest::new(subject).policy(policy);
    request.requested_by = requested_by.map(str::to_owned);
    request.id = text_arg(args, "request_id").map(str::to_owned);
    let record = match verifier.request(request).await {
        Ok(record) => record,
        Err(error) => return refusal(&error),
    };
    let message = format!(
        "Verification required for '{subject}' (policy: {policy}). Resolve by calling \
         {RESOLVE_NAME} with decision=grant|reject, a principal, and request_id={id}.",
        subject = record.subject,
        policy = record.policy,
        id = record.id,
    );
    ToolResult::confirmation(
        message,
        json!({
            "subject": record.subject,
            "policy": record.policy.as_str(),
            "request_id": record.id,
        }),
        "verify",
        record.subject.clone(),
        Value::String(record.subject.clone()),
    )
}

/// `resolve_verification`: records a grant or a reject.
async fn handle_resolve(verifier: &HumanVerifier, args: &Value, ctx: &ToolContext) -> ToolResult {
    let Some(request_id) = text_arg(args, "request_id") else {
        return refusal(&VerificationError::invalid(
            "request_id",
            "request_id is required",
        ));
    };
    let grant = match args.get("decision").and_then(Value::as_str) {
        Some("grant") => true,
        Some("reject") => false,
        _ => {
            return refusal(&VerificationError::invalid(
                "decision",
                "decision must be grant|reject",
            ));
        }
    };
    let Some(principal) = text_arg(args, "principal") else {
        return refusal(&VerificationError::invalid(
            "principal",
            "principal is required",
        ));
    };
    // The decider must be the caller: otherwise anyone allowed to resolve could claim to be
    // someone else and defeat the self-approval and distinct-approver checks. Only a fully
    // trusted caller (holding `*`, like the local shell or a trusted stdio process) may
    // record a decision on someone's behalf.
    if let Some(caller) = ctx.principal()
        && caller != principal
        && !holds_wildcard(ctx)
    {
        return ToolResult::forbidden(format!(
            "principal '{principal}' is not the caller ('{caller}'): resolve_verification \
                 records decisions under the caller's own principal."
        ));
    }
    let subject = text_arg(args, "subject");
    let reason = text_arg(args, "reason");

    if let Some(subject) = subject {
        match verifier.get(request_id).await {
            Ok(Some(record)) if record.subject != subject => {
                return refusal(&VerificationError::SubjectMismatch {
                    id: request_id.to_owned(),
                    subject: subject.to_owned(),
                });
            }
            Ok(Some(_)) => {}
            Ok(None) => {
                return refusal(&VerificationError::NotFound {
                    id: request_id.to_owned(),
                });
            }
            Err(error) => return refusal(&error),
        }
    }

    let outcome = if grant {
        verifier.grant(request_id, principal, reason).await
    } else {
        verifier.reject(request_id, principal, reason).await
    };
    let resolution = match outcome {
        Ok(resolution) => resolution,
        Err(error) => return refusal(&error),
    };
    // Display only: the request itself keeps its stored subject.
    let label = subject.unwrap_or(request_id);
    let record = &resolution.record;
    let message = match resolution.result.status {
        VerificationStatus::Passed => format!("Verification granted for '{label}'."),
        VerificationStatus::Failed => format!("Verification rejected for '{label}'."),
        status => format!(
            "Grant recorded for '{label}': {have} of {need} approvals (policy: {policy}); \
             the verification is still {status}.",
            have = record.grants.len(),
            need = record.required_grants,
            policy = record.policy,
        ),
    };
    ToolResult::success(resolution.result.to_value())
        .with_message(message)
        .with_meta(
            "verification_status",
            Value::from(resolution.result.status.as_str()),
        )
}

/// Whether the caller holds the literal `*` scope (the local shell, a trusted stdio
/// process, a manifest token its operator granted `*`), the only callers that may act in
/// someone else's name. An OAuth identity never holds it (an issuer's patterns are dropped)
/// and neither does the agent token `serve --http` makes without a manifest.
fn holds_wildcard(ctx: &ToolContext) -> bool {
    ctx.scopes().iter().any(|s| s == "*")
}

/// A trimmed, non-empty string argument.
fn text_arg<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|text| !text.is_empty())
}

/// The error result for a refused request or resolution: the message in `error`, the code
/// in `meta.code`, and `{field, message}` in `data` (the original's shape).
fn refusal(error: &VerificationError) -> ToolResult {
    let message = error.to_string();
    let mut result = ToolResult::error_with_code(error.code(), message.clone());
    result.data = json!({"field": error.field(), "message": message});
    result
}
