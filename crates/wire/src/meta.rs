//! Names the protocol reserves: `_meta` keys, HTTP header names and well-known methods.
//!
//! Spelling each one once keeps the client and server sides from drifting apart.

/// `_meta` key carrying the modern-era protocol revision (required on every request).
pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key carrying the modern-era client capabilities (required on every request).
pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key carrying the client's name and version.
pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key carrying the log level a modern client wants.
pub const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// `_meta` key on results naming the server.
pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// `_meta` key of a request's progress token.
pub const PROGRESS_TOKEN: &str = "progressToken";

/// HTTP headers of Streamable HTTP.
pub mod header {
    pub const PROTOCOL_VERSION: &str = "mcp-protocol-version";
    pub const SESSION_ID: &str = "mcp-session-id";
    pub const METHOD: &str = "mcp-method";
    pub const NAME: &str = "mcp-name";
    /// Prefix of headers mirrored from tool arguments marked `x-mcp-header`.
    pub const PARAM_PREFIX: &str = "mcp-param-";
    pub const LAST_EVENT_ID: &str = "last-event-id";
}

/// Methods whose handling differs by era or that the transports must recognise.
pub mod method {
    pub const INITIALIZE: &str = "initialize";
    pub const INITIALIZED: &str = "notifications/initialized";
    pub const DISCOVER: &str = "server/discover";
    pub const PING: &str = "ping";
    pub const CANCELLED: &str = "notifications/cancelled";
    pub const PROGRESS: &str = "notifications/progress";
    pub const MESSAGE: &str = "notifications/message";
    pub const TOOLS_LIST: &str = "tools/list";
    pub const TOOLS_CALL: &str = "tools/call";
    pub const RESOURCES_LIST: &str = "resources/list";
    pub const RESOURCES_READ: &str = "resources/read";
    pub const TEMPLATES_LIST: &str = "resources/templates/list";
    pub const PROMPTS_LIST: &str = "prompts/list";
    pub const PROMPTS_GET: &str = "prompts/get";
    pub const ROOTS_LIST: &str = "roots/list";
    pub const SAMPLING_CREATE: &str = "sampling/createMessage";
    pub const ELICITATION_CREATE: &str = "elicitation/create";
    pub const SUBSCRIPTIONS_LISTEN: &str = "subscriptions/listen";
}

/// The requests Manifold serves to 2026-07-28 clients besides `server/discover` and
/// `subscriptions/listen`: one list for every transport that speaks that era.
pub const MODERN_METHODS: [&str; 11] = [
    method::TOOLS_LIST,
    method::TOOLS_CALL,
    method::PROMPTS_LIST,
    method::PROMPTS_GET,
    method::RESOURCES_LIST,
    method::RESOURCES_READ,
    method::TEMPLATES_LIST,
    "completion/complete",
    // The tasks extension; the gateway answers -32021 to clients that did not declare it.
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
];

/// The methods whose `Mcp-Name` header is required in the modern era, and the params key it mirrors
/// (the tasks extension's follow-up methods mirror the task id).
pub fn name_param_of(method: &str) -> Option<&'static str> {
    match method {
        method::TOOLS_CALL | method::PROMPTS_GET => Some("name"),
        method::RESOURCES_READ => Some("uri"),
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        _ => None,
    }
}
