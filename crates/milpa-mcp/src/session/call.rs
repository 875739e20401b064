//! A `tools/call`'s life: registered in the in-flight table (so `notifications/cancelled`
//! finds it), run through the registry with a context built from its caller, answered —
//! or dropped unanswered once cancelled.

use std::collections::HashMap;
use std::sync::Arc;

use milpa::call_span::McpAttributes;
use milpa::{
    CallHandle, CallOutcome, ToolContext, channel, generate_request_id, split_confirm_token,
};
use parking_lot::Mutex;
use serde_json::Value;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::call_params::CallParams;
use super::confirm::confirm_by_elicitation;
use super::mrtr::Outcome;
use super::reply::Reply;
use super::{Caller, Dispatch, Shared};
use crate::client_link::{ClientLink, Route};
use crate::jsonrpc::{ErrorObject, INVALID_REQUEST, RequestId};
use crate::protocol::{MISSING_REQUIRED_CLIENT_CAPABILITY, MODERN_VERSION};

/// 2026-07-28: the error for a call that needed a capability its request did not declare;
/// `data.requiredCapabilities` is a `ClientCapabilities` object naming it.
fn missing_capability(capability: &str) -> ErrorObject {
    let mut error = ErrorObject::new(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        format!("Missing required client capability: {capability}"),
    );
    error.data = Some(serde_json::json!({"requiredCapabilities": {capability: {}}}));
    error
}
use crate::peer::Peer;

/// Cancels one call: the one it was made for, even after its request id was reused. The
/// call's own token (one per call), never looked up by request id.
#[derive(Debug, Clone)]
pub(crate) struct CallCancel(CancellationToken);

impl CallCancel {
    /// The cancel of work no request id names (a resource read, a prompt): cancelling it
    /// does nothing; the transport drops the work's future to stop it.
    pub fn detached() -> CallCancel {
        CallCancel(CancellationToken::new())
    }

    /// Cancels the call (nothing happens once it has ended).
    pub fn cancel(&self) {
        self.0.cancel();
    }

    /// A guard that cancels the call when dropped (unless disarmed).
    pub fn drop_guard(&self) -> DropGuard {
        self.0.clone().drop_guard()
    }
}

/// The calls running on one session, by request id.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    // foldhash: an insert and a removal on every call, and SipHash showed in profiles.
    // Its seed is random per map; a client that forces collisions only slows its own
    // session.
    calls: Mutex<HashMap<RequestId, CancellationToken, foldhash::fast::RandomState>>,
}

impl InFlight {
    fn lock(
        &self,
    ) -> parking_lot::MutexGuard<
        '_,
        HashMap<RequestId, CancellationToken, foldhash::fast::RandomState>,
    > {
        self.calls.lock()
    }

    /// Registers a call; `None` when one with this id still runs.
    fn register(&self, id: &RequestId) -> Option<CancellationToken> {
        let mut calls = self.lock();
        if calls.contains_key(id) {
            return None;
        }
        let control = CancellationToken::new();
        calls.insert(id.clone(), control.clone());
        Some(control)
    }

    /// Cancels the call with this request id, if it runs.
    pub fn cancel(&self, id: &RequestId) {
        let control = self.lock().get(id).cloned();
        if let Some(control) = control {
            control.cancel();
        }
    }

    /// Cancels every running call.
    pub fn cancel_all(&self) {
        let calls: Vec<_> = self.lock().values().cloned().collect();
        for control in calls {
            control.cancel();
        }
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }
}

/// Removes a finished (or dropped) call from the in-flight table.
struct CallGuard<'a> {
    table: &'a InFlight,
    id: &'a RequestId,
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        self.table.lock().remove(self.id);
    }
}

impl Caller {
    /// The trusted local process at the other end of stdio: every scope.
    pub fn local_process() -> Caller {
        Caller {
            principal: Some("stdio".to_owned()),
            scopes: vec!["*".to_owned()],
            ip: None,
            user_agent: None,
            scope_denial: None,
        }
    }
}

/// What a call on a session runs with besides its params and its caller: the server's
/// shared state, the client end and the session id. The session hands these parts to each
/// call it starts; the call takes nothing else of it.
#[derive(Clone)]
pub(super) struct CallEnv {
    /// The registry the call runs through, and the server's options.
    pub shared: Arc<Shared>,
    /// The client the call talks back to.
    pub client: Arc<ClientLink>,
    /// HTTP: the session id, for the call's context and span.
    pub session_id: Option<Arc<str>>,
}

impl InFlight {
    /// Registers the call (before this returns, so a cancellation that follows finds it)
    /// and hands back its future, which runs with `env` and leaves the table when it ends.
    pub(super) fn start(
        self: &Arc<Self>,
        env: CallEnv,
        id: RequestId,
        mut call: CallParams,
        caller: &Caller,
        route: Route,
    ) -> Dispatch {
        let Some(control) = self.register(&id) else {
            return Dispatch::Reply(Reply::error(
                Some(id),
                ErrorObject::new(
                    INVALID_REQUEST,
                    "Invalid Request: a request with this id is still running",
                ),
            ));
        };
        let table = Arc::clone(self);
        let caller = caller.clone();
        let grace = env.shared.options.cancel_grace;
        let cancel = CallCancel(control.clone());
        // The caller's trace context wraps the whole call, a confirmation's replay too.
        let trace_parent = std::mem::take(&mut call.trace_parent);
        let call = Box::pin(async move {
            let guard = CallGuard {
                table: &table,
                id: &id,
            };
            let work = trace_parent.run(run_call(&env, call, &caller, &id, route, control.clone()));
            let value = tokio::select! {
                biased;
                () = async {
                    control.cancelled().await;
                    if !grace.is_zero() {
                        tokio::time::sleep(grace).await;
                    }
                } => None,
                value = work => Some(value),
            };
            drop(guard);
            if control.is_cancelled() {
                return None;
            }
            let modern = env.client.protocol_version() == Some(MODERN_VERSION);
            value.map(|(name, outcome, missing)| {
                if let Some(capability) = missing {
                    return Reply::error(Some(id), missing_capability(capability));
                }
                let outcome = match outcome {
                    Outcome::Done(outcome) => outcome,
                    Outcome::InputRequired(answer) => return Reply::result(id, answer),
                    Outcome::Refused(error) => return Reply::error(Some(id), error),
                };
                // A ticket is rendered here, once, into the result legacy clients read; the
                // text of a confirmation is taken from the ticket.
                let (result, confirmation) = match outcome {
                    CallOutcome::NeedsConfirmation(ticket) => (ticket.to_result(), Some(ticket)),
                    other => (other.into_result(), None),
                };
                if let (Some(slot), Some(needed)) = (&caller.scope_denial, result.required_scopes())
                {
                    slot.record(needed.into_iter().map(str::to_owned).collect());
                }
                // Only a failed result can move its data out of structuredContent: a
                // successful call (the common case) skips the lookup.
                let output_schema = !result.success
                    && env
                        .shared
                        .registry
                        .get(&name)
                        .is_some_and(|tool| tool.options().output_schema.is_some());
                Reply::call(id, name, result, confirmation, output_schema, modern)
            })
        });
        Dispatch::Call(call, cancel)
    }
}

/// Runs a call: through its input rounds on the 2026-07-28 path, else through the
/// registry, then the approval or confirmation its outcome asks for.
async fn run_call(
    env: &CallEnv,
    mut call: CallParams,
    caller: &Caller,
    id: &RequestId,
    route: Route,
    control: CancellationToken,
) -> (String, Outcome, Option<&'static str>) {
    let shared = &env.shared;
    let peer = Arc::new(Peer::new(
        env.client.clone(),
        control,
        call.progress_token.clone(),
        route,
        call.request.clone(),
    ));
    let client = match &call.request {
        Some(meta) => meta.client_name.clone(),
        None => env.client.client_name(),
    };
    let ctx = call_context(
        caller,
        CallHandle::new(peer.clone()),
        Some(id),
        env.session_id.as_deref(),
        env.client.protocol_version(),
        client,
    );
    if let Some(meta) = call.request.take() {
        let (name, outcome) = shared.input_rounds().run(call, &meta, &ctx, &peer).await;
        return (name, outcome, peer.missing_capability());
    }
    // The legacy `confirm_token` argument is taken off here, at the edge.
    let mut arguments = call.arguments;
    let sent = split_confirm_token(&mut arguments);
    let outcome = shared
        .registry
        .invoke_sent(&call.name, arguments, sent, &ctx)
        .await;
    let outcome = match outcome {
        CallOutcome::AwaitingApproval(pending) => {
            shared
                .human_approval()
                .seek(pending, &env.client, &ctx, &peer)
                .await
        }
        CallOutcome::NeedsConfirmation(ticket)
            if shared.options.elicitation_confirmation
                && env.client.supports_form_elicitation() =>
        {
            confirm_by_elicitation(&shared.registry, &env.client, ticket, &ctx, &peer).await
        }
        other => other,
    };
    (call.name, Outcome::Done(outcome), peer.missing_capability())
}

/// The context a call from `caller` runs with, whatever the transport; `id` is the
/// JSON-RPC id of its request, when it got far enough to run; `session_id` and
/// `protocol_version` are the session's; `client` is the client's name (the session's, or
/// a 2026-07-28 request's own).
pub(super) fn call_context(
    caller: &Caller,
    handle: CallHandle,
    id: Option<&RequestId>,
    session_id: Option<&str>,
    protocol_version: Option<&'static str>,
    client: Option<Arc<str>>,
) -> ToolContext {
    let mut builder = ToolContext::builder(channel::MCP)
        .request_id(generate_request_id())
        .scopes(caller.scopes.iter().cloned())
        .call_handle(handle)
        .mcp_attributes(span_attributes(id, session_id, protocol_version));
    if let Some(principal) = &caller.principal {
        builder = builder.principal(principal.clone());
    }
    if let Some(ip) = &caller.ip {
        builder = builder.ip(ip.clone());
    }
    if let Some(agent) = &caller.user_agent {
        builder = builder.user_agent(agent.clone());
    }
    if let Some(session) = session_id {
        builder = builder.extra("mcp_session_id", Value::String(session.to_owned()));
    }
    if let Some(client) = client {
        builder = builder.client(client);
    }
    builder.build()
}

/// The context a listing for `caller` is judged in: who it is and what it holds, on the
/// MCP channel.
pub(super) fn listing_context(caller: &Caller) -> ToolContext {
    let mut builder = ToolContext::builder(channel::MCP).scopes(caller.scopes.iter().cloned());
    if let Some(principal) = &caller.principal {
        builder = builder.principal(principal.clone());
    }
    builder.build()
}

/// The MCP semantic conventions' attributes of a `tools/call` on a session.
fn span_attributes(
    id: Option<&RequestId>,
    session_id: Option<&str>,
    protocol_version: Option<&'static str>,
) -> McpAttributes {
    let mut attributes = McpAttributes::new("tools/call");
    if let Some(session) = session_id {
        attributes = attributes.session_id(session.to_owned());
    }
    if let Some(version) = protocol_version {
        attributes = attributes.protocol_version(version);
    }
    match id {
        Some(RequestId::Number(number)) => attributes.request_id(number.to_string()),
        Some(RequestId::String(text)) => attributes.request_id(&**text),
        None => attributes,
    }
}
