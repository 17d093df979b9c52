//! Inbound authentication on `/mcp`, `/sse` and `/message`: every request proves who it is
//! before any handler reads it, and a legacy session answers only to the identity that started
//! it.
//!
//! The middleware asks the configured [`manifold_auth::Authenticator`]; a refusal is answered
//! here with the status and `WWW-Authenticate` challenge it names. The identity then travels
//! in the request's extensions ([`Authenticated`], read by handlers as part of `EdgeFacts`),
//! down to where they build the gateway's `RequestContext` and where they mint a session (the
//! binding: a digest of the principal sealed into the session). A request that presents a session id
//! minted for another identity gets the same 404 as an unknown session: nothing tells it the
//! session exists, and a client whose identity changed simply starts a new one.
//!
//! Also here: the RFC 9728 protected resource metadata, outside the Origin/Host guard and
//! outside authentication (clients read it to learn how to authenticate).

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use manifold_auth::bearer::query_carries_credential;
use manifold_auth::{AuthError, Identity, WELL_KNOWN_PREFIX};
use manifold_gateway::{BearerToken, Caller};
use manifold_wire::{ErrorCode, meta};
use tracing::Instrument as _;

use super::AppState;
use super::edge_facts::Authenticated;
use super::endpoint_path::toolset_in_path;
use super::reply;
use crate::sealed;

/// Runs the rest of the stack as `caller`, in the tool set the path names or the caller is
/// confined to; refuses an unknown set (404) and a set the caller is kept out of (403).
async fn run_as<Fut: Future<Output = Response>>(
    state: &AppState,
    request: Request,
    then: impl FnOnce(Request) -> Fut,
    caller: Option<Arc<Caller>>,
    binding: Option<String>,
) -> Response {
    let asked = toolset_in_path(request.uri().path());
    let toolset = match state.gateway.policy().toolset_for(asked, caller.as_deref()) {
        Ok(set) => set,
        Err(refusal) => {
            let status = match refusal {
                manifold_gateway::policy::ToolsetRefusal::Unknown(_) => StatusCode::NOT_FOUND,
                manifold_gateway::policy::ToolsetRefusal::Elsewhere { .. } => StatusCode::FORBIDDEN,
            };
            tracing::warn!(path = request.uri().path(), reason = %refusal, "refused a request for a tool set");
            return reply::error(status, None, ErrorCode::Forbidden, refusal.to_string());
        }
    };
    let mut request = request;
    request.extensions_mut().insert(Authenticated {
        caller,
        binding,
        toolset,
    });
    then(request).await
}

fn caller_of(identity: &Identity, bearer: Option<String>) -> Caller {
    Caller {
        name: identity.name.clone(),
        groups: identity.groups.clone(),
        scopes: identity.scopes.clone(),
        bearer: bearer.map(|t| BearerToken(Arc::from(t))),
    }
}

/// The answer to a refusal: the authenticator's status and challenge, a JSON-RPC error body.
fn refusal(auth: &manifold_auth::Authenticator, error: &AuthError) -> Response {
    let challenge = auth.challenge(error);
    let status =
        StatusCode::from_u16(challenge.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let code = match challenge.status {
        400 => ErrorCode::InvalidRequest,
        503 => ErrorCode::Overloaded,
        _ => ErrorCode::Forbidden,
    };
    let mut response = reply::error(status, None, code, challenge.message);
    if let Some(value) = challenge
        .www_authenticate
        .and_then(|v| HeaderValue::from_str(&v).ok())
    {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// Authenticates a request and runs `then` (the rest of the stack) as that identity.
pub(crate) async fn authenticate_then<Fut: Future<Output = Response>>(
    state: &AppState,
    request: Request,
    then: impl FnOnce(Request) -> Fut,
) -> Response {
    let Some(auth) = state.settings.auth.as_ref() else {
        if let Some(r) = foreign_session(state, &request, None) {
            return r;
        }
        return run_as(state, request, then, None, None).await;
    };
    if request.uri().query().is_some_and(query_carries_credential) {
        tracing::warn!(
            path = request.uri().path(),
            "refused a request with a credential in its URL query"
        );
        return refusal(
            auth,
            &AuthError::InvalidRequest(
                "credentials in the URL query are refused (URLs end up in logs); send them in the Authorization header".to_owned(),
            ),
        );
    }
    let values: Vec<&[u8]> = request
        .headers()
        .get_all(header::AUTHORIZATION)
        .iter()
        .map(HeaderValue::as_bytes)
        .collect();
    let identity = match auth.authenticate(&values).await {
        Ok(identity) => identity,
        Err(error) => {
            match &error {
                AuthError::Missing => {
                    tracing::debug!(
                        path = request.uri().path(),
                        "a request without credentials was refused"
                    )
                }
                other => tracing::warn!(
                    path = request.uri().path(),
                    reason = %other,
                    "refused a request's credentials"
                ),
            }
            return refusal(auth, &error);
        }
    };
    // The token just authenticated, kept for servers that take the caller's own token.
    let bearer = manifold_auth::bearer::bearer_token(&values).ok().flatten();
    let binding = identity.binding();
    if let Some(r) = foreign_session(state, &request, Some(&binding)) {
        return r;
    }
    let span = tracing::info_span!("authenticated", caller = %identity.name);
    let caller = Some(Arc::new(caller_of(&identity, bearer)));
    run_as(state, request, then, caller, Some(binding))
        .instrument(span)
        .await
}

/// A 404 for a request naming a Streamable HTTP session that another identity started; `None`
/// for anything else (unknown or expired sessions are the handlers' to answer).
fn foreign_session(state: &AppState, request: &Request, binding: Option<&str>) -> Option<Response> {
    let path = request.uri().path();
    if path != "/mcp" && !path.starts_with("/mcp/") {
        return None;
    }
    let sid = request
        .headers()
        .get(meta::header::SESSION_ID)?
        .to_str()
        .ok()?;
    // A session live here carries its owner; only one this replica has not seen yet is opened.
    let owner = match state.sessions.get(sid) {
        Some(live) => live.owner.clone(),
        None => {
            sealed::open(
                &state.settings.session_key,
                sid,
                state.settings.limits.session_lifetime,
            )
            .ok()?
            .owner
        }
    };
    if owner.as_deref() == binding {
        return None;
    }
    tracing::warn!(
        "refused a session id presented by another identity than the one that started it"
    );
    Some(reply::session_gone(None))
}

async fn protected_resource_metadata(State(state): State<Arc<AppState>>) -> Response {
    let Some(document) = state.settings.auth.as_ref().and_then(|a| a.metadata()) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let mut response = reply::json(StatusCode::OK, document.to_json());
    // Public by design: browser-based clients on any origin must be able to read it.
    response.headers_mut().insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    response
}

/// The RFC 9728 document at its root well-known path and at the one suffixed with `/mcp`.
pub(crate) fn metadata_routes() -> Router<Arc<AppState>> {
    Router::new()
        .route(WELL_KNOWN_PREFIX, get(protected_resource_metadata))
        .route(
            &format!("{WELL_KNOWN_PREFIX}/mcp"),
            get(protected_resource_metadata),
        )
}
