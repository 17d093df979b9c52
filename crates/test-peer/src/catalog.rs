//! The peer's tools, resources and prompts, and the protocol revisions it knows.
//!
//! Kept apart from the request handling so a test author can read, in one place, exactly what the
//! peer advertises.

use serde_json::{Value, json};

pub const SERVER_NAME: &str = "manifold-test-peer";
pub const SERVER_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The stateless revision (`server/discover`, per-request `_meta`).
pub const MODERN_REVISION: &str = "2026-07-28";
/// `initialize`-based revisions the peer negotiates, oldest first.
pub const LEGACY_REVISIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// Answered when the client asks for a legacy revision the peer does not know.
pub const LATEST_LEGACY_REVISION: &str = "2025-11-25";
/// The revision the `wrong-revision` behaviour claims.
pub const WRONG_REVISION: &str = "1999-01-01";

pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// Freshness hint on modern cacheable results.
pub const TTL_MS: u64 = 60_000;

/// `{"name":"manifold-test-peer","version":...}`.
pub fn server_info() -> Value {
    json!({"name": SERVER_NAME, "version": SERVER_VERSION})
}

/// The `instructions` string; it names the behaviour so a test can tell which peer it reached.
pub fn instructions(behaviour_name: &str) -> String {
    format!("manifold-test-peer, a server for Manifold's tests; behaviour: {behaviour_name}")
}

/// The well-behaved tool list, in the order `tools/list` serves it.
pub fn tools() -> Vec<Value> {
    let no_arguments = json!({"type": "object", "properties": {}});
    vec![
        json!({
            "name": "echo",
            "description": "Returns its message as text. The message \"log\" also emits a notifications/message.",
            "inputSchema": {
                "type": "object",
                "properties": {"message": {"type": "string"}},
                "required": ["message"]
            }
        }),
        json!({
            "name": "add",
            "description": "Adds two numbers; the sum comes back as text and as structuredContent.",
            "inputSchema": {
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"]
            },
            "outputSchema": {
                "type": "object",
                "properties": {"sum": {"type": "number"}},
                "required": ["sum"]
            }
        }),
        json!({
            "name": "fail",
            "description": "Always returns a tool error (isError true).",
            "inputSchema": no_arguments
        }),
        json!({
            "name": "slow",
            "description": "Takes `seconds` (default 1) in `steps` (default 5) steps, reporting progress; stops when cancelled.",
            "inputSchema": {
                "type": "object",
                "properties": {"seconds": {"type": "number"}, "steps": {"type": "integer"}}
            }
        }),
        json!({
            "name": "ask",
            "description": "Asks the user a question through elicitation and returns the answer.",
            "inputSchema": {
                "type": "object",
                "properties": {"question": {"type": "string"}}
            }
        }),
        json!({
            "name": "sample",
            "description": "Asks the client's model through sampling and returns its text.",
            "inputSchema": {
                "type": "object",
                "properties": {"prompt": {"type": "string"}}
            }
        }),
        json!({
            "name": "roots",
            "description": "Asks the client for its roots and returns their URIs, one per line.",
            "inputSchema": no_arguments
        }),
        json!({
            "name": "echo_raw",
            "description": "Returns a fixed result with unknown fields, odd number forms, key order and escapes.",
            "inputSchema": no_arguments
        }),
        json!({
            "name": "seen_headers",
            "description": "Returns the HTTP request headers the peer saw (HTTP transports only).",
            "inputSchema": no_arguments
        }),
    ]
}

/// Names of the many-tools behaviour's generated tools: `tool_00000`, `tool_00001`, ...
pub fn generated_tool_name(index: u64) -> String {
    format!("tool_{index:05}")
}

/// The index of a generated tool, if `name` is one and is below `total`.
pub fn generated_tool_index(name: &str, total: u64) -> Option<u64> {
    let digits = name.strip_prefix("tool_")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let index: u64 = digits.parse().ok()?;
    (index < total && generated_tool_name(index) == name).then_some(index)
}

/// One generated tool definition.
pub fn generated_tool(index: u64) -> Value {
    json!({
        "name": generated_tool_name(index),
        "description": format!("Generated tool number {index}; returns its own name."),
        "inputSchema": {"type": "object", "properties": {}}
    })
}

pub fn resources() -> Vec<Value> {
    vec![json!({
        "uri": "test://static",
        "name": "static",
        "description": "A fixed text resource.",
        "mimeType": "text/plain"
    })]
}

pub fn resource_templates() -> Vec<Value> {
    vec![json!({
        "uriTemplate": "test://item/{id}",
        "name": "item",
        "description": "Any item; its text names the id.",
        "mimeType": "text/plain"
    })]
}

/// The text of a resource, or `None` when the URI names nothing.
pub fn read_resource(uri: &str) -> Option<String> {
    if uri == "test://static" {
        return Some("static resource".to_owned());
    }
    let id = uri.strip_prefix("test://item/")?;
    (!id.is_empty() && !id.contains('/')).then(|| format!("item {id}"))
}

pub fn prompts() -> Vec<Value> {
    vec![json!({
        "name": "greet",
        "description": "Greets someone by name.",
        "arguments": [{"name": "name", "description": "Who to greet", "required": true}]
    })]
}

/// The syslog levels of MCP logging, least severe first.
pub const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// Position of a level in [`LOG_LEVELS`], `None` when it is not one.
pub fn log_level_rank(level: &str) -> Option<usize> {
    LOG_LEVELS.iter().position(|known| *known == level)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn generated_names_round_trip_and_reject_lookalikes() {
        assert_eq!(generated_tool_index("tool_00042", 100), Some(42));
        assert_eq!(generated_tool_index("tool_42", 100), None);
        assert_eq!(generated_tool_index("tool_00100", 100), None);
        assert_eq!(generated_tool_index("tool_+0042", 100), None);
    }

    #[test]
    fn item_template_resolves_single_segment_ids_only() {
        assert_eq!(read_resource("test://item/7").as_deref(), Some("item 7"));
        assert_eq!(read_resource("test://item/"), None);
        assert_eq!(read_resource("test://item/a/b"), None);
        assert_eq!(read_resource("test://nothing"), None);
    }
}
