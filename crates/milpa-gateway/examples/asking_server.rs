//! A small MCP server, built on milpa-mcp, whose tools ask their client something: the
//! upstream the gateway's relay tests put behind the pipeline. Over stdio by default; with
//! `--http 127.0.0.1:0` over Streamable HTTP, printing `http://ADDR/mcp` as its first line.
//!
//! Tools: `ask_model(prompt)` sends `sampling/createMessage`, `ask_user(message)` sends
//! form-mode `elicitation/create`; each answers with what its client answered (as
//! structured content), or fails with the client's error and its code.
//! `say(text)` logs its text at info and a detail at debug (what the client gets depends on
//! the level it asked for). `toggle_extra(on)` adds (or removes) the tool `extra(text)`, which answers
//! `extra: <text>`; the server then tells its clients its tool list changed.

use std::sync::{Arc, OnceLock, Weak};

use milpa::policy::ChannelPolicy;
use milpa::{LogLevel, ToolContext, ToolDefinition, ToolError, ToolRegistry};
use milpa_mcp::{HttpServer, ServerOptions};
use serde_json::{Value, json};

fn string_arg(name: &str) -> Value {
    json!({
        "type": "object",
        "properties": {name: {"type": "string"}},
        "required": [name]
    })
}

fn refused(what: &str, error: &milpa::PeerError) -> ToolError {
    ToolError::new(format!(
        "{what} failed: {} (code {})",
        error.message,
        error.code.map_or("none".to_owned(), |c| c.to_string())
    ))
}

/// The server's registry, for `toggle_extra` (a tool of that same registry).
static REGISTRY: OnceLock<Weak<ToolRegistry>> = OnceLock::new();

fn extra() -> ToolDefinition {
    ToolDefinition::builder("extra")
        .description("Appeared at run time")
        .input_schema(string_arg("text"))
        .sync(|args: &Value, _: &ToolContext| {
            json!(format!(
                "extra: {}",
                args["text"].as_str().unwrap_or_default()
            ))
        })
}

fn tools() -> Vec<ToolDefinition> {
    vec![
        ToolDefinition::builder("toggle_extra")
            .description("Adds or removes the tool `extra`")
            .input_schema(json!({
                "type": "object",
                "properties": {"on": {"type": "boolean"}},
                "required": ["on"]
            }))
            .sync(|args: &Value, _: &ToolContext| {
                let registry = REGISTRY
                    .get()
                    .and_then(Weak::upgrade)
                    .ok_or_else(|| ToolError::new("no registry"))?;
                let tools = if args["on"] == true {
                    vec![extra()]
                } else {
                    Vec::new()
                };
                registry
                    .replace_tools("extra", tools)
                    .map_err(|e| ToolError::new(e.to_string()))?;
                Ok::<_, ToolError>(json!(registry.len()))
            }),
        ToolDefinition::builder("ask_model")
            .description("Asks the client's model to complete a prompt")
            .input_schema(string_arg("prompt"))
            .asynchronous(|args: Value, ctx: ToolContext| async move {
                let prompt = args["prompt"].as_str().unwrap_or_default().to_owned();
                ctx.call_handle()
                    .create_message(json!({
                        "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
                        "maxTokens": 50
                    }))
                    .await
                    .map_err(|e| refused("sampling", &e))
            }),
        ToolDefinition::builder("ask_user")
            .description("Asks the client's user for a name")
            .input_schema(string_arg("message"))
            .asynchronous(|args: Value, ctx: ToolContext| async move {
                let message = args["message"].as_str().unwrap_or_default().to_owned();
                ctx.call_handle()
                    .elicit(json!({
                        "message": message,
                        "requestedSchema": {
                            "type": "object",
                            "properties": {"name": {"type": "string"}},
                            "required": ["name"]
                        }
                    }))
                    .await
                    .map_err(|e| refused("elicitation", &e))
            }),
        ToolDefinition::builder("say")
            .description("Logs its text at info (and a detail at debug), then answers `said`")
            .input_schema(string_arg("text"))
            .asynchronous(|args: Value, ctx: ToolContext| async move {
                let text = args["text"].as_str().unwrap_or_default().to_owned();
                let handle = ctx.call_handle();
                handle.log(LogLevel::Debug, json!(format!("about to say {text}")));
                handle.log(LogLevel::Info, json!(text));
                json!("said")
            }),
    ]
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    // Anonymous HTTP callers may call (the tests' gateway sends no token).
    let mut registry = ToolRegistry::builder()
        .channel_policy("mcp", ChannelPolicy::AUTHENTICATED.with_require_auth(false))
        .build();
    for tool in tools() {
        registry.register(tool).expect("a valid tool");
    }
    let registry = Arc::new(registry);
    let _ = REGISTRY.set(Arc::downgrade(&registry));
    let mut options = ServerOptions::default();
    options.name = "asking-example".into();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => milpa_mcp::serve_stdio_with(registry, options).await,
        [flag, addr] if flag == "--http" => {
            let listener = tokio::net::TcpListener::bind(addr.as_str()).await?;
            println!("http://{}/mcp", listener.local_addr()?);
            HttpServer::new(registry)
                .options(options)
                .serve_listener(listener, std::future::pending::<()>())
                .await
        }
        _ => Err(std::io::Error::other("usage: asking_server [--http ADDR]")),
    }
}
