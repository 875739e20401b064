//! Argument completion (`completion/complete`): suggestions for a prompt's argument or a
//! resource template's variable, asked of the provider that serves it, after the gate
//! allowed the caller to use that prompt or template.

use crate::catalog::access::AccessRefusal;
use crate::context::ToolContext;
use crate::deferred::Deferred;
use crate::policy::{Access, Authorization, Subject};
use crate::registry::ToolRegistry;
use crate::result::ErrorCode;

/// The most suggestions one answer carries (MCP's limit); the rest are counted in
/// [`Completion::total`].
pub const MAX_COMPLETION_VALUES: usize = 100;

/// What is being completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CompletionRef<'a> {
    /// An argument of the prompt with this name.
    Prompt(&'a str),
    /// A variable of the resource template written so.
    ResourceTemplate(&'a str),
}

/// The suggestions.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Completion {
    /// At most [`MAX_COMPLETION_VALUES`], in the provider's order.
    pub values: Vec<String>,
    /// How many the provider had.
    pub total: usize,
    /// Whether there were more than `values` holds.
    pub has_more: bool,
}

/// Suggestions for `argument` of `reference`, given `value` typed so far. The caller must
/// be allowed to use the prompt or template (the gate's checks, without the call policy,
/// which judges requests, not keystrokes); nothing is audited or charged.
pub(crate) async fn complete(
    registry: &ToolRegistry,
    reference: CompletionRef<'_>,
    argument: &str,
    value: &str,
    ctx: &ToolContext,
) -> Result<Completion, AccessRefusal> {
    let catalog = registry.catalog().snapshot();
    let not_found = |what: &str, name: &str| {
        AccessRefusal::new(ErrorCode::NotFound, format!("{what} not found: {name}"))
    };
    // Who suggests is found now and asked only once the gate allowed the caller.
    type Suggest<'a> = Box<dyn FnOnce() -> Deferred<'a, Vec<String>> + Send + 'a>;
    let (access, name, scopes, suggest): (_, _, _, Suggest<'_>) = match reference {
        CompletionRef::Prompt(name) => {
            let (prompt, provider) = catalog
                .prompt(name)
                .ok_or_else(|| not_found("Prompt", name))?;
            let suggest = Box::new(move || provider.complete(name, argument, value));
            (Access::GetPrompt, prompt.name(), prompt.scopes(), suggest)
        }
        CompletionRef::ResourceTemplate(text) => {
            let (template, provider) = catalog
                .template(text)
                .ok_or_else(|| not_found("Resource template", text))?;
            let suggest = Box::new(move || provider.complete(text, argument, value));
            (
                Access::ReadResource,
                template.template().as_str(),
                template.scopes(),
                suggest,
            )
        }
    };
    let gate = &registry.wiring().gate;
    let policy = gate.lookup_warning_if_unknown(ctx.channel());
    match gate
        .authorize_subject(&policy, ctx, Subject::read(access, name, scopes))
        .await
    {
        Authorization::Allowed => {}
        Authorization::InsufficientScope { reason, .. } | Authorization::Denied(reason) => {
            return Err(AccessRefusal::new(ErrorCode::Forbidden, reason));
        }
    }
    let mut values = suggest().await;
    let total = values.len();
    values.truncate(MAX_COMPLETION_VALUES);
    Ok(Completion {
        has_more: total > values.len(),
        values,
        total,
    })
}
