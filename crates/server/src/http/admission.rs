//! The checks every request to an MCP endpoint (`/mcp`, `/sse`, `/message`, `/rpc`) passes before
//! its transport's handler, in their order: Origin and Host (`guard.rs`), then who the caller is
//! (`authn.rs`: an unauthenticated caller learns 401, never what the body should have been), then
//! the POST's `Content-Type` (`content_type.rs`).
//!
//! One middleware runs the three as plain calls. As three layers, each request paid for three
//! boxed futures and three service clones on the way in, a few thousand instructions of every
//! forwarded call for checks that are each a header comparison.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use super::AppState;
use super::{authn, content_type, guard};

pub(crate) async fn admit(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(refusal) = guard::origin_and_host_refusal(&state, &request) {
        return refusal;
    }
    authn::authenticate_then(&state, request, |request| async move {
        match content_type::json_refusal(&request) {
            Some(refusal) => refusal,
            None => next.run(request).await,
        }
    })
    .await
}
