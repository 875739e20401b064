//! OpenTelemetry export: when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set, every call's `execute_tool` span goes to
//! that collector over OTLP/HTTP with protobuf bodies. Unset, nothing is installed and the
//! spans are never even created.
//!
//! The standard variables apply: `OTEL_SERVICE_NAME` (default `milpa`),
//! `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_EXPORTER_OTLP_TIMEOUT`,
//! `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG`, `OTEL_BSP_*`, `OTEL_SDK_DISABLED`.
//! Only `http/protobuf` over plain `http://` is built in (no gRPC, no TLS): a collector on
//! the same host or network forwards further.

use std::time::Duration;

use async_trait::async_trait;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::hyper::HyperClient;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tokio::runtime::Handle;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::registry::LookupSpan;

use crate::CliError;

/// The service name when neither `OTEL_SERVICE_NAME` nor `OTEL_RESOURCE_ATTRIBUTES` names one.
const DEFAULT_SERVICE_NAME: &str = "milpa";

/// How long one export request may take when `OTEL_EXPORTER_OTLP_TIMEOUT` does not say
/// (the specification's default).
const DEFAULT_EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the spans go: the tracer provider, kept to flush it when the command ends.
pub(crate) struct Telemetry {
    provider: SdkTracerProvider,
}

impl Telemetry {
    /// The exporter the environment asks for, or `None` when it asks for none.
    /// `runtime` drives the exporter's HTTP requests.
    pub(crate) fn from_env(
        var: &dyn Fn(&str) -> Option<String>,
        runtime: Handle,
    ) -> Result<Option<Telemetry>, CliError> {
        let endpoint = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .or_else(|| var("OTEL_EXPORTER_OTLP_ENDPOINT"))
            .filter(|endpoint| !endpoint.is_empty());
        let disabled = var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let Some(endpoint) = endpoint.filter(|_| !disabled) else {
            return Ok(None);
        };
        if !endpoint.starts_with("http://") {
            return Err(CliError::usage(format!(
                "OTLP endpoint {endpoint}: milpa exports over plain http:// only; \
                 send to a collector that forwards over TLS"
            )));
        }
        if let Some(protocol) = var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL"))
            .filter(|p| p != "http/protobuf")
        {
            return Err(CliError::usage(format!(
                "OTLP protocol {protocol}: milpa exports http/protobuf only"
            )));
        }
        let timeout = var("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")
            .or_else(|| var("OTEL_EXPORTER_OTLP_TIMEOUT"))
            .and_then(|ms| ms.parse().ok())
            .map_or(DEFAULT_EXPORT_TIMEOUT, Duration::from_millis);
        let client = RuntimeHttpClient {
            client: HyperClient::with_default_connector(timeout, None),
            runtime,
        };
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_http_client(client)
            .build()
            .map_err(|e| CliError::usage(format!("OTLP exporter: {e}")))?;
        let provider = SdkTracerProvider::builder()
            .with_resource(resource())
            .with_batch_exporter(exporter)
            .build();
        Ok(Some(Telemetry { provider }))
    }

    /// The subscriber layer that turns milpa's spans (only spans: audit records stay
    /// logs) into OpenTelemetry spans.
    pub(crate) fn layer<S>(&self) -> impl Layer<S> + use<S>
    where
        S: tracing::Subscriber + for<'span> LookupSpan<'span>,
    {
        tracing_opentelemetry::layer()
            .with_tracer(self.provider.tracer("milpa"))
            // The semantic-convention attributes only: no source locations, thread names
            // or busy/idle timings on every span.
            .with_location(false)
            .with_threads(false)
            .with_tracked_inactivity(false)
            .with_filter(filter_fn(|meta| {
                meta.is_span() && meta.target().starts_with("milpa")
            }))
    }

    /// Exports what is still buffered and stops the exporter. Run before `runtime` stops:
    /// the export requests run on it.
    pub(crate) fn shutdown(self, runtime: &tokio::runtime::Runtime) {
        let provider = self.provider;
        // The flush waits on the exporter's thread, which waits on requests spawned onto the
        // runtime: blocking in `block_on` keeps even a current-thread runtime turning.
        let flushed = runtime.block_on(runtime.spawn_blocking(move || provider.shutdown()));
        if let Ok(Err(error)) = flushed {
            eprintln!("milpa: OpenTelemetry: {error}");
        }
    }
}

/// The resource the environment describes, named `milpa` unless it names itself.
fn resource() -> Resource {
    let resource = Resource::builder().build();
    let named = resource
        .get(&opentelemetry::Key::from_static_str("service.name"))
        .is_some_and(|name| !name.as_str().starts_with("unknown_service"));
    if named {
        resource
    } else {
        Resource::builder()
            .with_service_name(DEFAULT_SERVICE_NAME)
            .build()
    }
}

/// The exporter's HTTP client: hyper, on the command's tokio runtime. The SDK's batch
/// processor exports from a thread of its own, outside any runtime, where hyper cannot run;
/// so each request is spawned onto the runtime and awaited from that thread.
#[derive(Debug)]
struct RuntimeHttpClient {
    client: HyperClient,
    runtime: Handle,
}

#[async_trait]
impl HttpClient for RuntimeHttpClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        self.runtime
            .spawn(async move { client.send_bytes(request).await })
            .await?
    }
}
