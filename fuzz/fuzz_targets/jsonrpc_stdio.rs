//! The stdio transport end to end: the input is the byte stream a client writes (lines of
//! JSON-RPC, or anything else), served by `serve_io` over an in-process duplex stream. The
//! server must answer and stop at end of input, whatever came in.

#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use milpa::ToolRegistry;
use milpa_mcp::ServerOptions;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::runtime::Runtime;

/// A session whose initialize handshake is already done, so most inputs reach dispatch.
const HANDSHAKE: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"fuzz\",\"version\":\"0\"}}}\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";

struct Fixture {
    runtime: Runtime,
    registry: std::sync::Arc<ToolRegistry>,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| Fixture {
        runtime: tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime"),
        registry: milpa_fuzz::registry(),
    })
}

fuzz_target!(|data: &[u8]| {
    let fixture = fixture();
    // The first byte chooses whether the session starts initialized.
    let (initialized, input) = match data.split_first() {
        Some((first, rest)) => (first & 1 == 1, rest),
        None => (false, data),
    };
    fixture.runtime.block_on(async {
        let (client, server) = tokio::io::duplex(1 << 16);
        let (server_read, server_write) = tokio::io::split(server);
        let (mut client_read, mut client_write) = tokio::io::split(client);
        let mut options = ServerOptions::default();
        // No client answers elicitation requests here; a confirmation gets a token instead.
        options.elicitation_confirmation = false;
        let serve =
            milpa_mcp::serve_io(fixture.registry.clone(), options, server_read, server_write);
        let feed = async move {
            if initialized {
                client_write.write_all(HANDSHAKE).await?;
            }
            client_write.write_all(input).await?;
            client_write.shutdown().await
        };
        let drain = async move {
            let mut answers = Vec::new();
            client_read.read_to_end(&mut answers).await.map(|_| answers)
        };
        let finished = tokio::time::timeout(Duration::from_secs(20), async {
            let (served, _fed, answers) = tokio::join!(serve, feed, drain);
            (served, answers)
        })
        .await;
        let (served, answers) = finished.expect("serve_io stops after the end of its input");
        served.expect("serve_io over a duplex stream does not fail");
        let answers = answers.expect("the answers can be read");
        // Every answer is one JSON value per line.
        for line in answers.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            serde_json::from_slice::<serde_json::Value>(line).unwrap_or_else(|e| {
                panic!(
                    "an answer line is not JSON ({e}): {:?}",
                    String::from_utf8_lossy(line)
                )
            });
        }
    });
});
