//! Telling a session's client when the registry's tool list changes
//! (`notifications/tools/list_changed`), from one task per session.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use milpa::ToolRegistry;
use serde_json::json;

use crate::client_link::{ClientLink, Route};
use crate::jsonrpc;

/// Whether a session's task forwarding tool list changes runs already.
#[derive(Debug, Default)]
pub(super) struct ToolListWatch {
    started: AtomicBool,
}

impl ToolListWatch {
    /// Sends `notifications/tools/list_changed` to `client` along `route` each time
    /// `registry`'s tool list changes (once the session is initialized), until the client
    /// is gone. Started once; later calls do nothing.
    pub fn start(&self, registry: &ToolRegistry, client: &Arc<ClientLink>, route: Route) {
        if self.started.swap(true, Ordering::AcqRel) {
            return;
        }
        let mut changes = registry.tool_list_changes();
        changes.borrow_and_update();
        let client = Arc::clone(client);
        let notification = jsonrpc::notification("notifications/tools/list_changed", &json!({}));
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = client.closing() => return,
                    changed = changes.changed() => {
                        if changed.is_err() {
                            return;
                        }
                    }
                }
                if client.is_initialized() && !client.is_closed() {
                    client.send(&route, notification.clone());
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second start (a second standalone stream) does not start a second task: the
    /// client hears of each change once.
    #[tokio::test]
    async fn a_change_is_told_once_however_often_the_watch_starts() {
        let registry = ToolRegistry::new();
        let client = Arc::new(ClientLink::new(None, None));
        assert!(client.declare(crate::client_link::ClientInfo {
            version: "2025-11-25",
            capabilities: json!({}),
        }));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let watch = ToolListWatch::default();
        watch.start(&registry, &client, Route::Channel(tx.clone()));
        watch.start(&registry, &client, Route::Channel(tx));
        tokio::task::yield_now().await;
        registry
            .replace_tools(
                "up",
                vec![milpa::ToolDefinition::builder("up__t").sync(|_, _| json!(null))],
            )
            .unwrap();
        let first = tokio::time::timeout(std::time::Duration::from_secs(5), rx.recv())
            .await
            .expect("a notification");
        assert!(
            matches!(first, Some(crate::client_link::Out::Msg(m)) if m.contains("list_changed"))
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(rx.try_recv().is_err());
        client.close();
    }
}
