//! manifold-gateway: the core of the gateway, with no knowledge of HTTP or stdio framing.
//!
//! Downstream transports (manifold-server) hand it decoded requests with their context; it merges
//! the catalogs of every upstream under stable names, routes each call to its upstream through
//! manifold-upstream, and answers with patched raw messages.

pub mod approval;
pub mod audience;
pub mod audit;
pub mod builtin;
pub mod call_record;
pub mod catalog;
pub mod context;
pub mod drain;
pub mod events;
pub mod gateway;
pub mod gateway_settings;
pub mod hosted;
mod hosted_calls;
pub mod mrtr;
pub mod patterns;
pub mod pins;
mod pipeline;
pub mod policy;
pub mod rate_limit;
pub mod reconfigure;
mod request_notes;
pub mod result_cache;
mod result_links;
pub mod router;
pub mod server_requests;
pub mod sessions;
pub mod shared_limits;
mod state;
pub mod supervisor;
pub mod tasks;
pub mod tool_filter;
pub mod truncate;
pub mod upstream;

pub use context::{
    BearerToken, Caller, ClientInfo, ClientView, DownstreamPeer, RequestContext, RequestNotes,
    SessionId, SilentPeer, TraceHeaders,
};
pub use events::{GatewayEvent, event_notification};
pub use gateway::Gateway;
pub use gateway_settings::{Discovery, GatewaySettings};
pub use patterns::{BadPattern, NamePatterns};
pub use state::Upstreams;
pub use tool_filter::ToolFilter;
pub use upstream::{RestartPolicy, Sandbox, Scope, Status, UpstreamDefinition};
