//! What changed, for sessions to tell their clients: list changes, resource updates and
//! upstream log lines, and the notification each becomes.

use manifold_wire::Message;

/// Events downstream sessions may need to pass on.
pub const EVENT_QUEUE: usize = 1024;

/// What changed, for sessions to tell their clients.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GatewayEvent {
    ToolsChanged,
    PromptsChanged,
    ResourcesChanged,
    /// An upstream resource changed; `uri` is the exposed URI.
    ResourceUpdated {
        uri: String,
    },
    /// A log line from an upstream not tied to any call (raw params of `notifications/message`).
    Log {
        server: String,
        params: String,
    },
}

/// A notification message for a gateway event, as a client receives it.
pub fn event_notification(event: &GatewayEvent) -> Message {
    match event {
        GatewayEvent::ToolsChanged => {
            Message::notification("notifications/tools/list_changed", None)
        }
        GatewayEvent::PromptsChanged => {
            Message::notification("notifications/prompts/list_changed", None)
        }
        GatewayEvent::ResourcesChanged => {
            Message::notification("notifications/resources/list_changed", None)
        }
        GatewayEvent::ResourceUpdated { uri } => Message::notification(
            "notifications/resources/updated",
            Some(&format!(
                "{{\"uri\":{}}}",
                manifold_wire::id::json_string(uri)
            )),
        ),
        GatewayEvent::Log { params, .. } => {
            Message::notification("notifications/message", Some(params))
        }
    }
}
