//! The dispatcher: a request of either revision is read into a typed [`Request`] once
//! (see [`super::request`]), then served by [`Session::serve`], one handler per method.
//!
//! What each revision checks before reading its params differs, and stays here:
//! - the session revisions answer `initialize` and `ping` at any time and every other
//!   method they serve once the session is initialized ("Method not found" before);
//! - 2026-07-28 admits the request's `_meta` first (see [`super::modern::admit`]), then
//!   looks at its method.

use std::collections::HashSet;
use std::sync::Arc;

use milpa::{CallHandle, Listed};
use serde_json::{Value, json};

use super::call::call_context;
use super::call_params::RefusedCall;
use super::initialize::initialize;
use super::modern::admit;
use super::reply::Reply;
use super::request::{ReadParams, Refusal, Request};
use super::{Caller, Dispatch, Session};
use crate::client_link::Route;
use crate::jsonrpc::{ErrorObject, METHOD_NOT_FOUND, RequestId};
use crate::method::{Era, Method};

fn method_not_found(method: &str) -> ErrorObject {
    ErrorObject::new(METHOD_NOT_FOUND, format!("Method not found: {method}"))
}

impl Session {
    /// Handles one request of a session revision (2024-11-05 to 2025-11-25). Calls are
    /// registered for cancellation before this returns.
    pub fn dispatch(
        self: &Arc<Self>,
        id: RequestId,
        method: &str,
        params: ReadParams,
        caller: &Caller,
        route: Route,
    ) -> Dispatch {
        match self.read_request(&id, method, params) {
            Ok(request) => self.serve(id, request, caller, route),
            Err(refusal) => self.refuse(id, refusal, caller),
        }
    }

    /// Handles one 2026-07-28 request (see [`Session::modern`]). `version_header` is the
    /// HTTP `MCP-Protocol-Version` (`Some(None)` when the header is missing), `None` on
    /// transports without headers: on HTTP it must name the version the `_meta` does.
    pub fn dispatch_stateless(
        self: &Arc<Self>,
        id: RequestId,
        method: &str,
        params: ReadParams,
        caller: &Caller,
        route: Route,
        version_header: Option<Option<&str>>,
    ) -> Dispatch {
        match read_stateless(&id, method, params, version_header) {
            Ok(request) => self.serve(id, request, caller, route),
            Err(refusal) => self.refuse(id, refusal, caller),
        }
    }

    /// A session revision's request: served by this revision, and now.
    fn read_request(
        &self,
        id: &RequestId,
        name: &str,
        params: ReadParams,
    ) -> Result<Request, Refusal> {
        let Some(method) = Method::served(name, Era::Session) else {
            return Err(method_not_found(name).into());
        };
        if method.needs_initialized_session() && !self.client.is_initialized() {
            return Err(ErrorObject::new(
                METHOD_NOT_FOUND,
                format!(
                    "Method not found: {name} (the session is not initialized; send initialize first)"
                ),
            )
            .into());
        }
        Request::read(method, params, id)
    }

    /// Serves a request read by either revision.
    fn serve(
        self: &Arc<Self>,
        id: RequestId,
        request: Request,
        caller: &Caller,
        route: Route,
    ) -> Dispatch {
        let shared = &self.shared;
        let result = match request {
            Request::ToolsCall(call) => {
                return self.calls.start(self.call_env(), id, *call, caller, route);
            }
            Request::SubscriptionsListen(subscription) => return Dispatch::Listen(subscription),
            Request::Initialize(params) => initialize(&self.client, &shared.options, params),
            Request::Ping => Ok(json!({})),
            Request::SetLogLevel(level) => {
                self.client.set_log_level(level);
                // A gateway asks its upstreams for what its clients want.
                shared.registry.server_log().ask_level(level);
                Ok(json!({}))
            }
            Request::ToolsList(cursor) => {
                let viewer = self.viewer(caller);
                let visible: Option<HashSet<String>> = viewer.as_ref().map(|ctx| {
                    let registry = &shared.registry;
                    registry
                        .definitions()
                        .filter(|tool| registry.could_use(Listed::Tool(tool), ctx))
                        .map(|tool| tool.name().to_owned())
                        .collect()
                });
                let keep = visible
                    .as_ref()
                    .map(|visible| move |name: &str| visible.contains(name));
                let shown = keep.as_ref().map(|keep| keep as &dyn Fn(&str) -> bool);
                let page = shared.listing().page(cursor.as_deref(), shown);
                if self.is_modern() {
                    page.map(|page| match page {
                        Value::Object(page) => shared.cacheable(page, viewer.is_none()),
                        other => other,
                    })
                } else {
                    page
                }
            }
            Request::ServerDiscover => Ok(shared.discover()),
            Request::PromptsList => Ok(self.list_prompts(caller)),
            Request::ResourcesList => Ok(self.list_resources(caller)),
            Request::ResourceTemplatesList => Ok(self.list_resource_templates(caller)),
            Request::ResourcesSubscribe(params) => self.subscribe(params, &route),
            Request::ResourcesUnsubscribe(params) => Ok(self.unsubscribe(params)),
            Request::ResourcesRead(params) => {
                return self.read_resource(id, params, caller, route);
            }
            Request::PromptsGet(params) => return self.get_prompt(id, params, caller, route),
            Request::Complete(params) => return self.complete(id, params, caller, route),
        };
        Dispatch::Reply(match result {
            Ok(value) => Reply::result(id, value),
            Err(error) => Reply::error(Some(id), error),
        })
    }

    /// Answers a request refused before it was served.
    fn refuse(&self, id: RequestId, refusal: Refusal, caller: &Caller) -> Dispatch {
        let error = match refusal {
            Refusal::Error(error) => error,
            Refusal::Call(refused) => {
                self.audit_refused_call(&refused, caller);
                *refused.error
            }
        };
        Dispatch::Reply(Reply::error(Some(id), error))
    }

    /// A `tools/call` refused before the registry saw it still leaves an audit record.
    pub(super) fn audit_refused_call(&self, refused: &RefusedCall, caller: &Caller) {
        let ctx = call_context(
            caller,
            CallHandle::detached(),
            None,
            self.session_id.as_deref(),
            self.client.protocol_version(),
            self.client.client_name(),
        );
        self.shared.registry.audit_refused_request(
            refused.name.as_deref(),
            &refused.error.message,
            &ctx,
        );
    }
}

/// A 2026-07-28 request: its `_meta` admitted, then its method served by this revision;
/// a call carries what its request declared.
fn read_stateless(
    id: &RequestId,
    name: &str,
    params: ReadParams,
    version_header: Option<Option<&str>>,
) -> Result<Request, Refusal> {
    let params = params.read_now(name);
    let meta = admit(params.meta(), version_header)?;
    let Some(method) = Method::served(name, Era::Stateless) else {
        return Err(method_not_found(name).into());
    };
    let mut request = Request::read(method, params, id)?;
    match &mut request {
        Request::ToolsCall(call) => call.request = Some(Arc::new(meta)),
        Request::PromptsGet(prompt) => prompt.request = Some(Arc::new(meta)),
        _ => {}
    }
    Ok(request)
}
