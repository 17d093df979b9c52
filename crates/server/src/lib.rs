//! manifold-server: what MCP clients talk to.
//!
//! The gateway core (manifold-gateway) knows nothing of transports; this crate puts it behind
//! every downstream transport a client may speak: Streamable HTTP at `/mcp` serving both protocol
//! eras per request, the deprecated HTTP+SSE transport (`/sse` + `/message`), and stdio. It owns
//! what is transport state: legacy sessions (sealed into their ids so another replica can resume
//! them), SSE streams and their resumption buffers, server-to-client requests, cancellation, and
//! the Origin/Host checks that keep a local gateway out of reach of web pages.

pub mod accept;
pub mod allowlist;
pub mod error;
pub mod events;
pub mod first_start;
pub mod http;
pub mod in_process;
pub mod limits;
pub mod log_filter;
pub mod modern_meta;
pub mod observed_call;
pub mod relay;
pub mod sealed;
pub mod session;
pub mod session_key;
pub mod settings;
pub mod shared_sessions;
pub mod stdio;
pub mod stream_log;

pub use allowlist::{HostAllowlist, HostPattern, OriginPattern, PatternError};
pub use error::ServerError;
pub use first_start::FirstStart;
pub use http::{BoundServer, OperatorServer, Server};
pub use limits::Limits;
pub use session_key::SessionKey;
pub use settings::{OperatorUi, ServerSettings};
pub use stdio::{serve_stdio, serve_stdio_in};
