//! Change notifications: one hub that every listener hears, and the modern era's
//! `subscriptions/listen` streams built on it.
//!
//! Lists change when a trigger tool runs; a resource changes when `test_trigger_resource_update`
//! runs. Legacy connections turn a change into a notification on their standalone channel (stdout,
//! the GET stream); a modern `subscriptions/listen` request turns it into a notification on its own
//! response stream, tagged with the subscription id, and only for the kinds its filter names.

use serde_json::{Map, Value, json};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use manifold_wire::Id;

use crate::outbox::Outbox;

/// How many changes a slow listener may fall behind before it misses some.
pub const HUB_CAPACITY: usize = 64;

/// `_meta` key tying a notification to the `subscriptions/listen` request that opened its stream.
pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// Something listeners may be told about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    ToolsListChanged,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated(String),
}

impl Change {
    /// The notification method announcing this change.
    pub fn method(&self) -> &'static str {
        match self {
            Change::ToolsListChanged => "notifications/tools/list_changed",
            Change::PromptsListChanged => "notifications/prompts/list_changed",
            Change::ResourcesListChanged => "notifications/resources/list_changed",
            Change::ResourceUpdated(_) => "notifications/resources/updated",
        }
    }

    /// The notification params (without `_meta`).
    pub fn params(&self) -> Map<String, Value> {
        let mut params = Map::new();
        if let Change::ResourceUpdated(uri) = self {
            params.insert("uri".to_owned(), Value::String(uri.clone()));
        }
        params
    }
}

/// Fans changes out to every listener.
#[derive(Debug)]
pub struct Hub {
    tx: broadcast::Sender<Change>,
}

impl Default for Hub {
    fn default() -> Self {
        Hub {
            tx: broadcast::channel(HUB_CAPACITY).0,
        }
    }
}

impl Hub {
    pub fn announce(&self, change: Change) {
        // No listener is not an error.
        let _ = self.tx.send(change);
    }

    pub fn listen(&self) -> broadcast::Receiver<Change> {
        self.tx.subscribe()
    }
}

/// The notification kinds one `subscriptions/listen` stream asked for (and is granted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    pub tools: bool,
    pub prompts: bool,
    pub resources: bool,
    pub resource_uris: Vec<String>,
}

impl Filter {
    /// Reads `params.notifications`; unknown members are not granted.
    pub fn from_params(params: &Value) -> Filter {
        let n = params.get("notifications");
        let flag = |key: &str| {
            n.and_then(|n| n.get(key))
                .and_then(Value::as_bool)
                .unwrap_or(false)
        };
        let resource_uris = n
            .and_then(|n| n.get("resourceSubscriptions"))
            .and_then(Value::as_array)
            .map(|uris| {
                uris.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        Filter {
            tools: flag("toolsListChanged"),
            prompts: flag("promptsListChanged"),
            resources: flag("resourcesListChanged"),
            resource_uris,
        }
    }

    pub fn admits(&self, change: &Change) -> bool {
        match change {
            Change::ToolsListChanged => self.tools,
            Change::PromptsListChanged => self.prompts,
            Change::ResourcesListChanged => self.resources,
            Change::ResourceUpdated(uri) => self.resource_uris.iter().any(|u| u == uri),
        }
    }

    /// The granted filter, as the acknowledgement reports it.
    pub fn to_value(&self) -> Value {
        let mut granted = Map::new();
        if self.tools {
            granted.insert("toolsListChanged".to_owned(), Value::Bool(true));
        }
        if self.prompts {
            granted.insert("promptsListChanged".to_owned(), Value::Bool(true));
        }
        if self.resources {
            granted.insert("resourcesListChanged".to_owned(), Value::Bool(true));
        }
        if !self.resource_uris.is_empty() {
            granted.insert(
                "resourceSubscriptions".to_owned(),
                json!(self.resource_uris),
            );
        }
        Value::Object(granted)
    }
}

/// Serves one `subscriptions/listen` request: acknowledges it, then forwards every admitted change
/// until the request is cancelled or its reader goes away. Returns the closing result's `_meta`
/// subscription id.
pub async fn listen(
    hub: &Hub,
    id: &Id,
    params: &Value,
    out: &Outbox,
    cancel: &CancellationToken,
) -> Value {
    let filter = Filter::from_params(params);
    let subscription = serde_json::from_str::<Value>(&id.to_json()).unwrap_or(Value::Null);
    // Subscribe before acknowledging, so that a change made right after the ack is not lost.
    let mut changes = hub.listen();
    let ack = json!({
        "notifications": filter.to_value(),
        "_meta": { SUBSCRIPTION_ID: subscription },
    });
    out.notify("notifications/subscriptions/acknowledged", &ack)
        .await;
    loop {
        let change = tokio::select! {
            change = changes.recv() => change,
            () = cancel.cancelled() => break,
            () = out.closed() => break,
        };
        let change = match change {
            Ok(change) => change,
            Err(broadcast::error::RecvError::Lagged(_)) => continue,
            Err(broadcast::error::RecvError::Closed) => break,
        };
        if !filter.admits(&change) {
            continue;
        }
        let mut params = change.params();
        params.insert("_meta".to_owned(), json!({ SUBSCRIPTION_ID: subscription }));
        out.notify(change.method(), &Value::Object(params)).await;
    }
    subscription
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;
    use crate::outbox::Outgoing;

    #[test]
    fn the_filter_grants_only_what_was_asked() {
        let f = Filter::from_params(
            &json!({"notifications": {"promptsListChanged": true, "bogus": true}}),
        );
        assert!(f.admits(&Change::PromptsListChanged));
        assert!(!f.admits(&Change::ToolsListChanged));
        assert_eq!(f.to_value(), json!({"promptsListChanged": true}));
    }

    #[tokio::test]
    async fn a_listen_stream_acks_first_and_tags_what_it_forwards() {
        let hub = std::sync::Arc::new(Hub::default());
        let (out, mut rx) = Outbox::channel();
        let cancel = CancellationToken::new();
        let task = {
            let (hub, cancel) = (hub.clone(), cancel.clone());
            tokio::spawn(async move {
                listen(
                    &hub,
                    &Id::from(7),
                    &json!({"notifications": {"toolsListChanged": true}}),
                    &out,
                    &cancel,
                )
                .await
            })
        };
        let Some(Outgoing::Message(ack)) = rx.recv().await else {
            panic!("no acknowledgement");
        };
        assert_eq!(
            serde_json::from_str::<Value>(ack.as_str()).unwrap(),
            json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                   "params": {"_meta": {SUBSCRIPTION_ID: 7}, "notifications": {"toolsListChanged": true}}})
        );
        hub.announce(Change::PromptsListChanged);
        hub.announce(Change::ToolsListChanged);
        let Some(Outgoing::Message(n)) = rx.recv().await else {
            panic!("no notification");
        };
        assert_eq!(
            serde_json::from_str::<Value>(n.as_str()).unwrap(),
            json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                   "params": {"_meta": {SUBSCRIPTION_ID: 7}}})
        );
        cancel.cancel();
        assert_eq!(task.await.unwrap(), json!(7));
    }
}
