//! The Origin and Host checks every HTTP request passes first.
//!
//! A bad `Origin` is 403, as the spec requires. A bad `Host` is also 403 (not 421): the request
//! did reach the right server, it is refused because a page may have pointed a hostile name at
//! it (DNS rebinding), which is a matter of permission, and it is what other MCP servers answer.

use std::sync::Arc;

use crate::allowlist::origin_allowed;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use manifold_telemetry::RejectReason;
use manifold_wire::ErrorCode;

use super::AppState;
use super::reply;

pub(crate) async fn origin_and_host(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    match origin_and_host_refusal(&state, &request) {
        Some(refusal) => refusal,
        None => next.run(request).await,
    }
}

/// The refusal for a request whose `Origin` or `Host` is not allowed; `None` when both are.
pub(crate) fn origin_and_host_refusal(state: &AppState, request: &Request) -> Option<Response> {
    let origin = request
        .headers()
        .get(header::ORIGIN)
        .map(|v| v.to_str().unwrap_or("\u{0}"));
    if !origin_allowed(&state.settings.allowed_origins, origin) {
        tracing::warn!(origin = ?origin, "refused a request from a disallowed Origin");
        return Some(refused(
            RejectReason::Origin,
            forbidden(format!(
                "Forbidden: the Origin {:?} is not allowed; add it to allowed_origins if this page should reach Manifold",
                origin.unwrap_or_default()
            )),
        ));
    }
    host_refusal(state, request)
}

/// The Host check alone, for the operators' pages: they accept a change only from a page of their
/// own address (a check stricter than `allowed_origins`, made by the pages themselves), so an
/// operator who reaches them under a public name need not list it as a client origin; a hostile
/// name pointed at this address (DNS rebinding) is still refused here.
pub(crate) async fn host_only(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    match host_refusal(&state, &request) {
        Some(refusal) => refusal,
        None => next.run(request).await,
    }
}

/// The refusal for a request whose `Host` is not allowed; `None` when it is.
fn host_refusal(state: &AppState, request: &Request) -> Option<Response> {
    let headers = request.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()));
    if state.settings.allowed_hosts.allows(host, state.local) {
        return None;
    }
    tracing::warn!(host = ?host, "refused a request for a disallowed Host");
    Some(refused(
        RejectReason::Host,
        forbidden(format!(
            "Forbidden: the Host {:?} is not allowed; add it to allowed_hosts if clients reach Manifold under that name",
            host.unwrap_or_default()
        )),
    ))
}

/// A refusal with its reason attached, for the rejected-requests metric (`metering.rs`).
fn refused(reason: RejectReason, mut response: Response) -> Response {
    response
        .extensions_mut()
        .insert(super::metering::Refused(reason));
    response
}

/// 403 with a JSON-RPC error without id: the request is refused before anything reads its body.
fn forbidden(why: String) -> Response {
    reply::error(StatusCode::FORBIDDEN, None, ErrorCode::Forbidden, why)
}
