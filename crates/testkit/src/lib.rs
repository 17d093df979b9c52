//! Why: Manifold's tests run against real MCP peers (pinned in tests/peers, installed by
//! scripts/install-peers). This crate is the one way tests find those peers, pick loopback ports, and
//! start peers that cannot outlive the test; and it holds one fixture per scenario family of the
//! end-to-end tests (a `manifold serve` in front of given servers: [`ServeCommand`]; a session of a
//! given era: [`McpSession`]; a raw HTTP driver: [`RawHttp`]). It is a dev-dependency only; nothing
//! ships with it.
//!
//! ```no_run
//! # async fn demo() -> Result<(), manifold_testkit::TestkitError> {
//! use std::ffi::OsStr;
//! use manifold_testkit::{free_port, loopback_preload, node, npm_package_entry, spawn_http_peer};
//!
//! let port = free_port()?;
//! let entry = npm_package_entry("@modelcontextprotocol/server-everything")?;
//! let preload = loopback_preload()?;
//! let peer = spawn_http_peer(
//!     node()?,
//!     [OsStr::new("--require"), preload.as_os_str(), entry.as_os_str(), OsStr::new("streamableHttp")],
//!     [("PORT", port.to_string())],
//!     port,
//! )
//! .await?;
//! // ... talk to http://127.0.0.1:{port}/mcp; dropping `peer` kills its process group.
//! # drop(peer);
//! # Ok(())
//! # }
//! ```

mod child;
mod client_run;
mod error;
mod gateway;
mod listening_peer;
mod locate;
mod loopback_router;
mod mcp_session;
mod ports;
mod postgres;
mod product;
mod raw_http;
mod scratch;
mod server_sections;
mod workspace_bin;

pub use child::{
    ChildGuard, PEER_START_HANG_GUARD, process_group_members, process_is_running, spawn_http_peer,
};
pub use client_run::{ClientProcess, ClientRun, run_client};
pub use error::TestkitError;
pub use gateway::{
    CONFIG_FILE, DEFAULT_SERVE_LOG, GatewayProcess, SERVE_START_HANG_GUARD, ServeCommand,
};
pub use listening_peer::{LISTENING_PREFIX, ListeningPeer};
pub use locate::{
    CONFORMANCE_DIR_ENV, NODE22_BIN_ENV, PEERS_DIR_ENV, bench_venv_bin, conformance_dir,
    entry_from_manifest, loopback_preload, node, node22, npm_package_entry, peers_dir, python,
    resolve_peers_dir, venv_bin, workspace_root,
};
pub use loopback_router::serve_router;
pub use mcp_session::{
    ACCEPT_JSON_OR_SSE, LEGACY_REVISION, MODERN_REVISION, McpSession, Reply, SessionEra,
    SessionOptions, http_client, json_rpc_messages,
};
pub use ports::{free_port, listening_addrs, parse_listeners, wait_for_port};
pub use postgres::{
    POSTGRES_BIN_ENV, POSTGRES_OS_USER, Postgres, PostgresFixtureError, is_root, postgres_bin,
};
pub use product::PRODUCT_CRATES;
pub use raw_http::{RAW_READ_HANG_GUARD, RawHttp, RawResponse};
pub use scratch::{ScratchDir, fresh_dir};
pub use server_sections::{python_server_section, toml_string};
pub use workspace_bin::{test_peer, workspace_binary};
