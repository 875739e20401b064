//! What every HTTP listener of this crate shares, whatever it serves: the MCP endpoint
//! ([`crate::http`]) and the approvals page (`crate::approvals`) mounted beside it.
//!
//! These pieces sit below both and import neither, so the endpoint can mount the page's
//! router without the page reaching back into the endpoint:
//!
//! - [`HostOriginCheck`]: the `Host`/`Origin` check (DNS-rebinding defence) that runs first
//!   on every request;
//! - [`throttle::FailureThrottle`]: a per-address budget of failed credentials (bearer
//!   tokens, sign-ins);
//! - [`expiring_table::ExpiringTable`]: entries that expire when idle or old (HTTP sessions,
//!   page logins, passkey ceremonies);
//! - [`json_body`]: a JSON response, the shape of every refusal.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

pub(crate) mod expiring_table;
mod host_origin;
pub(crate) mod throttle;

pub(crate) use host_origin::HostOriginCheck;

/// A JSON response with `status`.
pub(crate) fn json_body(status: StatusCode, body: String) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}
