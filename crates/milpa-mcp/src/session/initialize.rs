//! `initialize`: the session revisions' handshake, which settles the protocol version and
//! records what the client declared.

use serde_json::{Map, Value, json};

use super::request::InitializeParams;
use crate::client_link::{ClientInfo, ClientLink};
use crate::jsonrpc::{ErrorObject, INVALID_REQUEST};
use crate::protocol::{self, ServerOptions};

/// Answers `initialize`: records what the client declared on `client` (once: a second
/// `initialize` is refused) and says who the server is, from `options`.
pub(super) fn initialize(
    client: &ClientLink,
    options: &ServerOptions,
    params: InitializeParams,
) -> Result<Value, ErrorObject> {
    let version = protocol::negotiate(&params.protocol_version);
    let client_name = params.client_name;
    if !client.declare(ClientInfo {
        version,
        capabilities: params.capabilities,
        name: client_name.clone(),
    }) {
        return Err(ErrorObject::new(
            INVALID_REQUEST,
            "Invalid Request: the session is already initialized",
        ));
    }
    let client_name = client_name.as_deref().unwrap_or("?");
    tracing::debug!(target: "milpa_mcp", client = client_name, version, "initialized");
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
        // The server tells its clients when one of the registry's lists changes (an
        // upstream's tools did, a provider's resources did): see
        // `Session::forward_server_messages`. Resources and prompts are answered whether or
        // not the registry has any (a list may be empty, and fill later).
        json!({
            "tools": {"listChanged": true},
            "logging": {},
            "resources": {"subscribe": true, "listChanged": true},
            "prompts": {"listChanged": true},
            "completions": {},
        }),
    );
    result.insert("serverInfo".into(), Value::Object(info));
    if let Some(instructions) = &options.instructions {
        result.insert("instructions".into(), Value::String(instructions.clone()));
    }
    Ok(Value::Object(result))
}
