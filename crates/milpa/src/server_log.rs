//! Log messages for every client of a server, outside any call: what a gateway's upstream
//! servers log (`notifications/message` arriving from them), relayed to the clients.
//!
//! A tool logs to its own caller through its [`CallHandle`](crate::CallHandle). Some
//! messages belong to no call: an upstream server behind a gateway logs whenever it likes,
//! and over stdio the protocol does not say which call (if any) a message is about. Those
//! go through the registry's [`ServerLog`], which every MCP session of the server listens
//! to; each session sends a message on only when it is at or above the level its client
//! set with `logging/setLevel`.
//!
//! The other way, the levels clients ask for are gathered here too
//! ([`ServerLog::asked_level`]), so a gateway can ask its upstreams for what its clients
//! want (`logging/setLevel` forwarded) rather than for everything.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::{broadcast, watch};

use crate::call_handle::LogLevel;

/// One log message for the clients.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct LogEntry {
    /// Its severity.
    pub level: LogLevel,
    /// Who logged it (for a gateway's upstream: the upstream's name).
    pub logger: Option<Arc<str>>,
    /// What was logged: any JSON value, as MCP's `notifications/message` carries it.
    pub data: Value,
}

impl LogEntry {
    /// A message at `level` from `logger`.
    pub fn new(level: LogLevel, logger: Option<Arc<str>>, data: Value) -> Self {
        LogEntry {
            level,
            logger,
            data,
        }
    }
}

/// The server-wide log: messages for every client, and the levels the clients asked for.
///
/// Cheap to clone (handles on shared channels). Messages are broadcast with a bounded
/// backlog: a session that falls more than [`BACKLOG`](Self::BACKLOG) messages behind
/// skips the oldest (and says so in milpa's own log) rather than holding memory for a
/// client that does not read.
///
/// ```
/// use milpa::LogLevel;
/// use milpa::server_log::{LogEntry, ServerLog};
/// use serde_json::json;
///
/// let log = ServerLog::new();
/// let mut listener = log.listen();
/// log.send(LogEntry::new(LogLevel::Warning, Some("fs".into()), json!("disk almost full")));
/// let entry = listener.try_recv().unwrap();
/// assert_eq!(entry.logger.as_deref(), Some("fs"));
///
/// assert_eq!(log.asked_level(), None);
/// log.ask_level(LogLevel::Info);
/// log.ask_level(LogLevel::Error); // another client: the most verbose ask stands
/// assert_eq!(log.asked_level(), Some(LogLevel::Info));
/// ```
#[derive(Debug, Clone)]
pub struct ServerLog {
    entries: broadcast::Sender<Arc<LogEntry>>,
    asked: Arc<watch::Sender<Option<LogLevel>>>,
}

impl Default for ServerLog {
    fn default() -> Self {
        ServerLog::new()
    }
}

impl ServerLog {
    /// How many messages a slow listener may fall behind before it skips the oldest.
    pub const BACKLOG: usize = 1024;

    /// A log with no listener yet and no level asked for.
    pub fn new() -> Self {
        ServerLog {
            entries: broadcast::Sender::new(Self::BACKLOG),
            asked: Arc::new(watch::Sender::new(None)),
        }
    }

    /// Sends `entry` to every listener (none listening is no error: no client is
    /// connected).
    pub fn send(&self, entry: LogEntry) {
        let _ = self.entries.send(Arc::new(entry));
    }

    /// The messages sent from now on.
    pub fn listen(&self) -> broadcast::Receiver<Arc<LogEntry>> {
        self.entries.subscribe()
    }

    /// A client asked for messages at `level` and above (`logging/setLevel`).
    ///
    /// The level kept is the most verbose any client has asked for while the server runs:
    /// an upstream asked for less would starve the client that asked for more, and each
    /// session still sends its client only what the client's own level lets through.
    pub fn ask_level(&self, level: LogLevel) {
        self.asked.send_if_modified(|asked| match *asked {
            Some(current) if current <= level => false,
            _ => {
                *asked = Some(level);
                true
            }
        });
    }

    /// The most verbose level a client has asked for, if any has.
    pub fn asked_level(&self) -> Option<LogLevel> {
        *self.asked.borrow()
    }

    /// Changes of [`asked_level`](Self::asked_level) from now on.
    pub fn asked_levels(&self) -> watch::Receiver<Option<LogLevel>> {
        self.asked.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_listener_gets_each_message_in_order() {
        let log = ServerLog::new();
        let mut first = log.listen();
        let mut second = log.listen();
        for n in 0..3 {
            log.send(LogEntry::new(LogLevel::Info, None, json!(n)));
        }
        for listener in [&mut first, &mut second] {
            let got: Vec<Value> = (0..3)
                .map(|_| listener.try_recv().unwrap().data.clone())
                .collect();
            assert_eq!(got, [json!(0), json!(1), json!(2)]);
        }
    }

    #[test]
    fn a_listener_that_falls_behind_skips_the_oldest() {
        let log = ServerLog::new();
        let mut slow = log.listen();
        for n in 0..ServerLog::BACKLOG + 5 {
            log.send(LogEntry::new(LogLevel::Debug, None, json!(n)));
        }
        assert!(matches!(
            slow.try_recv(),
            Err(broadcast::error::TryRecvError::Lagged(5))
        ));
        assert_eq!(slow.try_recv().unwrap().data, json!(5));
    }

    #[test]
    fn the_most_verbose_level_asked_for_stands_and_is_told_once() {
        let log = ServerLog::new();
        let mut levels = log.asked_levels();
        log.ask_level(LogLevel::Warning);
        assert!(levels.has_changed().unwrap());
        assert_eq!(*levels.borrow_and_update(), Some(LogLevel::Warning));
        log.ask_level(LogLevel::Error);
        assert!(!levels.has_changed().unwrap(), "less verbose: no change");
        log.ask_level(LogLevel::Debug);
        assert_eq!(*levels.borrow_and_update(), Some(LogLevel::Debug));
        assert_eq!(log.asked_level(), Some(LogLevel::Debug));
    }
}
