//! [`McpAttributes`]: what a transport tells the core about the request a call came in, for
//! the call's span (see [`call_span`](crate::call_span)). Held by the context, below both.

/// What a transport knows about a call that the MCP semantic conventions record on its span.
/// Set with [`ToolContextBuilder::mcp_attributes`](crate::ToolContextBuilder::mcp_attributes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct McpAttributes {
    /// `mcp.method.name`, e.g. `tools/call`.
    pub method: String,
    /// `mcp.session.id`: the session the request belongs to, when there is one.
    pub session_id: Option<String>,
    /// `mcp.protocol.version`: the protocol revision the request speaks.
    pub protocol_version: Option<String>,
    /// `jsonrpc.request.id`: the JSON-RPC id of the request, as text.
    pub request_id: Option<String>,
}

impl McpAttributes {
    /// The attributes of a request of `method` (e.g. `tools/call`).
    pub fn new(method: impl Into<String>) -> Self {
        McpAttributes {
            method: method.into(),
            ..McpAttributes::default()
        }
    }

    /// With `mcp.session.id`.
    pub fn session_id(mut self, session_id: impl Into<String>) -> Self {
        self.session_id = Some(session_id.into());
        self
    }

    /// With `mcp.protocol.version`.
    pub fn protocol_version(mut self, version: impl Into<String>) -> Self {
        self.protocol_version = Some(version.into());
        self
    }

    /// With `jsonrpc.request.id`.
    pub fn request_id(mut self, request_id: impl Into<String>) -> Self {
        self.request_id = Some(request_id.into());
        self
    }
}
