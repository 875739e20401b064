//! The `403 insufficient_scope` answer of an OAuth resource server: a request whose tool
//! call the `authorize` stage denied for a missing scope (the call ran through the pipeline
//! and was audited as denied) is answered `403` with `error="insufficient_scope"` and the
//! scopes the stage reported, the response body unchanged. For a call answered on its own
//! SSE stream, the status waits for the stream's first event that carries something (the
//! denial itself, or the call's first message, or the keep-alive after 15 s; priming events
//! are read past), so a denied call is seen before the headers go out. A 2026-07-28 request
//! whose `Mcp-Method` is not `tools/call` is not held.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{Method, Response, StatusCode, header};
use axum::middleware::Next;
use http_body_util::BodyExt;

use crate::auth::challenge;
use crate::auth::oauth::OAuthResource;
use crate::auth::scope_denial::ScopeDenial;
use crate::session::Caller;

/// Runs the request for `caller` with a slot for a scope denial, and answers `403
/// insufficient_scope` when its tool call was denied for a missing scope.
pub(super) async fn answer(
    oauth: &OAuthResource,
    mut caller: Caller,
    mut request: Request,
    next: Next,
) -> Response<Body> {
    let denial = ScopeDenial::default();
    caller.scope_denial = Some(denial.clone());
    // Only a tool call can be denied for a scope: a 2026-07-28 request names its method in
    // `Mcp-Method`, so other long-lived streams (`subscriptions/listen`) are not held.
    let streamed_post = request.method() == Method::POST
        && request
            .headers()
            .get(METHOD_HEADER)
            .is_none_or(|method| method.as_bytes() == b"tools/call");
    request.extensions_mut().insert(caller);
    let response = next.run(request).await;
    let response = if streamed_post && is_event_stream(&response) {
        first_event_sent(response).await
    } else {
        response
    };
    match denial.needed() {
        Some(needed) => insufficient_scope(response, oauth.metadata_url(), needed),
        None => response,
    }
}

fn is_event_stream(response: &Response<Body>) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// The header naming a 2026-07-28 request's method.
const METHOD_HEADER: &str = "mcp-method";

/// How many priming events (an event id without data, for resumption) are read past
/// while waiting for the call's first real event.
const MAX_PRIMING_EVENTS: usize = 4;

/// Waits for the stream's first event that carries something (a message, or the
/// keep-alive comment), past any priming events, and hands back the same response with
/// what was read first. A client that goes away meanwhile drops this future, and with it
/// the stream (which cancels the call).
async fn first_event_sent(response: Response<Body>) -> Response<Body> {
    let (parts, mut body) = response.into_parts();
    let mut read = Vec::new();
    while read.len() <= MAX_PRIMING_EVENTS {
        let Some(Ok(frame)) = body.frame().await else {
            break;
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let priming = is_priming(&data);
        read.push(Ok::<_, axum::Error>(data));
        if !priming {
            break;
        }
    }
    let rest = body.into_data_stream();
    let stream = futures_util::stream::StreamExt::chain(futures_util::stream::iter(read), rest);
    Response::from_parts(parts, Body::from_stream(stream))
}

/// Whether an SSE chunk only primes the stream: fields such as `id:` and `retry:`, and no
/// data or comment.
fn is_priming(chunk: &[u8]) -> bool {
    let text = String::from_utf8_lossy(chunk);
    let mut fields = text.lines().filter(|line| !line.is_empty()).peekable();
    fields.peek().is_some()
        && fields.all(|line| match line.split_once(':') {
            Some(("data", value)) => value.trim().is_empty(),
            Some(("", _)) => false,
            // Another field, or a bare field name (an empty value).
            Some(_) | None => true,
        })
}

/// The same response as `403` with the `insufficient_scope` challenge.
fn insufficient_scope(
    mut response: Response<Body>,
    metadata_url: &str,
    needed: &[String],
) -> Response<Body> {
    *response.status_mut() = StatusCode::FORBIDDEN;
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        challenge::insufficient_scope(metadata_url, needed),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::is_priming;

    #[test]
    fn priming_events_carry_no_data_and_no_comment() {
        assert!(is_priming(b"id: 0\ndata:\n\n"));
        assert!(is_priming(b"id: abc\nretry: 1000\ndata: \n\n"));
        assert!(is_priming(b"id: 2\ndata\n\n"));
        assert!(!is_priming(b"data: {\"jsonrpc\":\"2.0\"}\n\n"));
        assert!(!is_priming(b"id: 1\ndata: {}\n\n"));
        assert!(!is_priming(b":\n\n"));
        assert!(!is_priming(b""));
    }
}
