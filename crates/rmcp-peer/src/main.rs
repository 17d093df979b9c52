//! manifold-rmcp-peer: a small MCP server built on the official Rust SDK (`rmcp` 3.11.0), so Manifold's
//! interop tests meet that SDK's real wire behaviour (both eras, stdio and Streamable HTTP).
//!
//! usage: manifold-rmcp-peer stdio
//!        manifold-rmcp-peer http --port N     (binds 127.0.0.1, serves /mcp; N = 0 picks a free port)

mod server;

use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use rmcp::ServiceExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::server::RmcpPeer;

#[derive(Debug, Parser)]
#[command(
    name = "manifold-rmcp-peer",
    version,
    about = "An rmcp 3.11.0 MCP server (tools echo/add, one resource, one prompt) for Manifold's tests"
)]
struct Cli {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Debug, Subcommand)]
enum Mode {
    /// Newline-delimited JSON-RPC on stdin and stdout.
    Stdio,
    /// Streamable HTTP at http://127.0.0.1:PORT/mcp (prints the URL on stderr once listening).
    Http {
        /// TCP port on 127.0.0.1; 0 picks a free one.
        #[arg(long)]
        port: u16,
    },
}

/// Why the peer stopped early.
#[derive(Debug, thiserror::Error)]
enum PeerError {
    #[error("could not start the stdio server: {0}")]
    StdioStart(String),
    #[error("the stdio server stopped abnormally: {0}")]
    StdioRun(String),
    #[error("could not listen on 127.0.0.1:{port}: {source}; pick another port")]
    Bind {
        port: u16,
        #[source]
        source: std::io::Error,
    },
    #[error("the HTTP server failed: {0}")]
    Serve(#[source] std::io::Error),
}

async fn serve_stdio() -> Result<(), PeerError> {
    let running = RmcpPeer::new()
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| PeerError::StdioStart(e.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|e| PeerError::StdioRun(e.to_string()))?;
    Ok(())
}

async fn serve_http(port: u16) -> Result<(), PeerError> {
    let stop = CancellationToken::new();
    // The SDK defaults (loopback Host check, legacy sessions for pre-2026 clients) are what a
    // typical rmcp deployment runs, which is what the interop tests want to meet.
    let config = StreamableHttpServerConfig::default().with_cancellation_token(stop.clone());
    let service: StreamableHttpService<RmcpPeer, LocalSessionManager> =
        StreamableHttpService::new(|| Ok(RmcpPeer::new()), Default::default(), config);
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
        .await
        .map_err(|source| PeerError::Bind { port, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| PeerError::Bind { port, source })?;
    eprintln!("manifold-rmcp-peer listening on http://{bound}/mcp");
    let shutdown = stop.clone();
    tokio::spawn(async move {
        // SIGTERM and SIGINT both end the server; if the handler cannot be installed the
        // process still dies to the signal's default action.
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => return,
            };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        shutdown.cancel();
    });
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { stop.cancelled_owned().await })
        .await
        .map_err(PeerError::Serve)
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.mode {
        Mode::Stdio => serve_stdio().await,
        Mode::Http { port } => serve_http(port).await,
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("manifold-rmcp-peer: {e}");
            ExitCode::FAILURE
        }
    }
}
