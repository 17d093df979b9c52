//! Why a call to an upstream server did not produce a response.
//!
//! Every variant names the server, because a gateway in front of dozens of servers is useless if
//! an error does not say which one failed and why.

use std::time::Duration;

use manifold_wire::{ErrorCode, ErrorObject};

/// A failure talking to an upstream server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpstreamError {
    #[error("could not start server {server:?}: {reason}; check the command and its arguments")]
    Spawn { server: String, reason: String },
    #[error("the connection to server {server:?} is closed: {cause}")]
    Closed { server: String, cause: String },
    #[error(
        "server {server:?} did not answer {method} within {after:?}; it may be overloaded or stuck"
    )]
    Timeout {
        server: String,
        method: String,
        after: Duration,
    },
    #[error("the {method} request to server {server:?} was cancelled: {reason}")]
    Cancelled {
        server: String,
        method: String,
        reason: String,
    },
    #[error("server {server:?} broke the MCP protocol: {detail}")]
    Protocol { server: String, detail: String },
    #[error("server {server:?} answered {method} with an error: {error}")]
    Rpc {
        server: String,
        method: String,
        error: ErrorObject,
    },
    #[error("server {server:?} answered HTTP {status} to {method}: {body}")]
    Http {
        server: String,
        method: String,
        status: u16,
        body: String,
    },
    #[error("could not reach server {server:?}: {reason}")]
    Connect { server: String, reason: String },
    #[error("could not get authorization for server {server:?}: {detail}")]
    Auth { server: String, detail: String },
    #[error("the URL {url:?} is refused: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("could not agree on a protocol revision with server {server:?}: {detail}")]
    Negotiation { server: String, detail: String },
    #[error("server {server:?} has too many requests in flight (limit {limit}); retry later")]
    Overloaded { server: String, limit: usize },
    #[error("listing {method} from server {server:?} failed: {detail}")]
    Pagination {
        server: String,
        method: String,
        detail: String,
    },
}

impl UpstreamError {
    /// The JSON-RPC code a downstream reply carries for this failure.
    pub fn code(&self) -> ErrorCode {
        match self {
            UpstreamError::Timeout { .. } => ErrorCode::RequestTimeout,
            UpstreamError::Cancelled { .. } => ErrorCode::RequestCancelled,
            UpstreamError::Protocol { .. }
            | UpstreamError::Negotiation { .. }
            | UpstreamError::Pagination { .. } => ErrorCode::UpstreamProtocolViolation,
            UpstreamError::Overloaded { .. } => ErrorCode::Overloaded,
            _ => ErrorCode::UpstreamUnavailable,
        }
    }

    /// The error as a JSON-RPC error object; an upstream's own error passes through unchanged.
    pub fn to_error_object(&self) -> ErrorObject {
        match self {
            UpstreamError::Rpc { error, .. } => error.clone(),
            other => ErrorObject::new(other.code(), other.to_string()),
        }
    }
}
