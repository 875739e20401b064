//! From a manifest to a registry, an authenticator and MCP server options.

use std::sync::Arc;
use std::time::Duration;

use milpa::approval::ApprovalQueue;
use milpa::audit::AuditSink;
use milpa::events::Dispatcher;
use milpa::policy::StaticRuleProvider;
use milpa::rate_limit::Quota;
use milpa::verification::{HumanVerifier, VerificationTools};
use milpa::{RegistryError, ToolRegistry};
use milpa_mcp::ServerOptions;
use milpa_mcp::auth::StaticTokens;
use milpa_mcp::auth::oauth::{JwksSource, OAuthConfig};

use crate::command_tool::CommandTool;
use crate::manifest::{Manifest, ManifestError};
use crate::notify::ApprovalNotifier;
use crate::store::Stores;

/// Adds a program's own tools to the registry the manifest configured.
pub type ToolsFn<'a> = dyn FnOnce(&mut ToolRegistry, &Setup<'_>) -> Result<(), RegistryError> + 'a;

/// What a program's own tools may need when they are registered.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Setup<'a> {
    /// The manifest (the built-in defaults when no file was read).
    pub manifest: &'a Manifest,
    /// Where state lives: a tool that keeps data can keep it there too (the demo's notes
    /// live in the SQLite file when the store is SQLite).
    pub stores: &'a Stores,
}

/// Why a registry could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetupError {
    /// A manifest entry was refused (a command tool's name, say).
    Manifest(ManifestError),
    /// The program's own tools could not be registered.
    Tools(RegistryError),
}

impl std::fmt::Display for SetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SetupError::Manifest(e) => e.fmt(f),
            SetupError::Tools(e) => write!(f, "could not register the tools: {e}"),
        }
    }
}

impl std::error::Error for SetupError {}

/// The registry the manifest describes: its policy (channel overrides, static rules; without
/// a manifest, the rule that the generated `local-approver` token calls no tool), rate
/// limiter, confirmation lifetime, approval queue and audit sink (`None`: `tracing`), with
/// state in `stores`; then the tools `tools` adds, the verification tools when
/// `[verification]` is on, and the manifest's tools (a `wasm` tool's component is loaded
/// and its imports checked against its grants here: refused with the `wasm =` line).
/// `[approvals] notify_command`, when set, runs for every approval that opens.
pub fn build_registry(
    manifest: &Manifest,
    stores: &Stores,
    audit: Option<Arc<dyn AuditSink>>,
    tools: Box<ToolsFn<'_>>,
) -> Result<ToolRegistry, SetupError> {
    let notifier = ApprovalNotifier::from_manifest(manifest).map(Arc::new);
    build_registry_with(manifest, stores, audit, notifier.as_ref(), tools)
}

/// [`build_registry`] with the notifier of `[approvals] notify_command` given by the caller,
/// who can then tell it the approvals page ([`ApprovalNotifier::set_approvals_page`]) and
/// wait for its programs ([`ApprovalNotifier::idle`]).
///
/// There is one approval queue: a [`HumanVerifier`] over `stores.verifications` whose
/// dispatcher tells `notifier` of every approval that opens, shared by the registry's
/// `confirm = "human"` gate ([`ToolRegistry::approvals`]) and by the verification tools.
pub(crate) fn build_registry_with(
    manifest: &Manifest,
    stores: &Stores,
    audit: Option<Arc<dyn AuditSink>>,
    notifier: Option<&Arc<ApprovalNotifier>>,
    tools: Box<ToolsFn<'_>>,
) -> Result<ToolRegistry, SetupError> {
    let mut builder =
        ToolRegistry::builder().approvals(Arc::new(approval_queue(manifest, stores, notifier)));
    if let Some(confirmations) = &stores.confirmations {
        builder = builder.confirmation_store(Arc::clone(confirmations));
    }
    if let Some(limit) = &manifest.rate_limit {
        builder = builder
            .rate_limiter(Arc::clone(&stores.rate_limiter))
            .default_quota(Quota::new(
                *limit.max_tokens.get_ref(),
                Duration::from_secs(*limit.window_seconds.get_ref()),
            ));
    }
    if let Some(budget) = &manifest.caller_budget {
        // Spent in the resolve stage, so unknown names and refused calls cost the caller
        // too: a flood of them is cut off before it reaches a lookup.
        builder = builder.caller_budget(Quota::new(
            *budget.max_tokens.get_ref(),
            Duration::from_secs(*budget.window_seconds.get_ref()),
        ));
    }
    if let Some(ttl) = &manifest.confirmation.ttl_seconds {
        builder = builder.confirmation_ttl(Duration::from_secs(*ttl.get_ref()));
    }
    let mut rules: Vec<_> = manifest.rules.iter().map(|r| r.to_static_rule()).collect();
    if manifest.source().is_none() {
        // Without a manifest, `serve --http` makes the approver's token, which calls no tool.
        rules.insert(0, crate::local_tokens::approver_calls_no_tool());
    }
    if !rules.is_empty() {
        builder = builder.rule_provider(Arc::new(StaticRuleProvider::new(rules)));
    }
    if let Some(sink) = audit {
        builder = builder.audit_sink(sink);
    }
    // `[policy]`: Cedar, checked last in the authorize stage.
    if let Some(policy) = manifest
        .policy
        .as_ref()
        .map(|section| {
            section.load(manifest.base_dir(), |offset, message| {
                manifest.error_at(offset, message)
            })
        })
        .transpose()
        .map_err(SetupError::Manifest)?
    {
        builder = builder.call_policy(policy);
    }
    let mut registry = builder.build();
    for (channel, change) in &manifest.channels {
        let base = registry.policy_gate().channel_policy(channel);
        registry
            .policy_gate_mut()
            .set_channel_policy(channel.clone(), change.apply(base));
    }
    tools(&mut registry, &Setup { manifest, stores }).map_err(SetupError::Tools)?;
    if let Some(verification) = manifest.verification.as_ref().filter(|v| v.enabled) {
        VerificationTools::new(Arc::clone(registry.approvals().verifier()))
            .resolve_scopes(verification.resolve_scopes.iter().cloned())
            .register(&mut registry)
            .map_err(|e| SetupError::Manifest(manifest.error_at(None, e.to_string())))?;
    }
    let base_dir = manifest.base_dir();
    if !manifest.resources.is_empty() {
        registry
            .register_resources(crate::resource_source::ManifestResources::new(
                &manifest.resources,
                base_dir,
            ))
            .map_err(|e| {
                SetupError::Manifest(manifest.error_at(None, format!("[[resources]]: {e}")))
            })?;
    }
    if !manifest.prompts.is_empty() {
        let prompts =
            crate::prompt_template::ManifestPrompts::new(&manifest.prompts).map_err(|e| {
                SetupError::Manifest(manifest.error_at(None, format!("[[prompts]]: {e}")))
            })?;
        registry.register_prompts(prompts).map_err(|e| {
            SetupError::Manifest(manifest.error_at(None, format!("[[prompts]]: {e}")))
        })?;
    }
    for spec in &manifest.tools {
        let definition = match &spec.wasm {
            Some(wasm) => wasm_definition(manifest, spec, wasm).map_err(SetupError::Manifest)?,
            None => CommandTool::definition(spec, base_dir),
        };
        registry.register(definition).map_err(|e| {
            SetupError::Manifest(manifest.error_at(Some(spec.name.span().start), e.to_string()))
        })?;
    }
    Ok(registry)
}

/// A `wasm = "…"` tool, its component loaded and checked against its grants.
#[cfg(feature = "wasm")]
fn wasm_definition(
    manifest: &Manifest,
    spec: &crate::manifest::CommandToolSpec,
    wasm: &toml::Spanned<std::path::PathBuf>,
) -> Result<milpa::ToolDefinition, ManifestError> {
    crate::wasm_tool::definition(manifest, spec, wasm)
}

/// A `wasm = "…"` tool in a build without the `wasm` feature: refused, naming the feature.
#[cfg(not(feature = "wasm"))]
fn wasm_definition(
    manifest: &Manifest,
    spec: &crate::manifest::CommandToolSpec,
    wasm: &toml::Spanned<std::path::PathBuf>,
) -> Result<milpa::ToolDefinition, ManifestError> {
    Err(manifest.error_at(
        Some(wasm.span().start),
        format!(
            "tool `{}`: wasm tools need milpa built with the cargo feature `wasm` \
             (this build has it off: cargo build -p milpa-cli --features wasm)",
            spec.name()
        ),
    ))
}

/// The approval queue over `stores.verifications`, with the manifest's TTL; `notifier` hears
/// of every approval that opens.
fn approval_queue(
    manifest: &Manifest,
    stores: &Stores,
    notifier: Option<&Arc<ApprovalNotifier>>,
) -> ApprovalQueue {
    let dispatcher = Dispatcher::new();
    if let Some(notifier) = notifier {
        notifier.subscribe(&dispatcher);
    }
    let verifier =
        HumanVerifier::new(Arc::clone(&stores.verifications)).with_dispatcher(Arc::new(dispatcher));
    ApprovalQueue::new(verifier)
        .with_ttl(manifest.approvals.ttl())
        .with_server(manifest.server_name())
}

/// The bearer tokens of `[[auth.tokens]]` (hashes checked when the manifest was read).
pub(crate) fn authenticator(manifest: &Manifest) -> StaticTokens {
    let mut tokens = StaticTokens::new();
    for token in &manifest.auth.tokens {
        // Checked by `Manifest::parse`: 64 hex digits.
        let _ = tokens.insert_sha256_hex(
            token.sha256.get_ref(),
            token.principal.get_ref().clone(),
            token.scopes.iter().cloned(),
        );
    }
    tokens
}

/// The OAuth resource server settings of `[auth.oauth]`, if any: a relative `jwks` path is
/// read beside the manifest.
pub(crate) fn oauth_config(manifest: &Manifest) -> Option<OAuthConfig> {
    let spec = manifest.auth.oauth.as_ref()?;
    let jwks = match JwksSource::parse(spec.jwks.get_ref()) {
        JwksSource::File(path) if path.is_relative() => JwksSource::File(
            manifest
                .base_dir()
                .map_or_else(|| path.clone(), |dir| dir.join(&path)),
        ),
        other => other,
    };
    let mut config = OAuthConfig::new(spec.issuer.get_ref(), spec.audience.get_ref(), jwks);
    if let Some(claim) = &spec.scopes_claim {
        config = config.scopes_claim(claim);
    }
    Some(config)
}

/// The host a URL names, lowercased, without port (`tools.example.com`).
pub(crate) fn url_host(url: &str) -> Option<String> {
    let (_, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let host = match authority.strip_prefix('[') {
        Some(v6) => format!("[{}]", v6.split_once(']')?.0),
        None => authority.split(':').next()?.to_owned(),
    };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// The MCP server options of `[server]` and `[confirmation]`.
pub(crate) fn server_options(manifest: &Manifest) -> ServerOptions {
    let mut options = ServerOptions::default();
    if let Some(name) = &manifest.server.name {
        options.name = name.clone();
    }
    if let Some(version) = &manifest.server.version {
        options.version = version.clone();
    }
    options.title = manifest.server.title.clone();
    options.instructions = manifest.server.instructions.clone();
    options.list_all = manifest.server.list_all;
    if let Some(elicitation) = manifest.confirmation.elicitation {
        options.elicitation_confirmation = elicitation;
    }
    options
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_options_follow_the_manifest() {
        let defaults = server_options(&Manifest::default());
        assert_eq!(defaults.name, ServerOptions::default().name);
        assert!(defaults.elicitation_confirmation);
        assert!(
            !defaults.list_all,
            "listings are filtered per caller by default"
        );

        let manifest = Manifest::parse(
            "milpa.toml",
            "[server]\nname = \"ops\"\nlist_all = true\n\n[confirmation]\nelicitation = false\n",
        )
        .unwrap();
        let options = server_options(&manifest);
        assert_eq!(options.name, "ops");
        assert!(options.list_all);
        assert!(!options.elicitation_confirmation);
    }
}
