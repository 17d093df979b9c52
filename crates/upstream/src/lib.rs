//! manifold-upstream: Manifold's client side.
//!
//! One [`Connection`] API over every transport (stdio children, Streamable HTTP, legacy HTTP+SSE)
//! and both protocol eras, so the gateway and the CLI never care how a server is reached.

pub mod auth;
pub mod connect;
pub mod connection;
pub mod error;
pub mod mrtr;
pub mod negotiate;
pub mod paginate;
pub mod transport;

pub use connect::{ConnectOptions, HttpSpec, HttpTransportChoice, Target, connect, connect_within};
pub use connection::{
    Call, CallEvent, CallOptions, Connection, RefuseServerRequests, ServerRequest,
    ServerRequestHandler,
};
pub use error::UpstreamError;
pub use negotiate::{ClientIdentity, EraChoice, PeerInfo};
