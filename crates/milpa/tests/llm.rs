//! The LLM seam: a fake service fed from the registry's summaries.

use std::sync::Arc;

use milpa::llm::{DEFAULT_MAX_TOKENS, LlmError, LlmService};
use milpa::{Deferred, ToolContext, ToolDefinition, ToolRegistry, ToolSummary};
use serde_json::{Value, json};

/// Answers in OpenAI's shape, saying which tools it was offered. A real service would send
/// `tools` to its provider (converted to the provider's function format) and parse the
/// reply; this one answers at once, so it uses `Deferred::ready`.
struct EchoTools;

impl LlmService for EchoTools {
    fn generate_response<'a>(
        &'a self,
        prompt: &'a str,
        tools: &'a [ToolSummary],
        messages: &'a [Value],
        max_tokens: u32,
    ) -> Deferred<'a, Result<Value, LlmError>> {
        if max_tokens == 0 {
            return Deferred::ready(Err(LlmError::InvalidResponse(
                "max_tokens must be positive".into(),
            )));
        }
        let offered: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        Deferred::ready(Ok(json!({
            "choices": [{
                "message": {
                    "role": "assistant",
                    "content": format!("{prompt} | tools: {} | history: {}", offered.join(", "), messages.len()),
                },
                "finish_reason": "stop"
            }],
            "usage": {"max_tokens": max_tokens}
        })))
    }
}

/// A service that takes its time, as a network one does.
struct Slow;

impl LlmService for Slow {
    fn generate_response<'a>(
        &'a self,
        _prompt: &'a str,
        tools: &'a [ToolSummary],
        _messages: &'a [Value],
        _max_tokens: u32,
    ) -> Deferred<'a, Result<Value, LlmError>> {
        Deferred::pending(async move {
            tokio::task::yield_now().await;
            if tools.is_empty() {
                Err(LlmError::Unavailable("no tools, no point".into()))
            } else {
                Ok(json!({"choices": []}))
            }
        })
    }
}

fn registry() -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    for name in ["echo", "add"] {
        registry
            .register(
                ToolDefinition::builder(name)
                    .description(format!("{name} tool"))
                    .sync(|_args: &Value, _ctx: &ToolContext| json!(null)),
            )
            .unwrap();
    }
    registry
}

#[tokio::test]
async fn a_service_is_offered_the_registry_summaries() {
    let registry = registry();
    let llm: Arc<dyn LlmService> = Arc::new(EchoTools);
    let history = [json!({"role": "user", "content": "earlier"})];
    let response = llm
        .generate_response(
            "hello",
            &registry.tool_summaries(),
            &history,
            DEFAULT_MAX_TOKENS,
        )
        .await
        .unwrap();
    assert_eq!(
        response["choices"][0]["message"]["content"],
        "hello | tools: echo, add | history: 1"
    );
    assert_eq!(response["usage"]["max_tokens"], 4096);
}

#[tokio::test]
async fn a_service_can_be_fed_a_budgeted_selection() {
    let registry = registry();
    let selection = registry.tools_within_budget("gpt-4o", Some(&["add"]));
    let response = EchoTools
        .generate_response("hi", &selection.selected, &[], 256)
        .await
        .unwrap();
    assert_eq!(
        response["choices"][0]["message"]["content"],
        "hi | tools: add, echo | history: 0"
    );
}

#[tokio::test]
async fn errors_and_pending_answers() {
    let error = EchoTools
        .generate_response("x", &[], &[], 0)
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid LLM response: max_tokens must be positive"
    );
    assert_eq!(
        Slow.generate_response("x", &[], &[], 1).await,
        Err(LlmError::Unavailable("no tools, no point".into()))
    );
    let tools = registry().tool_summaries();
    assert!(Slow.generate_response("x", &tools, &[], 1).await.is_ok());
    assert_eq!(
        LlmError::RateLimited {
            retry_after_seconds: Some(3)
        }
        .to_string(),
        "LLM service rate limited"
    );
}
