//! An MCP server over stdio written by hand (newline-delimited JSON-RPC, no SDK), for the
//! gateway's tests: it can do what a well-built server never does. Built by `cargo test -p
//! milpa-cli` beside the tests, which put it behind `milpa`.
//!
//! Options:
//! - `--start-delay SECS`: sleep before reading anything (a slow `npx -y` download);
//! - `--extra-tool NAME` (repeatable): list one more tool of that name, however odd;
//! - `--stderr-flood`: write to standard error without end and without a newline;
//! - `--instructions TEXT`: the `instructions` of its `initialize` answer.
//!
//! Tools:
//! - `echo(text)`: the text; listed with a `title`, every annotation, `icons` and `_meta`;
//! - `pid()`: its process id;
//! - `huge(bytes)`: writes one line of that many bytes without a newline, then waits;
//! - `flood(count)`: that many `notifications/progress` for the call, then `"flooded"`;
//! - `log()`: a `notifications/message` at `debug`, `info` and `error`, each sent only
//!   when at or above the level `logging/setLevel` set (default `debug`); then `"logged"`;
//! - `roots()`: asks the client `roots/list` and answers with what came back;
//! - `open_page()`: a URL-mode `elicitation/create`; answers with what came back;
//! - `env(name)`: the value of that variable in its environment (`unset` when it is not);
//! - `args()`: its arguments after the program, space-separated.

use std::io::{BufRead, Write};
use std::time::Duration;

use serde_json::{Value, json};

const LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

fn send(message: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{message}");
    let _ = out.flush();
}

fn answer(id: &Value, result: Value) {
    send(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
}

fn text(id: &Value, text: impl Into<String>) {
    answer(
        id,
        json!({"content": [{"type": "text", "text": text.into()}], "isError": false}),
    );
}

fn tools(extra: &[String]) -> Vec<Value> {
    let plain = |name: &str, properties: Value| {
        json!({"name": name, "description": format!("The {name} tool"),
               "inputSchema": {"type": "object", "properties": properties}})
    };
    let mut tools = vec![
        json!({
            "name": "echo",
            "title": "Echo",
            "description": "Echoes its text",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                            "required": ["text"]},
            "annotations": {"title": "Echo it", "readOnlyHint": true, "idempotentHint": true,
                            "openWorldHint": false, "destructiveHint": false},
            "icons": [{"src": "https://example.com/echo.png", "mimeType": "image/png", "sizes": ["48x48"]}],
            "_meta": {"example.com/origin": "odd_upstream"}
        }),
        plain("pid", json!({})),
        plain("huge", json!({"bytes": {"type": "integer"}})),
        plain("flood", json!({"count": {"type": "integer"}})),
        plain("log", json!({})),
        plain("roots", json!({})),
        plain("open_page", json!({})),
        plain("env", json!({"name": {"type": "string"}})),
        plain("args", json!({})),
    ];
    tools.extend(extra.iter().map(|name| plain(name, json!({}))));
    tools
}

fn main() {
    let mut extra = Vec::new();
    let mut instructions = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--start-delay" => {
                let seconds: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(0);
                std::thread::sleep(Duration::from_secs(seconds));
            }
            "--extra-tool" => extra.extend(args.next()),
            "--instructions" => instructions = args.next(),
            // Ignored: an argument for `args()` to show.
            "--tag" => {
                args.next();
            }
            "--stderr-flood" => {
                std::thread::spawn(|| {
                    let chunk = vec![b'x'; 64 * 1024];
                    let mut err = std::io::stderr().lock();
                    while err.write_all(&chunk).is_ok() {}
                });
            }
            other => {
                eprintln!("odd_upstream: unknown option {other}");
                std::process::exit(2);
            }
        }
    }
    let mut level = 0;
    // Our requests to the client waiting for an answer: their id, and the call they serve.
    let mut asked: Vec<(Value, Value)> = Vec::new();
    let mut next_id = 0u64;
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { return };
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let id = message["id"].clone();
        let Some(method) = message["method"].as_str() else {
            // An answer to one of our requests: the call it served gets it.
            if let Some(i) = asked.iter().position(|(ours, _)| *ours == id) {
                let (_, call) = asked.remove(i);
                let got = message.get("result").or(message.get("error"));
                text(&call, got.cloned().unwrap_or(Value::Null).to_string());
            }
            continue;
        };
        let params = &message["params"];
        match method {
            "initialize" => {
                let mut result = json!({
                    "protocolVersion": "2025-06-18",
                    "capabilities": {"tools": {"listChanged": true}, "logging": {}},
                    "serverInfo": {"name": "odd_upstream", "version": "1"}
                });
                if let Some(instructions) = &instructions {
                    result["instructions"] = json!(instructions);
                }
                answer(&id, result);
            }
            "tools/list" => answer(&id, json!({"tools": tools(&extra)})),
            "logging/setLevel" => {
                let wanted = params["level"].as_str().unwrap_or("debug");
                level = LEVELS.iter().position(|l| *l == wanted).unwrap_or(0);
                answer(&id, json!({}));
            }
            "ping" => answer(&id, json!({})),
            "tools/call" => {
                let arguments = &params["arguments"];
                let token = params["_meta"]["progressToken"].clone();
                match params["name"].as_str().unwrap_or("") {
                    "echo" => text(&id, arguments["text"].as_str().unwrap_or("")),
                    "pid" => text(&id, std::process::id().to_string()),
                    "huge" => {
                        let mut left = arguments["bytes"].as_u64().unwrap_or(0);
                        let chunk = vec![b'a'; 1024 * 1024];
                        let mut out = std::io::stdout().lock();
                        while left > 0 {
                            let n = left.min(chunk.len() as u64) as usize;
                            if out.write_all(&chunk[..n]).is_err() {
                                return;
                            }
                            left -= n as u64;
                        }
                        let _ = out.flush();
                        drop(out);
                        // The line never ends: wait to be killed.
                        std::thread::sleep(Duration::from_secs(3600));
                    }
                    "flood" => {
                        let count = arguments["count"].as_u64().unwrap_or(0);
                        for i in 1..=count {
                            send(
                                &json!({"jsonrpc": "2.0", "method": "notifications/progress",
                                "params": {"progressToken": token, "progress": i,
                                           "total": count}}),
                            );
                        }
                        text(&id, "flooded");
                    }
                    "log" => {
                        for (rank, name) in [(0, "debug"), (1, "info"), (4, "error")] {
                            if rank >= level {
                                send(&json!({"jsonrpc": "2.0", "method": "notifications/message",
                                    "params": {"level": name, "logger": "odd",
                                               "data": format!("a {name} message")}}));
                            }
                        }
                        text(&id, "logged");
                    }
                    "roots" => {
                        next_id += 1;
                        let ours = json!(format!("odd-{next_id}"));
                        send(&json!({"jsonrpc": "2.0", "id": ours, "method": "roots/list"}));
                        asked.push((ours, id));
                    }
                    "open_page" => {
                        next_id += 1;
                        let ours = json!(format!("odd-{next_id}"));
                        send(
                            &json!({"jsonrpc": "2.0", "id": ours, "method": "elicitation/create",
                            "params": {"mode": "url", "elicitationId": "e1",
                                       "url": "https://example.com/authorize",
                                       "message": "Authorize the odd server"}}),
                        );
                        asked.push((ours, id));
                    }
                    "env" => {
                        let name = arguments["name"].as_str().unwrap_or("");
                        text(&id, std::env::var(name).unwrap_or_else(|_| "unset".into()))
                    }
                    "args" => text(&id, std::env::args().skip(1).collect::<Vec<_>>().join(" ")),
                    other => text(&id, format!("called {other}")),
                }
            }
            _ if id.is_null() => {}
            other => send(&json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": format!("no method {other}")}})),
        }
    }
}
