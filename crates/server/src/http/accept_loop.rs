//! The MCP listener's accept loop: what `axum::serve` with a graceful shutdown does, with each
//! connection's task run under [`RepollOnSelfWake`].
//!
//! Why not `axum::serve` itself: it spawns each connection's task on its own, so nothing can wrap
//! that task's future, and the self-wake that wrapper absorbs happens on every request with a body
//! (`self_wake.rs`). Everything else is as `axum::serve` does it: the same hyper connection
//! builder (HTTP/1.1, and HTTP/2 with prior knowledge where hyper-util is built with it), accept
//! errors that concern one connection skipped and others retried after a pause, and on stop no
//! new connection, each open one told to finish its request in flight and close, and the loop
//! ending once every connection has.

use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::self_wake::RepollOnSelfWake;

/// How long the loop waits after an accept error that is not one connection's (no file
/// descriptors left, say) before accepting again.
pub const ACCEPT_ERROR_PAUSE: Duration = Duration::from_secs(1);

/// Serves `app` on `listener` until `stop` is cancelled and every open connection has closed.
pub async fn serve(listener: TcpListener, app: Router, stop: CancellationToken) {
    let connections = TaskTracker::new();
    loop {
        let stream = tokio::select! {
            stream = accept(&listener) => stream,
            () = stop.cancelled() => break,
        };
        let service = TowerToHyperService::new(app.clone());
        let stop = stop.clone();
        connections.spawn(RepollOnSelfWake::new(async move {
            let builder = Builder::new(TokioExecutor::new());
            let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
            let mut connection = std::pin::pin!(connection);
            let served = tokio::select! {
                served = connection.as_mut() => served,
                () = stop.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(e) = served {
                tracing::trace!(error = %e, "a client connection ended with an error");
            }
        }));
    }
    drop(listener);
    connections.close();
    connections.wait().await;
}

/// The next connection. Errors that concern only the connection being accepted are skipped;
/// others (out of file descriptors, say) are logged and retried after [`ACCEPT_ERROR_PAUSE`].
async fn accept(listener: &TcpListener) -> TcpStream {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => return stream,
            Err(e) if concerns_one_connection(&e) => {}
            Err(e) => {
                tracing::error!(error = %e, pause_s = ACCEPT_ERROR_PAUSE.as_secs(), "accepting a client connection failed; accepting again after a pause (if this says too many open files, raise the process's file limit)");
                tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
            }
        }
    }
}

fn concerns_one_connection(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    )
}
