//! An upstream's log, both ways.
//!
//! - What the upstream logs (`notifications/message`) goes to the clients, through the
//!   server log of the registry serving its tools ([`milpa::server_log`]), with the
//!   upstream's name as the logger (`<name>/<logger>` when the upstream named one); each
//!   client gets what its own `logging/setLevel` lets through. A message that came on a
//!   call's own answer stream (an HTTP upstream) goes to that call's client only: it is
//!   about that call, and another client has no business reading it. Over stdio the
//!   protocol does not say which call a message is about, so it goes to every client.
//!   milpa's own log keeps a line of each at debug (target `milpa::upstream`).
//! - What the clients ask for (`logging/setLevel`) is asked of the upstream, when it
//!   declared the `logging` capability: the most verbose level any client asked for (see
//!   [`ServerLog::ask_level`]), once it is up and after each restart.

use std::sync::Arc;

use milpa::LogLevel;
use milpa::call_handle::CallHandle;
use milpa::server_log::{LogEntry, ServerLog};
use parking_lot::Mutex;
use serde_json::Value;

/// Where an upstream's log messages go, shared by its supervisor and its sessions.
#[derive(Debug, Default)]
pub(crate) struct UpstreamLog {
    /// The server log of the registry serving its tools, once one follows it.
    server: Mutex<Option<ServerLog>>,
}

impl UpstreamLog {
    /// Relays to `log` from now on.
    pub fn serve_in(&self, log: &ServerLog) {
        *self.server.lock() = Some(log.clone());
    }

    /// The server log it relays to, once one follows it.
    pub fn server(&self) -> Option<ServerLog> {
        self.server.lock().clone()
    }

    /// Takes in a `notifications/message` of `upstream`, with its `params`: to the
    /// client of `call` when it came on that call's own stream (an HTTP upstream answering
    /// it), else to every client at its level.
    pub fn relay(&self, upstream: &str, params: &Value, call: Option<&CallHandle>) {
        let entry = entry(upstream, params);
        tracing::debug!(
            target: "milpa::upstream",
            upstream,
            level = ?entry.level,
            logger = entry.logger.as_deref(),
            "{}",
            entry.data
        );
        match (call, self.server()) {
            (Some(call), _) => {
                let logger = entry.logger.as_deref().unwrap_or(upstream);
                call.log_with_logger(entry.level, logger, entry.data);
            }
            (None, Some(server)) => server.send(entry),
            (None, None) => {}
        }
    }
}

/// What `notifications/message` `params` of `upstream` say: an unknown level is `info`,
/// the logger is the upstream's name (`<name>/<logger>` when it named one).
fn entry(upstream: &str, params: &Value) -> LogEntry {
    let level = params
        .get("level")
        .cloned()
        .and_then(|level| serde_json::from_value::<LogLevel>(level).ok())
        .unwrap_or(LogLevel::Info);
    let logger: Arc<str> = match params.get("logger").and_then(Value::as_str) {
        Some(logger) if !logger.is_empty() => Arc::from(format!("{upstream}/{logger}")),
        _ => Arc::from(upstream),
    };
    let data = params.get("data").cloned().unwrap_or(Value::Null);
    LogEntry::new(level, Some(logger), data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_are_named_after_the_upstream_at_their_level() {
        let relay = UpstreamLog::default();
        // No registry follows it yet: only milpa's own log has it.
        relay.relay("fs", &json!({"level": "error", "data": "lost"}), None);
        let server = ServerLog::new();
        relay.serve_in(&server);
        let mut listener = server.listen();
        relay.relay(
            "fs",
            &json!({"level": "warning", "data": {"disk": "full"}}),
            None,
        );
        relay.relay(
            "fs",
            &json!({"level": "debug", "logger": "walk", "data": "x"}),
            None,
        );
        relay.relay("fs", &json!({"level": "loud", "data": "odd level"}), None);
        let got: Vec<LogEntry> = (0..3)
            .map(|_| (*listener.try_recv().unwrap()).clone())
            .collect();
        assert_eq!(
            got,
            [
                LogEntry::new(
                    LogLevel::Warning,
                    Some("fs".into()),
                    json!({"disk": "full"})
                ),
                LogEntry::new(LogLevel::Debug, Some("fs/walk".into()), json!("x")),
                LogEntry::new(LogLevel::Info, Some("fs".into()), json!("odd level")),
            ]
        );
        assert!(listener.try_recv().is_err());
    }
}
