//! Resources and prompts go through the same gates as a tool call, in the call's order:
//! resolve, authorize (channel, scopes, rules, call policy), rate limit, execute, audit.
//! Nothing is read before the gate allows it, and every request leaves one record.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use milpa::audit::AuditOutcome;
use milpa::catalog::{
    CatalogError, CompletionRef, Prompt, PromptArgument, PromptMessage, PromptProvider,
    PromptReply, Resource, ResourceContents, ResourceProvider, ResourceTemplate,
};
use milpa::policy::{
    Access, CallPolicy, PolicyDecision, PolicyInput, PolicyRule, StaticRule, StaticRuleProvider,
};
use milpa::rate_limit::{InMemoryRateLimiter, Quota};
use milpa::{Deferred, ErrorCode, ToolContext, ToolDefinition, ToolRegistry};
use serde_json::json;
use support::{Runs, audited, only_record};

/// `docs://readme` (open), `docs://secret` (scope `docs:secret`) and the template
/// `docs://notes/{id}`; counts reads.
struct Docs(Runs);

impl ResourceProvider for Docs {
    fn resources(&self) -> Vec<Resource> {
        vec![
            Resource::new("docs://readme", "readme").with_mime_type("text/plain"),
            Resource::new("docs://secret", "secret").with_scopes(["docs:secret"]),
        ]
    }

    fn templates(&self) -> Vec<ResourceTemplate> {
        vec![ResourceTemplate::new("docs://notes/{id}", "note").unwrap()]
    }

    fn read<'a>(
        &'a self,
        uri: &'a str,
        _ctx: &'a ToolContext,
    ) -> Deferred<'a, Result<Vec<ResourceContents>, CatalogError>> {
        self.0.hit();
        Deferred::ready(match uri {
            "docs://notes/404" => Err(CatalogError::NotFound(uri.into())),
            "docs://notes/boom" => Err(CatalogError::failed("the disk is gone")),
            _ => Ok(vec![ResourceContents::text(
                uri,
                "text/plain",
                format!("text of {uri}"),
            )]),
        })
    }

    fn complete<'a>(&'a self, _: &'a str, _: &'a str, value: &'a str) -> Deferred<'a, Vec<String>> {
        Deferred::ready((0..150).map(|n| format!("{value}{n}")).collect())
    }
}

/// `greet(name, password?)`.
struct Greetings;

impl PromptProvider for Greetings {
    fn prompts(&self) -> Vec<Prompt> {
        vec![
            Prompt::new("greet", "Greets someone")
                .with_argument(PromptArgument::required("name"))
                .with_argument(PromptArgument::optional("password")),
        ]
    }

    fn get<'a>(
        &'a self,
        _name: &'a str,
        arguments: &'a BTreeMap<String, String>,
        _ctx: &'a ToolContext,
    ) -> Deferred<'a, Result<PromptReply, CatalogError>> {
        let text = format!("Say hello to {}", arguments["name"]);
        Deferred::ready(Ok(PromptReply::new(vec![PromptMessage::user(text)])))
    }
}

fn anonymous_mcp() -> ToolContext {
    ToolContext::mcp("r1", None, Vec::<String>::new())
}

fn ana(scopes: &[&str]) -> ToolContext {
    ToolContext::mcp(
        "r2",
        Some("ana".into()),
        scopes.iter().map(|s| s.to_string()),
    )
}

fn args(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[tokio::test]
async fn a_read_returns_the_contents_and_leaves_a_read_record() {
    let reads = Runs::default();
    let (mut registry, sink) = audited(ToolRegistry::builder());
    registry.register_resources(Docs(reads.clone())).unwrap();
    let contents = registry
        .read_resource("docs://readme", &ana(&[]))
        .await
        .unwrap();
    assert_eq!(
        contents,
        [ResourceContents::text(
            "docs://readme",
            "text/plain",
            "text of docs://readme"
        )]
    );
    let record = only_record(&sink);
    assert_eq!(
        (
            record.tool.as_str(),
            record.kind,
            record.outcome,
            record.success
        ),
        (
            "docs://readme",
            Access::ReadResource,
            AuditOutcome::Executed,
            true
        )
    );
    assert_eq!(
        serde_json::to_value(&record).unwrap()["kind"],
        "read_resource"
    );
    // A template matches its URIs; the record names the URI read.
    let note = registry
        .read_resource("docs://notes/7", &ana(&[]))
        .await
        .unwrap();
    assert_eq!(note[0].uri(), "docs://notes/7");
    assert_eq!(only_record(&sink).tool, "docs://notes/7");
    assert_eq!(reads.count(), 2);
}

#[tokio::test]
async fn the_channel_and_the_scopes_refuse_before_anything_is_read() {
    let reads = Runs::default();
    let (mut registry, sink) = audited(ToolRegistry::builder());
    registry.register_resources(Docs(reads.clone())).unwrap();

    let anonymous = registry
        .read_resource("docs://readme", &anonymous_mcp())
        .await
        .unwrap_err();
    assert_eq!(anonymous.code(), &ErrorCode::Forbidden);
    assert_eq!(
        anonymous.message(),
        "channel 'mcp' requires an authenticated principal (require_auth) — none provided."
    );
    assert_eq!(only_record(&sink).outcome, AuditOutcome::Denied);

    let unscoped = registry
        .read_resource("docs://secret", &ana(&["docs:read"]))
        .await
        .unwrap_err();
    assert_eq!(
        unscoped.message(),
        "Missing required scope for resource 'docs://secret'. Need one of: docs:secret — context has: docs:read."
    );
    assert_eq!(unscoped.required_scopes(), ["docs:secret"]);
    let record = only_record(&sink);
    assert_eq!(
        (record.outcome, record.code),
        (AuditOutcome::Denied, Some(ErrorCode::Forbidden))
    );
    assert_eq!(reads.count(), 0, "nothing was read");

    registry
        .read_resource("docs://secret", &ana(&["docs:secret"]))
        .await
        .unwrap();
    assert_eq!(reads.count(), 1);
}

#[tokio::test]
async fn unknown_uris_missing_contents_and_failures_are_typed() {
    let reads = Runs::default();
    let (mut registry, sink) = audited(ToolRegistry::builder());
    registry.register_resources(Docs(reads.clone())).unwrap();
    let unknown = registry
        .read_resource("docs://nope", &ana(&[]))
        .await
        .unwrap_err();
    assert_eq!(
        (unknown.code(), unknown.message()),
        (&ErrorCode::NotFound, "Resource not found: docs://nope")
    );
    assert_eq!(only_record(&sink).outcome, AuditOutcome::NotFound);
    assert_eq!(reads.count(), 0);

    let gone = registry
        .read_resource("docs://notes/404", &ana(&[]))
        .await
        .unwrap_err();
    assert_eq!(gone.message(), "Resource not found: docs://notes/404");
    let failed = registry
        .read_resource("docs://notes/boom", &ana(&[]))
        .await
        .unwrap_err();
    assert_eq!(
        (failed.code(), failed.message()),
        (&ErrorCode::InternalError, "the disk is gone")
    );
    let records = sink.take();
    assert_eq!(
        records.iter().map(|r| r.outcome).collect::<Vec<_>>(),
        [AuditOutcome::NotFound, AuditOutcome::Failed]
    );
}

#[tokio::test]
async fn rules_match_resources_by_uri() {
    let reads = Runs::default();
    let rules = StaticRuleProvider::new(vec![StaticRule::new(
        "docs://notes/*",
        PolicyRule::deny().with_id(9),
    )]);
    let (mut registry, _sink) = audited(ToolRegistry::builder().rule_provider(Arc::new(rules)));
    registry.register_resources(Docs(reads.clone())).unwrap();
    let denied = registry
        .read_resource("docs://notes/1", &ana(&[]))
        .await
        .unwrap_err();
    assert_eq!(
        denied.message(),
        "Denied by policy rule #9 for resource 'docs://notes/{id}' on channel 'mcp' (principal: ana)."
    );
    registry
        .read_resource("docs://readme", &ana(&[]))
        .await
        .unwrap();
    assert_eq!(reads.count(), 1);
}

/// A call policy that judges tool calls only.
struct CallsOnly;

impl CallPolicy for CallsOnly {
    fn evaluate<'a>(&'a self, _input: PolicyInput<'a>) -> Deferred<'a, PolicyDecision> {
        Deferred::ready(PolicyDecision::Continue)
    }
    fn describe(&self, _tool: &ToolDefinition) -> String {
        "calls only".into()
    }
}

#[tokio::test]
async fn a_call_policy_that_does_not_judge_reads_denies_them() {
    let (mut registry, _sink) = audited(ToolRegistry::builder().call_policy(Arc::new(CallsOnly)));
    registry.register_resources(Docs(Runs::default())).unwrap();
    let denied = registry
        .read_resource("docs://readme", &ana(&[]))
        .await
        .unwrap_err();
    assert_eq!(
        denied.message(),
        "The call policy judges tool calls only; resource 'docs://readme' is denied (fail-closed)."
    );
}

#[tokio::test]
async fn reads_are_rate_limited_in_their_own_bucket() {
    let builder = ToolRegistry::builder()
        .rate_limiter(Arc::new(InMemoryRateLimiter::new()))
        .default_quota(Quota::per_minute(2));
    let (mut registry, sink) = audited(builder);
    registry.register_resources(Docs(Runs::default())).unwrap();
    let ctx = ana(&[]);
    registry.read_resource("docs://readme", &ctx).await.unwrap();
    registry.read_resource("docs://readme", &ctx).await.unwrap();
    let limited = registry
        .read_resource("docs://readme", &ctx)
        .await
        .unwrap_err();
    assert_eq!(limited.code(), &ErrorCode::RateLimited);
    assert_eq!(
        limited.message(),
        "Rate limit exceeded for 'mcp:ana:resource:docs://readme': max 2 tokens per 60s."
    );
    assert!(limited.retry_after_seconds().is_some_and(|s| s > 0));
    assert_eq!(
        sink.take().last().unwrap().outcome,
        AuditOutcome::RateLimited
    );
    // Another resource has its own budget.
    registry
        .read_resource("docs://notes/1", &ctx)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_read_over_the_result_cap_is_refused() {
    let (mut registry, sink) = audited(ToolRegistry::builder().max_result_bytes(8));
    registry.register_resources(Docs(Runs::default())).unwrap();
    let big = registry
        .read_resource("docs://readme", &ana(&[]))
        .await
        .unwrap_err();
    assert_eq!(big.code(), &ErrorCode::ResultTooLarge);
    assert_eq!(
        big.message(),
        "The resource 'docs://readme' is 21 bytes, over the 8-byte cap."
    );
    assert_eq!(only_record(&sink).outcome, AuditOutcome::Failed);
}

#[tokio::test]
async fn prompts_check_their_arguments_and_are_audited_redacted() {
    let (mut registry, sink) = audited(ToolRegistry::builder());
    registry.register_prompts(Greetings).unwrap();
    let missing = registry
        .get_prompt("greet", &args(&[]), &ana(&[]))
        .await
        .unwrap_err();
    assert_eq!(missing.code(), &ErrorCode::ValidationError);
    assert_eq!(
        missing.message(),
        "Missing required argument(s) for prompt 'greet': name"
    );
    assert_eq!(only_record(&sink).outcome, AuditOutcome::InvalidArguments);

    let given = args(&[("name", "Bo"), ("password", "hunter2")]);
    let reply = registry
        .get_prompt("greet", &given, &ana(&[]))
        .await
        .unwrap();
    assert_eq!(reply.messages, [PromptMessage::user("Say hello to Bo")]);
    let record = only_record(&sink);
    assert_eq!(
        (record.kind, record.tool.as_str()),
        (Access::GetPrompt, "greet")
    );
    assert_eq!(
        record.args,
        json!({"name": "Bo", "password": "***REDACTED***"})
    );

    let unknown = registry
        .get_prompt("nope", &args(&[]), &ana(&[]))
        .await
        .unwrap_err();
    assert_eq!(
        (unknown.code(), unknown.message()),
        (&ErrorCode::NotFound, "Prompt not found: nope")
    );
}

#[tokio::test]
async fn completion_is_capped_and_gated() {
    let (mut registry, sink) = audited(ToolRegistry::builder());
    registry.register_resources(Docs(Runs::default())).unwrap();
    let reference = CompletionRef::ResourceTemplate("docs://notes/{id}");
    let done = registry
        .complete(reference, "id", "n", &ana(&[]))
        .await
        .unwrap();
    assert_eq!(
        (done.values.len(), done.total, done.has_more),
        (100, 150, true)
    );
    assert_eq!(done.values[0], "n0");
    let anonymous = registry
        .complete(reference, "id", "n", &anonymous_mcp())
        .await
        .unwrap_err();
    assert_eq!(anonymous.code(), &ErrorCode::Forbidden);
    let unknown = registry
        .complete(CompletionRef::Prompt("nope"), "x", "", &ana(&[]))
        .await
        .unwrap_err();
    assert_eq!(unknown.message(), "Prompt not found: nope");
    assert!(sink.take().is_empty(), "completions are not audited");
}

#[test]
fn a_uri_or_prompt_offered_twice_is_refused() {
    let mut registry = ToolRegistry::new();
    registry.register_resources(Docs(Runs::default())).unwrap();
    let again = registry
        .register_resources(Docs(Runs::default()))
        .unwrap_err();
    assert_eq!(again.to_string(), "already registered: docs://readme");
    assert_eq!(registry.catalog_snapshot().resources().count(), 2);
    registry.register_prompts(Greetings).unwrap();
    assert!(registry.register_prompts(Greetings).is_err());
    assert_eq!(registry.catalog_snapshot().prompts().count(), 1);
}

/// After its record, a read or prompt that ran is announced (`resource.read`,
/// `resource.failed`, `prompt.got`); one the gates refused is not, as a refused call is not.
#[tokio::test]
async fn reads_and_prompts_that_ran_are_announced_after_their_record() {
    use milpa::events::Dispatcher;
    use parking_lot::Mutex;

    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let dispatcher = Arc::new(Dispatcher::new());
    let log = seen.clone();
    dispatcher.subscribe("*.*", 0, move |event: &milpa::Event<'_>| {
        if let milpa::Event::Accessed(accessed) = event {
            let failure = accessed.failure.map(|(code, _)| format!(" {code:?}"));
            log.lock().push(format!(
                "{} {}{}",
                event.name(),
                accessed.name,
                failure.unwrap_or_default()
            ));
        }
    });
    let (mut registry, _sink) = audited(ToolRegistry::builder().dispatcher(dispatcher));
    registry.register_resources(Docs(Runs::default())).unwrap();
    registry.register_prompts(Greetings).unwrap();
    let ana = ana(&[]);
    assert!(registry.read_resource("docs://readme", &ana).await.is_ok());
    assert!(
        registry
            .read_resource("docs://notes/boom", &ana)
            .await
            .is_err()
    );
    assert!(registry.read_resource("docs://secret", &ana).await.is_err());
    assert!(registry.read_resource("docs://nope", &ana).await.is_err());
    let greeted = registry
        .get_prompt("greet", &args(&[("name", "Bo")]), &ana)
        .await;
    assert!(greeted.is_ok());
    assert_eq!(
        *seen.lock(),
        [
            "resource.read docs://readme",
            "resource.failed docs://notes/boom InternalError",
            "prompt.got greet",
        ]
    );
}
