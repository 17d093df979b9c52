//! The HTTP server: Streamable HTTP at `/mcp` (both eras, chosen per request), the deprecated
//! HTTP+SSE transport at `/sse` + `/message`, and the Origin/Host guard in front of all of them,
//! then authentication (`authn.rs`); `/healthz`, `/readyz` and `/metrics` for operators beside them
//! (or on their own listener), and the OAuth protected resource metadata.

pub(crate) mod accept_loop;
pub(crate) mod admission;
pub mod audited_refusal;
pub mod authn;
pub mod content_type;
pub mod drain;
pub(crate) mod edge_facts;
pub(crate) mod endpoint_path;
pub(crate) mod exchange;
mod failure_class;
pub mod guard;
pub mod legacy_sessions;
pub mod metaforge;
pub mod metering;
pub mod modern;
pub mod operator;
pub(crate) mod relay_inbox;
pub mod reply;
pub mod rest_tools;
pub(crate) mod self_wake;
pub(crate) mod shared_state;
pub mod sse_transport;
pub mod streamable;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{any, get, post};
use manifold_gateway::Gateway;
use tokio_util::sync::CancellationToken;

use crate::error::ServerError;
use crate::settings::ServerSettings;

/// What every handler shares.
pub(crate) struct AppState {
    pub gateway: Gateway,
    pub settings: ServerSettings,
    /// The address actually bound (its port when `listen` asked for 0).
    pub local: SocketAddr,
    /// Fires on shutdown: streams end, sessions stop.
    pub stop: CancellationToken,
    pub sessions: legacy_sessions::SessionTable,
    pub sse_sessions: sse_transport::SseSessions,
    pub listen_streams: Arc<AtomicUsize>,
}

/// The HTTP server of Manifold.
pub struct Server;

/// A running server.
pub struct BoundServer {
    local: SocketAddr,
    state: Arc<AppState>,
    task: tokio::task::JoinHandle<()>,
    /// The operators' listener (`admin_listen`), when there is one.
    admin: Option<SocketAddr>,
}

impl Server {
    /// Binds `settings.listen` and serves until [`BoundServer::shutdown`]. The gateway is shared,
    /// not owned: shutting the server down leaves it running.
    pub async fn bind(
        settings: ServerSettings,
        gateway: Gateway,
    ) -> Result<BoundServer, ServerError> {
        let listener = tokio::net::TcpListener::bind(settings.listen)
            .await
            .map_err(|source| ServerError::Bind {
                addr: settings.listen,
                source,
            })?;
        let local = listener.local_addr().map_err(|source| ServerError::Bind {
            addr: settings.listen,
            source,
        })?;
        let state = Arc::new(AppState {
            gateway,
            sessions: legacy_sessions::SessionTable::default(),
            sse_sessions: sse_transport::SseSessions::default(),
            listen_streams: Arc::new(AtomicUsize::new(0)),
            stop: CancellationToken::new(),
            local,
            settings,
        });
        let app = router(Arc::clone(&state));
        let admin = operator::serve_admin(&state).await?;
        tokio::spawn(legacy_sessions::expire_idle_sessions(Arc::downgrade(
            &state,
        )));
        if let Some(inbox) = state.settings.relay.as_ref().and_then(|r| r.take_inbox()) {
            tokio::spawn(relay_inbox::deliver(inbox, Arc::downgrade(&state)));
        }
        let stop = state.stop.clone();
        let task = tokio::spawn(accept_loop::serve(listener, app, stop));
        tracing::info!(addr = %local, "Manifold listens for MCP clients at http://{local}/mcp");
        Ok(BoundServer {
            local,
            state,
            task,
            admin,
        })
    }
}

/// The operator endpoints alone (`/metrics`, `/healthz`, `/readyz` on `admin_listen`), for a
/// gateway whose MCP clients reach it another way (`manifold stdio`).
pub struct OperatorServer {
    state: Arc<AppState>,
    local: SocketAddr,
}

impl Server {
    /// Serves the operator endpoints on `settings.admin_listen` until
    /// [`OperatorServer::shutdown`]; `None` when `admin_listen` is not set. Nothing MCP is served.
    pub async fn bind_operators(
        settings: ServerSettings,
        gateway: Gateway,
    ) -> Result<Option<OperatorServer>, ServerError> {
        let Some(admin) = settings.admin_listen else {
            return Ok(None);
        };
        let state = Arc::new(AppState {
            gateway,
            sessions: legacy_sessions::SessionTable::default(),
            sse_sessions: sse_transport::SseSessions::default(),
            listen_streams: Arc::new(AtomicUsize::new(0)),
            stop: CancellationToken::new(),
            local: admin,
            settings,
        });
        let local = operator::serve_admin(&state).await?.unwrap_or(admin);
        Ok(Some(OperatorServer { state, local }))
    }
}

impl OperatorServer {
    /// The address the operator endpoints listen on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Stops the listener.
    pub fn shutdown(self) {
        self.state.stop.cancel();
    }
}

fn router(state: Arc<AppState>) -> Router {
    let dialect = if state.settings.metaforge_rpc {
        Router::new().route("/rpc", post(metaforge::endpoint))
    } else {
        Router::new()
    };
    let rest = if state.settings.rest_tools {
        Router::new()
            .route("/rest/openapi.json", get(rest_tools::document))
            .route("/rest/{name}", post(rest_tools::call))
    } else {
        Router::new()
    };
    // The MCP endpoints: one middleware runs every check in front of them, metering first
    // (`admission.rs`). Their handlers read the body with their own bound.
    let mcp = Router::new()
        .merge(dialect)
        .merge(rest)
        .route("/mcp", any(streamable::endpoint))
        .route("/sse", get(sse_transport::open))
        .route("/message", post(sse_transport::message))
        // A tool set's own endpoints (`[toolsets.NAME]`); authentication resolves the set.
        .route("/mcp/{toolset}", any(streamable::endpoint))
        .route("/sse/{toolset}", get(sse_transport::open))
        .route("/message/{toolset}", post(sse_transport::message))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            admission::admit,
        ));
    // The operators' pages sign people in themselves and accept changes only from their own
    // page; a hostile name pointed at this address (DNS rebinding) is still refused.
    let others = operator::ui_routes(&state, false)
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            guard::host_only,
        ))
        // Probes come from orchestrators under any name: added after the guard, outside it.
        .route("/healthz", get(operator::healthz))
        .route("/readyz", get(operator::readyz))
        .merge(authn::metadata_routes())
        .layer(DefaultBodyLimit::disable())
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            drain::refuse_new_work,
        ))
        // Scrapes go on while draining: added after the drain layer, outside it.
        .merge(operator::metrics_route(&state));
    mcp.merge(others).with_state(state)
}

impl BoundServer {
    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The address of the operators' listener (`/metrics`, `/healthz`, `/readyz`), if any.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin
    }

    /// Begins a graceful shutdown (see `drain.rs`): new requests are refused with 503 from now
    /// on, calls in flight get up to `deadline` to finish, the rest are cancelled with an error
    /// naming the shutdown. Call [`BoundServer::shutdown`] after it.
    pub async fn drain(
        &self,
        deadline: std::time::Duration,
    ) -> manifold_gateway::drain::DrainReport {
        drain::run(&self.state, deadline).await
    }

    /// Stops accepting, ends every stream (listen streams with their closing result), cancels
    /// what is in flight, and waits for the connections to close.
    pub async fn shutdown(self) {
        self.state.stop.cancel();
        self.state.sessions.end_all();
        self.state.sse_sessions.end_all();
        let _ = self.task.await;
    }
}
