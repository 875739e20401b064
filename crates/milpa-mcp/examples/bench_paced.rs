//! Benchmark: server CPU per call at a real agent's pace, over stdio.
//!
//! Sends `tools/call add {"a":1,"b":2}` at a fixed pace (one call in flight, the next one
//! sent at its slot on a fixed schedule) to each server under test and reports how much
//! CPU time the *server process* spent per call, as the operating system counts it. A
//! server that answers fast by spinning looks good in a throughput bench and bad here,
//! which is the point: at 100 or 500 calls/s a spinning core is a core taken from
//! everything else on the machine.
//!
//! ```text
//! cargo build --release -p milpa-cli -p milpa-mcp --examples
//! cargo build --release --manifest-path bench/rmcp-add/Cargo.toml
//! target/release/examples/bench_paced [--rates 500,100] [--seconds 3] [--rounds 3] \
//!     --server 'rmcp=bench/rmcp-add/target/release/rmcp-add pipes' \
//!     --server 'memory=target/release/milpa --store memory serve' \
//!     --server 'default=MILPA_HOME={tmp} target/release/milpa serve'
//! ```
//!
//! `--server NAME=COMMAND…` names a server and the command that starts it (split on
//! spaces; leading `KEY=VALUE` words are set in its environment; `{tmp}` becomes a fresh
//! empty folder of its own, so `MILPA_HOME={tmp}` gives `milpa serve` its default SQLite
//! store in a new state folder). The first server is the baseline of the ratios.
//!
//! Every server is started once, initialized, and warmed up with unpaced calls. Then each
//! round measures every rate on every server in turn (interleaved, so a noisy shared
//! machine hits them alike): it samples the server's CPU time, sends `--seconds` worth of
//! paced calls, waits for the last answer, samples again and divides by the calls. CPU
//! time is the sum over the server's threads of `/proc/<pid>/task/<tid>/schedstat`
//! (nanoseconds on CPU), with `utime + stime` of `/proc/<pid>/stat` (clock ticks, which
//! also count threads that have exited) printed beside it as a check. Each figure is the
//! median of the rounds, with the lowest and highest. The load average is printed before
//! and after, because only figures from a quiet machine compare across runs.
//!
//! Linux only (it reads `/proc`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// One server under test.
struct Server {
    name: String,
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    line: String,
    next_id: u64,
    /// The folders made for `{tmp}`, removed at the end.
    folders: Vec<PathBuf>,
}

/// CPU time of a process: precise (scheduler nanoseconds of its live threads) and coarse
/// (clock ticks of the whole process, dead threads included).
#[derive(Clone, Copy)]
struct CpuSample {
    sched_ns: u64,
    ticks: u64,
}

/// One round's measurement of one server at one rate.
struct RoundResult {
    sched_us_per_call: f64,
    ticks_us_per_call: f64,
    p50_latency_us: f64,
    achieved_rate: f64,
}

fn usage() -> ! {
    eprintln!(
        "usage: bench_paced [--rates 500,100] [--seconds 3] [--rounds 3] --server NAME=COMMAND... [--server ...]"
    );
    std::process::exit(2);
}

fn main() {
    let mut rates = vec![500u32, 100];
    let mut seconds = 3.0f64;
    let mut rounds = 3usize;
    let mut specs = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| usage());
        match arg.as_str() {
            "--rates" => {
                rates = value()
                    .split(',')
                    .map(|rate| rate.trim().parse().unwrap_or_else(|_| usage()))
                    .collect();
            }
            "--seconds" => seconds = value().parse().unwrap_or_else(|_| usage()),
            "--rounds" => rounds = value().parse().unwrap_or_else(|_| usage()),
            "--server" => specs.push(value()),
            _ => usage(),
        }
    }
    if specs.is_empty() || rates.is_empty() || rates.contains(&0) || rounds == 0 {
        usage();
    }
    let mut servers: Vec<Server> = specs.iter().map(|spec| start(spec)).collect();
    for server in &mut servers {
        server.initialize();
        for _ in 0..500 {
            server.call();
        }
    }
    println!(
        "load before: {}  ({} rounds of {seconds} s, one call in flight)",
        loadavg(),
        rounds
    );
    // results[(rate, server index)] = one entry per round
    let mut results: BTreeMap<(u32, usize), Vec<RoundResult>> = BTreeMap::new();
    for round in 0..rounds {
        for &rate in &rates {
            for (index, server) in servers.iter_mut().enumerate() {
                let result = server.paced_round(rate, seconds);
                eprintln!(
                    "round {} {:>4}/s {:<10} {:>7.1} µs/call (ticks {:>7.1}), p50 {:>6.1} µs, {:.0} calls/s",
                    round + 1,
                    rate,
                    server.name,
                    result.sched_us_per_call,
                    result.ticks_us_per_call,
                    result.p50_latency_us,
                    result.achieved_rate
                );
                results.entry((rate, index)).or_default().push(result);
            }
        }
    }
    println!("load after:  {}", loadavg());
    println!();
    println!(
        "| pace | server | CPU µs/call median (min-max) | ratio to {} | ticks µs/call | p50 latency µs |",
        servers[0].name
    );
    println!("|---|---|---|---|---|---|");
    for &rate in &rates {
        let baseline = median(&results[&(rate, 0)], |r| r.sched_us_per_call).0;
        for (index, server) in servers.iter().enumerate() {
            let rows = &results[&(rate, index)];
            let (cpu, low, high) = median(rows, |r| r.sched_us_per_call);
            let ticks = median(rows, |r| r.ticks_us_per_call).0;
            let latency = median(rows, |r| r.p50_latency_us).0;
            println!(
                "| {rate}/s | {} | {cpu:.1} ({low:.1}-{high:.1}) | x{:.2} | {ticks:.1} | {latency:.1} |",
                server.name,
                cpu / baseline
            );
        }
    }
    for server in servers {
        server.stop();
    }
}

/// The median, lowest and highest of `value` over `rows`.
fn median(rows: &[RoundResult], value: impl Fn(&RoundResult) -> f64) -> (f64, f64, f64) {
    let mut values: Vec<f64> = rows.iter().map(value).collect();
    values.sort_by(f64::total_cmp);
    (
        values[values.len() / 2],
        values[0],
        values[values.len() - 1],
    )
}

/// The longest `/proc` file this bench reads (`stat` is a few hundred bytes; a command
/// name is capped at 16), so a read is bounded whatever the file says.
const PROC_FILE_CAP: u64 = 4096;

/// Reads a small `/proc` file, at most [`PROC_FILE_CAP`] bytes of it.
fn read_proc(path: impl AsRef<Path>) -> std::io::Result<String> {
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(PROC_FILE_CAP)
        .read_to_string(&mut text)?;
    Ok(text)
}

fn loadavg() -> String {
    read_proc("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "?".to_owned())
}

/// Starts the server `spec` (`NAME=[KEY=VALUE ...] COMMAND [ARG ...]`) describes.
fn start(spec: &str) -> Server {
    let (name, command) = spec.split_once('=').unwrap_or_else(|| usage());
    let mut folders = Vec::new();
    let mut words = command.split_whitespace().map(|word| {
        if word.contains("{tmp}") {
            let folder = std::env::temp_dir().join(format!(
                "bench_paced-{}-{}-{}",
                std::process::id(),
                name,
                folders.len()
            ));
            let _ = std::fs::remove_dir_all(&folder);
            std::fs::create_dir_all(&folder).expect("create a temporary folder");
            let word = word.replace("{tmp}", &folder.to_string_lossy());
            folders.push(folder);
            word
        } else {
            word.to_owned()
        }
    });
    let mut env = Vec::new();
    let program = loop {
        let word = words.next().unwrap_or_else(|| usage());
        match word.split_once('=') {
            Some((key, value)) if !key.contains('/') => {
                env.push((key.to_owned(), value.to_owned()))
            }
            _ => break word,
        }
    };
    let rest: Vec<String> = words.collect();
    let mut child = Command::new(&program)
        .args(&rest)
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start {program}: {error}"));
    let input = child.stdin.take().expect("piped stdin");
    let output = BufReader::new(child.stdout.take().expect("piped stdout"));
    Server {
        name: name.to_owned(),
        child,
        input,
        output,
        line: String::new(),
        next_id: 1,
        folders,
    }
}

impl Server {
    fn send(&mut self, message: &str) {
        self.input
            .write_all(message.as_bytes())
            .and_then(|()| self.input.flush())
            .unwrap_or_else(|error| panic!("{}: write: {error}", self.name));
    }

    /// Reads lines until the response to `id` (skipping notifications).
    fn read_response(&mut self, id: u64) {
        let wanted = format!("\"id\":{id}");
        loop {
            self.line.clear();
            let read = self
                .output
                .read_line(&mut self.line)
                .unwrap_or_else(|error| panic!("{}: read: {error}", self.name));
            assert!(read > 0, "{}: the server closed its output", self.name);
            if self.line.contains(&wanted) {
                assert!(
                    !self.line.contains("\"error\"") && !self.line.contains("\"isError\":true"),
                    "{}: the call failed: {}",
                    self.name,
                    self.line
                );
                return;
            }
        }
    }

    fn initialize(&mut self) {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"initialize\",\"params\":{{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{{}},\"clientInfo\":{{\"name\":\"bench_paced\",\"version\":\"0\"}}}}}}\n"
        ));
        self.read_response(id);
        self.send("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
    }

    /// One `add` call, answered.
    fn call(&mut self) {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"add\",\"arguments\":{{\"a\":1,\"b\":2}}}}}}\n"
        ));
        self.read_response(id);
    }

    fn cpu(&self) -> CpuSample {
        let pid = self.child.id();
        let mut sched_ns = 0;
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
            for task in tasks.flatten() {
                if let Ok(text) = read_proc(task.path().join("schedstat")) {
                    sched_ns += text
                        .split_whitespace()
                        .next()
                        .and_then(|ns| ns.parse::<u64>().ok())
                        .unwrap_or(0);
                }
            }
        }
        let stat = read_proc(format!("/proc/{pid}/stat")).unwrap_or_default();
        // Fields after the command name (which is in parentheses and may hold spaces):
        // utime and stime are the 14th and 15th fields of the line, the 12th and 13th
        // after the closing parenthesis.
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let fields: Vec<&str> = after.split_whitespace().collect();
        let field = |index: usize| {
            fields
                .get(index)
                .and_then(|value| value.parse::<u64>().ok())
                .unwrap_or(0)
        };
        CpuSample {
            sched_ns,
            ticks: field(11) + field(12),
        }
    }

    /// `seconds` of calls at `rate` per second, one in flight.
    fn paced_round(&mut self, rate: u32, seconds: f64) -> RoundResult {
        let period = Duration::from_secs_f64(1.0 / f64::from(rate));
        let calls = ((seconds * f64::from(rate)).round() as u64).max(1);
        let mut latencies = Vec::with_capacity(calls as usize);
        // Let the server settle after the previous round (its idle spin, if any).
        std::thread::sleep(Duration::from_millis(20));
        let before = self.cpu();
        let started = Instant::now();
        for slot in 0..calls {
            let due = started + period * slot as u32;
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            let sent = Instant::now();
            self.call();
            latencies.push(sent.elapsed());
        }
        let elapsed = started.elapsed();
        // The server's work after its answer (an audit commit, an idle spin) belongs to
        // the call too: sample after one more period.
        std::thread::sleep(period);
        let after = self.cpu();
        latencies.sort();
        // A clock tick is 1/USER_HZ s, and USER_HZ is 100 on Linux (its ABI fixes it).
        let tick_us = 10_000.0;
        RoundResult {
            sched_us_per_call: after.sched_ns.saturating_sub(before.sched_ns) as f64
                / 1000.0
                / calls as f64,
            ticks_us_per_call: after.ticks.saturating_sub(before.ticks) as f64 * tick_us
                / calls as f64,
            p50_latency_us: latencies[latencies.len() / 2].as_secs_f64() * 1e6,
            achieved_rate: calls as f64 / elapsed.as_secs_f64(),
        }
    }

    fn stop(mut self) {
        drop(self.input);
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break;
                }
            }
        }
        for folder in self.folders {
            let _ = std::fs::remove_dir_all(folder);
        }
    }
}
