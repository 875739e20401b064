//! The fixture server for the MCP conformance suite and the interop tests.
//!
//! ```text
//! cargo run -p milpa-mcp --example everything -- --stdio
//! cargo run -p milpa-mcp --example everything -- --http 127.0.0.1:3000
//! ```
//!
//! Options: `--json-response` (HTTP: never SSE), `--no-elicitation-confirm` (always use the
//! confirm_token round trip), `--require-auth` (keep the `mcp` channel's `require_auth`;
//! by default this fixture lets anonymous HTTP callers run tools, since the conformance
//! suite sends no token), `--token TOKEN=PRINCIPAL:SCOPE,SCOPE` (HTTP bearer token),
//! `--audit FILE` (audit records as JSON lines; default: stderr through `tracing` when
//! `RUST_LOG` enables `milpa::audit`).
//!
//! The demo tools are declared with `#[tool]`; the suite's fixtures, whose schemas are
//! prescribed to the letter, with `ToolDefinition::builder`.
//!
//! Tools: the suite's fixtures (`test_simple_text`, `test_image_content`,
//! `test_audio_content`, `test_embedded_resource`, `test_multiple_content_types`,
//! `test_error_handling`, `test_tool_with_logging`, `test_tool_with_progress`,
//! `test_reconnection`, `test_trigger_tool_change`, `test_trigger_prompt_change`, `test_sampling`, `test_elicitation`, `test_elicitation_sep1034_defaults`,
//! `test_elicitation_sep1330_enums`, `json_schema_2020_12_tool`), plus `add(a, b)`,
//! `echo(text)`, `delete_note(id)` (asks for confirmation), `restart_server` (denied by a
//! policy rule) and `slow(seconds)` (reports progress, stops when cancelled).
//!
//! Resources: `test://static-text`, `test://static-binary`, `test://watched-resource` and
//! the template `test://template/{id}/data`; prompts: `test_simple_prompt`,
//! `test_prompt_with_arguments`, `test_prompt_with_embedded_resource`,
//! `test_prompt_with_image`; completion of `test_prompt_with_arguments`' arguments.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use milpa::Deferred;
use milpa::audit::{AuditRecord, AuditSink};
use milpa::catalog::{
    CatalogError, Prompt, PromptArgument, PromptContent, PromptMessage, PromptProvider,
    PromptReply, Resource, ResourceContents, ResourceProvider, ResourceTemplate, Role,
};
use milpa::policy::{ChannelPolicy, PolicyRule, RuleEffect, StaticRule, StaticRuleProvider};
use milpa::{
    CallHandle, LogLevel, ToolContext, ToolDefinition, ToolError, ToolRegistry, ToolResult, tool,
};
use milpa_mcp::auth::StaticTokens;
use milpa_mcp::{HttpServer, ServerOptions, content};
use parking_lot::Mutex;
use serde_json::{Value, json};

const PNG_1X1: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";
const WAV_TINY: &str =
    "UklGRjQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YRAAAAAAAAAAAAAAAAAAAAAAAAAA";

fn no_args() -> Value {
    json!({"type": "object", "properties": {}})
}

fn string_arg(name: &str, description: &str) -> Value {
    json!({
        "type": "object",
        "properties": {name: {"type": "string", "description": description}},
        "required": [name]
    })
}

fn fixture_tools() -> Vec<ToolDefinition> {
    vec![
        ToolDefinition::builder("test_simple_text")
            .description("Returns a simple text response")
            .input_schema(no_args())
            .sync(|_, _| json!("This is a simple text response for testing.")),
        ToolDefinition::builder("test_image_content")
            .description("Returns an image (a 1x1 PNG)")
            .input_schema(no_args())
            .sync(|_, _| content::result([content::image(PNG_1X1, "image/png")])),
        ToolDefinition::builder("test_audio_content")
            .description("Returns audio (a tiny WAV)")
            .input_schema(no_args())
            .sync(|_, _| content::result([content::audio(WAV_TINY, "audio/wav")])),
        ToolDefinition::builder("test_embedded_resource")
            .description("Returns an embedded resource")
            .input_schema(no_args())
            .sync(|_, _| {
                content::result([content::resource(
                    "test://embedded-resource",
                    "text/plain",
                    "This is an embedded resource content.",
                )])
            }),
        ToolDefinition::builder("test_multiple_content_types")
            .description("Returns text, an image and a resource")
            .input_schema(no_args())
            .sync(|_, _| {
                content::result([
                    content::text("Multiple content types test:"),
                    content::image(PNG_1X1, "image/png"),
                    content::resource(
                        "test://mixed-content-resource",
                        "application/json",
                        r#"{"test":"data","value":123}"#,
                    ),
                ])
            }),
        ToolDefinition::builder("test_error_handling")
            .description("Always fails")
            .input_schema(no_args())
            .sync(|_, _| -> Result<Value, ToolError> {
                Err(ToolError::new(
                    "This tool intentionally returns an error for testing",
                ))
            }),
        ToolDefinition::builder("test_tool_with_logging")
            .description("Sends three log messages while it runs")
            .input_schema(no_args())
            .asynchronous(|_, ctx: ToolContext| async move {
                let handle = ctx.call_handle();
                handle.log(LogLevel::Info, json!("Tool execution started"));
                tokio::time::sleep(Duration::from_millis(50)).await;
                handle.log(LogLevel::Info, json!("Tool processing data"));
                tokio::time::sleep(Duration::from_millis(50)).await;
                handle.log(LogLevel::Info, json!("Tool execution completed"));
                json!("Tool with logging executed successfully")
            }),
        ToolDefinition::builder("test_tool_with_progress")
            .description("Reports progress 0, 50, 100 of 100")
            .input_schema(no_args())
            .asynchronous(|_, ctx: ToolContext| async move {
                let handle = ctx.call_handle();
                handle.progress(0.0, Some(100.0), None);
                tokio::time::sleep(Duration::from_millis(50)).await;
                handle.progress(50.0, Some(100.0), None);
                tokio::time::sleep(Duration::from_millis(50)).await;
                handle.progress(100.0, Some(100.0), None);
                json!("Tool with progress executed successfully")
            }),
        ToolDefinition::builder("test_reconnection")
            .description(
                "Closes its response stream, then answers: the client resumes with Last-Event-ID",
            )
            .input_schema(no_args())
            .asynchronous(|_, ctx: ToolContext| async move {
                let closed = ctx.call_handle().close_response_stream();
                tokio::time::sleep(Duration::from_millis(200)).await;
                json!(format!(
                    "Reconnection test completed (stream closed mid-call: {closed})"
                ))
            }),
        ToolDefinition::builder("test_sampling")
            .description("Asks the client's model to complete a prompt")
            .input_schema(string_arg("prompt", "The prompt to send to the LLM"))
            .asynchronous(|args: Value, ctx: ToolContext| async move {
                let prompt = args["prompt"].as_str().unwrap_or_default().to_owned();
                let answer = ctx
                    .call_handle()
                    .create_message(json!({
                        "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
                        "maxTokens": 100
                    }))
                    .await
                    .map_err(|e| ToolError::new(format!("Sampling failed: {e}")))?;
                let text = answer["content"]["text"].as_str().unwrap_or_default();
                Ok::<_, ToolError>(json!(format!("LLM response: {text}")))
            }),
        // 2026-07-28: needs sampling, so a request that did not declare it gets -32021.
        // 2026-07-28: `region` travels in the Mcp-Param-Region header too (x-mcp-header).
        ToolDefinition::builder("test_custom_headers")
            .description("Echoes a region that proxies can route on (Mcp-Param-Region)")
            .input_schema(json!({
                "type": "object",
                "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
                "required": ["region"]
            }))
            .sync(|args, _| json!(format!("region={}", args["region"].as_str().unwrap_or("?")))),
        ToolDefinition::builder("test_missing_capability")
            .description("Asks the client's model a question: needs the sampling capability")
            .input_schema(json!({"type": "object", "additionalProperties": false}))
            .asynchronous(|_, ctx: ToolContext| async move {
                let answer = ctx
                    .call_handle()
                    .create_message(json!({
                        "messages": [{"role": "user", "content": {"type": "text", "text": "Say hello"}}],
                        "maxTokens": 10
                    }))
                    .await
                    .map_err(|e| ToolError::new(format!("Sampling failed: {e}")))?;
                Ok::<_, ToolError>(answer)
            }),
        ToolDefinition::builder("test_elicitation")
            .description("Asks the user for a username and an email")
            .input_schema(string_arg("message", "The message to show the user"))
            .asynchronous(|args: Value, ctx: ToolContext| async move {
                let message = args["message"].as_str().unwrap_or_default().to_owned();
                let answer = ctx
                    .call_handle()
                    .elicit(json!({
                        "message": message,
                        "requestedSchema": {
                            "type": "object",
                            "properties": {
                                "username": {"type": "string", "description": "User's response"},
                                "email": {"type": "string", "description": "User's email address"}
                            },
                            "required": ["username", "email"]
                        }
                    }))
                    .await
                    .map_err(|e| ToolError::new(format!("Elicitation failed: {e}")))?;
                Ok::<_, ToolError>(json!(format!(
                    "User response: action={}, content={}",
                    answer["action"].as_str().unwrap_or("?"),
                    answer.get("content").cloned().unwrap_or(Value::Null)
                )))
            }),
        ToolDefinition::builder("test_elicitation_sep1034_defaults")
            .description("Elicitation whose fields have default values")
            .input_schema(no_args())
            .asynchronous(|_, ctx: ToolContext| async move {
                elicit_and_report(
                    &ctx,
                    json!({
                        "message": "Please review the defaults",
                        "requestedSchema": {
                            "type": "object",
                            "properties": {
                                "name": {"type": "string", "default": "John Doe"},
                                "age": {"type": "integer", "default": 30},
                                "score": {"type": "number", "default": 95.5},
                                "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
                                "verified": {"type": "boolean", "default": true}
                            }
                        }
                    }),
                )
                .await
            }),
        ToolDefinition::builder("test_elicitation_sep1330_enums")
            .description("Elicitation with every enum form")
            .input_schema(no_args())
            .asynchronous(|_, ctx: ToolContext| async move {
                elicit_and_report(
                    &ctx,
                    json!({
                        "message": "Please choose",
                        "requestedSchema": {
                            "type": "object",
                            "properties": {
                                "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                                "titledSingle": {"type": "string", "oneOf": [
                                    {"const": "value1", "title": "First Option"},
                                    {"const": "value2", "title": "Second Option"},
                                    {"const": "value3", "title": "Third Option"}
                                ]},
                                "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                                    "enumNames": ["Option One", "Option Two", "Option Three"]},
                                "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                                "titledMulti": {"type": "array", "items": {"anyOf": [
                                    {"const": "value1", "title": "First Choice"},
                                    {"const": "value2", "title": "Second Choice"},
                                    {"const": "value3", "title": "Third Choice"}
                                ]}}
                            }
                        }
                    }),
                )
                .await
            }),
        ToolDefinition::builder("json_schema_2020_12_tool")
            .description("Tool with JSON Schema 2020-12 features")
            .input_schema(json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {
                    "address": {
                        "$anchor": "addressDef",
                        "type": "object",
                        "properties": {"street": {"type": "string"}, "city": {"type": "string"}}
                    }
                },
                "properties": {
                    "name": {"type": "string"},
                    "address": {"$ref": "#/$defs/address"},
                    "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                    "phone": {"type": "string"},
                    "email": {"type": "string"}
                },
                "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
                "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
                "then": {"required": ["phone"]},
                "else": {"required": ["email"]},
                "additionalProperties": false
            }))
            .sync(|args, _| args.clone()),
    ]
}

/// A request to the client under the `inputRequests` key `key` (2026-07-28 MRTR; the
/// older revisions send it to the client as a request).
async fn ask(
    ctx: &ToolContext,
    key: &str,
    method: &str,
    mut params: Value,
) -> Result<Value, ToolError> {
    params["_meta"] = json!({ milpa_mcp::protocol::INPUT_KEY_META: key });
    ctx.call_handle()
        .request(method, params)
        .await
        .map_err(|e| ToolError::new(format!("{method} failed: {e}")))
}

fn name_question(message: &str) -> Value {
    json!({
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"]
        }
    })
}

fn answered_name(answer: &Value) -> Result<String, ToolError> {
    answer["content"]["name"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| ToolError::new("the answer carries no content.name"))
}

/// The 2026-07-28 MRTR fixture tools of the conformance suite: each asks the client
/// through its call handle, and the server turns the question into an `input_required`
/// round.
fn input_required_tools() -> Vec<ToolDefinition> {
    vec![
        ToolDefinition::builder("test_input_required_result_elicitation")
            .description("Asks the user's name (one elicitation round)")
            .input_schema(no_args())
            .asynchronous(|_, ctx: ToolContext| async move {
                let answer = ask(&ctx, "user_name", "elicitation/create", name_question("What is your name?")).await?;
                Ok::<_, ToolError>(json!(format!("Hello, {}!", answered_name(&answer)?)))
            }),
        ToolDefinition::builder("test_input_required_result_sampling")
            .description("Asks the client's model a question (one sampling round)")
            .input_schema(no_args())
            .asynchronous(|_, ctx: ToolContext| async move {
                let answer = ask(&ctx, "capital_question", "sampling/createMessage", json!({
                    "messages": [{"role": "user", "content": {"type": "text", "text": "What is the capital of France?"}}],
                    "maxTokens": 100
                })).await?;
                let text = answer["content"]["text"].as_str().unwrap_or_default();
                Ok::<_, ToolError>(json!(format!("The model said: {text}")))
            }),
        ToolDefinition::builder("test_input_required_result_list_roots")
            .description("Asks the client's roots (one roots/list round)")
            .input_schema(no_args())
            .asynchronous(|_, ctx: ToolContext| async move {
                let answer = ask(&ctx, "client_roots", "roots/list", json!({})).await?;
                let uris: Vec<&str> = answer["roots"].as_array().map(|r| r.iter().filter_map(|r| r["uri"].as_str()).collect()).unwrap_or_default();
                Ok::<_, ToolError>(json!(format!("Roots: {}", uris.join(", "))))
            }),
        ToolDefinition::builder("test_input_required_result_request_state")
            .description("Asks for a confirmation; the retry's requestState is verified by the server")
            .input_schema(no_args())
            .asynchronous(|_, ctx: ToolContext| async move {
                let answer = ask(&ctx, "confirm", "elicitation/create", json!({
                    "message": "Please confirm",
                    "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
                })).await?;
                Ok::<_, ToolError>(json!(format!("state-ok: confirmed={}", answer["content"]["ok"])))
            }),
        ToolDefinition::builder("test_input_required_result_tampered_state")
            .description("Asks for a confirmation; a tampered requestState is refused")
            .input_schema(no_args())
            .asynchronous(|_, ctx: ToolContext| async move {
                let answer = ask(&ctx, "confirm", "elicitation/create", json!({
                    "message": "Please confirm",
                    "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
                })).await?;
                Ok::<_, ToolError>(json!(format!("confirmed={}", answer["content"]["ok"])))
            }),
        ToolDefinition::builder("test_input_required_result_multiple_inputs")
            .description("Asks a name, a greeting and the roots in one round")
            .input_schema(no_args())
            .asynchronous(|_, ctx: ToolContext| async move {
                let (name, greeting, roots) = tokio::join!(
                    ask(&ctx, "user_name", "elicitation/create", name_question("What is your name?")),
                    ask(&ctx, "greeting", "sampling/createMessage", json!({
                        "messages": [{"role": "user", "content": {"type": "text", "text": "Generate a greeting"}}],
                        "maxTokens": 50
                    })),
                    ask(&ctx, "client_roots", "roots/list", json!({})),
                );
                let (name, greeting, roots) = (name?, greeting?, roots?);
                Ok::<_, ToolError>(json!(format!(
                    "{} {} ({} roots)",
                    greeting["content"]["text"].as_str().unwrap_or("Hello"),
                    answered_name(&name)?,
                    roots["roots"].as_array().map_or(0, Vec::len)
                )))
            }),
        ToolDefinition::builder("test_input_required_result_multi_round")
            .description("Asks a name, then an age: two rounds")
            .input_schema(no_args())
            .asynchronous(|_, ctx: ToolContext| async move {
                let first = ask(&ctx, "step1", "elicitation/create", name_question("Step 1: What is your name?")).await?;
                let name = answered_name(&first)?;
                let second = ask(&ctx, "step2", "elicitation/create", json!({
                    "message": format!("Step 2: Hello {name}, how old are you?"),
                    "requestedSchema": {"type": "object", "properties": {"age": {"type": "number"}}, "required": ["age"]}
                })).await?;
                Ok::<_, ToolError>(json!(format!("{name} is {} years old", second["content"]["age"])))
            }),
        ToolDefinition::builder("test_input_required_result_capabilities")
            .description("Asks only what the client declared it can answer")
            .input_schema(no_args())
            .asynchronous(|_, ctx: ToolContext| async move {
                let declared = ctx.call_handle().client_capabilities().unwrap_or_default();
                if declared.get("elicitation").is_some() {
                    let answer = ask(&ctx, "user_name", "elicitation/create", name_question("What is your name?")).await?;
                    return Ok::<_, ToolError>(json!(format!("Hello, {}!", answered_name(&answer)?)));
                }
                if declared.get("sampling").is_some() {
                    let answer = ask(&ctx, "greeting", "sampling/createMessage", json!({
                        "messages": [{"role": "user", "content": {"type": "text", "text": "Generate a greeting"}}],
                        "maxTokens": 50
                    })).await?;
                    return Ok(json!(format!("The model said: {}", answer["content"]["text"].as_str().unwrap_or_default())));
                }
                Ok(json!("Nothing to ask: the client declared neither elicitation nor sampling"))
            }),
    ]
}

async fn elicit_and_report(ctx: &ToolContext, params: Value) -> Result<Value, ToolError> {
    let answer = ctx
        .call_handle()
        .elicit(params)
        .await
        .map_err(|e| ToolError::new(format!("Elicitation failed: {e}")))?;
    Ok(json!(format!(
        "Elicitation completed: action={}, content={}",
        answer["action"].as_str().unwrap_or("?"),
        answer.get("content").cloned().unwrap_or(Value::Null)
    )))
}

/// Adds two integers.
#[tool]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

/// Echoes the text.
#[tool]
fn echo(#[param(description = "The text to echo")] text: String) -> String {
    text
}

/// Deletes a note (asks for confirmation first).
#[tool(mutating, confirm)]
fn delete_note(id: i64) -> ToolResult {
    ToolResult::success(json!({"deleted": id})).with_message("Deleted.")
}

/// Restarts the server (a policy rule denies it to agents).
#[tool(mutating)]
fn restart_server() -> String {
    "restarted".into()
}

/// Waits, reporting progress each 100 ms; stops when cancelled.
#[tool]
async fn slow(#[param(minimum = 0, maximum = 60)] seconds: f64, handle: &CallHandle) -> Value {
    let steps = (seconds * 10.0).ceil().max(1.0) as u64;
    for step in 1..=steps {
        tokio::select! {
            () = handle.cancelled() => return json!({"cancelled_at_step": step}),
            () = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
        handle.progress(step as f64, Some(steps as f64), Some("waiting"));
    }
    json!({"slept_seconds": seconds})
}

fn demo_tools() -> Vec<ToolDefinition> {
    vec![
        add_tool(),
        echo_tool(),
        delete_note_tool(),
        restart_server_tool(),
        slow_tool(),
    ]
}

/// Audit records as JSON lines, buffered in memory and written by a background thread
/// every 20 ms (a sink must be quick: it runs inline at the end of every call). What is
/// still buffered when the sink is dropped is written then, so no record is lost at exit.
struct BufferedAuditFile {
    buf: Mutex<Vec<u8>>,
    file: Arc<Mutex<std::fs::File>>,
}

impl BufferedAuditFile {
    fn start(file: std::fs::File) -> Arc<BufferedAuditFile> {
        let file = Arc::new(Mutex::new(file));
        let sink = Arc::new(BufferedAuditFile {
            buf: Mutex::new(Vec::with_capacity(1 << 16)),
            file: file.clone(),
        });
        let weak = Arc::downgrade(&sink);
        std::thread::spawn(move || {
            let mut spare = Vec::with_capacity(1 << 16);
            while let Some(sink) = weak.upgrade() {
                std::mem::swap(&mut *sink.buf.lock(), &mut spare);
                drop(sink);
                write_lines(&file, &mut spare);
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        sink
    }
}

fn write_lines(file: &Mutex<std::fs::File>, lines: &mut Vec<u8>) {
    if !lines.is_empty() {
        let mut file = file.lock();
        let _ = file.write_all(lines).and_then(|()| file.flush());
        lines.clear();
    }
}

impl Drop for BufferedAuditFile {
    fn drop(&mut self) {
        let buf = self.buf.get_mut();
        write_lines(&self.file, buf);
    }
}

impl AuditSink for BufferedAuditFile {
    fn record(&self, record: &AuditRecord<'_>) {
        let mut buf = self.buf.lock();
        record.write_json(&mut buf);
        buf.push(b'\n');
    }
}

struct Args {
    http: Option<SocketAddr>,
    json_response: bool,
    elicitation_confirm: bool,
    require_auth: bool,
    tokens: Vec<(String, String, Vec<String>)>,
    audit: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        http: None,
        json_response: false,
        elicitation_confirm: true,
        require_auth: false,
        tokens: Vec::new(),
        audit: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--stdio" => args.http = None,
            "--http" => {
                let addr = it.next().ok_or("--http needs an address")?;
                args.http = Some(
                    addr.parse()
                        .map_err(|e| format!("bad address {addr}: {e}"))?,
                );
            }
            "--json-response" => args.json_response = true,
            "--no-elicitation-confirm" => args.elicitation_confirm = false,
            "--require-auth" => args.require_auth = true,
            "--token" => {
                let spec = it.next().ok_or("--token needs TOKEN=PRINCIPAL:SCOPES")?;
                let (token, rest) = spec
                    .split_once('=')
                    .ok_or("--token TOKEN=PRINCIPAL:SCOPES")?;
                let (principal, scopes) = rest.split_once(':').unwrap_or((rest, ""));
                let scopes = scopes
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect();
                args.tokens.push((token.into(), principal.into(), scopes));
            }
            "--audit" => args.audit = Some(it.next().ok_or("--audit needs a file")?),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(args)
}

fn build_registry(args: &Args) -> Result<ToolRegistry, Box<dyn std::error::Error>> {
    let deny_restart = StaticRule::new(
        "restart_server",
        PolicyRule::new(RuleEffect::Deny)
            .with_id(1)
            .with_description("Restarts are not for agents."),
    )
    .with_channel("mcp");
    let mut builder = ToolRegistry::builder()
        .rule_provider(Arc::new(StaticRuleProvider::new(vec![deny_restart])));
    if !args.require_auth {
        builder =
            builder.channel_policy("mcp", ChannelPolicy::AUTHENTICATED.with_require_auth(false));
    }
    if let Some(path) = &args.audit {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        builder = builder.audit_sink(BufferedAuditFile::start(file));
    }
    let mut registry = builder.build();
    for tool in fixture_tools()
        .into_iter()
        .chain(input_required_tools())
        .chain(demo_tools())
        .chain([trigger_tool_change(), trigger_prompt_change()])
    {
        registry.register(tool)?;
    }
    registry.register_resources(FixtureResources)?;
    registry.register_prompts(FixturePrompts)?;
    Ok(registry)
}

/// The suite's resources.
struct FixtureResources;

impl ResourceProvider for FixtureResources {
    fn resources(&self) -> Vec<Resource> {
        vec![
            Resource::new("test://static-text", "static-text")
                .with_description("A static text resource")
                .with_mime_type("text/plain"),
            Resource::new("test://static-binary", "static-binary")
                .with_description("A static binary resource (a 1x1 PNG)")
                .with_mime_type("image/png"),
            Resource::new("test://watched-resource", "watched-resource")
                .with_description("A resource to subscribe to")
                .with_mime_type("text/plain"),
        ]
    }

    fn templates(&self) -> Vec<ResourceTemplate> {
        vec![
            ResourceTemplate::new("test://template/{id}/data", "template-data")
                .expect("a valid template")
                .with_description("Data for an id")
                .with_mime_type("application/json"),
        ]
    }

    fn read<'a>(
        &'a self,
        uri: &'a str,
        _ctx: &'a ToolContext,
    ) -> Deferred<'a, Result<Vec<ResourceContents>, CatalogError>> {
        let contents = match uri {
            "test://static-text" => ResourceContents::text(
                uri,
                "text/plain",
                "This is the content of the static text resource.",
            ),
            "test://static-binary" => ResourceContents::Blob {
                uri: uri.to_owned(),
                mime_type: Some("image/png".to_owned()),
                blob: PNG_1X1.to_owned(),
            },
            "test://watched-resource" => {
                ResourceContents::text(uri, "text/plain", "The watched resource, as it is now.")
            }
            _ => match uri
                .strip_prefix("test://template/")
                .and_then(|rest| rest.strip_suffix("/data"))
            {
                Some(id) => ResourceContents::text(
                    uri,
                    "application/json",
                    json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")})
                        .to_string(),
                ),
                None => return Deferred::ready(Err(CatalogError::NotFound(uri.to_owned()))),
            },
        };
        Deferred::ready(Ok(vec![contents]))
    }
}

/// The suite's prompts.
struct FixturePrompts;

impl PromptProvider for FixturePrompts {
    fn prompts(&self) -> Vec<Prompt> {
        vec![
            Prompt::new("test_simple_prompt", "A simple prompt without arguments"),
            Prompt::new("test_prompt_with_arguments", "A prompt with two arguments")
                .with_argument(
                    PromptArgument::required("arg1").with_description("First test argument"),
                )
                .with_argument(
                    PromptArgument::required("arg2").with_description("Second test argument"),
                ),
            Prompt::new(
                "test_prompt_with_embedded_resource",
                "A prompt embedding a resource",
            )
            .with_argument(
                PromptArgument::required("resourceUri")
                    .with_description("URI of the resource to embed"),
            ),
            Prompt::new("test_prompt_with_image", "A prompt with an image"),
            Prompt::new(
                "test_input_required_result_prompt",
                "Asks the user for context (one elicitation round on 2026-07-28)",
            ),
        ]
        .into_iter()
        .chain(
            CHANGED_PROMPT
                .load(std::sync::atomic::Ordering::Acquire)
                .then(|| {
                    Prompt::new(
                        "changed_prompt",
                        "Appears and disappears with test_trigger_prompt_change",
                    )
                }),
        )
        .collect()
    }

    fn get<'a>(
        &'a self,
        name: &'a str,
        arguments: &'a BTreeMap<String, String>,
        ctx: &'a ToolContext,
    ) -> Deferred<'a, Result<PromptReply, CatalogError>> {
        if name == "test_input_required_result_prompt" {
            // A prompt asks the client as a tool does, through its call handle.
            return Deferred::pending(async move {
                let question = json!({
                    "message": "What context should the prompt use?",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"context": {"type": "string"}},
                        "required": ["context"]
                    }
                });
                let answer = ask(ctx, "user_context", "elicitation/create", question)
                    .await
                    .map_err(|e| CatalogError::failed(e.to_string()))?;
                let context = answer["content"]["context"].as_str().unwrap_or_default();
                Ok(PromptReply::new(vec![PromptMessage::user(format!(
                    "Use this context: {context}"
                ))]))
            });
        }
        let argument = |key: &str| arguments.get(key).cloned().unwrap_or_default();
        let messages = match name {
            "test_simple_prompt" => {
                vec![PromptMessage::user("This is a simple prompt for testing.")]
            }
            "changed_prompt" => vec![PromptMessage::user("This prompt comes and goes.")],
            "test_prompt_with_arguments" => vec![PromptMessage::user(format!(
                "Prompt with arguments: arg1='{}', arg2='{}'",
                argument("arg1"),
                argument("arg2")
            ))],
            "test_prompt_with_embedded_resource" => vec![
                PromptMessage::user_resource(ResourceContents::text(
                    argument("resourceUri"),
                    "text/plain",
                    "Embedded resource content for testing.",
                )),
                PromptMessage::user("Please process the embedded resource above."),
            ],
            "test_prompt_with_image" => vec![
                PromptMessage {
                    role: Role::User,
                    content: PromptContent::Image {
                        data: PNG_1X1.to_owned(),
                        mime_type: "image/png".to_owned(),
                    },
                },
                PromptMessage::user("Please analyze the image above."),
            ],
            _ => return Deferred::ready(Err(CatalogError::NotFound(name.to_owned()))),
        };
        Deferred::ready(Ok(PromptReply::new(messages)))
    }

    fn complete<'a>(
        &'a self,
        _name: &'a str,
        _argument: &'a str,
        value: &'a str,
    ) -> Deferred<'a, Vec<String>> {
        let words = ["test", "testing", "tested", "value", "valid"];
        Deferred::ready(
            words
                .iter()
                .filter(|word| word.starts_with(value))
                .map(|word| (*word).to_owned())
                .collect(),
        )
    }
}

/// The registry being served, for the one tool that changes the tool list. A weak
/// reference: the registry owns that tool.
static SERVED: std::sync::OnceLock<std::sync::Weak<ToolRegistry>> = std::sync::OnceLock::new();

/// `test_trigger_tool_change`: the suite's hook for tool list changes (2026-07-28
/// `subscriptions/listen`). Each call adds the tool `changed_tool` or takes it away again.
fn trigger_tool_change() -> ToolDefinition {
    ToolDefinition::builder("test_trigger_tool_change")
        .description("Adds the tool changed_tool, or removes it when it is there")
        .input_schema(no_args())
        .sync(|_, _| {
            let Some(registry) = SERVED.get().and_then(std::sync::Weak::upgrade) else {
                return json!("no registry is being served");
            };
            let extra = if registry.has("changed_tool") {
                vec![]
            } else {
                vec![
                    ToolDefinition::builder("changed_tool")
                        .description("Appears and disappears with test_trigger_tool_change")
                        .input_schema(no_args())
                        .sync(|_, _| json!("here")),
                ]
            };
            match registry.replace_tools("changes", extra) {
                Ok(()) => json!("tool list changed"),
                Err(error) => json!(format!("tool list unchanged: {error}")),
            }
        })
}

/// Whether the prompt `changed_prompt` is listed now (see [`trigger_prompt_change`]).
static CHANGED_PROMPT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `test_trigger_prompt_change`: the suite's hook for prompt list changes (2026-07-28
/// `subscriptions/listen`). Each call adds the prompt `changed_prompt` or takes it away
/// again, and tells the registry its prompt list changed.
fn trigger_prompt_change() -> ToolDefinition {
    ToolDefinition::builder("test_trigger_prompt_change")
        .description("Adds the prompt changed_prompt, or removes it when it is there")
        .input_schema(no_args())
        .sync(|_, _| {
            let Some(registry) = SERVED.get().and_then(std::sync::Weak::upgrade) else {
                return json!("no registry is being served");
            };
            CHANGED_PROMPT.fetch_xor(true, std::sync::atomic::Ordering::AcqRel);
            match registry.catalog_notifier().lists_changed() {
                Ok(()) => json!("prompt list changed"),
                Err(error) => json!(format!("prompt list unchanged: {error}")),
            }
        })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // MILPA_MCP_WORKERS=N picks the number of Tokio worker threads (default: one per core).
    // MILPA_MCP_WORKERS=0 runs everything on the current thread.
    let workers = std::env::var("MILPA_MCP_WORKERS")
        .ok()
        .and_then(|n| n.parse::<usize>().ok());
    let mut runtime = match workers {
        Some(0) => tokio::runtime::Builder::new_current_thread(),
        _ => tokio::runtime::Builder::new_multi_thread(),
    };
    if let Some(n) = workers.filter(|n| *n > 0) {
        runtime.worker_threads(n);
    }
    runtime.enable_all().build()?.block_on(run())
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let args = parse_args().inspect_err(|_| {
        eprintln!("usage: everything [--stdio | --http ADDR] [--json-response] [--no-elicitation-confirm] [--require-auth] [--token TOKEN=PRINCIPAL:SCOPES] [--audit FILE]");
    })?;
    let registry = Arc::new(build_registry(&args)?);
    let _ = SERVED.set(Arc::downgrade(&registry));
    let mut options = ServerOptions::default();
    options.name = "milpa-everything".into();
    options.instructions = Some("Fixture server for the MCP conformance suite.".into());
    options.elicitation_confirmation = args.elicitation_confirm;
    match args.http {
        None => milpa_mcp::serve_stdio_with(registry, options).await?,
        Some(addr) => {
            let mut tokens = StaticTokens::new();
            for (token, principal, scopes) in &args.tokens {
                tokens.insert_token(token, principal.clone(), scopes.clone());
            }
            if !addr.ip().is_loopback() {
                return Err(format!("{addr} is not a loopback address").into());
            }
            let listener = tokio::net::TcpListener::bind(addr).await?;
            eprintln!(
                "milpa-mcp everything: listening on http://{}/mcp",
                listener.local_addr()?
            );
            HttpServer::new(registry)
                .options(options)
                .authenticator(tokens)
                .json_response(args.json_response)
                .serve_listener(listener, async {
                    let _ = tokio::signal::ctrl_c().await;
                })
                .await?;
        }
    }
    Ok(())
}
