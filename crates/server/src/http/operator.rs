//! Endpoints for operators and orchestrators, beside the MCP endpoint: `/healthz` (the process
//! answers), `/readyz` (every upstream is up, or lazy and not needed yet; degraded sandboxes are
//! named, not failed) and `/metrics`
//! (Prometheus). With `admin_listen` they are also served on a listener of their own, and
//! `/metrics` only there.
//!
//! They sit outside the Origin/Host guard because probes come from the orchestrator, addressed by
//! whatever name or IP it uses, and they reveal only upstream names and states (and, in metrics,
//! tool names and counts: never arguments, session ids or secrets).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use manifold_gateway::Status;
use manifold_telemetry::{
    SandboxControlSnapshot, SessionCount, Snapshot, UpstreamSnapshot, UpstreamState,
};
use manifold_wire::Revision;
use serde_json::json;

use super::AppState;
use crate::error::ServerError;

/// `/healthz`: the process is alive and serving HTTP.
pub(crate) async fn healthz() -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain")],
        "ok\n",
    )
        .into_response()
}

/// What `/readyz` says (the dashboard's overview shows the same): whether every upstream is up
/// or idle and the catalog is whole, and the body naming what is not.
pub fn readiness(gateway: &manifold_gateway::Gateway) -> (bool, serde_json::Value) {
    let mut ready = gateway.catalog_error().is_none();
    let mut sandbox_degraded: Vec<String> = Vec::new();
    let upstreams: Vec<serde_json::Value> = gateway
        .upstreams()
        .iter()
        .map(|u| {
            let status = u.status();
            let (name, cause) = status.word_and_cause();
            if !matches!(name, "up" | "idle") {
                ready = false;
            }
            let sandbox = u.sandbox().map(|s| {
                if s.is_degraded() {
                    sandbox_degraded.push(u.def.name.clone());
                }
                s.word()
            });
            json!({ "name": u.def.name, "state": name, "cause": cause, "sandbox": sandbox })
        })
        .collect();
    let body = json!({
        "ready": ready,
        "catalogError": gateway.catalog_error(),
        "upstreams": upstreams,
        "sandboxDegraded": sandbox_degraded,
    });
    (ready, body)
}

/// `/readyz`: 200 when every upstream is up (or lazy and idle), else 503 naming the ones that
/// are not and why. A server whose sandbox is degraded (a control partial or missing) is named in
/// `sandboxDegraded` but does not fail readiness: it is up and answering, and restarting the
/// gateway elsewhere on the same kind of host would not strengthen it. `require` is the way to
/// refuse such a server.
pub(crate) async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    let (ready, body) = readiness(&state.gateway);
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

/// What the gateway and the server hold now, for the gauges a scrape reports.
fn snapshot(state: &AppState) -> Snapshot {
    let upstreams = state
        .gateway
        .upstreams()
        .iter()
        .map(|u| UpstreamSnapshot {
            name: u.def.name.clone(),
            state: match u.status() {
                Status::Idle => UpstreamState::Idle,
                Status::Starting => UpstreamState::Starting,
                Status::Up => UpstreamState::Up,
                Status::CrashLoop { .. } => UpstreamState::CrashLoop,
                _ => UpstreamState::Down,
            },
            restarts: u.restarts(),
            up_for: u.uptime(),
            sandbox: u
                .sandbox()
                .map(|s| s.controls())
                .unwrap_or_default()
                .iter()
                .map(|e| SandboxControlSnapshot {
                    control: e.control.as_str(),
                    state: e.state.as_str(),
                })
                .collect(),
        })
        .collect();
    let mut counts: Vec<SessionCount> = Vec::new();
    let mut add = |transport: &'static str, revision: Revision| match counts
        .iter_mut()
        .find(|c| c.transport == transport && c.revision == revision)
    {
        Some(c) => c.count += 1,
        None => counts.push(SessionCount {
            transport,
            revision,
            count: 1,
        }),
    };
    for revision in state.sessions.revisions() {
        add("streamable_http", revision);
    }
    for revision in state.sse_sessions.revisions() {
        add("sse", revision);
    }
    Snapshot {
        upstreams,
        sessions: counts,
    }
}

/// `/metrics`: every Manifold metric, in the OpenMetrics text format Prometheus scrapes.
pub(crate) async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    let body = state
        .gateway
        .settings()
        .telemetry
        .metrics
        .encode(&snapshot(&state));
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            manifold_telemetry::metrics::CONTENT_TYPE,
        )],
        body,
    )
        .into_response()
}

/// `/metrics` for the MCP listener: there unless metrics are off or served on `admin_listen`.
pub(crate) fn metrics_route(state: &AppState) -> Router<Arc<AppState>> {
    let here = state.settings.metrics_endpoint && state.settings.admin_listen.is_none();
    if here {
        Router::new().route("/metrics", get(metrics))
    } else {
        Router::new()
    }
}

/// The operators' pages, on the listener that serves them: the admin listener when there is one
/// (`on_admin`), else the MCP one.
pub(crate) fn ui_routes(state: &AppState, on_admin: bool) -> Router<Arc<AppState>> {
    match &state.settings.operator_ui {
        Some(ui) if on_admin == state.settings.admin_listen.is_some() => {
            ui.0.clone().with_state(())
        }
        _ => Router::new(),
    }
}

/// Binds `admin_listen` (when set) and serves the operator endpoints there until the server
/// stops. Returns the bound address.
pub(crate) async fn serve_admin(state: &Arc<AppState>) -> Result<Option<SocketAddr>, ServerError> {
    let Some(addr) = state.settings.admin_listen else {
        return Ok(None);
    };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { addr, source })?;
    let local = listener
        .local_addr()
        .map_err(|source| ServerError::Bind { addr, source })?;
    let probes = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        // The drain turns /readyz to 503 here as on the MCP listener.
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(state),
            super::drain::refuse_new_work,
        ));
    let app = if state.settings.metrics_endpoint {
        probes.route("/metrics", get(metrics))
    } else {
        probes
    }
    .merge(
        ui_routes(state, true).layer(axum::middleware::from_fn_with_state(
            Arc::clone(state),
            super::guard::origin_and_host,
        )),
    )
    .with_state(Arc::clone(state));
    tokio::spawn(super::accept_loop::serve(listener, app, state.stop.clone()));
    tracing::info!(addr = %local, "operator endpoints (/metrics, /healthz, /readyz) at http://{local}");
    Ok(Some(local))
}
