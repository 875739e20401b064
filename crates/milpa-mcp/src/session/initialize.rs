//! `initialize`: the session revisions' handshake, which settles the protocol version and
//! records what the client declared.

use milpa::ToolRegistry;
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
    registry: &ToolRegistry,
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
    if let Some(instructions) = instructions(options, registry) {
        result.insert("instructions".into(), Value::String(instructions));
    }
    Ok(Value::Object(result))
}

/// The server's `instructions`: its own, then each tool group's (a gateway's upstreams,
/// see [`ToolRegistry::set_group_instructions`]) under a `## <group>` heading; none when
/// nobody said anything.
pub(super) fn instructions(options: &ServerOptions, registry: &ToolRegistry) -> Option<String> {
    let groups = registry.group_instructions();
    if groups.is_empty() {
        return options.instructions.clone();
    }
    let mut text = options.instructions.clone().unwrap_or_default();
    for (group, instructions) in groups {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str("## ");
        text.push_str(&group);
        text.push('\n');
        text.push_str(instructions.trim_end());
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_groups_instructions_follow_the_servers_own_under_its_name() {
        let registry = ToolRegistry::new();
        let mut options = ServerOptions::default();
        assert_eq!(instructions(&options, &registry), None);
        options.instructions = Some("Use the notes tools.".into());
        assert_eq!(
            instructions(&options, &registry).as_deref(),
            Some("Use the notes tools.")
        );
        registry.set_group_instructions("fs", Some("Paths are absolute.\n"));
        registry.set_group_instructions("git", Some("One commit a change."));
        assert_eq!(
            instructions(&options, &registry).as_deref(),
            Some(
                "Use the notes tools.\n\n## fs\nPaths are absolute.\n\n## git\nOne commit a change."
            )
        );
        options.instructions = None;
        registry.set_group_instructions("fs", None);
        assert_eq!(
            instructions(&options, &registry).as_deref(),
            Some("## git\nOne commit a change.")
        );
    }
}
