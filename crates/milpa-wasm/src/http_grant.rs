//! Outgoing `wasi:http` limited to the sandbox's `allow_hosts`.
//!
//! The check runs on the request as the host will send it (its URI's host and port, after
//! the guest's scheme and authority were put together), so a guest cannot reach another
//! host by playing with headers: the `Host` header is set from the authority.

use std::sync::Arc;

use wasmtime_wasi_http::{RequestOptions, WasiBody, WasiHttpHooks};

use crate::sandbox::Sandbox;

/// The future a hook hands back for a request (wasmtime-wasi-http's shape).
type SendFuture = Box<
    dyn Future<
            Output = wasmtime_wasi_http::Result<(
                http::Response<WasiBody>,
                Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
            )>,
        > + Send,
>;

/// The hooks of one call: sends a request only when its host is granted.
pub(crate) struct HostGrant {
    sandbox: Arc<Sandbox>,
}

impl HostGrant {
    pub(crate) fn new(sandbox: Arc<Sandbox>) -> HostGrant {
        HostGrant { sandbox }
    }
}

impl WasiHttpHooks for HostGrant {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        fut: Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
    ) -> SendFuture {
        let uri = request.uri();
        let host = uri.host().unwrap_or_default();
        let port = uri.port_u16().or_else(|| match uri.scheme_str() {
            Some("http") => Some(80),
            Some("https") => Some(443),
            _ => None,
        });
        if !self.sandbox.allows_host(host, port) {
            tracing::info!(target: "milpa::wasm", host, ?port, "outgoing HTTP refused: host not in allow_hosts");
            return Box::new(async { Err(wasmtime_wasi_http::Error::HttpRequestDenied) });
        }
        _ = fut;
        Box::new(async move {
            use http_body_util::BodyExt;
            let (response, io) = wasmtime_wasi_http::default_send_request(request, options).await?;
            Ok((
                response.map(BodyExt::boxed_unsync),
                Box::new(io) as Box<dyn Future<Output = _> + Send>,
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, Empty};

    fn request(uri: &str) -> http::Request<WasiBody> {
        let body = Empty::<bytes::Bytes>::new()
            .map_err(|never| match never {})
            .boxed_unsync();
        http::Request::get(uri).body(body).unwrap()
    }

    async fn refused(hooks: &mut HostGrant, uri: &str) -> bool {
        let sent = hooks.send_request(request(uri), None, Box::new(async { Ok(()) }));
        matches!(
            Box::into_pin(sent).await,
            Err(wasmtime_wasi_http::Error::HttpRequestDenied)
        )
    }

    #[tokio::test]
    async fn hosts_not_granted_are_refused_without_a_connection() {
        let sandbox = Sandbox::new().allow_host("api.example.com:443");
        let mut hooks = HostGrant::new(Arc::new(sandbox));
        assert!(refused(&mut hooks, "https://other.example.com/").await);
        // The scheme's default port is the port checked.
        assert!(refused(&mut hooks, "http://api.example.com/").await);
        assert!(refused(&mut hooks, "https://api.example.com:8443/").await);
        assert!(refused(&mut hooks, "https://api.example.com.evil.test/").await);
    }
}
