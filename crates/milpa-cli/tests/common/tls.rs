//! A TLS server on a free loopback port, for the tests that need `https://` (a JWKS, an
//! upstream): a self-signed certificate for `127.0.0.1` made per server, connections
//! handled on a thread of its own.

#![allow(dead_code)]

use std::future::Future;
use std::sync::Arc;

use tokio::net::TcpStream;
use tokio_rustls::rustls;
use tokio_rustls::server::TlsStream;

/// Starts the server; each accepted connection, once its handshake is done, goes to
/// `handle`. Returns the port and the certificate (PEM): the only root a client needs to
/// trust it.
pub fn serve<F, Fut>(handle: F) -> (u16, String)
where
    F: Fn(TlsStream<TcpStream>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    let pem = cert.cert.pem();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.signing_key.serialize_der().into());
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![cert.cert.der().clone()], key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let handle = Arc::new(handle);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            while let Ok((socket, _)) = listener.accept().await {
                let (acceptor, handle) = (acceptor.clone(), Arc::clone(&handle));
                tokio::spawn(async move {
                    if let Ok(tls) = acceptor.accept(socket).await {
                        handle(tls).await;
                    }
                });
            }
        });
    });
    (port, pem)
}
