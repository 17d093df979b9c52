//! Why: end-to-end tests stand up small HTTP servers of their own beside the gateway (a recording
//! MCP upstream, an OAuth authorization server, the API behind an OpenAPI server, a registry, an
//! OTLP collector), each an axum router, and each test file used to bind and spawn it its own way.
//! One definition here: 127.0.0.1, a port the kernel picks, served on the test's runtime.

use std::net::{Ipv4Addr, SocketAddr};

use crate::error::TestkitError;

/// Serves `router` on 127.0.0.1 at a free port, on a task of the current tokio runtime (it stops
/// with the runtime, that is with the test); returns the bound address.
pub async fn serve_router(router: axum::Router) -> Result<SocketAddr, TestkitError> {
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .map_err(TestkitError::NoFreePort)?;
    let addr = listener.local_addr().map_err(TestkitError::NoFreePort)?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    Ok(addr)
}
