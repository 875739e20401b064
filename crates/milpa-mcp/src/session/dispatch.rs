//! Request routing: `initialize` and `ping` at any time, the other known methods once the
//! session is initialized (see [`KNOWN_METHODS`]), and `logging/setLevel`.

use std::sync::Arc;

use milpa::{CallHandle, LogLevel};
use serde::Deserialize;
use serde::de::{self, value::StrDeserializer};
use serde_json::{Map, Value, json};

use super::call_params::{RefusedCall, parse_call};
use super::client::{ClientInfo, Route};
use super::{Caller, Dispatch, Session};
use crate::jsonrpc::{
    self, ErrorObject, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, Params, RequestId,
};
use crate::protocol::{self, KNOWN_METHODS};

impl Session {
    /// Handles one request. Calls are registered for cancellation before this returns.
    pub fn dispatch(
        self: &Arc<Self>,
        id: RequestId,
        method: &str,
        params: Option<Params>,
        caller: &Caller,
        route: Route,
    ) -> Dispatch {
        let reply = |result: Result<Value, ErrorObject>| {
            Dispatch::Reply(match result {
                Ok(value) => jsonrpc::response(&id, &value),
                Err(error) => jsonrpc::error_response(Some(&id), &error),
            })
        };
        if !KNOWN_METHODS.contains(&method) {
            return reply(Err(ErrorObject::new(
                METHOD_NOT_FOUND,
                format!("Method not found: {method}"),
            )));
        }
        match method {
            "initialize" => reply(self.initialize(jsonrpc::params_value(params))),
            "ping" => reply(Ok(json!({}))),
            _ if !self.client.is_initialized() => reply(Err(ErrorObject::new(
                METHOD_NOT_FOUND,
                format!(
                    "Method not found: {method} (the session is not initialized; send initialize first)"
                ),
            ))),
            "tools/list" => reply(
                self.shared
                    .listing()
                    .list(jsonrpc::params_value(params).as_ref()),
            ),
            "tools/call" => match parse_call(params) {
                Ok(call) => self.start_call(id, call, caller, route),
                Err(refused) => {
                    self.audit_refused_call(&refused, caller);
                    reply(Err(*refused.error))
                }
            },
            "logging/setLevel" => reply(self.set_log_level(jsonrpc::params_value(params))),
            // A method in KNOWN_METHODS without a route here: a bug the unit test
            // `every_known_method_is_routed` catches.
            other => reply(Err(ErrorObject::new(
                METHOD_NOT_FOUND,
                format!("Method not found: {other}"),
            ))),
        }
    }

    /// A `tools/call` refused before the registry saw it still leaves an audit record.
    pub(super) fn audit_refused_call(&self, refused: &RefusedCall, caller: &Caller) {
        let ctx = self.context(caller, CallHandle::detached(), None);
        self.shared.registry.audit_refused_request(
            refused.name.as_deref(),
            &refused.error.message,
            &ctx,
        );
    }

    fn set_log_level(&self, params: Option<Value>) -> Result<Value, ErrorObject> {
        let level = params
            .as_ref()
            .and_then(|p| p.get("level"))
            // The name only (a derived enum would also take `{"info": null}`).
            .and_then(Value::as_str)
            .and_then(|name| {
                LogLevel::deserialize(StrDeserializer::<de::value::Error>::new(name)).ok()
            });
        match level {
            Some(level) => {
                self.client.set_log_level(level);
                Ok(json!({}))
            }
            None => Err(ErrorObject::new(
                INVALID_PARAMS,
                "Invalid params: level must be one of debug, info, notice, warning, error, critical, alert, emergency",
            )),
        }
    }

    fn initialize(&self, params: Option<Value>) -> Result<Value, ErrorObject> {
        let params = params.unwrap_or(Value::Null);
        let Some(requested) = params.get("protocolVersion").and_then(Value::as_str) else {
            return Err(ErrorObject::new(
                INVALID_PARAMS,
                "Invalid params: protocolVersion (a string) is required",
            ));
        };
        let capabilities = match params.get("capabilities") {
            None | Some(Value::Null) => json!({}),
            Some(Value::Object(map)) => Value::Object(map.clone()),
            Some(_) => {
                return Err(ErrorObject::new(
                    INVALID_PARAMS,
                    "Invalid params: capabilities must be an object",
                ));
            }
        };
        let version = protocol::negotiate(requested);
        if !self.client.declare(ClientInfo {
            version,
            capabilities,
        }) {
            return Err(ErrorObject::new(
                INVALID_REQUEST,
                "Invalid Request: the session is already initialized",
            ));
        }
        let client_name = params
            .get("clientInfo")
            .and_then(|c| c.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("?");
        tracing::debug!(target: "milpa_mcp", client = client_name, version, "initialized");
        let options = &self.shared.options;
        let mut info = Map::new();
        info.insert("name".into(), Value::String(options.name.clone()));
        info.insert("version".into(), Value::String(options.version.clone()));
        if let Some(title) = &options.title {
            info.insert("title".into(), Value::String(title.clone()));
        }
        let mut result = Map::new();
        result.insert("protocolVersion".into(), Value::String(version.into()));
        result.insert(
            "capabilities".into(),
            // The server tells its clients when the registry's tool list changes (an
            // upstream's did): see `Session::forward_tool_list_changes`.
            json!({"tools": {"listChanged": true}, "logging": {}}),
        );
        result.insert("serverInfo".into(), Value::Object(info));
        if let Some(instructions) = &options.instructions {
            result.insert("instructions".into(), Value::String(instructions.clone()));
        }
        Ok(Value::Object(result))
    }
}
