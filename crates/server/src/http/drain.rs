//! A graceful shutdown as HTTP clients see it. While the gateway drains, the listener stays
//! open so that a client gets a clear answer rather than a refused connection: every new
//! request is answered 503 with a JSON-RPC error saying Manifold is shutting down (and
//! `Connection: close`, so a load balancer's next attempt goes elsewhere), and `/readyz` turns
//! 503. What belongs to calls already running still passes: a client's answers to the server's
//! own requests, its notifications (cancellations), resumption of a reply stream
//! (`Last-Event-ID`), and DELETE of a session. `/healthz` stays 200: the process is alive.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use manifold_gateway::drain::DrainReport;
use manifold_wire::{ErrorCode, Id, Kind, Message, meta};

use super::AppState;
use super::reply;

/// Runs the drain: see [`manifold_gateway::Gateway::drain`].
pub(crate) async fn run(state: &Arc<AppState>, deadline: Duration) -> DrainReport {
    let report = state.gateway.drain(deadline).await;
    tracing::info!(
        in_flight_at_start = report.in_flight_at_start,
        cut_off = report.cut_off,
        "the drain is over"
    );
    report
}

fn refuse(state: &AppState, id: Option<&Id>) -> Response {
    let mut r = reply::error(
        StatusCode::SERVICE_UNAVAILABLE,
        id,
        ErrorCode::Overloaded,
        format!("Service Unavailable: {}", state.gateway.draining_message()),
    );
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

fn not_ready() -> Response {
    let body = serde_json::json!({
        "ready": false,
        "draining": true,
        "reason": "Manifold is shutting down",
    });
    reply::json(StatusCode::SERVICE_UNAVAILABLE, body.to_string())
}

/// The middleware in front of the routes that are not MCP endpoints (those get the same check
/// inside their one edge middleware, `admission.rs`).
pub(crate) async fn refuse_new_work(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    refusing_new_work(&state, request, |request| next.run(request)).await
}

/// Runs `inner` on `request` unless the gateway is draining and the request starts new work,
/// which is answered 503 instead.
pub(crate) async fn refusing_new_work<F, Fut>(
    state: &Arc<AppState>,
    request: Request,
    inner: F,
) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: Future<Output = Response>,
{
    if !state.gateway.is_draining() {
        return inner(request).await;
    }
    let path = super::endpoint_path::endpoint_of(request.uri().path()).to_owned();
    let method = request.method().clone();
    match (method, path.as_str()) {
        (_, "/healthz") => inner(request).await,
        (_, "/readyz") => not_ready(),
        (Method::DELETE, "/mcp") => inner(request).await,
        (Method::GET, "/mcp") if request.headers().contains_key(meta::header::LAST_EVENT_ID) => {
            inner(request).await
        }
        (Method::POST, "/mcp" | "/message") => {
            let (parts, body) = request.into_parts();
            let Ok(bytes) = axum::body::to_bytes(body, state.settings.limits.max_body_bytes).await
            else {
                return refuse(state, None);
            };
            match Message::decode(&bytes) {
                Ok(m) if m.kind() == Kind::Request => refuse(state, m.id()),
                // Answers and notifications belong to calls already running.
                Ok(_) => inner(Request::from_parts(parts, Body::from(bytes))).await,
                Err(_) => refuse(state, None),
            }
        }
        _ => refuse(state, None),
    }
}
