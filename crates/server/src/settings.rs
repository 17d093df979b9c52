//! How one server is set up: where it listens, who may reach it, which key seals its sessions,
//! and its bounds.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use crate::allowlist::{HostAllowlist, OriginPattern};

use crate::limits::Limits;
use crate::session_key::SessionKey;

/// Settings of the HTTP server.
#[derive(Debug, Clone)]
pub struct ServerSettings {
    /// Where to listen (port 0: any free port; read it back from `BoundServer::local_addr`).
    pub listen: SocketAddr,
    /// `Origin` values allowed (requests without `Origin` always are). Default: loopback
    /// origins, any port. A request with another `Origin` gets 403.
    pub allowed_origins: Vec<OriginPattern>,
    /// `Host` values allowed. Default: loopback names and the listen address itself (on its
    /// port, unless it is 0.0.0.0 or ::). A request with another `Host` gets 403.
    pub allowed_hosts: HostAllowlist,
    /// Seals legacy session state into session ids.
    pub session_key: SessionKey,
    pub limits: Limits,
    /// Inbound authentication of `/mcp`, `/sse` and `/message`; `None`: off (loopback only).
    pub auth: Option<Arc<manifold_auth::Authenticator>>,
    /// Whether `/metrics` is served (on `admin_listen` when set, else beside `/mcp`).
    pub metrics_endpoint: bool,
    /// A second listener for operators only: `/metrics`, `/healthz`, `/readyz`.
    pub admin_listen: Option<SocketAddr>,
    /// Pages for operators (the dashboard at `/ui`), served on `admin_listen` when set, else
    /// beside `/mcp`; behind the Origin/Host guard either way, with their own sign-in.
    pub operator_ui: Option<OperatorUi>,
    /// Whether the MetaForge dialect is served at `POST /rpc` (`http/metaforge.rs`).
    pub metaforge_rpc: bool,
    /// Whether the tools are served as a REST API described by OpenAPI at `/rest`
    /// (`http/rest_tools.rs`).
    pub rest_tools: bool,
    /// How legacy session messages reach the replica holding their call (`relay.rs`); `None`:
    /// one replica, or replicas whose clients keep each session on one of them.
    pub relay: Option<crate::relay::SessionRelay>,
}

/// Routes the binary adds for operators. They authenticate on their own (a sign-in page and a
/// session cookie), so the MCP endpoint's bearer check and JSON-only rule do not apply to them.
#[derive(Clone)]
pub struct OperatorUi(pub axum::Router);

impl std::fmt::Debug for OperatorUi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OperatorUi")
    }
}

impl ServerSettings {
    /// Defaults around a key: 127.0.0.1, a free port, loopback origins and hosts.
    pub fn new(session_key: SessionKey) -> ServerSettings {
        ServerSettings {
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
            allowed_origins: OriginPattern::loopback(),
            allowed_hosts: HostAllowlist::default(),
            session_key,
            limits: Limits::default(),
            auth: None,
            metrics_endpoint: true,
            admin_listen: None,
            operator_ui: None,
            metaforge_rpc: false,
            rest_tools: false,
            relay: None,
        }
    }
}
