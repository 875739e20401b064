//! Benchmark: `tools/call` of a trivial tool (`add`, declared with `#[tool]`) over stdio
//! against the `everything` fixture server, with the full pipeline and audit on: every call
//! produces an audit record, serialized as a JSON line into the fixture's buffered audit
//! file (`--audit`, default `/dev/null`).
//!
//! ```text
//! cargo build --release -p milpa-mcp --examples
//! target/release/examples/bench_stdio [--seconds 2] [--rounds 5] [--audit FILE]
//!     [--tool NAME] [--proxy MILPA] [-- SERVER_CMD [ARG]...]
//! ```
//!
//! `--read URI` also starts a second server of the same command and times `resources/read`
//! of URI on it (`test://static-text` on the fixture), in the same alternation as the
//! calls: what a governed read costs against a governed call.
//!
//! `-- SERVER_CMD…` benchmarks another stdio server (its tool `--tool`, default `add`, is
//! called with `--arguments`, default `{"a":1,"b":2}`): the npm `@modelcontextprotocol/server-everything`, say,
//! with `--tool get-sum -- node …/server-everything/dist/index.js stdio`. `--proxy MILPA` (the `milpa` binary) also starts
//! `MILPA --store memory proxy --audit /dev/null --name up -- SERVER_CMD…` and times the same
//! calls through it (tool `up__<tool>`), alternating rounds between the server called
//! directly and the proxy, and prints the time each call spends in the proxy. `--proxy`
//! may be given more than once (two builds of `milpa`, say): each proxy gets its own
//! connection, measured in the same alternation, so a noisy machine hits them all alike.
//!
//! `--tool` given more than once starts one server of the command for each tool and times
//! them in the same alternation, each row named after its tool: tools of one server side
//! by side (a native tool, a sandboxed one and a command tool of one manifest, say).
//!
//! Each figure is the median of `--rounds` measurements of `--seconds` each (with the
//! lowest and highest), because a shared or idle virtual machine varies a lot between runs.
//!
//! Spawns `everything --stdio` (found next to this binary), initializes, then measures
//! calls per second one at a time and with 32 in flight (the client keeps 32 requests
//! outstanding, sending new ones as responses arrive). `MILPA_MCP_WORKERS` sets the
//! server's Tokio worker threads. As a baseline measured in the same
//! run, it also times the same call through `ToolRegistry::call` in process.

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use milpa::audit::{AuditRecord, AuditSink};
use milpa::{ToolContext, ToolDefinition, ToolRegistry};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// What each request of a connection asks.
#[derive(Clone)]
enum Ask {
    /// `tools/call` of this tool with these arguments (JSON text).
    Call { tool: String, arguments: String },
    /// `resources/read` of this URI (`--read`).
    Read(String),
}

fn push_request(out: &mut String, id: u64, ask: &Ask) {
    use std::fmt::Write;
    out.push_str("{\"jsonrpc\":\"2.0\",\"id\":");
    let _ = write!(out, "{id}");
    match ask {
        Ask::Call { tool, arguments } => {
            out.push_str(",\"method\":\"tools/call\",\"params\":{\"name\":\"");
            out.push_str(tool);
            out.push_str("\",\"arguments\":");
            out.push_str(arguments);
            out.push_str("}}\n");
        }
        Ask::Read(uri) => {
            out.push_str(",\"method\":\"resources/read\",\"params\":{\"uri\":\"");
            out.push_str(uri);
            out.push_str("\"}}\n");
        }
    }
}

/// A server under test: its process and the connection to it.
struct Conn {
    child: Child,
    writer: BufWriter<ChildStdin>,
    reader: BufReader<ChildStdout>,
    line: String,
    /// What each request asks.
    tool: Ask,
}

impl Conn {
    async fn read(&mut self) -> &str {
        self.line.clear();
        let n = self.reader.read_line(&mut self.line).await.expect("read");
        assert!(n > 0, "the server closed its output");
        &self.line
    }
}

async fn sequential(conn: &mut Conn, seconds: f64) -> (u64, f64) {
    let started = Instant::now();
    let mut calls = 0u64;
    let mut out = String::with_capacity(128);
    while started.elapsed().as_secs_f64() < seconds {
        for _ in 0..256 {
            out.clear();
            push_request(&mut out, calls, &conn.tool);
            conn.writer.write_all(out.as_bytes()).await.unwrap();
            conn.writer.flush().await.unwrap();
            let line = conn.read().await;
            // Servers that leave `isError` out when it is false (the TypeScript SDK's) count.
            assert!(
                line.contains("\"result\"") && !line.contains("\"isError\":true"),
                "{line}"
            );
            calls += 1;
        }
    }
    (calls, started.elapsed().as_secs_f64())
}

/// Keeps `in_flight` calls outstanding from one task: each time responses arrive, as many
/// new requests go out in one write.
async fn pipelined(conn: &mut Conn, seconds: f64, in_flight: u64) -> (u64, f64) {
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(seconds);
    let mut sent = 0u64;
    let mut received = 0u64;
    let mut out = String::with_capacity(in_flight as usize * 128);
    for _ in 0..in_flight {
        push_request(&mut out, sent, &conn.tool);
        sent += 1;
    }
    conn.writer.write_all(out.as_bytes()).await.unwrap();
    conn.writer.flush().await.unwrap();
    while received < sent {
        let chunk = conn.reader.fill_buf().await.unwrap();
        assert!(!chunk.is_empty(), "the server closed its output");
        let lines = chunk.iter().filter(|b| **b == b'\n').count() as u64;
        // Spot-check (a full scan would cost more than the server's work).
        if received % 1024 < lines {
            assert!(
                !chunk.windows(14).any(|w| w == b"\"isError\":true"),
                "a call failed"
            );
        }
        let n = chunk.len();
        conn.reader.consume(n);
        received += lines;
        if lines > 0 && Instant::now() < deadline {
            out.clear();
            for _ in 0..lines {
                push_request(&mut out, sent, &conn.tool);
                sent += 1;
            }
            conn.writer.write_all(out.as_bytes()).await.unwrap();
            conn.writer.flush().await.unwrap();
        }
    }
    (received, started.elapsed().as_secs_f64())
}

/// Serializes each record as the fixture's audit file does, keeping the bytes in memory
/// (cleared now and then), so the baseline does the same audit work without file I/O.
#[derive(Default)]
struct MemoryJsonLines {
    buf: std::sync::Mutex<Vec<u8>>,
}

impl AuditSink for MemoryJsonLines {
    fn record(&self, record: &AuditRecord<'_>) {
        let mut buf = self.buf.lock().unwrap();
        if buf.len() > 1 << 20 {
            buf.clear();
        }
        record.write_json(&mut buf);
        buf.push(b'\n');
    }
}

async fn in_process(seconds: f64) -> (u64, f64) {
    let mut registry = ToolRegistry::builder()
        .audit_sink(Arc::new(MemoryJsonLines::default()))
        .build();
    registry
        .register(
            ToolDefinition::builder("add")
                .input_schema(json!({
                    "type": "object",
                    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                    "required": ["a", "b"]
                }))
                .sync(|args, _| {
                    json!(args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0))
                }),
        )
        .unwrap();
    let started = Instant::now();
    let mut calls = 0u64;
    while started.elapsed().as_secs_f64() < seconds {
        for _ in 0..1024 {
            let ctx = ToolContext::stdio("bench");
            let r = registry.call("add", json!({"a": 1, "b": 2}), &ctx).await;
            assert!(r.success);
            calls += 1;
        }
    }
    (calls, started.elapsed().as_secs_f64())
}

/// Prints the median (and range) of `rates` and returns the median.
fn report(label: &str, rates: &mut [f64]) -> f64 {
    rates.sort_by(f64::total_cmp);
    let median = rates[rates.len() / 2];
    println!(
        "{label} {median:>10.0} calls/s median of {} (range {:.0}..{:.0})",
        rates.len(),
        rates[0],
        rates[rates.len() - 1]
    );
    median
}

/// Starts `program args…`, runs the handshake, and warms the connection up.
async fn start(program: &str, args: &[String], tool: Ask) -> Conn {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {program}: {e}"));
    let mut conn = Conn {
        writer: BufWriter::new(child.stdin.take().unwrap()),
        reader: BufReader::with_capacity(1 << 16, child.stdout.take().unwrap()),
        child,
        line: String::new(),
        tool,
    };
    conn.writer
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":\"init\",\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"bench\",\"version\":\"1\"}}}\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .await
        .unwrap();
    conn.writer.flush().await.unwrap();
    // Some servers log (a notification) before they answer.
    while !conn.read().await.contains("\"id\":\"init\"") {}
    if let Ask::Call { tool, .. } = &conn.tool {
        let tool = tool.clone();
        wait_for_tool(&mut conn, &tool).await;
    }
    sequential(&mut conn, 0.3).await;
    pipelined(&mut conn, 0.3, 32).await;
    conn
}

/// Lists the server's tools until `tool` is there (a proxy serves at once and lists an
/// upstream's tools once the upstream is up), for at most 30 s.
async fn wait_for_tool(conn: &mut Conn, tool: &str) {
    let started = Instant::now();
    let listed = format!("\"name\":\"{tool}\"");
    loop {
        conn.writer
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":\"list\",\"method\":\"tools/list\"}\n")
            .await
            .unwrap();
        conn.writer.flush().await.unwrap();
        let found = loop {
            let line = conn.read().await;
            if line.contains("\"id\":\"list\"") {
                break line.contains(&listed);
            }
        };
        if found {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the server does not list {tool}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn stop(conn: Conn) {
    let Conn {
        mut child,
        writer,
        reader,
        ..
    } = conn;
    drop((writer, reader));
    let _ = child.wait().await;
}

/// Runs `rounds` measurements on each connection, alternating between them round by round
/// (so a slow phase of a shared machine hits both alike); calls per second per connection.
async fn alternate(
    conns: &mut [Conn],
    rounds: usize,
    seconds: f64,
    in_flight: u64,
) -> Vec<Vec<f64>> {
    let mut rates = vec![Vec::with_capacity(rounds); conns.len()];
    for _ in 0..rounds {
        for (conn, rates) in conns.iter_mut().zip(rates.iter_mut()) {
            let (calls, secs) = if in_flight == 1 {
                sequential(conn, seconds).await
            } else {
                pipelined(conn, seconds, in_flight).await
            };
            rates.push(calls as f64 / secs);
        }
    }
    rates
}

// The client is the harness: one thread, so it costs the server as little as possible.
#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut seconds = 2.0;
    let mut rounds = 5usize;
    let mut audit = "/dev/null".to_owned();
    let mut tools: Vec<String> = Vec::new();
    let mut arguments = r#"{"a":1,"b":2}"#.to_owned();
    let mut proxies: Vec<String> = Vec::new();
    let mut read: Option<String> = None;
    let mut command: Vec<String> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--seconds" => seconds = args.next().and_then(|s| s.parse().ok()).unwrap_or(2.0),
            "--rounds" => rounds = args.next().and_then(|s| s.parse().ok()).unwrap_or(5).max(1),
            "--audit" => audit = args.next().unwrap_or(audit),
            "--tool" => tools.push(args.next().expect("--tool needs a name")),
            "--arguments" => {
                arguments = args.next().expect("--arguments needs a JSON object");
                let parsed: serde_json::Value =
                    serde_json::from_str(&arguments).expect("--arguments is JSON");
                // One line on the wire: written again without any newline it had.
                arguments = parsed.to_string();
            }
            "--proxy" => proxies.push(args.next().expect("--proxy needs the milpa binary")),
            "--read" => read = Some(args.next().expect("--read needs a URI")),
            "--" => {
                command = args.by_ref().collect();
                break;
            }
            other => panic!("unknown argument {other}"),
        }
    }
    if command.is_empty() {
        let exe = std::env::current_exe().unwrap();
        let server = exe.with_file_name("everything");
        command = vec![
            server.to_string_lossy().into_owned(),
            "--stdio".into(),
            "--audit".into(),
            audit.clone(),
        ];
    }
    if tools.is_empty() {
        tools.push("add".to_owned());
    }
    let call = |tool: String| Ask::Call {
        tool,
        arguments: arguments.clone(),
    };
    let tool = tools[0].clone();
    let mut labels = Vec::new();
    let mut conns = Vec::new();
    for tool in &tools {
        labels.push(if tools.len() == 1 {
            "direct".to_owned()
        } else {
            tool.clone()
        });
        conns.push(start(&command[0], &command[1..], call(tool.clone())).await);
    }
    if let Some(uri) = &read {
        conns.push(start(&command[0], &command[1..], Ask::Read(uri.clone())).await);
        labels.push("read ".to_owned());
    }
    for (n, milpa) in proxies.iter().enumerate() {
        let mut proxy_args: Vec<String> = [
            "--store", "memory", "proxy", "--audit", &audit, "--name", "up", "--prefix", "up__",
            "--",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        proxy_args.extend(command.iter().cloned());
        conns.push(start(milpa, &proxy_args, call(format!("up__{tool}"))).await);
        labels.push(if proxies.len() == 1 {
            "proxy ".to_owned()
        } else {
            format!("proxy{}", n + 1)
        });
    }

    let ones = alternate(&mut conns, rounds, seconds, 1).await;
    let mut one_medians = Vec::new();
    for (label, mut rates) in labels.iter().zip(ones) {
        one_medians.push(report(&format!("stdio {label}, 1 in flight: "), &mut rates));
    }
    let manys = alternate(&mut conns, rounds, seconds, 32).await;
    let mut many_medians = Vec::new();
    for (label, mut rates) in labels.iter().zip(manys) {
        many_medians.push(report(&format!("stdio {label}, 32 in flight:"), &mut rates));
    }
    for conn in conns {
        stop(conn).await;
    }
    if let Some(n) = labels.iter().position(|l| l.starts_with("read")) {
        println!(
            "resources/read against tools/call (rate ratio): 1 in flight x{:.2}, 32 in flight x{:.2}",
            one_medians[n] / one_medians[0],
            many_medians[n] / many_medians[0]
        );
    }
    for (n, label) in labels
        .iter()
        .enumerate()
        .skip(1)
        .filter(|(_, l)| !l.starts_with("read"))
    {
        // Time per call of this row minus time per call of the first, from the medians.
        let added = |m: &[f64]| (1.0 / m[n] - 1.0 / m[0]) * 1e6;
        let what = if label.starts_with("proxy") {
            format!("added by the {}", label.trim_end())
        } else {
            format!("{label} beyond {}", labels[0])
        };
        println!(
            "{what} per call: 1 in flight {:.1} µs, 32 in flight {:.1} µs",
            added(&one_medians),
            added(&many_medians)
        );
    }
    let (one, many) = (one_medians[0], many_medians[0]);

    let mut bases = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let (calls, secs) = in_process(seconds.min(1.0)).await;
        bases.push(calls as f64 / secs);
    }
    let base = report("baseline, in-process ToolRegistry::call:", &mut bases);
    println!(
        "ratios to baseline (direct): 1 in flight {:.2}, 32 in flight {:.2}",
        one / base,
        many / base
    );
}
