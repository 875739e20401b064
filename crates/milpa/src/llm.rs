//! [`LlmService`]: the seam through which a plugin provides model access and others use it.
//!
//! The runtime ships no implementation: a host or plugin wraps its provider (OpenAI,
//! Anthropic, a local model) in an `LlmService`, and code that needs a model depends only on
//! the trait. The tools passed in are [`ToolSummary`] entries, typically from
//! [`ToolRegistry::tool_summaries`](crate::ToolRegistry::tool_summaries) or
//! [`ToolRegistry::tools_within_budget`](crate::ToolRegistry::tools_within_budget).
//!
//! ```
//! use milpa::llm::{LlmError, LlmService};
//! use milpa::{Deferred, ToolSummary};
//! use serde_json::{Value, json};
//!
//! /// Answers every prompt with the same text; useful in tests.
//! struct Canned(&'static str);
//!
//! impl LlmService for Canned {
//!     fn generate_response<'a>(
//!         &'a self,
//!         _prompt: &'a str,
//!         _tools: &'a [ToolSummary],
//!         _messages: &'a [Value],
//!         _max_tokens: u32,
//!     ) -> Deferred<'a, Result<Value, LlmError>> {
//!         Deferred::ready(Ok(json!({
//!             "choices": [{"message": {"role": "assistant", "content": self.0}}]
//!         })))
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let llm: &dyn LlmService = &Canned("hello");
//! let response = llm.generate_response("hi", &[], &[], milpa::llm::DEFAULT_MAX_TOKENS).await.unwrap();
//! assert_eq!(response["choices"][0]["message"]["content"], "hello");
//! # });
//! ```

use serde_json::Value;

use crate::deferred::Deferred;
use crate::tool_summary::ToolSummary;

/// The `max_tokens` to pass when the caller has no opinion (as in the original).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// Why a model gave no response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    /// The provider could not be reached (network, DNS, no service configured).
    #[error("LLM service unavailable: {0}")]
    Unavailable(String),
    /// The provider refused for rate or quota reasons.
    #[error("LLM service rate limited")]
    RateLimited {
        /// When to try again, if the provider said.
        retry_after_seconds: Option<u64>,
    },
    /// The provider answered with an error.
    #[error("LLM provider error: {0}")]
    Provider(String),
    /// The provider's answer could not be read.
    #[error("invalid LLM response: {0}")]
    InvalidResponse(String),
}

/// A model that answers a prompt, optionally offered tools and given a history.
///
/// Implementations backed by the network return [`Deferred::pending`]; fakes and caches
/// may answer with [`Deferred::ready`]. The trait is object safe: share one as
/// `Arc<dyn LlmService>`.
pub trait LlmService: Send + Sync {
    /// Asks the model.
    ///
    /// * `prompt`: the new user message.
    /// * `tools`: the tools the model may call, in MCP shape.
    /// * `messages`: the conversation so far (OpenAI-style `{role, content}` maps).
    /// * `max_tokens`: the most tokens to generate ([`DEFAULT_MAX_TOKENS`] by convention).
    ///
    /// Returns the provider's response as an OpenAI-compatible JSON object
    /// (`{"choices": [{"message": {...}}], ...}`).
    fn generate_response<'a>(
        &'a self,
        prompt: &'a str,
        tools: &'a [ToolSummary],
        messages: &'a [Value],
        max_tokens: u32,
    ) -> Deferred<'a, Result<Value, LlmError>>;
}
