//! A resource read and a prompt through their whole gate, in process, against a
//! `tools/call` of `echo` on the same registry: a read should cost no more than a call.
//!
//! As in `pipeline`, each future is pinned and polled once (everything here completes
//! without yielding), and audit is on (the default tracing sink, no subscriber).

// criterion's macros generate functions without doc comments.
#![allow(missing_docs)]

use std::collections::BTreeMap;
use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use milpa::catalog::{
    CatalogError, Prompt, PromptArgument, PromptMessage, PromptProvider, PromptReply, Resource,
    ResourceContents, ResourceProvider,
};
use milpa::{Deferred, ToolContext, ToolDefinition, ToolRegistry};
use serde_json::json;

struct Static;

impl ResourceProvider for Static {
    fn resources(&self) -> Vec<Resource> {
        vec![Resource::new("test://static-text", "static-text").with_mime_type("text/plain")]
    }
    fn read<'a>(
        &'a self,
        uri: &'a str,
        _: &'a ToolContext,
    ) -> Deferred<'a, Result<Vec<ResourceContents>, CatalogError>> {
        Deferred::ready(Ok(vec![ResourceContents::text(
            uri,
            "text/plain",
            "This is the content of the static text resource.",
        )]))
    }
}

struct Greeting;

impl PromptProvider for Greeting {
    fn prompts(&self) -> Vec<Prompt> {
        vec![Prompt::new("greet", "Greets").with_argument(PromptArgument::required("name"))]
    }
    fn get<'a>(
        &'a self,
        _: &'a str,
        arguments: &'a BTreeMap<String, String>,
        _: &'a ToolContext,
    ) -> Deferred<'a, Result<PromptReply, CatalogError>> {
        Deferred::ready(Ok(PromptReply::new(vec![PromptMessage::user(format!(
            "Hello {}",
            arguments["name"]
        ))])))
    }
}

fn poll_once<T>(future: impl Future<Output = T>) -> T {
    let future = pin!(future);
    match future.poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(value) => value,
        Poll::Pending => panic!("completes without yielding"),
    }
}

fn catalog(c: &mut Criterion) {
    let mut registry = ToolRegistry::new();
    registry
        .register(
            ToolDefinition::builder("echo")
                .input_schema(json!({"type": "object", "properties": {"text": {"type": "string"}}}))
                .sync(|args, _| args["text"].clone()),
        )
        .unwrap();
    registry.register_resources(Static).unwrap();
    registry.register_prompts(Greeting).unwrap();
    let ctx = ToolContext::mcp("req-1", Some("agent".into()), Vec::<String>::new());

    c.bench_function("echo_call_mcp", |b| {
        b.iter_batched(
            || json!({"text": "This is the content of the static text resource."}),
            |args| black_box(poll_once(registry.call("echo", args, &ctx))),
            BatchSize::SmallInput,
        )
    });
    c.bench_function("read_static_mcp", |b| {
        b.iter(|| {
            black_box(poll_once(
                registry.read_resource("test://static-text", &ctx),
            ))
        })
    });
    let arguments = BTreeMap::from([("name".to_owned(), "Bo".to_owned())]);
    c.bench_function("get_prompt_mcp", |b| {
        b.iter(|| black_box(poll_once(registry.get_prompt("greet", &arguments, &ctx))))
    });
}

criterion_group!(benches, catalog);
criterion_main!(benches);
