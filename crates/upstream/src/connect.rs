//! From "where is the server" to a negotiated connection.
//!
//! A [`Target`] names a stdio command or a URL; [`connect`] starts the right transport, negotiates
//! the era, and for URLs walks the specification's fallback from Streamable HTTP to legacy SSE.
//! The target (`target.rs`), the HTTP spec (`http_spec.rs`) and the options
//! (`connect_options.rs`) are below this file, so that the transports can read them.

use std::sync::Arc;

use crate::connect_options::ConnectOptions;
use crate::connection::Connection;
use crate::error::UpstreamError;
use crate::negotiate::{EraChoice, PeerInfo};
use crate::target::Target;
use crate::transport::stdio;

/// Starts the transport and negotiates. On failure nothing is left running.
pub async fn connect(
    target: &Target,
    options: &ConnectOptions,
) -> Result<(Connection, PeerInfo), UpstreamError> {
    match target {
        Target::Stdio(spec) => {
            let (transport, inbound) = stdio::spawn(&options.server, spec)?;
            let conn = Connection::start(
                options.server.clone(),
                transport,
                inbound,
                Arc::clone(&options.handler),
            );
            match conn.negotiate(options.era, &options.client).await {
                Ok(info) => Ok((conn, info)),
                Err(e) => {
                    conn.close().await;
                    Err(e)
                }
            }
        }
        Target::Http(spec) => crate::transport::http::connect(spec, options).await,
        Target::OpenApi(spec) => {
            let (transport, inbound) =
                crate::transport::openapi::start(&options.server, spec).await?;
            let conn = Connection::start(
                options.server.clone(),
                transport,
                inbound,
                Arc::clone(&options.handler),
            );
            match conn.negotiate(EraChoice::Legacy, &options.client).await {
                Ok(info) => Ok((conn, info)),
                Err(e) => {
                    conn.close().await;
                    Err(e)
                }
            }
        }
    }
}

/// [`connect`] with a deadline for the whole set-up: starting the transport, the era probe and
/// the handshake. When it passes, the server is stopped (for a stdio server that takes at most
/// [`stdio::STDIN_CLOSE_GRACE`] + [`stdio::SIGTERM_GRACE`]) and the error names what was still
/// unanswered (`server/discover`, `initialize`), or "the connection set-up" when nothing was.
pub async fn connect_within(
    target: &Target,
    options: &ConnectOptions,
    deadline: tokio::time::Instant,
) -> Result<(Connection, PeerInfo), UpstreamError> {
    let started = tokio::time::Instant::now();
    let timed_out = |method: Option<String>| UpstreamError::Timeout {
        server: options.server.clone(),
        method: method.unwrap_or_else(|| SETUP_PHASE.to_owned()),
        after: deadline.saturating_duration_since(started),
    };
    match target {
        Target::Stdio(spec) => {
            let (transport, inbound) = stdio::spawn(&options.server, spec)?;
            let conn = Connection::start(
                options.server.clone(),
                transport,
                inbound,
                Arc::clone(&options.handler),
            );
            let outcome = {
                let negotiate = conn.negotiate(options.era, &options.client);
                tokio::pin!(negotiate);
                tokio::select! {
                    outcome = &mut negotiate => outcome,
                    () = tokio::time::sleep_until(deadline) => {
                        // Read while the request is still pending: dropping it forgets it.
                        Err(timed_out(conn.pending_methods().into_iter().next()))
                    }
                }
            };
            match outcome {
                Ok(info) => Ok((conn, info)),
                Err(e) => {
                    conn.close().await;
                    Err(e)
                }
            }
        }
        Target::Http(_) | Target::OpenApi(_) => {
            tokio::time::timeout_at(deadline, connect(target, options))
                .await
                .unwrap_or_else(|_| Err(timed_out(None)))
        }
    }
}

/// How a set-up timeout names its phase when no request was waiting (an HTTP connection).
pub const SETUP_PHASE: &str = "the connection set-up";
