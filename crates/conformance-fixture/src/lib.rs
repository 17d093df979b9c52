//! manifold-conformance-fixture: the MCP server the official conformance suite's server scenarios
//! expect, in both protocol eras, so Manifold can be measured by that suite while fronting it.
//!
//! Layout by concern: `catalog` (what the primitives are and do), `engine` (dispatch per era),
//! `interaction` + `mrtr` + `tasks` (how a primitive gets client input in each setting),
//! `sealing` (integrity of MRTR request state), `modern_validation` (admitting modern requests),
//! `session` and `subscriptions` (what outlives one request), `transport` (stdio, HTTP).

pub mod catalog;
pub mod client_requests;
pub mod engine;
pub mod error;
pub mod interaction;
pub mod log_level;
pub mod modern_validation;
pub mod mrtr;
pub mod outbox;
pub mod sealing;
pub mod session;
pub mod subscriptions;
pub mod tasks;
pub mod transport;

pub use engine::Fixture;
pub use error::{FixtureError, RpcError};
