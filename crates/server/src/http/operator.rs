//! Endpoints for operators and orchestrators, beside the MCP endpoint: `/healthz` (the process
//! answers) and `/readyz` (every upstream is up, or lazy and not needed yet).
//!
//! They sit outside the Origin/Host guard because probes come from the orchestrator, addressed by
//! whatever name or IP it uses, and they reveal only upstream names and states.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use manifold_gateway::Status;
use serde_json::json;

use super::AppState;

/// `/healthz`: the process is alive and serving HTTP.
pub(crate) async fn healthz() -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain")],
        "ok\n",
    )
        .into_response()
}

/// `/readyz`: 200 when every upstream is up (or lazy and idle), else 503 naming the ones that
/// are not and why.
pub(crate) async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    let mut ready = state.gateway.catalog_error().is_none();
    let upstreams: Vec<serde_json::Value> = state
        .gateway
        .upstreams()
        .iter()
        .map(|u| {
            let (name, cause) = match u.status() {
                Status::Up => ("up", None),
                Status::Idle => ("idle", None),
                Status::Starting => ("starting", None),
                Status::Down { cause } => ("down", Some(cause)),
                Status::CrashLoop { cause } => ("crash-loop", Some(cause)),
            };
            if !matches!(name, "up" | "idle") {
                ready = false;
            }
            json!({ "name": u.def.name, "state": name, "cause": cause })
        })
        .collect();
    let body = json!({
        "ready": ready,
        "catalogError": state.gateway.catalog_error(),
        "upstreams": upstreams,
    });
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}
