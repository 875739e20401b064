//! The accept loop: every accepted socket gets `TCP_NODELAY`, at most `max_connections`
//! are open at once (the next one waits in the listen backlog until one closes), and each
//! is served as HTTP/1.1 with a header read timeout (which also ends idle keep-alive
//! connections). Each connection's requests carry its [`ConnectionMark`], so anonymous
//! callers hold no more than their share of the slots (see [`super::connection_share`]).
//!
//! `TCP_NODELAY` matters because an SSE answer goes out in two writes (the headers, then
//! the event): with Nagle's algorithm on, the second write waits for the client's delayed
//! ACK, about 40 ms on Linux, for every `tools/call`.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tower::ServiceExt;

use super::connection_share::{ConnectionMark, ConnectionShare};

/// How connections are accepted and read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnectionLimits {
    /// Connections open at once.
    pub max_connections: usize,
    /// Slots anonymous callers may never hold (`None`: a quarter of `max_connections`).
    pub reserved_for_authenticated: Option<usize>,
    /// How long a client may take to send a request's headers (also how long an idle
    /// keep-alive connection stays open).
    pub header_read_timeout: Duration,
}

impl ConnectionLimits {
    /// How many connections anonymous callers may hold: all but the reserved ones (at
    /// least one).
    pub(crate) fn max_anonymous(&self) -> usize {
        let max = self.max_connections.max(1);
        let reserved = self.reserved_for_authenticated.unwrap_or(max / 4);
        max.saturating_sub(reserved).max(1)
    }
}

/// Accepts one connection, configured as the server serves it.
pub(crate) async fn accept(listener: &TcpListener) -> io::Result<(TcpStream, SocketAddr)> {
    let (stream, peer) = listener.accept().await?;
    stream.set_nodelay(true)?;
    Ok((stream, peer))
}

/// Serves `app` on `listener` until `shutdown` completes; then stops accepting, runs
/// `on_shutdown` (which ends long-lived streams) and waits for open connections to finish.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
    on_shutdown: impl FnOnce(),
) -> io::Result<()> {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let share = ConnectionShare::new(limits.max_anonymous());
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = accept(&listener) => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Per-connection failures (reset before accept, out of descriptors):
                    // keep serving, after a pause when the process is out of resources.
                    tracing::debug!(target: "milpa_mcp", %error, "accept failed");
                    if !is_connection_error(&error) {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let app = app.clone();
        let mark = ConnectionMark::new(share.clone());
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            request.extensions_mut().insert(mark.clone());
            let app = app.clone();
            async move {
                let response = app.oneshot(request.map(axum::body::Body::new)).await;
                Ok::<_, Infallible>(response.unwrap_or_else(|never| match never {}))
            }
        });
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(target: "milpa_mcp", %error, "connection ended with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    on_shutdown();
    graceful.shutdown().await;
    Ok(())
}

fn is_connection_error(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quarter_of_the_slots_is_kept_for_authenticated_callers_by_default() {
        let limits = |max, reserved| ConnectionLimits {
            max_connections: max,
            reserved_for_authenticated: reserved,
            header_read_timeout: Duration::from_secs(1),
        };
        assert_eq!(limits(1024, None).max_anonymous(), 768);
        assert_eq!(limits(1024, Some(24)).max_anonymous(), 1000);
        assert_eq!(limits(1, None).max_anonymous(), 1);
        assert_eq!(limits(4, Some(10)).max_anonymous(), 1);
    }

    /// The socket the server serves has Nagle's algorithm off (see the module docs).
    #[tokio::test]
    async fn accepted_sockets_have_nodelay() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = TcpStream::connect(addr).await.unwrap();
        let (served, peer) = accept(&listener).await.unwrap();
        assert_eq!(peer, client.local_addr().unwrap());
        assert!(served.nodelay().unwrap());
    }
}
