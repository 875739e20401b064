//! An upstream's tools as tools of ours: their definitions, and the body that forwards a
//! call (after the whole pipeline ran) as `tools/call`.

use std::collections::HashMap;
use std::sync::Arc;

use milpa::{
    Deferred, ErrorCode, Invocation, Tool, ToolContext, ToolDefinition, ToolError, ToolOutput,
    ToolRegistry, ToolResult,
};
use milpa_mcp::content;
use serde_json::{Value, json};

use crate::config::{Confirm, DEFAULT_CALL_TIMEOUT};
use crate::connection::CallError;
use crate::error::GatewayError;
use crate::upstream_link::UpstreamLink;

/// JSON-RPC "invalid params": the upstream refused the arguments.
const INVALID_PARAMS: i64 = milpa_mcp::jsonrpc::ErrorCode::INVALID_PARAMS.value();

/// The definitions of `tools`, as `upstream` listed them, overrides applied.
pub(crate) fn definitions_of(
    upstream: &Arc<dyn UpstreamLink>,
    tools: &[Value],
) -> Vec<(String, ToolDefinition)> {
    let config = upstream.config();
    let prefix = config.prefix();
    let mut out = Vec::new();
    for tool in tools {
        let Some(remote) = tool.get("name").and_then(Value::as_str) else {
            tracing::warn!(
                target: "milpa::upstream",
                upstream = %upstream.name(),
                "a listed tool has no name; skipped"
            );
            continue;
        };
        let over = config.override_for(remote);
        if over.hide == Some(true) {
            continue;
        }
        let confirm = over.confirm.unwrap_or(Confirm::No);
        let timeout = over.timeout.unwrap_or(DEFAULT_CALL_TIMEOUT);
        let schema = match tool.get("inputSchema") {
            Some(schema @ Value::Object(_)) => schema.clone(),
            _ => json!({"type": "object"}),
        };
        let mut builder = ToolDefinition::builder(format!("{prefix}{remote}"));
        // Its structured content comes back unchanged, so the upstream's schema of it holds.
        if let Some(output @ Value::Object(_)) = tool.get("outputSchema") {
            builder = builder.output_schema(output.clone());
        }
        // Listed again as they came: its title, every annotation, its `_meta`.
        if let Some(title) = tool.get("title").and_then(Value::as_str) {
            builder = builder.title(title);
        }
        if let Some(Value::Object(annotations)) = tool.get("annotations") {
            builder = builder.annotations(annotations.clone());
        }
        if let Some(Value::Object(meta)) = tool.get("_meta") {
            builder = builder.meta(meta.clone());
        }
        // Icons that are not objects are no icons (as for resources and prompts).
        if let Some(Value::Array(icons)) = tool.get("icons") {
            let icons: Vec<Value> = icons.iter().filter(|i| i.is_object()).cloned().collect();
            builder = builder.icons(icons);
        }
        let definition = builder
            .description(
                tool.get("description")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
            )
            .input_schema(schema)
            .scopes(over.scopes.unwrap_or_default())
            .mutating(is_mutating(tool, over.mutating))
            .requires_confirmation(confirm == Confirm::Caller)
            .requires_human_approval(confirm == Confirm::Human)
            .timeout(timeout)
            .hard_timeout(timeout)
            .upstream(upstream.name())
            .tool(UpstreamTool {
                upstream: Arc::clone(upstream),
                remote: remote.to_owned(),
            });
        out.push((remote.to_owned(), definition));
    }
    out
}

/// Whether an upstream tool counts as mutating: as the override says, else unless the
/// upstream declares it `readOnlyHint: true` (fail closed: no annotation, or anything else
/// than `true`, is mutating).
fn is_mutating(tool: &Value, overridden: Option<bool>) -> bool {
    overridden.unwrap_or(tool["annotations"]["readOnlyHint"] != Value::Bool(true))
}

/// Sets `upstream`'s tools in `registry` to the ones `tools` describes, leaving out (and
/// logging) those that cannot be served.
pub(crate) fn replace(
    registry: &ToolRegistry,
    upstream: &Arc<dyn UpstreamLink>,
    tools: &[Value],
) -> Vec<GatewayError> {
    let name = upstream.name();
    let mut skipped = Vec::new();
    let mut remotes: HashMap<String, String> = HashMap::new();
    let mut kept = Vec::new();
    for (remote, definition) in definitions_of(upstream, tools) {
        let holder = match registry.get(definition.name()) {
            None => None,
            Some(existing) => match existing.upstream() {
                Some(other) if other == name => None,
                Some(other) => Some(format!("a tool of upstream `{other}`")),
                None => Some("a tool of this server".to_owned()),
            },
        };
        let holder = holder.or_else(|| {
            remotes
                .contains_key(definition.name())
                .then(|| "another tool of the same upstream".to_owned())
        });
        if let Some(existing) = holder {
            skipped.push(GatewayError::Collision {
                upstream: name.to_owned(),
                remote,
                tool: definition.name().to_owned(),
                existing,
            });
            continue;
        }
        remotes.insert(definition.name().to_owned(), remote);
        kept.push(definition);
    }
    for (tool, source) in registry.replace_tools_skipping(name, kept) {
        skipped.push(GatewayError::Register {
            upstream: name.to_owned(),
            remote: remotes.remove(&tool).unwrap_or(tool),
            source,
        });
    }
    for error in &skipped {
        tracing::error!(target: "milpa::upstream", upstream = %name, "{error}");
    }
    skipped
}

/// The body of an upstream tool: forwards the validated arguments.
struct UpstreamTool {
    upstream: Arc<dyn UpstreamLink>,
    remote: String,
}

impl UpstreamTool {
    async fn forward(&self, args: &Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let name = self.upstream.name();
        let connection = self
            .upstream
            .connection()
            .map_err(|error| unavailable(name, &error))?;
        let params = json!({"name": self.remote, "arguments": args});
        match connection
            .request("tools/call", params, Some(ctx.call_handle()))
            .await
        {
            Ok(answer) => Ok(ToolOutput::Result(Box::new(call_result(name, answer)))),
            Err(error @ CallError::Unavailable(_)) => Err(unavailable(name, &error)),
            Err(CallError::Rpc { code, message }) => {
                let code = if code == INVALID_PARAMS {
                    ErrorCode::ValidationError
                } else {
                    ErrorCode::InternalError
                };
                Err(ToolError::with_code(
                    code,
                    format!("Upstream `{name}` refused the call: {message}"),
                ))
            }
        }
    }
}

impl Tool for UpstreamTool {
    fn invoke<'a>(&'a self, args: &'a Value, ctx: &'a ToolContext) -> Invocation<'a> {
        Deferred::pending(self.forward(args, ctx))
    }
}

fn unavailable(upstream: &str, error: &CallError) -> ToolError {
    ToolError::with_code(
        ErrorCode::UpstreamUnavailable,
        format!("Upstream `{upstream}` is unavailable: {error}"),
    )
}

/// The upstream's `tools/call` result as ours: its blocks and `structuredContent` as they
/// came, failed when it says `isError` (the message, for other channels, is its text).
fn call_result(upstream: &str, mut answer: Value) -> ToolResult {
    let blocks = match answer.get_mut("content").map(Value::take) {
        Some(Value::Array(blocks)) => blocks,
        _ => Vec::new(),
    };
    let structured = answer
        .get_mut("structuredContent")
        .map(Value::take)
        .filter(|s| !s.is_null());
    if answer["isError"] != Value::Bool(true) {
        return match structured {
            Some(structured) => content::result_with_structured(blocks, structured),
            None => content::result(blocks),
        };
    }
    let text: Vec<&str> = blocks
        .iter()
        .filter(|b| b["type"] == "text")
        .filter_map(|b| b["text"].as_str())
        .collect();
    let message = if text.is_empty() {
        format!("The tool of upstream `{upstream}` failed")
    } else {
        text.join("\n")
    };
    let mut result = content::error_result(message, blocks);
    if let (Some(structured), Value::Object(data)) = (structured, &mut result.data) {
        data.insert("structuredContent".into(), structured);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_are_mutating_unless_the_upstream_says_read_only() {
        assert!(is_mutating(&json!({"name": "t"}), None));
        assert!(is_mutating(
            &json!({"annotations": {"readOnlyHint": "yes"}}),
            None
        ));
        assert!(is_mutating(
            &json!({"annotations": {"destructiveHint": false}}),
            None
        ));
        assert!(!is_mutating(
            &json!({"annotations": {"readOnlyHint": true}}),
            None
        ));
        assert!(is_mutating(
            &json!({"annotations": {"readOnlyHint": true}}),
            Some(true)
        ));
        assert!(!is_mutating(&json!({"name": "t"}), Some(false)));
    }

    #[test]
    fn results_keep_blocks_structure_and_error_flag() {
        let ok = call_result(
            "u",
            json!({"content": [{"type": "image", "data": "AA==", "mimeType": "image/png"}],
                   "structuredContent": {"a": 1}}),
        );
        assert!(ok.success);
        assert_eq!(content::blocks_of(&ok).unwrap()[0]["type"], "image");
        assert_eq!(ok.data["structuredContent"], json!({"a": 1}));
        let failed = call_result(
            "u",
            json!({"content": [{"type": "text", "text": "no such file"}], "isError": true}),
        );
        assert!(!failed.success);
        assert_eq!(failed.error.as_deref(), Some("no such file"));
        assert_eq!(
            content::blocks_of(&failed).unwrap()[0]["text"],
            "no such file"
        );
    }
}
