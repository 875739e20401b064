//! [`Subject`]: what the gate is asked about. A tool call, a resource read and a prompt
//! request pass the same checks (authentication, scopes, rules, the channel's mutating
//! block); the gate reads only these facts of each, so one set of checks serves all three.

use crate::definition::ToolDefinition;

/// What kind of thing a request reaches: how a denial names it ("tool 'x'", "resource
/// 'docs://a'") and which action a [`CallPolicy`](crate::policy::CallPolicy) judges.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Access {
    /// `tools/call`: a tool runs.
    #[default]
    CallTool,
    /// `resources/read`: a resource is read.
    ReadResource,
    /// `prompts/get`: a prompt is rendered.
    GetPrompt,
}

impl Access {
    /// The noun a message names the subject with: `tool`, `resource`, `prompt`.
    pub fn noun(self) -> &'static str {
        match self {
            Access::CallTool => "tool",
            Access::ReadResource => "resource",
            Access::GetPrompt => "prompt",
        }
    }

    /// The action's wire name (Cedar's action id, the audit record's `kind`):
    /// `call_tool`, `read_resource`, `get_prompt`.
    pub fn as_str(self) -> &'static str {
        match self {
            Access::CallTool => "call_tool",
            Access::ReadResource => "read_resource",
            Access::GetPrompt => "get_prompt",
        }
    }
}

/// The facts of one request the gate checks: its kind, the name it reaches (a tool name, a
/// resource URI or template, a prompt name), the scopes it asks for and whether it changes
/// anything.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Subject<'a> {
    pub access: Access,
    pub name: &'a str,
    pub scopes: &'a [String],
    pub mutating: bool,
}

impl<'a> Subject<'a> {
    /// A call of `tool`.
    #[inline]
    pub fn tool(tool: &'a ToolDefinition) -> Subject<'a> {
        Subject {
            access: Access::CallTool,
            name: tool.name(),
            scopes: tool.scopes(),
            mutating: tool.is_mutating(),
        }
    }

    /// A read or a prompt: never mutating.
    pub fn read(access: Access, name: &'a str, scopes: &'a [String]) -> Subject<'a> {
        Subject {
            access,
            name,
            scopes,
            mutating: false,
        }
    }
}
