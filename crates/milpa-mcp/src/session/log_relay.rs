//! Sending a session's client the server-wide log ([`milpa::server_log`]): messages that
//! belong to no call, such as what a gateway's upstream servers log. Each goes out as
//! `notifications/message` when it is at or above the level the client set with
//! `logging/setLevel` (none is sent before the client sets one, unless the server has a
//! default level). Up to 2025-11-25 only: a 2026-07-28 client has no stream outside its
//! requests to receive them on.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use milpa::ToolRegistry;
use milpa::server_log::LogEntry;
use serde_json::{Map, Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::client_link::{ClientLink, Route};
use crate::jsonrpc;

/// Whether a session's task relaying the server log runs already.
#[derive(Debug, Default)]
pub(super) struct LogRelay {
    started: AtomicBool,
}

impl LogRelay {
    /// Sends `client` each message of `registry`'s server log its level lets through,
    /// along `route`, until the client is gone. Started once; later calls do nothing.
    pub fn start(&self, registry: &ToolRegistry, client: &Arc<ClientLink>, route: Route) {
        if self.started.swap(true, Ordering::AcqRel) {
            return;
        }
        let mut entries = registry.server_log().listen();
        let client = Arc::clone(client);
        tokio::spawn(async move {
            loop {
                let entry = tokio::select! {
                    () = client.closing() => return,
                    entry = entries.recv() => entry,
                };
                match entry {
                    Ok(entry) => {
                        if client.is_initialized()
                            && !client.is_closed()
                            && client.log_enabled(entry.level)
                        {
                            client.send(
                                &route,
                                jsonrpc::notification("notifications/message", &params(&entry)),
                            );
                        }
                    }
                    Err(RecvError::Lagged(skipped)) => tracing::warn!(
                        target: "milpa::mcp",
                        skipped,
                        "a client fell behind the server log; the oldest messages were skipped"
                    ),
                    // The registry is gone: nothing more will be logged.
                    Err(RecvError::Closed) => return,
                }
            }
        });
    }
}

/// The `notifications/message` params of `entry`.
fn params(entry: &LogEntry) -> Value {
    let mut params = Map::with_capacity(3);
    params.insert("level".into(), json!(entry.level));
    if let Some(logger) = &entry.logger {
        params.insert("logger".into(), Value::String(logger.to_string()));
    }
    params.insert("data".into(), entry.data.clone());
    Value::Object(params)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client_link::{ClientInfo, Out};
    use milpa::LogLevel;
    use std::time::Duration;

    async fn next(rx: &mut tokio::sync::mpsc::UnboundedReceiver<Out>) -> Option<Value> {
        match tokio::time::timeout(Duration::from_millis(200), rx.recv()).await {
            Ok(Some(Out::Msg(message))) => Some(serde_json::from_str(&message).unwrap()),
            _ => None,
        }
    }

    /// Only what the client's level lets through is sent, with the logger named.
    #[tokio::test]
    async fn the_clients_level_filters_the_server_log() {
        let registry = ToolRegistry::new();
        let client = Arc::new(ClientLink::new(None, None));
        assert!(client.declare(ClientInfo {
            version: "2025-06-18",
            capabilities: json!({}),
            name: None,
        }));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let relay = LogRelay::default();
        relay.start(&registry, &client, Route::Channel(tx.clone()));
        relay.start(&registry, &client, Route::Channel(tx));
        tokio::task::yield_now().await;
        let log = registry.server_log();
        let send = |level, data| log.send(LogEntry::new(level, Some("fs".into()), json!(data)));

        send(LogLevel::Error, "before any level");
        assert_eq!(next(&mut rx).await, None, "no level set: nothing is sent");

        client.set_log_level(LogLevel::Warning);
        send(LogLevel::Info, "too low");
        send(LogLevel::Warning, "disk almost full");
        assert_eq!(
            next(&mut rx).await,
            Some(
                json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {
                "level": "warning", "logger": "fs", "data": "disk almost full"}})
            )
        );
        // Started twice, relayed once.
        assert_eq!(next(&mut rx).await, None);
        client.close();
    }
}
