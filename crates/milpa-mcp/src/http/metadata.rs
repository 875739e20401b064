//! RFC 9728 protected-resource metadata, served when OAuth is on: at
//! `/.well-known/oauth-protected-resource` and at the path-suffixed forms (the endpoint's
//! path, and the resource's own path when a proxy maps it elsewhere), behind the same
//! `Host`/`Origin` checks as the endpoint, without a token (a client reads it to learn how
//! to get one).

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::IntoResponse;
use milpa::ToolRegistry;
use tower_http::validate_request::ValidateRequestHeaderLayer;

use crate::auth::oauth::{METADATA_PATH, OAuthResource};
use crate::listener::HostOriginCheck;
use crate::listener::json_body;

/// Every scope a tool asks for, sorted, without duplicates (`scopes_supported`).
pub(super) fn tool_scopes(registry: &ToolRegistry) -> Vec<String> {
    let mut scopes: Vec<String> = registry
        .definitions()
        .flat_map(|tool| tool.scopes().to_vec())
        .collect();
    scopes.sort();
    scopes.dedup();
    scopes
}

/// The metadata routes.
pub(super) fn router(
    oauth: Arc<OAuthResource>,
    scopes: &[String],
    endpoint_path: &str,
    hosts: HostOriginCheck,
) -> Router {
    let document: Arc<str> = oauth.metadata(scopes).to_string().into();
    let serve = axum::routing::get(move || {
        let document = document.clone();
        async move {
            let mut response = json_body(StatusCode::OK, document.to_string());
            response.headers_mut().insert(
                header::CACHE_CONTROL,
                HeaderValue::from_static("max-age=3600"),
            );
            response
        }
    })
    .fallback(|| async {
        (
            StatusCode::METHOD_NOT_ALLOWED,
            [(header::ALLOW, HeaderValue::from_static("GET, HEAD"))],
        )
            .into_response()
    });
    let mut paths = vec![METADATA_PATH.to_owned()];
    for suffix in [endpoint_path.trim_end_matches('/'), oauth.resource_path()] {
        let path = format!("{METADATA_PATH}{suffix}");
        if !suffix.is_empty() && !paths.contains(&path) {
            paths.push(path);
        }
    }
    let mut router = Router::new();
    for path in paths {
        router = router.route(&path, serve.clone());
    }
    router.layer(ValidateRequestHeaderLayer::custom(hosts))
}
