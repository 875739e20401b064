//! One MCP connection's protocol state, whatever carries it.
//!
//! - [`request`]: a request's params, read once into the typed request of its method.
//! - [`dispatch`]: the dispatcher of both revisions.
//! - [`initialize`]: the session revisions' handshake.
//! - [`reply`]: answers, kept as values until a transport writes them.
//! - [`listing`]: `tools/list` pages and cursors.
//! - [`call_params`]: `tools/call` parameters, checked before anything runs.
//! - [`call`]: a call's life — the in-flight table, its context, cancellation.
//! - [`confirm`]: confirmation through `elicitation/create`.
//! - [`approval`]: human approvals — `approve_url`, URL-mode elicitation, waiting for the
//!   person's decision.
//! - [`argument_digest`]: the digest of a call's arguments a `requestState` is bound to.
//! - [`mrtr`]: 2026-07-28 confirmation and approval through `input_required` results.
//! - [`list_watch`]: telling the client when a list (tools, resources, prompts) changes.
//! - [`modern`]: the 2026-07-28 revision — `server/discover`, per-request `_meta`, no
//!   session state.
//!
//! A transport feeds messages in ([`Session::handle`]) together with who sent them (a
//! [`Caller`]: the trusted local process for stdio, the authenticated principal per HTTP
//! request) and says where outgoing messages go with a [`Route`].

mod approval;
mod argument_digest;
mod call;
mod call_params;
mod catalog;
mod catalog_params;
mod confirm;
mod dispatch;
mod initialize;
mod list_watch;
mod listen;
mod listing;
mod log_relay;
mod modern;
mod mrtr;
mod reply;
mod request;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use milpa::ToolRegistry;
use serde_json::{Value, json};
use tokio::sync::mpsc;

pub(crate) use crate::client_link::{ClientLink, Out, RequestMeta, Route};
pub(crate) use call::CallCancel;
pub(crate) use listen::Subscription;
pub(crate) use modern::{header_mismatch, is_modern_version};
pub(crate) use reply::{Reply, batch_json, write_batch};
pub(crate) use request::ReadParams;

use crate::auth::scope_denial::ScopeDenial;
use crate::client_link::ClientInfo;
use crate::jsonrpc::{self, Incoming, Params, Rejected, RequestId};
use crate::protocol::{MODERN_VERSION, ServerOptions};
use call::{CallEnv, InFlight};
use list_watch::ListWatch;
use listing::{ListingCache, ToolListing};
use log_relay::LogRelay;

/// The server's shared, precomputed state.
pub(crate) struct Shared {
    /// The tools every session calls and lists.
    pub registry: Arc<ToolRegistry>,
    /// How the server answers (limits, confirmation by elicitation, its identity).
    pub options: ServerOptions,
    /// The approvals page (`http://host:port/approvals`) when the server serves one: an
    /// `APPROVAL_PENDING` result then carries `approve_url = <page>/<approval_id>`, and a
    /// client that declared URL-mode elicitation is sent there.
    pub approval_page: Option<String>,
    /// The `tools/list` entries of the registry's tool list as of its last change.
    listing: ListingCache,
    /// Seals 2026-07-28 `requestState`s.
    seal: mrtr::StateSeal,
}

impl Shared {
    /// The shared state of a server without an approvals page.
    pub fn new(registry: Arc<ToolRegistry>, options: ServerOptions) -> Arc<Shared> {
        Self::with_approval_page(registry, options, None)
    }

    /// The shared state of a server whose approvals page (if any) is at `approval_page`.
    pub fn with_approval_page(
        registry: Arc<ToolRegistry>,
        options: ServerOptions,
        approval_page: Option<String>,
    ) -> Arc<Shared> {
        let listing = ListingCache::new(&registry, options.page_size);
        let seal = mrtr::StateSeal::new(
            options
                .state_secret
                .clone()
                .unwrap_or_else(crate::protocol::StateSecret::random),
        );
        Arc::new(Shared {
            seal,
            registry,
            options,
            approval_page,
            listing,
        })
    }

    /// The approval path of a call: the registry and the approvals page.
    fn human_approval(&self) -> approval::HumanApproval<'_> {
        approval::HumanApproval {
            registry: &self.registry,
            page: self.approval_page.as_deref(),
        }
    }

    /// What a 2026-07-28 call's input rounds work with.
    fn input_rounds(&self) -> mrtr::InputRounds<'_> {
        mrtr::InputRounds {
            seal: &self.seal,
            approvals: self.human_approval(),
            elicitation_confirmation: self.options.elicitation_confirmation,
        }
    }

    /// The `tools/list` entries, listed again when the registry's tool list changed since.
    pub(crate) fn listing(&self) -> Arc<ToolListing> {
        self.listing.current(&self.registry, self.options.page_size)
    }
}

/// Who sent a message: the trusted local process for stdio
/// ([`Caller::local_process`]), the authenticated principal (or nobody) for each HTTP
/// request. Calls run with this principal and these scopes.
#[derive(Debug, Clone, Default)]
pub(crate) struct Caller {
    pub principal: Option<String>,
    pub scopes: Vec<String>,
    pub ip: Option<String>,
    pub user_agent: Option<String>,
    /// Where a call denied for a missing scope leaves the scopes it needs, when the
    /// transport answers such a denial itself (HTTP with OAuth: `403 insufficient_scope`).
    pub scope_denial: Option<ScopeDenial>,
}

/// What the transport should do with a request.
pub(crate) enum Dispatch {
    /// Send this response now.
    Reply(Reply),
    /// Run this tool call; it yields the response, or `None` when it was cancelled (no
    /// response is sent for a cancelled request). The [`CallCancel`] cancels this call and
    /// no other: a transport that gives up on the call (its response stream went away)
    /// uses it, never the request id, which a later request may reuse once this one ended.
    Call(CallFuture, CallCancel),
    /// 2026-07-28 `subscriptions/listen`, admitted: the transport acknowledges it and
    /// carries its notifications until the client ends it.
    Listen(Subscription),
}

/// A tool call's work: the response, or `None` when it was cancelled.
pub(crate) type CallFuture = Pin<Box<dyn Future<Output = Option<Reply>> + Send + 'static>>;

/// One connection's protocol state: the façade the transports use, holding its owned
/// parts. Each handler lives with the part it touches and is handed the others it needs.
pub(crate) struct Session {
    /// The server's state, shared by every session.
    pub shared: Arc<Shared>,
    /// The client end: what it declared, its log level, its streams, requests to it.
    client: Arc<ClientLink>,
    /// The calls running, by request id.
    calls: Arc<InFlight>,
    /// HTTP: the session id, for tool contexts.
    session_id: Option<Arc<str>>,
    /// The task telling the client about tool list changes, once started.
    lists: ListWatch,
    /// The task sending the client the server-wide log, once started.
    log_relay: LogRelay,
    /// The resources the client subscribed to.
    resource_subscriptions: catalog::ResourceSubscriptions,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("session_id", &self.session_id)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// A new session of a session revision, `session_id` its HTTP id (none on stdio).
    pub fn new(shared: Arc<Shared>, session_id: Option<String>) -> Arc<Session> {
        let client = Arc::new(ClientLink::new(
            shared.options.default_log_level,
            shared.options.client_request_timeout,
        ));
        Arc::new(Session {
            shared,
            client,
            calls: Arc::default(),
            session_id: session_id.map(Arc::from),
            lists: ListWatch::default(),
            log_relay: LogRelay::default(),
            resource_subscriptions: Default::default(),
        })
    }

    /// A session that serves 2026-07-28 requests: what the client declared comes with each
    /// request, so it starts declared, with no capabilities of its own.
    pub fn modern(shared: Arc<Shared>) -> Arc<Session> {
        let session = Session::new(shared, None);
        session.client.declare(ClientInfo {
            version: MODERN_VERSION,
            capabilities: json!({}),
            name: None,
        });
        session
    }

    /// Whether this session serves the 2026-07-28 revision.
    pub fn is_modern(&self) -> bool {
        self.client.protocol_version() == Some(MODERN_VERSION)
    }

    /// The parts of this session a call it starts runs with.
    fn call_env(&self) -> CallEnv {
        CallEnv {
            shared: Arc::clone(&self.shared),
            client: Arc::clone(&self.client),
            session_id: self.session_id.clone(),
        }
    }

    /// Whether `initialize` was answered (the session serves its other methods).
    pub fn is_initialized(&self) -> bool {
        self.client.is_initialized()
    }

    /// The protocol version `initialize` settled on.
    pub fn protocol_version(&self) -> Option<&'static str> {
        self.client.protocol_version()
    }

    /// Handles one incoming message of a session revision (or answers why it was
    /// rejected): requests are dispatched with `route` (cloned only for them), notifications and responses to this
    /// side's requests are taken in and get nothing to send.
    pub fn handle(
        self: &Arc<Self>,
        message: Result<Incoming, Rejected>,
        caller: &Caller,
        route: &Route,
    ) -> Option<Dispatch> {
        match message {
            Err(rejected) => Some(Dispatch::Reply(Reply::error(rejected.id, *rejected.error))),
            Ok(Incoming::Request { id, method, params }) => Some(self.dispatch(
                id,
                &method,
                ReadParams::Unread(params),
                caller,
                route.clone(),
            )),
            Ok(Incoming::Notification { method, params }) => {
                self.notify(&method, params);
                None
            }
            Ok(Incoming::Response { id, result }) => {
                self.client.answer(&id, result);
                None
            }
        }
    }

    /// Handles a notification from the client.
    pub fn notify(&self, method: &str, params: Option<Params>) {
        match method {
            "notifications/cancelled" => {
                if let Some(id) = jsonrpc::params_value(params)
                    .as_ref()
                    .and_then(|p| p.get("requestId"))
                    .and_then(RequestId::from_value)
                {
                    self.cancel(&id);
                }
            }
            "notifications/initialized" => {}
            other => {
                tracing::trace!(target: "milpa_mcp", method = other, "notification ignored");
            }
        }
    }

    /// Routes the client's answer to a request this side sent.
    pub fn answer(&self, id: &RequestId, result: Result<Value, jsonrpc::ErrorObject>) {
        self.client.answer(id, result);
    }

    /// Cancels the call with this request id, if it runs.
    pub fn cancel(&self, id: &RequestId) {
        self.calls.cancel(id);
    }

    /// How many calls are running.
    pub fn calls_in_flight(&self) -> usize {
        self.calls.len()
    }

    /// The client is gone: cancel every call, fail every pending client request, end the
    /// standalone streams.
    pub fn shutdown(&self) {
        self.client.close();
        self.calls.cancel_all();
    }

    /// Fails every request awaiting the client's answer (the client cannot answer any more).
    pub fn fail_pending(&self) {
        self.client.fail_pending();
    }

    /// Adds a standalone stream (HTTP `GET`); later streams are preferred. The first one
    /// also starts telling the client when a list changes, and the server-wide log.
    pub fn add_standalone(&self, stream: mpsc::UnboundedSender<Out>) {
        self.client.add_standalone(stream);
        self.forward_server_messages(Route::Standalone);
    }

    /// Sends along `route`, until the session ends, what the server tells every client
    /// outside any call: `notifications/tools/list_changed` (or `resources/…`,
    /// `prompts/…`) each time the registry's list of that kind changes, and the server-wide
    /// log (`notifications/message`, see [`milpa::server_log`]) at the client's level; both
    /// once the session is initialized. Started once per session; later calls do nothing.
    pub fn forward_server_messages(&self, route: Route) {
        let registry = &self.shared.registry;
        self.lists.start(registry, &self.client, route.clone());
        self.log_relay.start(registry, &self.client, route);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use milpa::LogLevel;

    use super::*;
    use crate::jsonrpc::{INVALID_PARAMS, METHOD_NOT_FOUND};
    use crate::method::{Era, Method};
    use crate::protocol::{META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, MODERN_VERSION};

    fn reply(session: &Arc<Session>, line: &str) -> Value {
        let jsonrpc::Parsed::Single(message) = jsonrpc::parse(line.as_bytes()) else {
            panic!("not a single message: {line}");
        };
        match session.handle(message, &Caller::local_process(), &Route::Standalone) {
            Some(Dispatch::Reply(reply)) => serde_json::from_str(&reply.to_json()).unwrap(),
            _ => panic!("no reply to {line}"),
        }
    }

    fn initialized() -> Arc<Session> {
        initialized_with(ToolRegistry::new())
    }

    fn initialized_with(registry: ToolRegistry) -> Arc<Session> {
        let shared = Shared::new(Arc::new(registry), ServerOptions::default());
        let session = Session::new(shared, None);
        reply(
            &session,
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}"#,
        );
        session
    }

    /// Starts a `tools/call` of `tool` under request id 7.
    fn start(session: &Arc<Session>, tool: &str) -> (CallFuture, CallCancel) {
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"{tool}","arguments":{{}}}}}}"#
        );
        let jsonrpc::Parsed::Single(message) = jsonrpc::parse(line.as_bytes()) else {
            panic!("not a single message");
        };
        match session.handle(message, &Caller::local_process(), &Route::Standalone) {
            Some(Dispatch::Call(call, cancel)) => (call, cancel),
            _ => panic!("not a call"),
        }
    }

    /// A transport cancels a call through its own handle when the call's response stream
    /// ends, which is also after the response: a later request reusing the id must not be
    /// cancelled by it (it was, through the id, under load with the Redis limiter).
    #[tokio::test]
    async fn an_ended_calls_cancel_handle_spares_a_later_call_with_its_id() {
        let mut registry = ToolRegistry::new();
        registry
            .register(
                milpa::ToolDefinition::builder("nap")
                    .input_schema(json!({"type": "object"}))
                    .asynchronous(|_, _| async {
                        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                        json!("rested")
                    }),
            )
            .unwrap();
        let session = initialized_with(registry);
        let (first, first_cancel) = start(&session, "nap");
        assert!(first.await.is_some());
        let (second, _second_cancel) = start(&session, "nap");
        first_cancel.cancel();
        let answer: Value =
            serde_json::from_str(&second.await.expect("a response").to_json()).unwrap();
        assert_eq!(answer["result"]["structuredContent"]["result"], "rested");
        // Its own handle still cancels it.
        let (third, third_cancel) = start(&session, "nap");
        third_cancel.cancel();
        assert!(third.await.is_none());
    }

    /// The list the HTTP transport consults is the one the dispatcher routes: a known
    /// method never answers "Method not found" once the session is initialized, an unknown
    /// one always does.
    #[test]
    fn every_known_method_is_routed() {
        let session = initialized();
        let known = Method::ALL
            .into_iter()
            .filter(|m| m.served_in(Era::Session));
        for method in known.map(Method::name) {
            let line = format!(r#"{{"jsonrpc":"2.0","id":9,"method":"{method}","params":{{}}}}"#);
            let answer = reply(&session, &line);
            assert_ne!(
                answer["error"]["code"], METHOD_NOT_FOUND,
                "{method}: {answer}"
            );
        }
        let answer = reply(
            &session,
            r#"{"jsonrpc":"2.0","id":9,"method":"server/discover"}"#,
        );
        assert_eq!(answer["error"]["code"], METHOD_NOT_FOUND);
        assert_eq!(
            answer["error"]["message"],
            "Method not found: server/discover"
        );
    }

    /// The 2026-07-28 dispatcher routes every method of its revision (the transports
    /// open `subscriptions/listen`), and answers the session revisions' own methods, like
    /// any unknown one, with "Method not found".
    #[test]
    fn every_stateless_method_is_routed() {
        let shared = Shared::new(Arc::new(ToolRegistry::new()), ServerOptions::default());
        let session = Session::modern(shared);
        let dispatch = |method: &str, params: Value| {
            let params = json!({"_meta": {
                META_PROTOCOL_VERSION: MODERN_VERSION,
                META_CLIENT_CAPABILITIES: {},
            }, "notifications": {}})
            .as_object()
            .unwrap()
            .clone()
            .into_iter()
            .chain(params.as_object().unwrap().clone())
            .collect::<serde_json::Map<_, _>>();
            session.dispatch_stateless(
                RequestId::Number(9),
                method,
                ReadParams::Value(Some(Value::Object(params))),
                &Caller::local_process(),
                Route::Standalone,
                None,
            )
        };
        for method in Method::ALL
            .into_iter()
            .filter(|m| m.served_in(Era::Stateless))
        {
            match dispatch(method.name(), json!({"name": "missing"})) {
                Dispatch::Reply(reply) => {
                    assert_ne!(reply.error_code(), Some(METHOD_NOT_FOUND), "{method}");
                }
                Dispatch::Listen(_) => assert_eq!(method, Method::SubscriptionsListen),
                Dispatch::Call(..) => {
                    assert!(
                        matches!(method, Method::ToolsCall | Method::PromptsGet),
                        "{method}"
                    )
                }
            }
        }
        for method in [
            "ping",
            "initialize",
            "logging/setLevel",
            "resources/subscribe",
        ] {
            let Dispatch::Reply(reply) = dispatch(method, json!({})) else {
                panic!("{method} got no reply");
            };
            assert_eq!(reply.error_code(), Some(METHOD_NOT_FOUND), "{method}");
            let answer: Value = serde_json::from_str(&reply.to_json()).unwrap();
            assert_eq!(
                answer["error"]["message"],
                format!("Method not found: {method}")
            );
        }
    }

    /// `tools/list` follows the registry's changes, and a cursor given before a change is
    /// refused rather than read against the new list.
    #[test]
    fn the_listing_follows_the_registrys_tool_list() {
        let tool = |name: &str| milpa::ToolDefinition::builder(name).sync(|_, _| json!(null));
        let mut registry = ToolRegistry::new();
        registry.register(tool("native")).unwrap();
        let registry = Arc::new(registry);
        let options = ServerOptions {
            page_size: 1,
            ..ServerOptions::default()
        };
        let session = Session::new(Shared::new(Arc::clone(&registry), options), None);
        let init = reply(
            &session,
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}"#,
        );
        assert_eq!(init["result"]["capabilities"]["tools"]["listChanged"], true);
        registry
            .replace_tools("up", vec![tool("up__a"), tool("up__b")])
            .unwrap();
        let first = reply(
            &session,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        );
        assert_eq!(first["result"]["tools"][0]["name"], "native");
        let cursor = first["result"]["nextCursor"].clone();
        let list = |id: u32, cursor: &Value| {
            reply(
                &session,
                &json!({"jsonrpc": "2.0", "id": id, "method": "tools/list",
                        "params": {"cursor": cursor}})
                .to_string(),
            )
        };
        let second = list(3, &cursor);
        assert_eq!(second["result"]["tools"][0]["name"], "up__a");
        registry
            .replace_tools("up", vec![tool("up__c"), tool("up__b")])
            .unwrap();
        let stale = list(4, &second["result"]["nextCursor"]);
        assert_eq!(stale["error"]["code"], INVALID_PARAMS, "{stale}");
        let again = reply(
            &session,
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/list"}"#,
        );
        let cursor = again["result"]["nextCursor"].clone();
        assert_eq!(list(6, &cursor)["result"]["tools"][0]["name"], "up__c");
    }

    #[test]
    fn log_levels_are_set_by_name_and_filter_in_order() {
        let names = [
            "debug",
            "info",
            "notice",
            "warning",
            "error",
            "critical",
            "alert",
            "emergency",
        ];
        let levels = [
            LogLevel::Debug,
            LogLevel::Info,
            LogLevel::Notice,
            LogLevel::Warning,
            LogLevel::Error,
            LogLevel::Critical,
            LogLevel::Alert,
            LogLevel::Emergency,
        ];
        let shared = Shared::new(Arc::new(ToolRegistry::new()), ServerOptions::default());
        let session = Session::new(shared, None);
        assert!(!session.is_initialized());
        let init = reply(
            &session,
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}"#,
        );
        assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
        assert!(session.is_initialized());
        // The default threshold is info.
        assert!(!session.client.log_enabled(LogLevel::Debug));
        assert!(session.client.log_enabled(LogLevel::Info));
        for (i, name) in names.iter().enumerate() {
            let line = format!(
                r#"{{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{{"level":"{name}"}}}}"#
            );
            assert_eq!(reply(&session, &line)["result"], json!({}), "{name}");
            for (j, level) in levels.iter().enumerate() {
                assert_eq!(json!(level), names[j]);
                assert_eq!(
                    session.client.log_enabled(*level),
                    j >= i,
                    "{name} vs {level:?}"
                );
            }
        }
        for bad in [r#""verbose""#, r#""Info""#, r#"{"info":null}"#, "3", "null"] {
            let line = format!(
                r#"{{"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{{"level":{bad}}}}}"#
            );
            assert_eq!(
                reply(&session, &line)["error"]["code"],
                INVALID_PARAMS,
                "{bad}"
            );
        }
        // A refused level leaves the last one set (emergency).
        assert!(!session.client.log_enabled(LogLevel::Alert));
        assert!(session.client.log_enabled(LogLevel::Emergency));
    }
}
