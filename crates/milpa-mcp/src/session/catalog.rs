//! Resources, prompts and completion on both eras: the listings, and the governed
//! requests (`resources/read`, `prompts/get`, `completion/complete`), which the registry
//! runs through its gates (see [`milpa::catalog`]). This module maps the core's types to
//! the wire and back; it decides nothing about access.

use std::sync::Arc;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};

use milpa::ErrorCode as MilpaCode;
use milpa::catalog::AccessRefusal;
use milpa::{CallHandle, Listed, ToolContext, ToolRegistry};
use parking_lot::Mutex;
use serde_json::{Map, Value, json};

use super::argument_digest::ArgumentDigest;
use super::call::{CallCancel, call_context, listing_context};
use super::catalog_params::{CompleteParams, PromptParams, UriParams};
use super::reply::Reply;
use super::{Caller, Dispatch, Session, Shared};
use crate::catalog_mapping::{
    completion_json, contents_json, prompt_json, prompt_reply_json, resource_json, template_json,
};
use crate::client_link::{ClientLink, RequestMeta, Route};
use crate::jsonrpc::{self, ErrorCode, ErrorObject, INTERNAL_ERROR, INVALID_PARAMS, RequestId};
use crate::peer::Peer;
use tokio_util::sync::CancellationToken;

/// The URIs one session subscribed to (`resources/subscribe`), and the task that tells
/// the client when one of them is updated.
#[derive(Debug, Default)]
pub(crate) struct ResourceSubscriptions {
    uris: Arc<Mutex<HashSet<String>>>,
    started: AtomicBool,
}

impl ResourceSubscriptions {
    /// Sends `notifications/resources/updated` to `client` along `route` for each update
    /// of a subscribed URI, until the client is gone. Started at the first subscription.
    fn start(&self, registry: &ToolRegistry, client: &Arc<ClientLink>, route: Route) {
        if self.started.swap(true, Ordering::AcqRel) {
            return;
        }
        let mut updates = registry.catalog_notifier().listen();
        let uris = Arc::clone(&self.uris);
        let client = Arc::clone(client);
        tokio::spawn(async move {
            loop {
                let uri = tokio::select! {
                    () = client.closing() => return,
                    update = updates.recv() => match update {
                        Ok(uri) => uri,
                        // Fell behind: the skipped updates are lost, later ones still come.
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                    },
                };
                if uris.lock().contains(&*uri) && !client.is_closed() {
                    let params = json!({"uri": &*uri});
                    client.notify(
                        &route,
                        jsonrpc::notification("notifications/resources/updated", &params),
                    );
                }
            }
        });
    }
}

/// The JSON-RPC error of a refused or failed request: the MCP code where the
/// specification gives one, and the core's code (with what a client can act on) in `data`.
/// An unknown resource is `-32002` up to 2025-11-25 and `-32602` from 2026-07-28
/// (SEP-2164), with its URI in `data.uri`.
fn refusal_error(refusal: &AccessRefusal, uri: Option<&str>, modern: bool) -> ErrorObject {
    let code = match refusal.code() {
        MilpaCode::NotFound if modern => INVALID_PARAMS,
        MilpaCode::NotFound => ErrorCode::RESOURCE_NOT_FOUND,
        MilpaCode::ValidationError => INVALID_PARAMS,
        MilpaCode::InternalError | MilpaCode::ResultTooLarge => INTERNAL_ERROR,
        _ => ErrorCode::ACCESS_REFUSED,
    };
    let mut error = ErrorObject::new(code, refusal.message());
    let mut data = Map::new();
    data.insert("code".into(), json!(refusal.code().as_str()));
    if !refusal.required_scopes().is_empty() {
        data.insert("required_scopes".into(), json!(refusal.required_scopes()));
    }
    if let Some(seconds) = refusal.retry_after_seconds() {
        data.insert("retry_after_seconds".into(), json!(seconds));
    }
    if let Some(uri) = uri {
        data.insert("uri".into(), json!(uri));
    }
    if let Some(id) = refusal.approval_id() {
        data.insert("approval_id".into(), json!(id));
    }
    error.data = Some(Value::Object(data));
    error
}

impl Shared {
    fn resources_page(&self, viewer: Option<&ToolContext>) -> Map<String, Value> {
        let list: Vec<Value> = self
            .registry
            .catalog_snapshot()
            .resources()
            .filter(|r| shown(&self.registry, viewer, Listed::Resource(r)))
            .map(resource_json)
            .collect();
        Map::from_iter([("resources".to_owned(), Value::Array(list))])
    }

    fn templates_page(&self, viewer: Option<&ToolContext>) -> Map<String, Value> {
        let list: Vec<Value> = self
            .registry
            .catalog_snapshot()
            .templates()
            .filter(|t| shown(&self.registry, viewer, Listed::Template(t)))
            .map(template_json)
            .collect();
        Map::from_iter([("resourceTemplates".to_owned(), Value::Array(list))])
    }

    fn prompts_page(&self, viewer: Option<&ToolContext>) -> Map<String, Value> {
        let list: Vec<Value> = self
            .registry
            .catalog_snapshot()
            .prompts()
            .filter(|p| shown(&self.registry, viewer, Listed::Prompt(p)))
            .map(prompt_json)
            .collect();
        Map::from_iter([("prompts".to_owned(), Value::Array(list))])
    }
}

/// Whether a listing for `viewer` (`None`: for anyone) shows `entry`.
fn shown(registry: &ToolRegistry, viewer: Option<&ToolContext>, entry: Listed<'_>) -> bool {
    viewer.is_none_or(|ctx| registry.could_use(entry, ctx))
}

/// What a governed request answers with, once it is done.
enum Answer {
    /// Its result (on 2026-07-28 `resultType: "complete"` is added when it has none).
    Result(Map<String, Value>),
    /// The gates' refusal and, for a read, the URI refused (error `data.uri`).
    Refused(AccessRefusal, Option<String>),
    /// A protocol error: a retry's `requestState` that does not open.
    Invalid(ErrorObject),
}

impl Session {
    /// A listing: every entry on one page (a 2026-07-28 one with its caching hints,
    /// private when it was made for its caller).
    fn listed(&self, page: Map<String, Value>, viewer: Option<&ToolContext>) -> Value {
        if self.is_modern() {
            self.shared.cacheable(page, viewer.is_none())
        } else {
            Value::Object(page)
        }
    }

    pub(super) fn list_resources(&self, caller: &Caller) -> Value {
        let viewer = self.viewer(caller);
        self.listed(self.shared.resources_page(viewer.as_ref()), viewer.as_ref())
    }

    pub(super) fn list_resource_templates(&self, caller: &Caller) -> Value {
        let viewer = self.viewer(caller);
        self.listed(self.shared.templates_page(viewer.as_ref()), viewer.as_ref())
    }

    pub(super) fn list_prompts(&self, caller: &Caller) -> Value {
        let viewer = self.viewer(caller);
        self.listed(self.shared.prompts_page(viewer.as_ref()), viewer.as_ref())
    }

    /// The context a listing for `caller` is judged in, or `None` when every entry is
    /// listed to everyone (`list_all`).
    pub(super) fn viewer(&self, caller: &Caller) -> Option<ToolContext> {
        (!self.shared.options.list_all).then(|| listing_context(caller))
    }

    /// `resources/subscribe`: a URI the registry serves is remembered (and its provider
    /// told, see [`ResourceProvider::subscribed`](milpa::catalog::ResourceProvider::subscribed));
    /// another is `-32002`. Whether the caller may read it is decided when it reads.
    /// Updates go where the session's lasting messages go: on HTTP the standalone `GET`
    /// stream (a `POST`'s stream ends with its reply), on stdio the one output (`route`).
    pub(super) fn subscribe(&self, params: UriParams, route: &Route) -> Result<Value, ErrorObject> {
        if !self.shared.registry.subscribe_resource(&params.uri) {
            return Err(ErrorObject::new(
                ErrorCode::RESOURCE_NOT_FOUND,
                format!("Resource not found: {}", params.uri),
            ));
        }
        self.resource_subscriptions.uris.lock().insert(params.uri);
        let route = match self.session_id {
            Some(_) => Route::Standalone,
            None => route.clone(),
        };
        self.resource_subscriptions
            .start(&self.shared.registry, &self.client, route);
        Ok(json!({}))
    }

    /// `resources/unsubscribe`: forgets the URI (one never subscribed is no error).
    pub(super) fn unsubscribe(&self, params: UriParams) -> Value {
        self.resource_subscriptions.uris.lock().remove(&params.uri);
        json!({})
    }

    pub(super) fn read_resource(
        self: &Arc<Self>,
        id: RequestId,
        params: UriParams,
        caller: &Caller,
        route: Route,
    ) -> Dispatch {
        self.governed(id, caller, route, None, move |session, ctx, _| async move {
            match session
                .shared
                .registry
                .read_resource(&params.uri, &ctx)
                .await
            {
                Ok(contents) => {
                    let list = contents.iter().map(contents_json).collect();
                    let mut result = Map::from_iter([("contents".to_owned(), Value::Array(list))]);
                    if session.is_modern() {
                        // What was read was read for this caller, and may change at
                        // any time: nobody else may reuse it, and nobody should keep it.
                        result.insert("ttlMs".into(), json!(0));
                        result.insert("cacheScope".into(), json!("private"));
                    }
                    Answer::Result(result)
                }
                Err(refusal) => Answer::Refused(refusal, Some(params.uri)),
            }
        })
    }

    pub(super) fn get_prompt(
        self: &Arc<Self>,
        id: RequestId,
        params: PromptParams,
        caller: &Caller,
        route: Route,
    ) -> Dispatch {
        let request = params.request.clone();
        self.governed(
            id,
            caller,
            route,
            request,
            move |session, ctx, peer| async move {
                let arguments = params.arguments.unwrap_or_default();
                // 2026-07-28: a prompt may ask the client (an elicitation) as a tool may; what
                // it asked without an answer yet makes an `input_required` round, and a retry
                // brings the answers back, checked against the sealed state.
                let digest = params.request.as_ref().map(|_| {
                    let arguments = Map::from_iter(
                        arguments
                            .iter()
                            .map(|(k, v)| (k.clone(), Value::String(v.clone()))),
                    );
                    ArgumentDigest::of(&Value::Object(arguments))
                });
                if let (Some(digest), Some(state)) = (&digest, params.request_state.as_deref()) {
                    let rounds = session.shared.input_rounds();
                    match rounds.prompt_answers(&params.name, digest, state, &ctx) {
                        Ok(answers) => peer.add_answers(answers),
                        Err(error) => return Answer::Invalid(error),
                    }
                }
                if let (Some(_), Some(responses)) = (&digest, params.input_responses) {
                    peer.add_answers(responses);
                }
                let got = session
                    .shared
                    .registry
                    .get_prompt(&params.name, &arguments, &ctx)
                    .await;
                let (asked, answers) = peer.take_inputs();
                if let Some(digest) = &digest
                    && !asked.is_empty()
                    && peer.missing_capability().is_none()
                {
                    let round = session.shared.input_rounds().prompt_input_round(
                        &params.name,
                        digest,
                        &ctx,
                        asked,
                        answers,
                    );
                    return Answer::Result(round);
                }
                match got {
                    Ok(reply) => Answer::Result(prompt_reply_json(&reply)),
                    Err(refusal) => Answer::Refused(refusal, None),
                }
            },
        )
    }

    pub(super) fn complete(
        self: &Arc<Self>,
        id: RequestId,
        params: CompleteParams,
        caller: &Caller,
        route: Route,
    ) -> Dispatch {
        self.governed(id, caller, route, None, move |session, ctx, _| async move {
            let CompleteParams {
                reference,
                argument,
            } = params;
            match session
                .shared
                .registry
                .complete(reference.as_ref(), &argument.name, &argument.value, &ctx)
                .await
            {
                Ok(completion) => Answer::Result(completion_json(&completion)),
                Err(refusal) => Answer::Refused(refusal, None),
            }
        })
    }

    /// Runs a governed request as the transport runs a call (its own future), in the
    /// caller's context, and answers with its result or its refusal. A provider logs
    /// through the context's call handle: its messages reach the client along `route`, at
    /// the level the client set, as a tool's do.
    fn governed<Work>(
        self: &Arc<Self>,
        id: RequestId,
        caller: &Caller,
        route: Route,
        request: Option<Arc<RequestMeta>>,
        work: impl FnOnce(Arc<Session>, milpa::ToolContext, Arc<Peer>) -> Work,
    ) -> Dispatch
    where
        Work: std::future::Future<Output = Answer> + Send + 'static,
    {
        let client = match &request {
            Some(meta) => meta.client_name.clone(),
            None => self.client.client_name(),
        };
        // Nobody cancels a governed request by id (see `CallCancel::detached`): the token
        // only tells the provider's handle that nothing was cancelled.
        let peer = Arc::new(Peer::new(
            self.client.clone(),
            CancellationToken::new(),
            None,
            route,
            request,
        ));
        let ctx = call_context(
            caller,
            CallHandle::new(peer.clone()),
            Some(&id),
            self.session_id.as_deref(),
            self.client.protocol_version(),
            client,
        );
        let session = Arc::clone(self);
        let scope_denial = caller.scope_denial.clone();
        let modern = self.is_modern();
        let work = work(session, ctx, peer);
        let future = Box::pin(async move {
            Some(match work.await {
                Answer::Result(mut result) => {
                    if modern && !result.contains_key("resultType") {
                        result.insert("resultType".into(), json!("complete"));
                    }
                    Reply::result(id, Value::Object(result))
                }
                Answer::Invalid(error) => Reply::error(Some(id), error),
                Answer::Refused(refusal, uri) => {
                    if let Some(slot) = &scope_denial
                        && !refusal.required_scopes().is_empty()
                    {
                        slot.record(refusal.required_scopes().to_vec());
                    }
                    Reply::error(Some(id), refusal_error(&refusal, uri.as_deref(), modern))
                }
            })
        });
        Dispatch::Call(future, CallCancel::detached())
    }
}
