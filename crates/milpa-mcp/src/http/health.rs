//! `/healthz` and `/readyz`, for whoever runs the server: a process supervisor, a load
//! balancer, an orchestrator's probes.
//!
//! - `/healthz` says the process answers HTTP: `200 {"status": "alive"}`, nothing checked.
//! - `/readyz` asks the server's [`Readiness`] (the store answers, each upstream is up…):
//!   `200 {"status": "ready", "checks": […]}` when every check passes, else `503` with
//!   `"status": "not_ready"` and each failing check's reason. Without a `Readiness`, ready
//!   means alive.
//!
//! Both sit behind the `Host`/`Origin` check like every route (a page in a browser cannot
//! probe the server through DNS rebinding), and need no token: they say nothing of tools,
//! callers or data, only whether to send traffic here.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tower::ServiceBuilder;
use tower_http::validate_request::ValidateRequestHeaderLayer;

use crate::listener::HostOriginCheck;

/// Where the probes are served.
pub(crate) const HEALTH_PATH: &str = "/healthz";
/// See [`HEALTH_PATH`].
pub(crate) const READY_PATH: &str = "/readyz";

/// One thing readiness depends on, and how it stands now.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReadinessCheck {
    /// What was checked, e.g. `store` or `upstream:files`.
    pub name: String,
    /// Whether it is ready.
    pub ready: bool,
    /// Why not (or what it is, when ready), for the operator.
    pub detail: String,
}

impl ReadinessCheck {
    /// `name` is ready; `detail` says what it is.
    pub fn ready(name: impl Into<String>, detail: impl Into<String>) -> ReadinessCheck {
        ReadinessCheck {
            name: name.into(),
            ready: true,
            detail: detail.into(),
        }
    }

    /// `name` is not ready, because of `reason`.
    pub fn not_ready(name: impl Into<String>, reason: impl Into<String>) -> ReadinessCheck {
        ReadinessCheck {
            name: name.into(),
            ready: false,
            detail: reason.into(),
        }
    }
}

/// What `/readyz` asks: every check the server's readiness depends on. Keep each check
/// short (a probe has a timeout of its own, often one second).
///
/// ```
/// use milpa_mcp::{Readiness, ReadinessCheck};
///
/// struct Always;
/// impl Readiness for Always {
///     fn checks(&self) -> std::pin::Pin<Box<dyn Future<Output = Vec<ReadinessCheck>> + Send + '_>> {
///         Box::pin(async { vec![ReadinessCheck::ready("store", "memory")] })
///     }
/// }
/// ```
pub trait Readiness: Send + Sync + 'static {
    /// How each dependency stands now.
    fn checks(&self) -> Pin<Box<dyn Future<Output = Vec<ReadinessCheck>> + Send + '_>>;
}

/// The probes' router, behind the `Host`/`Origin` check.
pub(crate) fn router(readiness: Option<Arc<dyn Readiness>>, hosts: HostOriginCheck) -> Router {
    Router::new()
        .route(HEALTH_PATH, axum::routing::get(alive))
        .route(READY_PATH, axum::routing::get(ready))
        .with_state(readiness)
        .layer(ServiceBuilder::new().layer(ValidateRequestHeaderLayer::custom(hosts)))
}

async fn alive() -> Response {
    (StatusCode::OK, axum::Json(json!({"status": "alive"}))).into_response()
}

async fn ready(State(readiness): State<Option<Arc<dyn Readiness>>>) -> Response {
    let checks = match &readiness {
        Some(readiness) => readiness.checks().await,
        None => Vec::new(),
    };
    let all_ready = checks.iter().all(|check| check.ready);
    let body = json!({
        "status": if all_ready { "ready" } else { "not_ready" },
        "checks": checks
            .iter()
            .map(|c| json!({"name": c.name, "ready": c.ready, "detail": c.detail}))
            .collect::<Vec<_>>(),
    });
    let status = if all_ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let mut response = (status, axum::Json(body)).into_response();
    // A probe's answer is about this moment only.
    response.headers_mut().insert(
        axum::http::header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("no-store"),
    );
    response
}
