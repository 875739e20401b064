//! Telling a session's client when the registry's lists change: the tools
//! (`notifications/tools/list_changed`), the resources and templates
//! (`notifications/resources/list_changed`) and the prompts
//! (`notifications/prompts/list_changed`). Up to 2025-11-25 one task per session tells the
//! client of every change; on 2026-07-28 a `subscriptions/listen` request tells what its
//! filter asked for (see `listen`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use milpa::ToolRegistry;
use milpa::catalog::CatalogGenerations;
use serde_json::json;
use tokio::sync::watch;

use crate::client_link::{ClientLink, Route};
use crate::jsonrpc;

/// Which lists: the ones a client asked to hear of, or the ones that changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Lists {
    pub tools: bool,
    pub resources: bool,
    pub prompts: bool,
}

impl Lists {
    /// Every list.
    pub const ALL: Lists = Lists {
        tools: true,
        resources: true,
        prompts: true,
    };

    fn any(self) -> bool {
        self.tools || self.resources || self.prompts
    }

    fn and(self, other: Lists) -> Lists {
        Lists {
            tools: self.tools && other.tools,
            resources: self.resources && other.resources,
            prompts: self.prompts && other.prompts,
        }
    }

    /// The notification methods of these lists, tools first.
    pub fn methods(self) -> impl Iterator<Item = &'static str> {
        [
            (self.tools, "notifications/tools/list_changed"),
            (self.resources, "notifications/resources/list_changed"),
            (self.prompts, "notifications/prompts/list_changed"),
        ]
        .into_iter()
        .filter_map(|(on, method)| on.then_some(method))
    }
}

/// The registry's list changes from the moment it was made.
pub(crate) struct ListChanges {
    tools: watch::Receiver<u64>,
    catalog: watch::Receiver<CatalogGenerations>,
    seen: CatalogGenerations,
}

impl ListChanges {
    /// Changes of `registry`'s lists made from now on.
    pub fn new(registry: &ToolRegistry) -> ListChanges {
        let mut tools = registry.tool_list_changes();
        tools.mark_unchanged();
        let mut catalog = registry.catalog_changes();
        let seen = *catalog.borrow_and_update();
        ListChanges {
            tools,
            catalog,
            seen,
        }
    }

    /// Waits for a change to one of the `wanted` lists, and says which changed (several
    /// changes in a row may come as one). `None` once the registry is gone.
    pub async fn next(&mut self, wanted: Lists) -> Option<Lists> {
        loop {
            let changed = tokio::select! {
                changed = self.tools.changed(), if wanted.tools => {
                    changed.ok()?;
                    Lists { tools: true, ..Lists::default() }
                }
                changed = self.catalog.changed(), if wanted.resources || wanted.prompts => {
                    changed.ok()?;
                    let now = *self.catalog.borrow_and_update();
                    let changed = Lists {
                        tools: false,
                        resources: now.resources != self.seen.resources,
                        prompts: now.prompts != self.seen.prompts,
                    };
                    self.seen = now;
                    changed
                }
                else => return std::future::pending().await,
            };
            let changed = changed.and(wanted);
            if changed.any() {
                return Some(changed);
            }
        }
    }
}

/// Whether a session's task forwarding list changes runs already.
#[derive(Debug, Default)]
pub(super) struct ListWatch {
    started: AtomicBool,
}

impl ListWatch {
    /// Sends the `list_changed` notification of each list of `registry` that changes to
    /// `client` along `route` (once the session is initialized), until the client is
    /// gone. Started once; later calls do nothing.
    pub fn start(&self, registry: &ToolRegistry, client: &Arc<ClientLink>, route: Route) {
        if self.started.swap(true, Ordering::AcqRel) {
            return;
        }
        let mut changes = ListChanges::new(registry);
        let client = Arc::clone(client);
        tokio::spawn(async move {
            loop {
                let changed = tokio::select! {
                    () = client.closing() => return,
                    changed = changes.next(Lists::ALL) => match changed {
                        Some(changed) => changed,
                        None => return,
                    },
                };
                if client.is_initialized() && !client.is_closed() {
                    for method in changed.methods() {
                        client.notify(&route, jsonrpc::notification(method, &json!({})));
                    }
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
            name: None,
        }));
        let (tx, mut rx) = crate::client_link::out_channel();
        let watch = ListWatch::default();
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
