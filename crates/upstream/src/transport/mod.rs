//! The seam between a connection and the bytes it travels on.
//!
//! A [`Transport`] moves whole messages; everything protocol-level (ids, pending requests, progress,
//! negotiation) lives once in `connection.rs` above it, so stdio, Streamable HTTP and legacy SSE
//! behave the same to their callers.

pub mod http;
pub mod inbound;
pub mod openapi;
pub mod stderr_cause;
pub mod stdio;

use std::sync::Arc;

use futures::future::BoxFuture;
use manifold_wire::{Fault, Id, Message, Revision};

use crate::auth::passthrough::CallerToken;
use crate::error::UpstreamError;

/// What a transport hands up to its connection.
#[derive(Debug)]
pub enum Inbound {
    /// A decoded message; `related` is our id of the request whose stream carried it, when the
    /// transport knows (a per-request HTTP stream), so server requests and notifications reach the
    /// right call.
    Message {
        message: Message,
        related: Option<Id>,
    },
    /// Bytes that did not decode; the fault keeps the id when it was readable.
    Fault(Fault),
    /// The transport could not deliver a request or its response (HTTP status, broken stream).
    RequestFailed { id: Id, error: UpstreamError },
    /// The answer to request `id` was longer than `limit` bytes and was skipped unread; the
    /// call fails at once rather than wait for its timeout.
    AnswerTooLong { id: Id, limit: usize },
    /// The transport is gone; every pending request must settle with this cause.
    Closed { cause: String },
}

/// A tool definition a transport refuses, and why (an invalid `x-mcp-header` annotation, which
/// the modern revision says must keep the tool out of `tools/list`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedTool {
    pub name: String,
    pub reason: String,
}

pub use inbound::{INBOUND_QUEUE, InboundRx, InboundTx, inbound_channel};

/// A message carrier to one upstream server.
pub trait Transport: Send + Sync + 'static {
    /// Writes one message. For a request, its response arrives later through [`Inbound`].
    fn send(&self, message: Message) -> BoxFuture<'_, Result<(), UpstreamError>>;

    /// Writes a request run for a downstream caller, whose own bearer token a server configured
    /// with `token_passthrough` is sent. Only HTTP transports carry one; the others send the
    /// request as [`Transport::send`] does.
    fn send_as(
        &self,
        message: Message,
        _caller: Option<CallerToken>,
    ) -> BoxFuture<'_, Result<(), UpstreamError>> {
        self.send(message)
    }

    /// Cancels a request at the transport level (closing its HTTP stream, in the modern era).
    /// Returns false when the transport cannot, so the connection sends `notifications/cancelled`.
    fn cancel_request(&self, id: &Id) -> bool;

    /// Told once negotiation settles, so the transport can add revision headers.
    fn negotiated(&self, revision: Revision);

    /// Learns which tool arguments are mirrored into `Mcp-Param-*` headers (`x-mcp-header` in
    /// each tool's `inputSchema`; raw tool JSON objects). Returns the tools the transport refuses.
    /// Only Streamable HTTP cares; other transports ignore the annotations, as they may.
    fn learn_tool_headers(&self, _tools: &[&str]) -> Vec<RejectedTool> {
        Vec::new()
    }

    /// In the legacy era, whether a server->client request can reach Manifold and its answer get
    /// back to the server. Stdio and HTTP+SSE always can; Streamable HTTP only inside a session
    /// (a server that answered `initialize` without a session id serves statelessly and has no
    /// way to match an answer POSTed later to the question it asked).
    fn carries_server_requests(&self) -> bool {
        true
    }

    /// What the kernel sandbox really enforced around this server, when it runs in one (a
    /// sandboxed stdio child); health and metrics show it.
    fn sandbox(&self) -> Option<Arc<manifold_sandbox::Report>> {
        None
    }

    /// Ends the connection gracefully (closing stdin and reaping a child, DELETE of a session).
    fn close(&self) -> BoxFuture<'_, ()>;

    /// A short description for logs and health: "stdio pid 123", "http https://...".
    fn describe(&self) -> String;
}
