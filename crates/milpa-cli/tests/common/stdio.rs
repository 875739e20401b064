//! An MCP client over a `milpa` child's standard input and output.

use std::io::Write;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

/// How long a test waits for one message.
pub const WAIT: Duration = Duration::from_secs(30);

/// A running server and the messages it wrote, one JSON value per line.
pub struct StdioClient {
    child: Child,
    stdin: ChildStdin,
    messages: mpsc::Receiver<Value>,
    next_id: u64,
}

impl StdioClient {
    /// Starts `command` (stderr goes to `stderr_file`) and runs the handshake.
    pub fn start(mut command: Command, stderr_file: &std::path::Path) -> StdioClient {
        let stderr = std::fs::File::create(stderr_file).unwrap();
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, messages) = mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if let Ok(value) = serde_json::from_str::<Value>(&line)
                    && tx.send(value).is_err()
                {
                    return;
                }
            }
        });
        let mut client = StdioClient {
            child,
            stdin,
            messages,
            next_id: 0,
        };
        let init = client.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}}),
        );
        assert!(init.get("result").is_some(), "{init}");
        client.notify("notifications/initialized", json!({}));
        client
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.write(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request without waiting; returns its id.
    pub fn send(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// The answer to request `id` (other messages are skipped).
    pub fn answer(&mut self, id: u64) -> Value {
        loop {
            let message = self
                .messages
                .recv_timeout(WAIT)
                .unwrap_or_else(|_| panic!("no answer to request {id}"));
            if message["id"] == json!(id) && message.get("method").is_none() {
                return message;
            }
        }
    }

    /// The first message `matches` accepts (others are skipped).
    pub fn wait_for(&mut self, matches: impl Fn(&Value) -> bool) -> Value {
        loop {
            let message = self
                .messages
                .recv_timeout(WAIT)
                .unwrap_or_else(|_| panic!("no message awaited came"));
            if matches(&message) {
                return message;
            }
        }
    }

    /// Sends a request and waits for its answer.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        self.answer(id)
    }

    /// Waits until `tools/list` has `tool` (upstreams start in the background, so their
    /// tools come some time after the handshake); the listed names.
    pub fn wait_for_tool(&mut self, tool: &str) -> Vec<String> {
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            let listed = self.request("tools/list", json!({}));
            let names: Vec<String> = listed["result"]["tools"]
                .as_array()
                .map(|tools| {
                    tools
                        .iter()
                        .filter_map(|t| t["name"].as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            if names.iter().any(|name| name == tool) {
                return names;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no tool {tool} listed: {listed}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `tools/call`; the call result (`result` of the answer).
    pub fn call(&mut self, tool: &str, args: Value) -> Value {
        let answer = self.request("tools/call", json!({"name": tool, "arguments": args}));
        answer
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("not a call result: {answer}"))
    }

    fn write(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }
}

impl Drop for StdioClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
