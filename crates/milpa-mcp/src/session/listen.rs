//! `subscriptions/listen` (2026-07-28): a long-lived request through which the server sends
//! the notifications a client asked for. This server delivers the list changes
//! (`toolsListChanged`, `resourcesListChanged`, `promptsListChanged`) and the updates of
//! the resources named in `resourceSubscriptions` (those it serves; the others are left out
//! of the acknowledgement). It acknowledges only what it delivers, then tags each
//! notification with the subscription's id (the request's id) until the client ends it.
//! HTTP ends a subscription when the client closes its stream; stdio when the client
//! sends `notifications/cancelled` naming the request, or closes the connection.

use milpa::ToolRegistry;
use serde_json::{Map, Value, json};

use super::Out;
use super::list_watch::{ListChanges, Lists};
use crate::jsonrpc::{self, ErrorObject, INVALID_PARAMS, RequestId};
use crate::session::OutTx;

/// `_meta` key tagging a subscription's notifications with its id.
const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// The most resource URIs one subscription may name (a filter is read from a peer).
const MAX_RESOURCE_SUBSCRIPTIONS: usize = 1024;

/// An admitted subscription: what it asked for that this server delivers.
#[derive(Debug)]
pub(crate) struct Subscription {
    /// `{"io.modelcontextprotocol/subscriptionId": <request id>}`.
    tag: Value,
    /// The lists whose changes were asked for.
    lists: Lists,
    /// The resources whose updates were asked for (`resourceSubscriptions`).
    resources: Vec<String>,
}

impl Subscription {
    /// Admits the request's `_meta` (see `admit`; `version_header` is the HTTP version
    /// header, `None` elsewhere) and reads its filter (`params.notifications`, an object;
    /// `-32602` otherwise).
    #[cfg(test)]
    pub fn open(
        id: &RequestId,
        params: Option<&Value>,
        version_header: Option<Option<&str>>,
    ) -> Result<Subscription, ErrorObject> {
        super::modern::admit(params.and_then(|p| p.get("_meta")), version_header)?;
        Subscription::new(id, params)
    }

    /// Reads the filter of an admitted request (`params.notifications`, an object;
    /// `-32602` otherwise).
    pub fn new(id: &RequestId, params: Option<&Value>) -> Result<Subscription, ErrorObject> {
        let Some(Value::Object(filter)) = params.and_then(|p| p.get("notifications")) else {
            return Err(ErrorObject::new(
                INVALID_PARAMS,
                "Invalid params: notifications (a subscription filter object) is required",
            ));
        };
        let asked = |key: &str| filter.get(key) == Some(&Value::Bool(true));
        let resources = match filter.get("resourceSubscriptions") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(uris)) if uris.len() <= MAX_RESOURCE_SUBSCRIPTIONS => uris
                .iter()
                .map(|uri| uri.as_str().map(str::to_owned))
                .collect::<Option<Vec<String>>>()
                .ok_or_else(|| {
                    ErrorObject::new(
                        INVALID_PARAMS,
                        "Invalid params: resourceSubscriptions must be an array of URIs",
                    )
                })?,
            Some(_) => {
                return Err(ErrorObject::new(
                    INVALID_PARAMS,
                    format!(
                        "Invalid params: resourceSubscriptions must be an array of at most {MAX_RESOURCE_SUBSCRIPTIONS} URIs"
                    ),
                ));
            }
        };
        Ok(Subscription {
            tag: json!({ META_SUBSCRIPTION_ID: id }),
            lists: Lists {
                tools: asked("toolsListChanged"),
                resources: asked("resourcesListChanged"),
                prompts: asked("promptsListChanged"),
            },
            resources,
        })
    }

    /// Starts watching `registry`'s lists. Called before the acknowledgement is sent: a
    /// client may change a list as soon as it reads the acknowledgement, and a change made
    /// before the watch began would be missed (seen under load in the conformance suite's
    /// `server-stateless`, where the watch was taken in the spawned task).
    ///
    /// Each resource asked for that `registry` serves is subscribed (its provider told, as
    /// `resources/subscribe` does); the others are dropped, so the acknowledgement leaves
    /// them out.
    pub fn watch(mut self, registry: &ToolRegistry) -> Listening {
        let updates = registry.catalog_notifier().listen();
        self.resources
            .retain(|uri| registry.subscribe_resource(uri));
        self.resources.sort();
        self.resources.dedup();
        Listening {
            changes: ListChanges::new(registry),
            updates,
            subscription: self,
        }
    }
}

/// A subscription whose lists are being watched (see [`Subscription::watch`]).
pub(crate) struct Listening {
    subscription: Subscription,
    changes: ListChanges,
    /// The URIs of updated resources, as the registry announces them.
    updates: tokio::sync::broadcast::Receiver<std::sync::Arc<str>>,
}

impl Listening {
    /// `notifications/subscriptions/acknowledged`, naming what will be delivered.
    pub fn acknowledgement(&self) -> String {
        let subscription = &self.subscription;
        let mut accepted = Map::new();
        for (on, key) in [
            (subscription.lists.tools, "toolsListChanged"),
            (subscription.lists.resources, "resourcesListChanged"),
            (subscription.lists.prompts, "promptsListChanged"),
        ] {
            if on {
                accepted.insert(key.to_owned(), Value::Bool(true));
            }
        }
        if !subscription.resources.is_empty() {
            accepted.insert(
                "resourceSubscriptions".to_owned(),
                json!(subscription.resources),
            );
        }
        jsonrpc::notification(
            "notifications/subscriptions/acknowledged",
            &json!({"notifications": accepted, "_meta": subscription.tag}),
        )
    }

    /// Sends the `list_changed` notification of each asked-for list that changed since
    /// the watch began, and `notifications/resources/updated` for each update of a
    /// subscribed resource, into `tx`, until `tx`'s receiver is gone or `stop` resolves.
    pub async fn forward(mut self, tx: OutTx, stop: impl Future<Output = ()>) {
        use tokio::sync::broadcast::error::RecvError;
        let lists = self.subscription.lists;
        let tag = self.subscription.tag;
        let resources = self.subscription.resources;
        // With no resource asked for, updates are not even read.
        let mut updates = (!resources.is_empty()).then_some(self.updates);
        let mut stop = std::pin::pin!(stop);
        loop {
            let notes: Vec<String> = tokio::select! {
                // An ended subscription sends nothing more, even a change already waiting.
                biased;
                () = tx.closed() => return,
                () = &mut stop => return,
                changed = self.changes.next(lists) => match changed {
                    Some(changed) => changed
                        .methods()
                        .map(|method| jsonrpc::notification(method, &json!({"_meta": tag})))
                        .collect(),
                    None => return,
                },
                update = async {
                    match updates.as_mut() {
                        Some(updates) => updates.recv().await,
                        None => std::future::pending().await,
                    }
                }, if updates.is_some() => match update {
                    Ok(uri) if resources.binary_search_by(|r| (**r).cmp(&*uri)).is_ok() => {
                        vec![jsonrpc::notification(
                            "notifications/resources/updated",
                            &json!({"uri": &*uri, "_meta": tag}),
                        )]
                    }
                    // Another resource, or fell behind (the skipped updates are lost, later
                    // ones still come).
                    Ok(_) | Err(RecvError::Lagged(_)) => Vec::new(),
                    Err(RecvError::Closed) => {
                        updates = None;
                        Vec::new()
                    }
                },
            };
            for note in notes {
                if tx.send(Out::Msg(note)).is_err() {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, MODERN_VERSION};

    fn params(notifications: Value) -> Value {
        json!({"notifications": notifications, "_meta": {
            META_PROTOCOL_VERSION: MODERN_VERSION,
            META_CLIENT_CAPABILITIES: {},
        }})
    }

    #[tokio::test]
    async fn only_what_is_delivered_is_acknowledged() {
        let id = RequestId::Number(4);
        let asked = params(json!({
            "toolsListChanged": true,
            "promptsListChanged": true,
            "resourceSubscriptions": ["docs://a"],
        }));
        let registry = ToolRegistry::new();
        let sub = Subscription::open(&id, Some(&asked), None)
            .unwrap()
            .watch(&registry);
        let ack: Value = serde_json::from_str(&sub.acknowledgement()).unwrap();
        assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
        assert_eq!(
            ack["params"]["notifications"],
            json!({"toolsListChanged": true, "promptsListChanged": true})
        );
        assert_eq!(ack["params"]["_meta"][META_SUBSCRIPTION_ID], 4);

        let none = Subscription::open(&id, Some(&params(json!({}))), None)
            .unwrap()
            .watch(&registry);
        let ack: Value = serde_json::from_str(&none.acknowledgement()).unwrap();
        assert_eq!(ack["params"]["notifications"], json!({}));
    }

    #[test]
    fn a_missing_filter_or_meta_is_invalid_params() {
        let id = RequestId::Number(1);
        let no_filter = params(Value::Null);
        let error = Subscription::open(&id, Some(&no_filter), None).unwrap_err();
        assert_eq!(error.code, INVALID_PARAMS);
        let no_meta = json!({"notifications": {"toolsListChanged": true}});
        let error = Subscription::open(&id, Some(&no_meta), None).unwrap_err();
        assert_eq!(error.code, INVALID_PARAMS);
    }

    /// A change made after the watch began but before forwarding started (the client
    /// changed a list as soon as it read the acknowledgement) is still delivered.
    #[tokio::test]
    async fn a_change_right_after_the_acknowledgement_is_delivered() {
        use milpa::ToolDefinition;
        let registry = ToolRegistry::new();
        let id = RequestId::Number(7);
        let asked = params(json!({"toolsListChanged": true}));
        let listening = Subscription::open(&id, Some(&asked), None)
            .unwrap()
            .watch(&registry);
        registry
            .replace_tools(
                "g",
                vec![ToolDefinition::builder("late").sync(|_, _| Value::Null)],
            )
            .unwrap();
        let (tx, mut rx) = crate::client_link::out_channel();
        let forwarding = tokio::spawn(listening.forward(tx, std::future::pending()));
        let Some(Out::Msg(note)) = rx.recv().await else {
            panic!("no notification");
        };
        let note: Value = serde_json::from_str(&note).unwrap();
        assert_eq!(note["method"], "notifications/tools/list_changed");
        assert_eq!(note["params"]["_meta"][META_SUBSCRIPTION_ID], 7);
        forwarding.abort();
    }
}
