//! Which gateway events each client hears, and in what form.
//!
//! The gateway broadcasts every change to everyone; clients asked for less. A legacy session hears
//! list changes, `resources/updated` only for URIs it subscribed to, and log lines at or above its
//! level. A modern `subscriptions/listen` stream hears exactly the kinds its filter opted in to,
//! each notification tagged with the subscription id, and never log lines.

use std::collections::HashSet;

use manifold_gateway::audience::Audience;
use manifold_gateway::{GatewayEvent, event_notification};
use manifold_wire::id::json_string;
use manifold_wire::{Id, Message};

use manifold_wire::log_level::LogLevel;

/// `_meta` key tagging every notification of a `subscriptions/listen` stream.
pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
/// First message of a listen stream.
pub const ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";
/// Resource URIs one listen stream may subscribe to.
pub const MAX_LISTEN_URIS: usize = 1024;

/// The notification a legacy session gets for an event, if any.
pub fn for_session(
    event: &GatewayEvent,
    subscribed: &HashSet<String>,
    level: Option<LogLevel>,
) -> Option<Message> {
    match event {
        GatewayEvent::ResourceUpdated { uri } if !subscribed.contains(uri) => None,
        GatewayEvent::Log { params, .. } if !crate::log_filter::admits(level, Some(params)) => None,
        other => Some(event_notification(other)),
    }
}

/// What a `subscriptions/listen` request opted in to (and Manifold honours in full: it offers
/// every kind).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListenFilter {
    pub tools: bool,
    pub prompts: bool,
    pub resources: bool,
    pub uris: Vec<String>,
}

impl ListenFilter {
    /// Reads `params.notifications`; the error says what is wrong with it.
    pub fn parse(params: Option<&str>) -> Result<ListenFilter, String> {
        let value: serde_json::Value = params
            .and_then(|p| serde_json::from_str(p).ok())
            .unwrap_or(serde_json::Value::Null);
        let Some(filter) = value.get("notifications").and_then(|n| n.as_object()) else {
            return Err(
                "subscriptions/listen needs params.notifications, an object such as {\"toolsListChanged\":true}"
                    .to_owned(),
            );
        };
        let flag = |k: &str| filter.get(k).and_then(serde_json::Value::as_bool) == Some(true);
        let uris: Vec<String> = match filter.get("resourceSubscriptions") {
            None | Some(serde_json::Value::Null) => Vec::new(),
            Some(serde_json::Value::Array(items)) => {
                let mut uris = Vec::new();
                for item in items {
                    let Some(uri) = item.as_str() else {
                        return Err(
                            "notifications.resourceSubscriptions must hold URI strings".to_owned()
                        );
                    };
                    if !uris.iter().any(|u| u == uri) {
                        uris.push(uri.to_owned());
                    }
                }
                uris
            }
            Some(_) => {
                return Err(
                    "notifications.resourceSubscriptions must be an array of URIs".to_owned(),
                );
            }
        };
        if uris.len() > MAX_LISTEN_URIS {
            return Err(format!(
                "one listen stream may subscribe to at most {MAX_LISTEN_URIS} resources; open another stream for the rest"
            ));
        }
        Ok(ListenFilter {
            tools: flag("toolsListChanged"),
            prompts: flag("promptsListChanged"),
            resources: flag("resourcesListChanged"),
            uris,
        })
    }

    /// The honoured filter as JSON (only what is on; an empty URI list is left out).
    pub fn to_json(&self) -> String {
        let mut members = Vec::new();
        if self.tools {
            members.push("\"toolsListChanged\":true".to_owned());
        }
        if self.prompts {
            members.push("\"promptsListChanged\":true".to_owned());
        }
        if self.resources {
            members.push("\"resourcesListChanged\":true".to_owned());
        }
        if !self.uris.is_empty() {
            let uris: Vec<String> = self.uris.iter().map(|u| json_string(u)).collect();
            members.push(format!("\"resourceSubscriptions\":[{}]", uris.join(",")));
        }
        format!("{{{}}}", members.join(","))
    }

    fn meta(id: &Id) -> String {
        format!("\"_meta\":{{\"{SUBSCRIPTION_ID}\":{}}}", id.to_json())
    }

    /// `notifications/subscriptions/acknowledged`, the stream's first message.
    pub fn acknowledgement(&self, id: &Id) -> Message {
        Message::notification(
            ACKNOWLEDGED,
            Some(&format!(
                "{{\"notifications\":{},{}}}",
                self.to_json(),
                Self::meta(id)
            )),
        )
    }

    /// The notification this stream gets for an event, if it opted in to its kind.
    pub fn notification(&self, event: &GatewayEvent, id: &Id) -> Option<Message> {
        let meta = Self::meta(id);
        let (method, params) = match event {
            GatewayEvent::ToolsChanged if self.tools => {
                ("notifications/tools/list_changed", format!("{{{meta}}}"))
            }
            GatewayEvent::PromptsChanged if self.prompts => {
                ("notifications/prompts/list_changed", format!("{{{meta}}}"))
            }
            GatewayEvent::ResourcesChanged if self.resources => (
                "notifications/resources/list_changed",
                format!("{{{meta}}}"),
            ),
            GatewayEvent::ResourceUpdated { uri } if self.uris.contains(uri) => (
                "notifications/resources/updated",
                format!("{{\"uri\":{},{meta}}}", json_string(uri)),
            ),
            _ => return None,
        };
        Some(Message::notification(method, Some(&params)))
    }

    /// As [`ListenFilter::notification`], and only if the listening caller's rules let it hear
    /// the event (see `manifold_gateway::audience`).
    pub fn heard(&self, event: &GatewayEvent, id: &Id, audience: &Audience) -> Option<Message> {
        self.notification(event, id)
            .filter(|_| audience.admits(event))
    }

    /// As [`ListenFilter::after_lag`], less what the listening caller's rules keep from it.
    pub fn heard_after_lag(&self, id: &Id, audience: &Audience) -> Vec<Message> {
        self.missed_events()
            .iter()
            .filter_map(|e| self.heard(e, id, audience))
            .collect()
    }

    fn missed_events(&self) -> Vec<GatewayEvent> {
        let mut kinds = vec![
            GatewayEvent::ToolsChanged,
            GatewayEvent::PromptsChanged,
            GatewayEvent::ResourcesChanged,
        ];
        kinds.extend(
            self.uris
                .iter()
                .map(|u| GatewayEvent::ResourceUpdated { uri: u.clone() }),
        );
        kinds
    }

    /// The notifications to send after events were missed (the stream lagged): every kind the
    /// stream opted in to, since each is a "refetch" trigger.
    pub fn after_lag(&self, id: &Id) -> Vec<Message> {
        self.missed_events()
            .iter()
            .filter_map(|k| self.notification(k, id))
            .collect()
    }

    /// The result that ends a listen stream gracefully (server shutdown).
    pub fn closing_result(id: &Id) -> Message {
        Message::result(
            id,
            &format!("{{\"resultType\":\"complete\",{}}}", Self::meta(id)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_hear_subscribed_updates_and_logs_at_their_level() {
        let mut subscribed = HashSet::new();
        subscribed.insert("a+test://static".to_owned());
        let updated = |uri: &str| GatewayEvent::ResourceUpdated {
            uri: uri.to_owned(),
        };
        assert!(for_session(&updated("a+test://static"), &subscribed, None).is_some());
        assert!(for_session(&updated("a+test://other"), &subscribed, None).is_none());
        assert_eq!(
            for_session(&GatewayEvent::ToolsChanged, &subscribed, None)
                .unwrap()
                .method(),
            Some("notifications/tools/list_changed")
        );
        let log = GatewayEvent::Log {
            server: "a".to_owned(),
            params: r#"{"level":"info","data":"x"}"#.to_owned(),
        };
        assert!(for_session(&log, &subscribed, Some(LogLevel::Error)).is_none());
        assert!(for_session(&log, &subscribed, Some(LogLevel::Debug)).is_some());
    }

    #[test]
    fn listen_streams_hear_only_what_they_opted_in_to_tagged_with_their_id() {
        let f = ListenFilter::parse(Some(
            r#"{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["a+test://static"]}}"#,
        ))
        .unwrap();
        let id = Id::from("listen-1");
        assert_eq!(
            f.acknowledgement(&id).as_str(),
            r#"{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["a+test://static"]},"_meta":{"io.modelcontextprotocol/subscriptionId":"listen-1"}}}"#
        );
        assert_eq!(
            f.notification(&GatewayEvent::ToolsChanged, &id)
                .unwrap()
                .as_str(),
            r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"listen-1"}}}"#
        );
        assert!(f.notification(&GatewayEvent::PromptsChanged, &id).is_none());
        let log = GatewayEvent::Log {
            server: "a".to_owned(),
            params: "{}".to_owned(),
        };
        assert!(f.notification(&log, &id).is_none());
        let updated = GatewayEvent::ResourceUpdated {
            uri: "a+test://static".to_owned(),
        };
        assert_eq!(
            f.notification(&updated, &id).unwrap().params(),
            Some(
                r#"{"uri":"a+test://static","_meta":{"io.modelcontextprotocol/subscriptionId":"listen-1"}}"#
            )
        );
        assert_eq!(f.after_lag(&id).len(), 2);
    }

    #[test]
    fn a_listen_request_without_a_filter_is_refused() {
        assert!(ListenFilter::parse(Some("{}")).is_err());
        assert!(
            ListenFilter::parse(Some(r#"{"notifications":{"resourceSubscriptions":[1]}}"#))
                .is_err()
        );
        assert_eq!(
            ListenFilter::parse(Some(r#"{"notifications":{}}"#))
                .unwrap()
                .to_json(),
            "{}"
        );
    }
}
