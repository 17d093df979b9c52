//! The ways a client reaches the fixture: stdio (what Manifold launches) and Streamable HTTP
//! (what the conformance suite speaks). Both hand decoded requests to the same engine.

pub mod http;
mod http_session;
pub mod stdio;
