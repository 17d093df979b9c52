//! manifold-upstream: Manifold's client side.
//!
//! One [`Connection`] API over every transport (stdio children, Streamable HTTP, legacy HTTP+SSE)
//! and both protocol eras, so the gateway and the CLI never care how a server is reached.

pub mod auth;
pub mod connect;
pub mod connect_options;
pub mod connection;
pub mod error;
pub mod http_client;
pub mod http_spec;
pub mod mrtr;
pub mod negotiate;
pub mod paginate;
pub mod target;
pub mod transport;

pub use connect::{connect, connect_within};
pub use connect_options::ConnectOptions;
pub use connection::{
    Call, CallEvent, CallOptions, Connection, RefuseServerRequests, ServerRequest,
    ServerRequestHandler,
};
pub use error::UpstreamError;
pub use http_spec::{HttpSpec, HttpTransportChoice};
pub use negotiate::{ClientIdentity, EraChoice, PeerInfo};
pub use target::Target;
