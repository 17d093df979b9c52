//! The one middleware in front of every MCP endpoint (`/mcp`, `/sse`, `/message`, `/rpc`): the
//! checks a request passes before its transport's handler, in their order. Metering wraps the
//! rest (`metering.rs`: it counts the bodies and sees every refusal below it); then a draining
//! gateway refuses new work (`drain.rs`); then Origin and Host (`guard.rs`); then who the caller
//! is (`authn.rs`: an unauthenticated caller learns 401, never what the body should have been);
//! then the POST's `Content-Type` (`content_type.rs`).
//!
//! They run as plain calls in one middleware. As layers, each request paid for a boxed future
//! and a clone of a boxed service per layer on the way in: about 10,000 instructions of every
//! forwarded call, for checks that are each a header comparison (docs/benchmarks.md).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use super::AppState;
use super::{authn, content_type, drain, guard, metering};

pub(crate) async fn admit(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    metering::metered(&state, request, |request| {
        drain::refusing_new_work(&state, request, |request| async {
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
        })
    })
    .await
}
