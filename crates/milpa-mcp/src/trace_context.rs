//! The W3C trace context a `tools/call` carries in its `_meta` (`traceparent`, `tracestate`,
//! as the MCP semantic conventions place them): the parent of the call's `execute_tool` span.
//!
//! The core creates that span as a plain `tracing` span; `tracing-opentelemetry` gives a
//! span without a parent span the OpenTelemetry context current when it is created. So the
//! call runs with the caller's context attached (on every poll), and its span joins the
//! caller's trace. Without a valid `traceparent` nothing is attached: the span starts a new
//! trace. Built without the `otel` feature, the context is read and ignored.

use std::future::Future;

use serde_json::Value;

/// `_meta.traceparent` and `_meta.tracestate` of one request, as sent.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct TraceParent {
    traceparent: Option<String>,
    tracestate: Option<String>,
}

impl TraceParent {
    /// The trace context in a request's `_meta` (string values only; anything else is
    /// ignored, as a malformed `traceparent` is).
    pub fn from_meta(meta: Option<&Value>) -> TraceParent {
        let text = |key: &str| {
            meta.and_then(|meta| meta.get(key))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        TraceParent {
            traceparent: text("traceparent"),
            tracestate: text("tracestate"),
        }
    }

    /// Runs `work` inside the caller's trace context, when the request sent a valid one.
    pub async fn run<F: Future>(self, work: F) -> F::Output {
        #[cfg(feature = "otel")]
        if let Some(parent) = self.context() {
            use opentelemetry::context::FutureExt as _;
            return work.with_context(parent).await;
        }
        work.await
    }

    /// The remote parent, or `None` when there is no valid `traceparent`.
    #[cfg(feature = "otel")]
    fn context(&self) -> Option<opentelemetry::Context> {
        use opentelemetry::propagation::TextMapPropagator as _;
        use opentelemetry::trace::TraceContextExt as _;
        self.traceparent.as_ref()?;
        let parent = opentelemetry_sdk::propagation::TraceContextPropagator::new()
            .extract_with_context(&opentelemetry::Context::new(), self);
        parent.has_active_span().then_some(parent)
    }
}

#[cfg(feature = "otel")]
impl opentelemetry::propagation::Extractor for TraceParent {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            "traceparent" => self.traceparent.as_deref(),
            "tracestate" => self.tracestate.as_deref(),
            _ => None,
        }
    }

    fn keys(&self) -> Vec<&str> {
        ["traceparent", "tracestate"]
            .into_iter()
            .filter(|key| self.get(key).is_some())
            .collect()
    }
}

#[cfg(all(test, feature = "otel"))]
mod tests {
    use opentelemetry::trace::TraceContextExt as _;
    use serde_json::json;

    use super::*;

    #[test]
    fn a_valid_traceparent_is_the_remote_parent_with_its_state() {
        let meta = json!({
            "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "tracestate": "vendor=value",
        });
        let parent = TraceParent::from_meta(Some(&meta)).context().unwrap();
        let span = parent.span();
        let context = span.span_context();
        assert!(context.is_remote());
        assert_eq!(
            context.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(context.span_id().to_string(), "00f067aa0ba902b7");
        assert!(context.is_sampled());
        assert_eq!(context.trace_state().get("vendor"), Some("value"));
    }

    #[test]
    fn a_missing_or_malformed_traceparent_gives_no_parent() {
        for meta in [
            json!({}),
            json!({"traceparent": 7}),
            json!({"traceparent": "00-zz-00f067aa0ba902b7-01"}),
            json!({"traceparent": "00-00000000000000000000000000000000-00f067aa0ba902b7-01"}),
            json!({"tracestate": "vendor=value"}),
        ] {
            assert!(
                TraceParent::from_meta(Some(&meta)).context().is_none(),
                "{meta}"
            );
        }
        assert!(TraceParent::from_meta(None).context().is_none());
    }
}
