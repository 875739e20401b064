//! A real `redis-server` per test: started on a free loopback port with no persistence,
//! killed when dropped. A missing `redis-server` fails the test with a clear message (it
//! is never skipped): `.ci/run` installs it, or set `MILPA_REDIS_SERVER` to its path.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use milpa_redis::{RedisOptions, RedisStore};

/// A running `redis-server`.
pub struct RedisServer {
    port: u16,
    child: Option<Child>,
}

fn program() -> String {
    std::env::var("MILPA_REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_owned())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind a loopback port")
        .local_addr()
        .expect("local address")
        .port()
}

impl RedisServer {
    /// Starts a server on a free port.
    pub fn start() -> RedisServer {
        // The port may be taken between asking for it and redis binding it; try a few.
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port();
            match RedisServer::spawn(port) {
                Ok(server) => return server,
                Err(error) => last = error,
            }
        }
        panic!("could not start redis-server: {last}");
    }

    fn spawn(port: u16) -> Result<RedisServer, String> {
        let child = Command::new(program())
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| {
                panic!(
                    "these tests need a real redis-server and `{}` could not be started ({error}); \
                     install it (apt-get install redis-server, as .ci/run does) or set \
                     MILPA_REDIS_SERVER to its path",
                    program()
                )
            });
        let mut server = RedisServer {
            port,
            child: Some(child),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(child) = server.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                server.child = None;
                return Err(format!("redis-server on port {port} exited with {status}"));
            }
            if ping(port) {
                return Ok(server);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(format!(
            "redis-server on port {port} did not answer PING within 10 s"
        ))
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills it (SIGKILL, no goodbye to clients) and waits until it is gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Freezes it (SIGSTOP): the socket stays open, replies stop coming, like a stalled host.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Thaws it (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let child = self.child.as_ref().expect("a running redis-server");
        let status = Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {signal} failed");
    }

    /// Starts a fresh server (empty, no scripts loaded) on the same port.
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match RedisServer::spawn(self.port) {
                Ok(mut fresh) => {
                    self.child = fresh.child.take();
                    return;
                }
                // The old socket may linger for a moment.
                Err(error) if Instant::now() > deadline => {
                    panic!(
                        "could not restart redis-server on port {}: {error}",
                        self.port
                    )
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    /// Runs one command over a plain socket (inline protocol) and returns the raw reply.
    pub fn command(&self, line: &str) -> String {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("read timeout");
        stream
            .write_all(format!("{line}\r\n").as_bytes())
            .expect("write");
        let mut reply = Vec::new();
        let mut buf = [0u8; 4096];
        // Inline replies used in tests fit in one read; read until a line end arrives.
        loop {
            let n = stream.read(&mut buf).expect("read");
            reply.extend_from_slice(&buf[..n]);
            if n == 0 || reply.ends_with(b"\r\n") {
                break;
            }
        }
        String::from_utf8_lossy(&reply).into_owned()
    }

    /// Connects a store to it with `prefix` and short timeouts.
    pub async fn store(&self, prefix: &str) -> RedisStore {
        RedisStore::connect(&self.url(), options(prefix))
            .await
            .expect("connect to the test redis-server")
    }
}

/// Options with a fresh-looking prefix and timeouts short enough for outage tests.
pub fn options(prefix: &str) -> RedisOptions {
    RedisOptions::default()
        .with_prefix(prefix)
        .with_response_timeout(Duration::from_millis(500))
        .with_connect_timeout(Duration::from_millis(500))
}

/// A prefix no other test of this process uses.
pub fn unique_prefix(name: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("test-{name}-{}:", NEXT.fetch_add(1, Ordering::Relaxed))
}

fn ping(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    if stream.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 16];
    matches!(stream.read(&mut buf), Ok(n) if buf[..n].starts_with(b"+PONG"))
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A multi-threaded runtime for tests that need real concurrency.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}
